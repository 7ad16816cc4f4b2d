//! The gathers that give every rank of a distributed lattice the whole domain's fields, populations and
//! checkpoint state, and the maps between a block's cells and the domain's.

use bespoke_gpu::bytemuck;

use std::ops::Range;

use super::{Lattice, cell_bits, put_cell_bits};
use crate::distributed::Block;
use crate::distributed::word_of;
use crate::error::{LbmError, Result};
use crate::storage::part_bits;

impl Lattice<'_> {
    /// The domain's coordinates of this lattice's cell (x, y).
    pub(crate) fn global_xy(&self, x: usize, y: usize) -> (usize, usize) {
        match &self.dist {
            Some(d) => d.block.global(x, y),
            None => (x, y),
        }
    }

    /// Whether local cell (x, y) is this lattice's own (every cell of a single domain; a block's cells outside
    /// its halo).
    pub(crate) fn owns(&self, x: usize, y: usize) -> bool {
        match &self.dist {
            Some(d) => {
                let b = &d.block;
                (b.halo[0]..b.size[0] - b.halo[0]).contains(&x)
                    && (b.halo[1]..b.size[1] - b.halo[1]).contains(&y)
            }
            None => true,
        }
    }

    /// The whole domain's nx.
    pub(crate) fn global_nx(&self) -> usize {
        match &self.dist {
            Some(d) => d.block.n[0],
            None => self.cfg.nx,
        }
    }

    /// Every rank's `mine`, concatenated in rank order, on every rank.
    pub(crate) fn all_gather_words(&self, mine: &[u32]) -> Result<Vec<u32>> {
        let all = self
            .dist()
            .comm
            .all_gather_bytes(bytemuck::cast_slice(mine))?;
        Ok(all
            .iter()
            .flat_map(|b| bytemuck::pod_collect_to_vec::<u8, u32>(b))
            .collect())
    }

    /// This block's cells (halo included) of `per_cell` whole-domain arrays (array-major).
    pub(crate) fn block_slice(&self, s: &[f64], per_cell: usize) -> Vec<f64> {
        let b = &self.dist().block;
        let (n, nl, gnx) = (b.n[0] * b.n[1], b.cells(), b.n[0]);
        let mut out = vec![0.0; per_cell * nl];
        for k in 0..per_cell {
            for ly in 0..b.size[1] {
                for lx in 0..b.size[0] {
                    let (x, y) = b.global(lx, ly);
                    out[k * nl + ly * b.size[0] + lx] = s[k * n + y * gnx + x];
                }
            }
        }
        out
    }

    /// The words of one direction of the domain's raw state (in the domain's layout) this lattice's cells need:
    /// all of them on a single domain, a block's (halo included) on a distributed lattice, as sorted, disjoint
    /// ranges of word indices (a few a row), so that a resume reads its block and no more from a checkpoint.
    pub(crate) fn needed_words(&self) -> WordRanges {
        let Some(d) = &self.dist else {
            let all = 0..self.cfg.layout().words(self.cfg.cells());
            return WordRanges::new(vec![all]);
        };
        let (b, gl) = (&d.block, d.global_cfg.layout());
        let n = b.n[0] * b.n[1];
        let mut ranges: Vec<Range<usize>> = row_segments(b)
            .map(|(_, _, c0, len)| {
                let first = word_of(gl, n, c0).0 as usize;
                first..word_of(gl, n, c0 + len - 1).0 as usize + 1
            })
            .collect();
        ranges.sort_unstable_by_key(|r| r.start);
        let mut merged: Vec<Range<usize>> = Vec::with_capacity(ranges.len());
        for r in ranges {
            match merged.last_mut() {
                Some(last) if r.start <= last.end => last.end = last.end.max(r.end),
                _ => merged.push(r),
            }
        }
        WordRanges::new(merged)
    }

    /// This block's words (halo included) of one direction from `words`, the domain's words of `ranges` (as
    /// [`needed_words`](Self::needed_words) gives them) concatenated.
    pub(crate) fn block_direction(&self, words: &[u32], ranges: &WordRanges) -> Vec<u32> {
        let d = self.dist();
        let b = &d.block;
        let (gl, ll) = (d.global_cfg.layout(), self.cfg.layout());
        let (n, nl) = (b.n[0] * b.n[1], b.cells());
        let mut out = vec![0u32; ll.words(nl)];
        for (ly, lx0, c0, len) in row_segments(b) {
            // A segment's words are consecutive inside one range: one search a segment, not one a cell.
            let w0 = word_of(gl, n, c0).0 as usize;
            let p0 = ranges.position(w0).expect("needed_words covers the block");
            for j in 0..len {
                let (w, part) = word_of(gl, n, c0 + j);
                let bits = part_bits(words[p0 + (w as usize - w0)], part);
                put_cell_bits(ll, &mut out, nl, ly * b.size[0] + lx0 + j, bits);
            }
        }
        out
    }

    /// The whole domain's arrays from every block's own cells of `per_cell` local arrays (array-major), on
    /// every rank.
    pub(crate) fn gather<T: bytemuck::Pod>(&self, local: &[T], per_cell: usize) -> Result<Vec<T>> {
        let all = self
            .dist()
            .comm
            .all_gather_bytes(bytemuck::cast_slice(&self.own_cells(local, per_cell)))?;
        self.assemble(&all, per_cell)
    }

    /// [`gather`](Self::gather) onto rank 0 only (None on the others, which hold no more than their block).
    pub(crate) fn gather_to_root<T: bytemuck::Pod>(
        &self,
        local: &[T],
        per_cell: usize,
    ) -> Result<Option<Vec<T>>> {
        self.gather_own_to_root(&self.own_cells(local, per_cell), per_cell)
    }

    /// [`gather_to_root`](Self::gather_to_root) of arrays that are this block's own cells already
    /// ([`own_cells`](Self::own_cells)' form).
    pub(crate) fn gather_own_to_root<T: bytemuck::Pod>(
        &self,
        own: &[T],
        per_cell: usize,
    ) -> Result<Option<Vec<T>>> {
        let all = self
            .dist()
            .comm
            .gather_bytes(0, bytemuck::cast_slice(own))?;
        all.map(|all| self.assemble(&all, per_cell)).transpose()
    }

    /// This block's own cells (halo left out) of `per_cell` local arrays, array-major.
    pub(super) fn own_cells<T: bytemuck::Pod>(&self, local: &[T], per_cell: usize) -> Vec<T> {
        let b = &self.dist().block;
        let nl = b.cells();
        (0..per_cell)
            .flat_map(|k| own(b).map(move |(x, y)| local[k * nl + y * b.size[0] + x]))
            .collect()
    }

    /// The whole domain's arrays from every rank's [`own_cells`](Self::own_cells), in rank order.
    fn assemble<T: bytemuck::Pod>(&self, all: &[Vec<u8>], per_cell: usize) -> Result<Vec<T>> {
        let d = self.dist();
        let b = &d.block;
        let (gnx, n) = (b.n[0], b.n[0] * b.n[1]);
        let mut out = vec![T::zeroed(); per_cell * n];
        for (r, bytes) in all.iter().enumerate() {
            let rb = d.decomp.local(r);
            let vals: Vec<T> = bytemuck::pod_collect_to_vec(bytes);
            let cells: Vec<(usize, usize)> = own(&rb).map(|(x, y)| rb.global(x, y)).collect();
            if vals.len() != per_cell * cells.len() {
                return Err(LbmError::Ranks(format!(
                    "rank {r} sent {} values for {} cells × {per_cell}",
                    vals.len(),
                    cells.len()
                )));
            }
            for k in 0..per_cell {
                for (j, &(x, y)) in cells.iter().enumerate() {
                    out[k * n + y * gnx + x] = vals[k * cells.len() + j];
                }
            }
        }
        Ok(out)
    }

    /// The whole domain's words of one direction (what a single-domain lattice would hold) from this block's
    /// words `local` of it, on rank 0 (None on the others): for checkpoints, one direction at a time.
    pub(crate) fn gather_raw_direction(&self, local: &[u32]) -> Result<Option<Vec<u32>>> {
        let d = self.dist();
        let (ll, nl) = (self.cfg.layout(), d.block.cells());
        let gl = d.global_cfg.layout();
        let n = d.global_cfg.cells();
        let bits: Vec<u32> = (0..nl).map(|c| cell_bits(ll, local, nl, c)).collect();
        let Some(all) = self.gather_to_root(&bits, 1)? else {
            return Ok(None);
        };
        let mut out = vec![0u32; gl.words(n)];
        for (c, &v) in all.iter().enumerate() {
            put_cell_bits(gl, &mut out, n, c, v);
        }
        Ok(Some(out))
    }
}

