//! Orderings of the tets: as read, random, reverse Cuthill–McKee, Hilbert curve on centroids, METIS k-way blocks
//! with METIS's cache-friendly order inside each block, and METIS nested dissection. An ordering is a
//! [`Permutation`] applied to the operator and fields and undone on output.

use std::time::Instant;

use crate::error::{FvError, Result};
use crate::operator::Operator;
use bespoke_gpu::rng::{SliceRandom, seeded};
use bespoke_gpu::{par_fill, prefetch};

mod curves;
mod metis;

pub use curves::{hilbert, rcm};
pub use metis::{
    ORDER_CACHE, metis_blocks, metis_blocks_in, metis_nd, metis_partition, order_within_parts,
    partition_method,
};

/// new index → old index and its inverse.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Permutation {
    new_to_old: Vec<u32>,
    old_to_new: Vec<u32>,
}

impl Permutation {
    pub fn identity(n: usize) -> Self {
        let v: Vec<u32> = (0..n as u32).collect();
        Self {
            new_to_old: v.clone(),
            old_to_new: v,
        }
    }

    /// Checks that `new_to_old` is a permutation of 0..n.
    pub fn from_new_to_old(new_to_old: Vec<u32>) -> Result<Self> {
        let n = new_to_old.len();
        let mut old_to_new = vec![u32::MAX; n];
        for (new, &old) in new_to_old.iter().enumerate() {
            let slot = old_to_new.get_mut(old as usize).ok_or_else(|| {
                FvError::Shape(format!("ordering maps {new} to {old}, past {n} tets"))
            })?;
            if *slot != u32::MAX {
                return Err(FvError::Shape(format!("ordering uses tet {old} twice")));
            }
            *slot = new as u32;
        }
        Ok(Self {
            new_to_old,
            old_to_new,
        })
    }

    pub fn len(&self) -> usize {
        self.new_to_old.len()
    }
    pub fn is_empty(&self) -> bool {
        self.new_to_old.is_empty()
    }
    pub fn new_to_old(&self) -> &[u32] {
        &self.new_to_old
    }
    pub fn old_to_new(&self) -> &[u32] {
        &self.old_to_new
    }

    /// A field in the new order (entries past n, like the Dirichlet ghost, keep their place).
    pub fn apply<T: Copy + Send + Sync>(&self, old: &[T]) -> Vec<T> {
        let n = self.len();
        // A gather at random (the orderings' point is that old and new neighbours differ): on every core, each
        // element asked for a while before it is read.
        const AHEAD: usize = 16;
        let mut out = old.to_vec();
        par_fill(&mut out[..n], |i, v| {
            if let Some(&o) = self.new_to_old.get(i + AHEAD) {
                prefetch(old.as_ptr().wrapping_add(o as usize));
            }
            *v = old[self.new_to_old[i] as usize];
        });
        out
    }

    /// A field back in the original order.
    pub fn undo<T: Copy>(&self, new: &[T]) -> Vec<T> {
        let n = self.len();
        let mut out: Vec<T> = self.old_to_new.iter().map(|&i| new[i as usize]).collect();
        out.extend_from_slice(&new[n..]);
        out
    }

    /// The operator with rows and neighbour indices renumbered (the ghost index n stays n).
    pub fn apply_operator(&self, op: &Operator) -> Operator {
        let n = self.len() as u32;
        let map = |j: u32| {
            if j < n {
                self.old_to_new[j as usize]
            } else {
                j
            }
        };
        let mut indices = vec![[0u32; 4]; self.new_to_old.len()];
        par_fill(&mut indices, |i, row| {
            *row = op.indices[self.new_to_old[i] as usize].map(map)
        });
        Operator {
            values: self.apply(&op.values),
            indices,
            volumes: self.apply(&op.volumes),
            centroids: self.apply(&op.centroids),
            boundary: op.boundary,
        }
    }
}

/// The orderings, by the names the CLI and JSON use.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OrderingKind {
    AsRead,
    Random,
    Rcm,
    Hilbert,
    /// METIS k-way blocks of about `block` tets, METIS's cache-friendly order inside each.
    Metis {
        block: usize,
    },
    MetisNd,
}

impl OrderingKind {
    pub fn name(&self) -> &'static str {
        match self {
            Self::AsRead => "as-read",
            Self::Random => "random",
            Self::Rcm => "rcm",
            Self::Hilbert => "hilbert",
            Self::Metis { .. } => "metis",
            Self::MetisNd => "metis-nd",
        }
    }
    pub fn parse(s: &str, block: usize) -> Result<Self> {
        Ok(match s {
            "as-read" => Self::AsRead,
            "random" => Self::Random,
            "rcm" => Self::Rcm,
            "hilbert" => Self::Hilbert,
            "metis" => Self::Metis { block },
            "metis-nd" => Self::MetisNd,
            _ => {
                return Err(FvError::param(
                    "ordering",
                    s,
                    "expected as-read, random, rcm, hilbert, metis or metis-nd",
                ));
            }
        })
    }
    pub fn all(block: usize) -> [Self; 6] {
        [
            Self::AsRead,
            Self::Random,
            Self::Rcm,
            Self::Hilbert,
            Self::Metis { block },
            Self::MetisNd,
        ]
    }
}

/// Computes an ordering of `op`'s tets; returns it and the seconds it took.
pub fn order(op: &Operator, kind: OrderingKind) -> Result<(Permutation, f64)> {
    let t = Instant::now();
    let n = op.n();
    let p = match kind {
        OrderingKind::AsRead => Permutation::identity(n),
        OrderingKind::Random => {
            let mut v: Vec<u32> = (0..n as u32).collect();
            v.shuffle(&mut seeded(0x5eed));
            Permutation::from_new_to_old(v)?
        }
        OrderingKind::Rcm => {
            let (xadj, adjncy) = op.graph();
            Permutation::from_new_to_old(rcm(&xadj, &adjncy))?
        }
        OrderingKind::Hilbert => Permutation::from_new_to_old(hilbert(&op.centroids))?,
        OrderingKind::Metis { block } => metis_blocks(op, block)?,
        OrderingKind::MetisNd => metis_nd(op)?,
    };
    Ok((p, t.elapsed().as_secs_f64()))
}

/// Fraction of interior neighbour references whose neighbour lies in the same block of `block` consecutive
/// tets (in the operator's current numbering). Panics when `block` is 0.
pub fn in_block_fraction(op: &Operator, block: usize) -> f64 {
    let n = op.n();
    let (mut inside, mut total) = (0usize, 0usize);
    for (i, row) in op.indices.iter().enumerate() {
        for &j in row {
            let j = j as usize;
            if j < n && j != i {
                total += 1;
                if j / block == i / block {
                    inside += 1;
                }
            }
        }
    }
    if total == 0 {
        1.0
    } else {
        inside as f64 / total as f64
    }
}
