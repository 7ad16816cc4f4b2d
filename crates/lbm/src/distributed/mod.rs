//! A lattice across ranks: a block decomposition, one block per rank with a one-cell halo where it has
//! neighbours, and the halo exchange each step needs (docs/scale.md). The lattice's side of it, the
//! step with its exchange and the gathers, is `lattice/exchange.rs`; here stand the decomposition and the plan.
//!
//! Every rank builds the whole domain's flags and encodes its window of them ([`crate::Flags::encode_window`]), so a
//! block's kernels do, cell for cell, the arithmetic of the single-domain kernels: a distributed run is bitwise
//! identical to a single-domain one. Only the populations that cross a cut move: 3 per edge cell and 1 per
//! corner per step, packed on the device into one small buffer, read back, exchanged through [`Comm`], uploaded
//! and unpacked. With overlap on, a step packs and starts the readback, runs the inner cells (which read no
//! halo), exchanges while they run, then unpacks and runs the ring of boundary cells.

pub(crate) mod plan;

use std::ops::Range;
use std::rc::Rc;

pub use bespoke_comm::{Comm, CommError};

use crate::config::{Layout, Storage};
use crate::error::{LbmError, Result};
pub(crate) use plan::word_of;

/// What the halo exchange cost so far on this rank.
#[derive(Clone, Debug, Default, PartialEq)]
#[non_exhaustive]
pub struct ExchangeStats {
    /// Exchanges done (one per step, plus one per read of a state whose halo was stale).
    pub exchanges: u64,
    /// Bytes this rank sent (the values that cross its cuts: 4 per population).
    pub bytes_sent: u64,
    /// Host seconds from starting the pack's readback until the received halo was submitted: the exchange as
    /// the step sees it (with overlap, the inner cells run meanwhile).
    pub seconds: f64,
    /// Of those, waiting for the packed halo to reach the host (the device finishing the work before the pack —
    /// without overlap, the whole previous step — then the pack and the copy).
    pub readback_seconds: f64,
    /// Of those, sending and receiving the halos (the transport alone).
    pub message_seconds: f64,
}

/// How a lattice runs across ranks: the communicator, the decomposition (`None`: slabs across the longer axis)
/// and whether the exchange overlaps the inner cells' update.
#[derive(Clone)]
pub struct Ranks {
    pub comm: Rc<dyn Comm>,
    /// Blocks along x and y (`--ranks PXxPY`); their product must be the job's size.
    pub grid: Option<[usize; 2]>,
    /// Update the inner cells while the halos travel (the default); off measures what overlap gains.
    pub overlap: bool,
    /// Every block's step kernel in this launch shape (None, the default: each rank's tuned or cached shape).
    pub shape: Option<crate::shape::StepShape>,
}

impl std::fmt::Debug for Ranks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "Ranks {{ rank: {} of {} ({}), grid: {:?}, overlap: {} }}",
            self.comm.rank(),
            self.comm.size(),
            self.comm.kind(),
            self.grid,
            self.overlap
        )
    }
}

impl Ranks {
    pub fn new(comm: Rc<dyn Comm>) -> Self {
        Self {
            comm,
            grid: None,
            overlap: true,
            shape: None,
        }
    }
    /// Parses `PXxPY` (e.g. `2x1`).
    pub fn parse_grid(text: &str) -> Result<[usize; 2]> {
        let bad = || {
            LbmError::param(
                "ranks",
                text,
                "give blocks along x and y as PXxPY, e.g. 2x1",
            )
        };
        let (a, b) = text.split_once('x').ok_or_else(bad)?;
        let (px, py) = (
            a.trim().parse().map_err(|_| bad())?,
            b.trim().parse().map_err(|_| bad())?,
        );
        if px == 0 || py == 0 {
            return Err(bad());
        }
        Ok([px, py])
    }
}

/// A block decomposition of an nx × ny lattice: cuts along x and y, block (i, j) on rank j·px + i.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Decomposition {
    nx: usize,
    ny: usize,
    /// Cut positions along x (px + 1 values from 0 to nx) and y.
    xs: Vec<usize>,
    ys: Vec<usize>,
}