/// A block's own cells (halo left out), row by row.
fn own(b: &Block) -> impl Iterator<Item = (usize, usize)> + use<> {
    let [ox, oy, w, h] = [b.halo[0], b.halo[1], b.size[0], b.size[1]];
    (oy..h - oy).flat_map(move |y| (ox..w - ox).map(move |x| (x, y)))
}

/// Sorted, disjoint ranges of one direction's word indices, and where each starts in their concatenation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct WordRanges {
    ranges: Vec<Range<usize>>,
    /// `starts[i]`: the words of the ranges before range i.
    starts: Vec<usize>,
}

impl WordRanges {
    fn new(ranges: Vec<Range<usize>>) -> Self {
        let starts = ranges
            .iter()
            .scan(0, |at, r| {
                let s = *at;
                *at += r.len();
                Some(s)
            })
            .collect();
        Self { ranges, starts }
    }
    pub(crate) fn ranges(&self) -> &[Range<usize>] {
        &self.ranges
    }
    /// Words in all the ranges.
    pub(crate) fn total(&self) -> usize {
        self.ranges.iter().map(|r| r.len()).sum()
    }
    /// Where word `w` sits in the concatenation, if a range holds it.
    fn position(&self, w: usize) -> Option<usize> {
        let i = self.ranges.partition_point(|r| r.end <= w);
        let r = self.ranges.get(i)?;
        r.contains(&w).then(|| self.starts[i] + (w - r.start))
    }
}

