//! Device tests of the one dispatch path. They run on any adapter (lavapipe in CI) and fail, not skip, when
//! `BESPOKE_REQUIRE_GPU=1` and no adapter exists.

#![allow(clippy::unwrap_used)] // a failed unwrap is a failed test

use bespoke_gpu::testing::{emulating, fresh_seed, test_gpu};
use bespoke_gpu::{
    Arg, CopyVariant, Gpu, GpuError, GpuOptions, Grid, Kernel, ProbeOptions, TimingSource,
};
use rand::{Rng, SeedableRng, rngs::StdRng};

fn rng() -> StdRng {
    StdRng::seed_from_u64(fresh_seed())
}

const AXPY: &str = "
struct P { a: f32, n: u32 }
@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read> y: array<f32>;
@group(0) @binding(2) var<storage, read_write> z: array<f32>;
@group(0) @binding(3) var<uniform> p: P;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) g: vec3<u32>) {
    if g.x < p.n { z[g.x] = fma(p.a, x[g.x], y[g.x]); }
}";

mod buffers;
mod dispatch;
mod flushed;
mod fused;
mod inexact;
mod invocations;
mod lifecycle;
mod packed;
mod reversed;
mod stale;
mod timing;
mod wrapped;
