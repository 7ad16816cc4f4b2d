//! Panels past one buffer: C = A·B + β·C split along N into column blocks whose B and C each fit the adapter's
//! largest buffer. Every column is computed from its own column of B and C alone, so a product in blocks gives
//! the bits of the product in one (tested with a lowered `max_buffer_size`).
//!
//! On an H200 (`max_buffer_size` 4 292 870 144 B) the B of hex-p6-m132 (K = 1029) at N = 2^20 needs 4 315 938 816
//! B in f32: `bespoke bench` stopped there. Blocks have one width, so one kernel serves them all; the last
//! block's columns past N are zero in B and never read back from C.

use std::ops::Range;

use bespoke_gpu::Gpu;

use super::matmul::MatMul;
use super::run::Panel;
use crate::dense::Element;
use crate::dtype::DType;
use crate::error::{MmError, Result};

/// How a panel of `n` columns goes in `count` blocks of `width` columns each (the last one padded).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ColumnBlocks {
    /// The panel's columns.
    pub n: usize,
    /// Columns per block (a multiple of the panel's vector alignment where N has one).
    pub width: usize,
    pub count: usize,
}

impl ColumnBlocks {
    /// The whole panel in one block.
    pub fn whole(n: usize) -> Self {
        Self {
            n,
            width: n,
            count: 1,
        }
    }

    /// The fewest blocks of equal width in which an M×K operator's B (K rows) and C (M rows) of `dtype` each
    /// fit one buffer of `gpu`, for a packed panel of `n` columns (ldb = ldc = N). One block where the panel
    /// fits.
    pub fn for_adapter(gpu: &Gpu, m: usize, k: usize, dtype: DType, n: usize) -> Result<Self> {
        Self::within(gpu.limits().max_buffer_size, m, k, dtype, n)
    }

    /// [`Self::for_adapter`] for buffers of at most `max_bytes`.
    pub fn within(max_bytes: u64, m: usize, k: usize, dtype: DType, n: usize) -> Result<Self> {
        if n == 0 {
            return Err(MmError::Shape("N = 0: nothing to multiply".into()));
        }
        let row_bytes = (m.max(k) * dtype.size()) as u64;
        let fit = (max_bytes / row_bytes.max(1)) as usize;
        if fit >= n {
            return Ok(Self::whole(n));
        }
        // Keep the panel's vector width: blocks of a multiple of 4 (or 2) columns where N is one.
        let align = Panel::packed(n).alignment();
        let widest = fit / align * align;
        if widest == 0 {
            return Err(MmError::Shape(format!(
                "one column of B or C ({} rows of {dtype}) does not fit a buffer of {max_bytes} B",
                m.max(k)
            )));
        }
        let count = n.div_ceil(widest);
        // Equal blocks, as narrow as the count allows (less padding in the last).
        let width = n.div_ceil(count).div_ceil(align) * align;
        Ok(Self { n, width, count })
    }

    /// The panel one block is run with (packed: ldb = ldc = width).
    pub fn panel(&self) -> Panel {
        Panel::packed(self.width)
    }

    /// The panel's columns block `i` computes.
    pub fn columns(&self, i: usize) -> Range<usize> {
        let start = (i * self.width).min(self.n);
        start..((i + 1) * self.width).min(self.n)
    }

    /// Block `i` of a row-major `rows`×N array with leading dimension `ld`: `rows`×width, columns past N zero.
    pub fn take<T: Element>(&self, i: usize, src: &[T], rows: usize, ld: usize) -> Vec<T> {
        let cols = self.columns(i);
        let mut out = vec![T::from_f64(0.0); rows * self.width];
        for r in 0..rows {
            out[r * self.width..r * self.width + cols.len()]
                .copy_from_slice(&src[r * ld + cols.start..r * ld + cols.end]);
        }
        out
    }

