//! The step kernel's launch shape: every workgroup size the tuner may choose gives the default's bits, and the
//! choice is timed once per adapter and kind of lattice, then read from the cache.

#![allow(clippy::unwrap_used)] // a failed unwrap is a failed test

use std::rc::Rc;

use bespoke_gpu::testing::{fresh_seed, test_gpu};
use bespoke_gpu::{DiskCache, GridLayout};
use bespoke_lbm::kernel::WG;
use bespoke_lbm::shape::{CELL_CANDIDATES, StepShape, candidates, step_shape_in};
use bespoke_lbm::{Collision, Config, Flags, Lattice, Storage, Streaming};
use rand::{Rng, SeedableRng, rngs::StdRng};

/// A random state of `n` cells: (ρ, u) each, ρ within 3 % of 1, each velocity component within ±0.05.
fn random_cells(rng: &mut StdRng, n: usize) -> Vec<(f64, [f64; 2])> {
    (0..n)
        .map(|_| {
            (
                rng.random_range(0.97..1.03),
                [rng.random_range(-0.05..0.05), rng.random_range(-0.05..0.05)],
            )
        })
        .collect()
}

mod bits;
mod buffers;
mod cache;
