//! Structured tetrahedral meshes of the unit box: n_x × n_y × n_z cubes, each cut into the 6 tets of its Kuhn
//! subdivision (around the main diagonal, so neighbouring cubes' faces match), with optional vertex jitter and a
//! random numbering of the tets (gmsh-like locality) for benchmarks larger than the shipped meshes.

use crate::error::{FvError, Result};
use crate::mesh::TetMesh;
use crate::operator::BOUNDARY;
use bespoke_gpu::par_fill;
use bespoke_gpu::rng::{Rng, SliceRandom, seeded};

/// Host bytes per tet at a box run's peak: the mesh, its adjacency, the operator, an ordering's copies and (on a
/// CPU adapter) the device buffers. Measured on lavapipe, 2026-11-29: `fv run --box 100` (6 M tets) peaked at
/// 1.89 GB resident, 315 B a tet; `fv order --box 100` at 1.44 GB, 240 B. Unchecked, `fv run --box 400` (384 M
/// tets) grew past 21 GB in 92 s on a 23 GB machine before any device limit was reached.
pub const HOST_BYTES_PER_TET: u64 = 320;

/// How to build a box mesh.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct BoxMesh {
    pub cells: [usize; 3],
    /// Interior vertices move by up to this fraction of a cell in each direction (0 ≤ jitter ≤ 0.25).
    pub jitter: f64,
    /// Shuffle the tets' numbering with this seed (None: lexicographic, cube by cube).
    pub shuffle: Option<u64>,
    pub seed: u64,
}

impl BoxMesh {
    /// n × n × n cubes, 6n³ tets, no jitter, lexicographic numbering.
    pub fn cube(n: usize) -> Self {
        Self {
            cells: [n, n, n],
            jitter: 0.0,
            shuffle: None,
            seed: 1,
        }
    }

    pub fn tets(&self) -> usize {
        self.cells
            .iter()
            .try_fold(6usize, |n, &c| n.checked_mul(c))
            .unwrap_or(usize::MAX)
    }

    /// Host bytes a run on this box takes at its peak, an estimate ([`HOST_BYTES_PER_TET`] a tet): what a caller
    /// compares with the memory the host has before building a mesh that would not fit.
    pub fn host_bytes(&self) -> u64 {
        (self.tets() as u64).saturating_mul(HOST_BYTES_PER_TET)
    }

    pub fn build(&self) -> Result<TetMesh> {
        Ok(self.make(false)?.0)
    }

    /// The mesh and its face adjacency, equal to [`crate::operator::adjacency`]'s but read off the Kuhn
    /// subdivision's structure instead of searched for among the faces (a tenth of the time at ten million
    /// tets).
    pub fn build_with_adjacency(&self) -> Result<(TetMesh, Vec<[u32; 4]>)> {
        let (mesh, adj) = self.make(true)?;
        Ok((mesh, adj.unwrap_or_default()))
    }