/// Splits n cells into p blocks as evenly as possible, each a multiple of `unit` cells where n allows it.
fn cuts(n: usize, p: usize, unit: usize) -> Vec<usize> {
    let units = n / unit;
    (0..=p)
        .map(|i| if i == p { n } else { i * units / p * unit })
        .collect()
}

impl Decomposition {
    /// `grid` = [px, py] blocks (uneven splits allowed). With paired f16 storage and py > 1 the blocks' heights
    /// are even, so each block pairs its rows as the whole lattice would (and needs no `SHADER_F16`).
    pub fn new(nx: usize, ny: usize, grid: [usize; 2], storage: Storage) -> Result<Self> {
        let [px, py] = grid;
        let paired = Layout::of(storage, ny) == Layout::F16Paired;
        let d = Self {
            nx,
            ny,
            xs: cuts(nx, px, 1),
            ys: cuts(ny, py, if paired && py > 1 { 2 } else { 1 }),
        };
        // A block needs two cells across a cut: the halo on each side must be another rank's cells, and the
        // ring of boundary cells must not meet itself.
        for (axis, n, p, c) in [("x", nx, px, &d.xs), ("y", ny, py, &d.ys)] {
            if p == 0 {
                return Err(LbmError::param(
                    "ranks",
                    format!("{px}x{py}"),
                    "each axis needs at least one block",
                ));
            }
            if p > 1 {
                let min = c.windows(2).map(|w| w[1] - w[0]).min().unwrap_or(0);
                if min < 2 {
                    return Err(LbmError::param(
                        "ranks",
                        format!("{px}x{py}"),
                        format!(
                            "more ranks than the lattice can be cut into: {n} cells along {axis} in {p} blocks \
                             leaves a block of {min} (at most {} blocks along {axis}; each needs 2 cells)",
                            n / 2
                        ),
                    ));
                }
            }
        }
        Ok(d)
    }

    /// `ranks` slabs across the longer axis (along x when nx ≥ ny).
    pub fn slabs(nx: usize, ny: usize, ranks: usize, storage: Storage) -> Result<Self> {
        let grid = if nx >= ny { [ranks, 1] } else { [1, ranks] };
        Self::new(nx, ny, grid, storage)
    }

    /// Blocks along x and y.
    pub fn grid(&self) -> [usize; 2] {
        [self.xs.len() - 1, self.ys.len() - 1]
    }
    pub fn ranks(&self) -> usize {
        let [px, py] = self.grid();
        px * py
    }
    /// The global cells rank `r` owns, along x and y.
    pub fn block(&self, r: usize) -> [Range<usize>; 2] {
        let px = self.grid()[0];
        let (i, j) = (r % px, r / px);
        [self.xs[i]..self.xs[i + 1], self.ys[j]..self.ys[j + 1]]
    }
    /// The rank that owns global cell (x, y).
    pub fn owner(&self, x: usize, y: usize) -> usize {
        let find = |c: &[usize], v: usize| c.partition_point(|&b| b <= v) - 1;
        find(&self.ys, y) * self.grid()[0] + find(&self.xs, x)
    }
    /// `PXxPY`, e.g. `2x1`.
    pub fn describe(&self) -> String {
        let [px, py] = self.grid();
        format!("{px}x{py}")
    }

    /// Rank `r`'s lattice: its block plus a one-cell halo on the axes that are cut.
    pub(crate) fn local(&self, r: usize) -> Block {
        let [bx, by] = self.block(r);
        let [px, py] = self.grid();
        let halo = [usize::from(px > 1), usize::from(py > 1)];
        Block {
            n: [self.nx, self.ny],
            origin: [
                (bx.start + self.nx - halo[0]) % self.nx,
                (by.start + self.ny - halo[1]) % self.ny,
            ],
            size: [bx.len() + 2 * halo[0], by.len() + 2 * halo[1]],
            halo,
        }
    }
}

/// One rank's lattice within the whole domain.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Block {
    /// The whole domain.
    pub n: [usize; 2],
    /// Global cell of local (0, 0).
    pub origin: [usize; 2],
    /// Local lattice, halo included.
    pub size: [usize; 2],
    /// Halo width along x and y (0 on an axis that is not cut: the block wraps around itself there).
    pub halo: [usize; 2],
}

