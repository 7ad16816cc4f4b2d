//! rolled: A's non-zeros in a table walked by loops, not inlined. Rows are taken in blocks of `r`; each block
//! lists its rows and the columns any of them uses with `r` coefficients per column (zeros where a row lacks
//! it), so one load of B feeds `r` accumulators. A block's rows need not be consecutive: rows that share columns
//! go together ([`rolled_blocks`]), so B is loaded fewer times. The source depends only on (r, vec, precision,
//! β, table size): it compiles once for any A, and N, ldb and ldc are read from a uniform at run time.
//!
//! The table is read by every invocation of a launch at the same index, so it sits in uniform buffers (constant
//! memory), not storage: a GPU broadcasts such reads, and lavapipe turns a uniform-buffer read at a dynamically
//! uniform index into one scalar load, where its storage-buffer read is a branchy per-lane loop. Control flow
//! stays uniform up to the stores (columns past N are clamped, their stores skipped) so the indices stay
//! dynamically uniform.

use std::fmt::Write;

use bespoke_gpu::GRID_WGSL;

use crate::dtype::DType;
use crate::specialise::emit::Emit;
use crate::specialise::layout::{LaunchRows, Layout, RowTerms, rolled_blocks};
use crate::specialise::variant::Beta;

/// Bytes of the `Params` uniform: nv, ldb, ldc (vector units), blocks, rows, c_row0, two pads.
pub(crate) const PARAMS_WORDS: usize = 8;

/// Bytes of each table binding (block offsets and columns; coefficients) where the adapter allows: WebGPU's
/// default uniform binding size. An adapter with smaller uniform bindings gets tables of its own size.
pub(crate) const TABLE_BYTES: usize = 65536;

/// The size of a rolled launch's two uniform tables.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TableSize {
    /// Bytes of each table binding (a multiple of 32, so both `vec4<u32>` and `vec4<f64>` arrays fill it).
    pub bytes: usize,
}

impl TableSize {
    /// `TABLE_BYTES`, or less where the adapter's uniform bindings are smaller.
    pub fn for_limit(max_uniform_binding: u64) -> Self {
        let bytes = (max_uniform_binding.min(TABLE_BYTES as u64) as usize) / 32 * 32;
        Self { bytes }
    }
    /// u32 words of the offsets-and-columns table.
    pub fn tab_words(&self) -> usize {
        self.bytes / 4
    }
    /// Coefficients the coefficient table holds.
    pub fn coef_elems(&self, dtype: DType) -> usize {
        self.bytes / dtype.size()
    }
}

impl Default for TableSize {
    fn default() -> Self {
        Self { bytes: TABLE_BYTES }
    }
}

/// One launch's table: `tab` = block offsets (blocks + 1 of them), then `r` rows per block (relative to the
/// launch's first row; [`NO_ROW`] past the last row of a short block), then one column per entry (relative to
/// the launch's K slice); `coef` = `r` coefficients per entry, in the order of the block's rows.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct RolledTable {
    pub blocks: usize,
    pub tab: Vec<u32>,
    pub coef: Vec<f64>,
}

impl RolledTable {
    /// The two uniform buffers' bytes, each padded to `size` (what the kernel declares), or why they do not fit.
    pub fn bytes(&self, dtype: DType, size: TableSize) -> Result<(Vec<u8>, Vec<u8>), String> {
        if self.tab.len() > size.tab_words() || self.coef.len() > size.coef_elems(dtype) {
            return Err(format!(
                "the launch's table needs {} offsets, rows and columns and {} coefficients, a {}-byte uniform table \
                 holds {} and {}",
                self.tab.len(),
                self.coef.len(),
                size.bytes,
                size.tab_words(),
                size.coef_elems(dtype)
            ));
        }
        let mut tab: Vec<u8> = bespoke_gpu::bytemuck::cast_slice(&self.tab).to_vec();
        let mut coef: Vec<u8> = match dtype {
            DType::F32 => self
                .coef
                .iter()
                .flat_map(|&v| (v as f32).to_le_bytes())
                .collect(),
            DType::F64 => self.coef.iter().flat_map(|&v| v.to_le_bytes()).collect(),
        };
        tab.resize(size.bytes, 0);
        coef.resize(size.bytes, 0);
        Ok((tab, coef))
    }
}

/// A row slot of a short block: no row (its store is skipped).
pub(crate) const NO_ROW: u32 = u32::MAX;

