//! The step kernel's launch shape: every workgroup size the tuner may choose gives the default's bits, and the
//! choice is timed once per adapter and kind of lattice, then read from the cache.

#![allow(clippy::unwrap_used)] // a failed unwrap is a failed test

use std::rc::Rc;

use bespoke_gpu::testing::{fresh_seed, skipped, test_gpu};
use bespoke_gpu::{DiskCache, GridLayout};
use bespoke_lbm::kernel::WG;
use bespoke_lbm::shape::{
    CELL_CANDIDATES, StepShape, candidates, nine_bindings_fit, one_buffer_fits, step_shape_in,
};
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

/// Whether the shared adapter binds `buffers` storage buffers a kernel and `bytes` a binding, as `test`'s premise
/// needs (its emulated devices lower the shared one's limits); where not, the test is skipped by name.
fn shared_allows(gpu: &bespoke_gpu::Gpu, test: &str, buffers: u32, bytes: u64) -> bool {
    let (has_buffers, has_bytes) = (
        gpu.limits().max_storage_buffers_per_shader_stage,
        gpu.binding_limit(),
    );
    let ok = has_buffers >= buffers && has_bytes >= bytes;
    if !ok {
        skipped(&format!(
            "{test}: needs {buffers} storage buffers a kernel and {bytes} bytes a binding, `{}` allows \
             {has_buffers} and {has_bytes}",
            gpu.adapter_name()
        ));
    }
    ok
}

mod bits;
mod buffers;
mod cache;