    fn make(&self, with_adjacency: bool) -> Result<(TetMesh, Option<Vec<[u32; 4]>>)> {
        let [nx, ny, nz] = self.cells;
        if nx == 0 || ny == 0 || nz == 0 {
            return Err(FvError::param(
                "cells",
                format!("{:?}", self.cells),
                "every direction needs ≥ 1 cube",
            ));
        }
        if !(0.0..=0.25).contains(&self.jitter) {
            return Err(FvError::param(
                "jitter",
                self.jitter,
                "must lie in [0, 0.25] (cells would invert)",
            ));
        }
        let tets = self.tets();
        if tets >= u32::MAX as usize / 2 {
            return Err(FvError::param(
                "cells",
                format!("{:?}", self.cells),
                "too many tets for 32-bit indices",
            ));
        }
        let node = |i: usize, j: usize, k: usize| ((k * (ny + 1) + j) * (nx + 1) + i) as u32;
        let mut rng = seeded(self.seed);
        let h = [1.0 / nx as f64, 1.0 / ny as f64, 1.0 / nz as f64];
        let mut nodes = Vec::with_capacity((nx + 1) * (ny + 1) * (nz + 1));
        for k in 0..=nz {
            for j in 0..=ny {
                for i in 0..=nx {
                    let idx = [i, j, k];
                    let lim = [nx, ny, nz];
                    nodes.push(std::array::from_fn(|d| {
                        let inner = idx[d] > 0 && idx[d] < lim[d];
                        let shake = if inner && self.jitter > 0.0 {
                            (2.0 * rng.random::<f64>() - 1.0) * self.jitter * h[d]
                        } else {
                            0.0
                        };
                        idx[d] as f64 * h[d] + shake
                    }));
                }
            }
        }
        // Tet 6·cube + o, cube = (k·ny + j)·nx + i, runs from the cube's corner 0 to its corner 7 along the
        // axes in ORDERS[o].
        let kuhn = |t: usize| -> [u32; 4] {
            let (cube, ord) = (t / 6, ORDERS[t % 6]);
            let mut c = [cube % nx, cube / nx % ny, cube / (nx * ny)];
            let mut v = [0u32; 4];
            v[0] = node(c[0], c[1], c[2]);
            for (m, &axis) in ord.iter().enumerate() {
                c[axis] += 1;
                v[m + 1] = node(c[0], c[1], c[2]);
            }
            v
        };
        // new index → lexicographic index (shuffling the indices is the same permutation as shuffling the tets).
        let mut new_to_old: Vec<u32> = (0..tets as u32).collect();
        if let Some(seed) = self.shuffle {
            new_to_old.shuffle(&mut seeded(seed));
        }
        let mut out = vec![[0u32; 4]; tets];
        par_fill(&mut out, |t, v| *v = kuhn(new_to_old[t] as usize));
        let mut mesh = TetMesh {
            nodes,
            physical: vec![0; out.len()],
            tets: out,
            physical_names: Vec::new(),
        };
        mesh.orient_and_check("generated box", |t| format!("tet {t}"))?;
        if !with_adjacency {
            return Ok((mesh, None));
        }
        let mut old_to_new = vec![0u32; tets];
        for (new, &old) in new_to_old.iter().enumerate() {
            old_to_new[old as usize] = new as u32;
        }
        let mut adj = vec![[0u32; 4]; tets];
        par_fill(&mut adj, |t, row| {
            let old = new_to_old[t] as usize;
            *row = kuhn_neighbours(old, self.cells)
                .map(|nb| nb.map_or(BOUNDARY, |o| old_to_new[o as usize]));
            // Orientation swapped nodes 2 and 3, and with them the faces opposite.
            if mesh.tets[t][2] != kuhn(old)[2] {
                row.swap(2, 3);
            }
        });
        Ok((mesh, Some(adj)))
    }
}

/// Kuhn's 6 tets: from corner 0 to corner 7 through one axis order each.
const ORDERS: [[usize; 3]; 6] = [
    [0, 1, 2],
    [0, 2, 1],
    [1, 0, 2],
    [1, 2, 0],
    [2, 0, 1],
    [2, 1, 0],
];

/// The lexicographic tets across the faces of tet `t` (= 6·cube + o), opposite its corners 0 to 3: corners 1 and 2
/// face the tets of the same cube whose axis order swaps the first two axes or the last two; corner 0 faces the
/// next cube along the first axis (its order rotated left), corner 3 the previous cube along the last axis (its
/// order rotated right); None past the box.
fn kuhn_neighbours(t: usize, [nx, ny, nz]: [usize; 3]) -> [Option<u32>; 4] {
    let (cube, [a, b, c]) = (t / 6, ORDERS[t % 6]);
    let at = [cube % nx, cube / nx % ny, cube / (nx * ny)];
    let n = [nx, ny, nz];
    let tet = |at: [usize; 3], ord: [usize; 3]| {
        let o = ORDERS.iter().position(|&x| x == ord).unwrap_or(0);
        Some((((at[2] * ny + at[1]) * nx + at[0]) * 6 + o) as u32)
    };
    let next = (at[a] + 1 < n[a]).then(|| {
        let mut q = at;
        q[a] += 1;
        q
    });
    let prev = (at[c] > 0).then(|| {
        let mut q = at;
        q[c] -= 1;
        q
    });
    [
        next.and_then(|q| tet(q, [b, c, a])),
        tet(at, [b, a, c]),
        tet(at, [a, c, b]),
        prev.and_then(|q| tet(q, [c, a, b])),
    ]
}

#[cfg(test)]
mod tests {
    use super::{BoxMesh, HOST_BYTES_PER_TET};

    #[test]
    fn tets_and_host_bytes_saturate_instead_of_wrapping() {
        let b = BoxMesh::cube(100);
        assert_eq!(b.tets(), 6_000_000);
        assert_eq!(b.host_bytes(), 6_000_000 * HOST_BYTES_PER_TET);
        let huge = BoxMesh {
            cells: [usize::MAX / 4, 8, 8],
            ..BoxMesh::cube(1)
        };
        assert_eq!(huge.tets(), usize::MAX);
        assert_eq!(huge.host_bytes(), u64::MAX);
        assert!(huge.build().is_err());
    }
}
