//! Structured tetrahedral meshes of the unit box: n_x × n_y × n_z cubes, each cut into the 6 tets of its Kuhn
//! subdivision (around the main diagonal, so neighbouring cubes' faces match), with optional vertex jitter and a
//! random numbering of the tets (gmsh-like locality) for benchmarks larger than the shipped meshes.

use crate::error::{FvError, Result};
use crate::mesh::TetMesh;
use bespoke_gpu::rng::{Rng, SliceRandom, seeded};

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
        6 * self.cells.iter().product::<usize>()
    }

    pub fn build(&self) -> Result<TetMesh> {
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
        // Kuhn's 6 tets: from corner 0 to corner 7 through one axis order each.
        const ORDERS: [[usize; 3]; 6] = [
            [0, 1, 2],
            [0, 2, 1],
            [1, 0, 2],
            [1, 2, 0],
            [2, 0, 1],
            [2, 1, 0],
        ];
        let mut out = Vec::with_capacity(tets);
        for k in 0..nz {
            for j in 0..ny {
                for i in 0..nx {
                    for ord in ORDERS {
                        let mut c = [i, j, k];
                        let mut t = [0u32; 4];
                        t[0] = node(c[0], c[1], c[2]);
                        for (m, &axis) in ord.iter().enumerate() {
                            c[axis] += 1;
                            t[m + 1] = node(c[0], c[1], c[2]);
                        }
                        out.push(t);
                    }
                }
            }
        }
        if let Some(seed) = self.shuffle {
            out.shuffle(&mut seeded(seed));
        }
        let mut mesh = TetMesh {
            nodes,
            physical: vec![0; out.len()],
            tets: out,
            physical_names: Vec::new(),
        };
        mesh.orient_and_check("generated box", |t| format!("tet {t}"))?;
        Ok(mesh)
    }
}