/// The table for `layout`'s rows and K slice in blocks of `r` rows ([`rolled_blocks`]).
pub(crate) fn rolled_table(a_rows: &[RowTerms], layout: &Layout, r: usize) -> RolledTable {
    // The rolled family's launches are consecutive rows (`LaunchCap::Table`): offsets from the first.
    debug_assert!(
        matches!(layout.rows, LaunchRows::Range(_)),
        "rolled rows in order"
    );
    let first = layout.rows.span().start;
    let (blocks, _) = rolled_blocks(a_rows, layout.rows.span(), &layout.ks, r);
    let mut offsets = Vec::with_capacity(blocks.len() + 1);
    let mut slots = Vec::with_capacity(blocks.len() * r);
    let (mut cols, mut coef) = (Vec::new(), Vec::new());
    for blk in &blocks {
        offsets.push(cols.len() as u32);
        for j in 0..r {
            slots.push(blk.get(j).map_or(NO_ROW, |&i| (i - first) as u32));
        }
        let mut used: Vec<usize> = blk
            .iter()
            .flat_map(|&i| layout.terms(a_rows, i).into_iter().map(|(p, _)| p))
            .collect();
        used.sort_unstable();
        used.dedup();
        for p in used {
            cols.push((p - layout.ks.start) as u32);
            for j in 0..r {
                let v = blk
                    .get(j)
                    .and_then(|&i| a_rows[i].iter().find(|(q, _)| *q == p))
                    .map_or(0.0, |(_, v)| *v);
                coef.push(v);
            }
        }
    }
    offsets.push(cols.len() as u32);
    offsets.extend(slots);
    offsets.extend(cols);
    RolledTable {
        blocks: blocks.len(),
        tab: offsets,
        coef,
    }
}