    /// Writes block `i` (`rows`×width) back into the row-major array `dst` (leading dimension `ld`).
    pub fn put<T: Element>(&self, i: usize, block: &[T], dst: &mut [T], rows: usize, ld: usize) {
        let cols = self.columns(i);
        for r in 0..rows {
            dst[r * ld + cols.start..r * ld + cols.end]
                .copy_from_slice(&block[r * self.width..r * self.width + cols.len()]);
        }
    }
}

impl<T: Element> MatMul<T> {
    /// C = A·B + β·C on host panels of any N (`b`: K×N with `ldb`, `c`: M×N with `ldc`), in the column blocks
    /// `blocks` (this product built for `blocks.panel()`): each block uploaded, run, and read back into `c`.
    pub fn run_host(
        &self,
        gpu: &Gpu,
        blocks: &ColumnBlocks,
        b: (&[T], usize),
        c: (&mut [T], usize),
    ) -> Result<()> {
        if self.panel != blocks.panel() {
            return Err(MmError::Shape(format!(
                "the product was built for {:?}, the blocks need {:?}",
                self.panel,
                blocks.panel()
            )));
        }
        let (m, k, n) = (self.op.m, self.op.k, blocks.n);
        for (name, rows, ld, len) in [("B", k, b.1, b.0.len()), ("C", m, c.1, c.0.len())] {
            if ld < n || len < (rows - 1) * ld + n {
                return Err(MmError::Shape(format!(
                    "{name}: {len} values with ld {ld} for {rows}×{n}"
                )));
            }
        }
        for i in 0..blocks.count {
            let bb = gpu.upload(&blocks.take(i, b.0, k, b.1))?;
            let cb = gpu.upload(&blocks.take(i, c.0, m, c.1))?;
            self.run(gpu, &bb, &cb)?;
            blocks.put(i, &gpu.read(&cb)?, c.0, m, c.1);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_fit_the_buffer_and_cover_the_panel() {
        // The H200's limit and hex-p6-m132 at N = 2^20: two blocks in f32, three in f64.
        let h200 = 4_292_870_144;
        let b = ColumnBlocks::within(h200, 343, 1029, DType::F32, 1 << 20).unwrap();
        assert_eq!((b.count, b.width), (2, 1 << 19));
        let b = ColumnBlocks::within(h200, 343, 1029, DType::F64, 1 << 20).unwrap();
        assert_eq!(b.count, 3);
        assert!(b.width as u64 * 1029 * 8 <= h200 && b.width.is_multiple_of(4));
        assert_eq!(b.columns(2).end, 1 << 20);
        // Fits: one block.
        assert_eq!(
            ColumnBlocks::within(h200, 96, 64, DType::F32, 1 << 20).unwrap(),
            ColumnBlocks::whole(1 << 20)
        );
        // An odd N keeps scalar blocks; every column is in exactly one block.
        let b = ColumnBlocks::within(4000, 13, 11, DType::F32, 999).unwrap();
        assert!(b.count > 1 && b.width * 13 * 4 <= 4000);
        let covered: usize = (0..b.count).map(|i| b.columns(i).len()).sum();
        assert_eq!(covered, 999);
        // A column that fits nowhere is refused by name.
        let e = ColumnBlocks::within(100, 13, 11, DType::F32, 8).unwrap_err();
        assert!(e.to_string().contains("does not fit"), "{e}");
    }

    #[test]
    fn take_and_put_round_trip() {
        let b = ColumnBlocks::within(3 * 4 * 4, 3, 2, DType::F32, 10).unwrap();
        let src: Vec<f32> = (0..3 * 12).map(|v| v as f32).collect();
        let mut back = vec![f32::NAN; 3 * 12];
        for i in 0..b.count {
            let blk = b.take(i, &src, 3, 12);
            b.put(i, &blk, &mut back, 3, 12);
        }
        for r in 0..3 {
            assert_eq!(back[r * 12..r * 12 + 10], src[r * 12..r * 12 + 10]);
            assert!(back[r * 12 + 10].is_nan());
        }
    }
}