impl Block {
    pub fn cells(&self) -> usize {
        self.size[0] * self.size[1]
    }
    /// The global cell of local (x, y).
    pub fn global(&self, x: usize, y: usize) -> (usize, usize) {
        (
            (self.origin[0] + x) % self.n[0],
            (self.origin[1] + y) % self.n[1],
        )
    }
    /// The local position of global (x, y), if this lattice holds it (owned or halo).
    pub fn local(&self, x: usize, y: usize) -> Option<(usize, usize)> {
        let lx = (x + self.n[0] - self.origin[0]) % self.n[0];
        let ly = (y + self.n[1] - self.origin[1]) % self.n[1];
        (lx < self.size[0] && ly < self.size[1]).then_some((lx, ly))
    }
    /// Whether local (x, y) is one of this rank's own cells (not halo).
    pub fn owns(&self, x: usize, y: usize) -> bool {
        let inside = |v: usize, a: usize| v >= self.halo[a] && v < self.size[a] - self.halo[a];
        inside(x, 0) && inside(y, 1)
    }
    /// Local cell (x, y) + c, or None past the local lattice (an axis that is not cut wraps, as the whole domain
    /// does).
    pub fn step(&self, x: usize, y: usize, c: [i32; 2]) -> Option<(usize, usize)> {
        let go = |v: usize, d: i32, a: usize| -> Option<usize> {
            let n = self.size[a] as i64;
            let t = v as i64 + i64::from(d);
            if self.halo[a] == 0 {
                Some(t.rem_euclid(n) as usize)
            } else {
                (0..n).contains(&t).then_some(t as usize)
            }
        };
        Some((go(x, c[0], 0)?, go(y, c[1], 1)?))
    }
    /// The kernels' edge positions: where global column 0, column nx − 1 and row 0 lie among this rank's own
    /// cells.
    pub fn edges(&self) -> crate::kernel::Edges {
        let find = |g: usize, a: usize| -> u32 {
            let l = (g + self.n[a] - self.origin[a]) % self.n[a];
            let own = l >= self.halo[a] && l < self.size[a] - self.halo[a];
            if own {
                l as u32
            } else {
                crate::kernel::Edges::NONE
            }
        };
        crate::kernel::Edges {
            x0: find(0, 0),
            x1: find(self.n[0] - 1, 0),
            y0: find(0, 1),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cuts_cover_and_owners_agree() {
        for (nx, ny, grid) in [
            (10, 7, [3, 2]),
            (9, 8, [2, 1]),
            (5, 12, [1, 4]),
            (8, 8, [1, 1]),
        ] {
            let d = Decomposition::new(nx, ny, grid, Storage::F32).unwrap();
            let mut seen = vec![0; nx * ny];
            for r in 0..d.ranks() {
                let [bx, by] = d.block(r);
                for y in by.clone() {
                    for x in bx.clone() {
                        seen[y * nx + x] += 1;
                        assert_eq!(d.owner(x, y), r);
                    }
                }
                let b = d.local(r);
                for y in 0..b.size[1] {
                    for x in 0..b.size[0] {
                        let (gx, gy) = b.global(x, y);
                        assert_eq!(b.local(gx, gy), Some((x, y)));
                        assert_eq!(
                            b.owns(x, y),
                            d.owner(gx, gy) == r,
                            "{nx}x{ny} {grid:?} rank {r} ({x}, {y})"
                        );
                    }
                }
            }
            assert!(seen.iter().all(|&s| s == 1));
        }
    }

    #[test]
    fn paired_blocks_have_even_heights_and_too_many_ranks_are_refused() {
        let d = Decomposition::new(6, 20, [1, 3], Storage::F16).unwrap();
        for r in 0..3 {
            assert_eq!(d.block(r)[1].len() % 2, 0, "{:?}", d.block(r));
        }
        let e = Decomposition::new(5, 8, [3, 1], Storage::F32)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("more ranks than the lattice can be cut into"),
            "{e}"
        );
        assert!(Ranks::parse_grid("2x").is_err() && Ranks::parse_grid("0x2").is_err());
        assert_eq!(Ranks::parse_grid("3x2").unwrap(), [3, 2]);
    }
}