/// The rolled kernel's WGSL for tables of `size`. Bindings: 0 B (the launch's K slice), 1 C (its row block),
/// 2 the offsets-and-columns table, 3 the coefficients (both uniform), 4 the parameters.
pub(crate) fn rolled(e: &mut Emit<'_>, size: TableSize) {
    let vt = e.vt();
    let t = e.dtype.wgsl();
    let r = e.variant.split as usize;
    let _ = writeln!(
        e.out,
        "// bespoke-mm {} {}: beta = {}; A's non-zeros from a table, N, ldb and ldc at run time",
        e.variant.name(),
        e.dtype,
        e.layout.beta.value()
    );
    e.out += "// rolled: per block of rows, one load of B per used column feeds every row's accumulator; the table is\n";
    e.out += "// read at dynamically uniform indices from uniform buffers\n";
    e.out.push_str(GRID_WGSL);
    let tab4 = size.tab_words() / 4;
    let coef4 = size.coef_elems(e.dtype) / 4;
    let _ = write!(
        e.out,
        "struct Params {{ nv: u32, ldb: u32, ldc: u32, blocks: u32, rows: u32, c_row0: u32, pad0: u32, pad1: u32 }}
@group(0) @binding(0) var<storage, read> b0: array<{vt}>;
@group(0) @binding(1) var<storage, read_write> c0: array<{vt}>;
@group(0) @binding(2) var<uniform> tab: array<vec4<u32>, {tab4}>;
@group(0) @binding(3) var<uniform> coef: array<vec4<{t}>, {coef4}>;
@group(0) @binding(4) var<uniform> P: Params;

fn tab_at(i: u32) -> u32 {{
    return tab[i >> 2u][i & 3u];
}}
"
    );
    e.open_main();
    // Clamped, not returned: the loops below must run in uniform control flow.
    e.out += "    let live = col < P.nv;
    let x_col = min(col, P.nv - 1u);
";
    e.out += "    let slots = P.blocks + 1u;
";
    let _ = writeln!(e.out, "    let cols = slots + P.blocks * {r}u;");
    e.out += "    for (var blk = 0u; blk < P.blocks; blk++) {
";
    let zero = e.lit(0.0);
    for j in 0..r {
        let _ = writeln!(e.out, "        var s{j} = {zero};");
    }
    let _ = writeln!(
        e.out,
        "        for (var q = tab_at(blk); q < tab_at(blk + 1u); q++) {{
            let x = b0[tab_at(cols + q) * P.ldb + x_col];"
    );
    if r.is_multiple_of(4) {
        for g in 0..r / 4 {
            let idx = if r == 4 {
                "q".to_owned()
            } else {
                format!("q * {}u + {g}u", r / 4)
            };
            let _ = writeln!(e.out, "            let a{g} = coef[{idx}];");
        }
    }
    for j in 0..r {
        let a = if r.is_multiple_of(4) {
            format!("a{}.{}", j / 4, ["x", "y", "z", "w"][j % 4])
        } else {
            let i = if j == 0 {
                format!("q * {r}u")
            } else {
                format!("q * {r}u + {j}u")
            };
            let i = if r == 1 { "q".to_owned() } else { i };
            format!("coef[({i}) >> 2u][({i}) & 3u]")
        };
        let a = if e.variant.vec > 1 {
            format!("{vt}({a})")
        } else {
            a
        };
        let _ = writeln!(e.out, "            s{j} = fma({a}, x, s{j});");
    }
    e.out += "        }\n";
    e.out += "        if (live) {\n";
    let _ = writeln!(e.out, "            let slot = slots + blk * {r}u;");
    for j in 0..r {
        let c = format!("c0[(P.c_row0 + i{j}) * P.ldc + col]");
        let stmt = match e.layout.beta {
            Beta::Zero => format!("{c} = s{j};"),
            Beta::One => format!("{c} = s{j} + {c};"),
            Beta::Other(b) => format!("{c} = fma({c}, {}, s{j});", e.lit(b)),
        };
        // The block's rows from the table; a short block's empty slots (NO_ROW) fail the bound.
        let slot = if j == 0 {
            "slot".to_owned()
        } else {
            format!("slot + {j}u")
        };
        let _ = writeln!(
            e.out,
            "            let i{j} = tab_at({slot});\n            if (i{j} < P.rows) {{ {stmt} }}"
        );
    }
    e.out += "        }\n    }\n}\n";
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::specialise::variant::Beta;

    #[test]
    fn blocks_list_the_union_of_columns_with_zero_fill() {
        // 3×6, rows in blocks of 2: block 0 = rows 0, 1 (row 1 empty), block 1 = row 2 alone.
        let rows: Vec<RowTerms> = vec![vec![(0, 1.0), (5, 2.0)], vec![(5, 3.0)], vec![(3, -1.0)]];
        let l = Layout::single(&rows, 6, Beta::Zero, 8, 8, 8).unwrap();
        let t = rolled_table(&rows, &l, 2);
        assert_eq!(t.blocks, 2);
        // Offsets 0, 2, 3; rows 0, 1 and 2, NO_ROW; columns 0, 5 and 3.
        assert_eq!(t.tab, vec![0, 2, 3, 0, 1, 2, NO_ROW, 0, 5, 3]);
        assert_eq!(t.coef, vec![1.0, 0.0, 2.0, 3.0, -1.0, 0.0]);
    }

    #[test]
    fn tables_pad_to_the_declared_size_or_say_what_does_not_fit() {
        let rows: Vec<RowTerms> = vec![vec![(0, 1.5), (2, -2.0)], vec![(1, 0.25)]];
        let l = Layout::single(&rows, 3, Beta::Zero, 8, 8, 8).unwrap();
        let t = rolled_table(&rows, &l, 1);
        let size = TableSize::for_limit(65536 + 100);
        assert_eq!(size.bytes, TABLE_BYTES);
        let (tab, coef) = t.bytes(DType::F64, size).unwrap();
        assert_eq!((tab.len(), coef.len()), (TABLE_BYTES, TABLE_BYTES));
        assert_eq!(
            &tab[..20],
            bespoke_gpu::bytemuck::cast_slice::<u32, u8>(&[0, 2, 3, 0, 1])
        );
        assert_eq!(&coef[..8], 1.5f64.to_le_bytes());
        assert_eq!(&coef[16..24], 0.25f64.to_le_bytes());
        // 40 bytes: rounded down to 32, 8 words and 4 f64; the table needs 8 words (3 offsets, 2 rows, 3
        // columns) and 3 coefficients.
        let small = TableSize::for_limit(40);
        assert_eq!((small.tab_words(), small.coef_elems(DType::F64)), (8, 4));
        assert!(t.bytes(DType::F64, small).is_ok());
        let tiny = TableSize { bytes: 16 };
        let e = t.bytes(DType::F32, tiny).unwrap_err();
        assert!(
            e.contains("needs 8 offsets, rows and columns and 3 coefficients"),
            "{e}"
        );
        assert!(e.contains("16-byte uniform table holds 4 and 4"), "{e}");
    }
}