/// A block's cells (halo included) as runs of consecutive domain cells: (local row, first local column, the
/// domain's cell index of the first, length); a row that wraps around the domain's x edge gives two.
fn row_segments(b: &Block) -> impl Iterator<Item = (usize, usize, usize, usize)> + '_ {
    (0..b.size[1]).flat_map(move |ly| {
        let mut lx = 0;
        std::iter::from_fn(move || {
            (lx < b.size[0]).then(|| {
                let (x, y) = b.global(lx, ly);
                let len = (b.size[0] - lx).min(b.n[0] - x);
                let seg = (ly, lx, y * b.n[0] + x, len);
                lx += len;
                seg
            })
        })
    })
}

#[cfg(test)]
mod tests {
    use super::{Block, WordRanges, row_segments};

    #[test]
    fn rows_split_where_a_block_wraps_and_ranges_find_their_words() {
        // Columns 9, 0, 1, 2 of a 10-wide domain (a halo across the x edge), rows 4 and 5.
        let b = Block {
            n: [10, 6],
            origin: [9, 4],
            size: [4, 2],
            halo: [1, 1],
        };
        let segs: Vec<_> = row_segments(&b).collect();
        assert_eq!(
            segs,
            [(0, 0, 49, 1), (0, 1, 40, 3), (1, 0, 59, 1), (1, 1, 50, 3)]
        );
        let r = WordRanges::new(vec![2..5, 9..10, 20..24]);
        assert_eq!(r.total(), 8);
        let at: Vec<_> = [1, 2, 4, 5, 9, 10, 20, 23, 24]
            .map(|w| r.position(w))
            .to_vec();
        assert_eq!(
            at,
            [
                None,
                Some(0),
                Some(2),
                None,
                Some(3),
                None,
                Some(4),
                Some(7),
                None
            ]
        );
    }
}
