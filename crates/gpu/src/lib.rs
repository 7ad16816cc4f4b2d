//! bespoke-gpu: the one wgpu layer of bespoke.
//!
//! Every kernel takes one path: WGSL source → [`Kernel`] (with a [`KernelId`]) → naga-validated module →
//! pipeline cached by id → [`Gpu::prepare`] (bind, plan the grid) → [`Gpu::run`] / [`Gpu::time`].
//! Buffers are typed ([`GpuBuffer`]); data past one binding's size is bound in [`Window`]s.
//!
//! ```no_run
//! use bespoke_gpu::{Gpu, Grid, Kernel};
//! let gpu = Gpu::new()?;
//! let x = gpu.upload(&[1.0f32, 2.0, 3.0])?;
//! let k = Kernel::new("double", "@group(0) @binding(0) var<storage, read_write> x: array<f32>;
//!     @compute @workgroup_size(64) fn main(@builtin(global_invocation_id) g: vec3<u32>) {
//!         if g.x < arrayLength(&x) { x[g.x] = 2.0 * x[g.x]; } }");
//! let launch = gpu.prepare(&k, &[x.arg()], Grid::cover(3, 64)?)?;
//! gpu.run(&[&launch])?;
//! assert_eq!(gpu.read(&x)?, vec![2.0, 4.0, 6.0]);
//! # Ok::<(), bespoke_gpu::GpuError>(())
//! ```

mod atomic;
mod backends;
mod barrier_uniformity;
mod buffer;
mod context;
mod copy_walk;
mod disk;
mod dispatch;
mod dtype;
mod error;
mod f16_pack;
mod flushed_subnormals;
mod fused_multiply_add;
mod heater;
mod host;
mod inexact_division;
mod kernel;
mod launch_shape;
mod overlap;
mod packed_toward_zero;
mod phase;
mod pipeline;
mod probe;
mod reversed_invocations;
mod reversed_workgroups;
mod rewrite;
pub mod rng;
mod stale_workgroup;
pub mod testing;
mod texture;
mod timing;
mod validate;
pub mod vtk;
mod wrapped_out_of_bounds;

pub use atomic::{AtomicFile, check_writable, folder_of, write_atomic, write_atomic_failing};
pub use backends::{MSL_VERSION, Target, Translation, translate, validate_everywhere};
pub use buffer::{GpuBuffer, Window, packed_len};
pub use context::{
    AdapterClass, AdapterSummary, Gpu, GpuInfo, GpuOptions, KernelLimits, LimitsProfile, Quirks,
    WANTED_FEATURES, env_flag, list_adapters,
};
pub use disk::{DiskCache, Lookup, remembered_json, user_cache_dir};
pub use dispatch::{Arg, Grid, GridLayout, Launch};
pub use dtype::{DType, Element};
pub use error::{GpuError, Result};
pub use host::{available_memory, par_fill, par_first, prefetch};
pub use kernel::{Kernel, KernelId, StableHasher, stable_hash};
pub use launch_shape::{
    PER_INVOCATION, TUNE_MARGIN, UNTUNED, WORKGROUP_SIZES, fastest_unless_close,
    tune_per_invocation, tuning_off, workgroup_block,
};
pub use overlap::PendingRead;
pub use phase::{phase, phase_note, phase_since};
pub use pipeline::{CachedPipeline, GRID_WGSL};
pub use probe::{CopyProbe, CopyVariant, DEFAULT_PROBE_BYTES, ProbeOptions};
pub use texture::GpuTexture;
pub use timing::{
    STILL_WARM, Timing, TimingSource, WARM_MAX_SECONDS, WARM_SECONDS, WARM_STEADY, median,
    warm_up_agreed,
};
pub use validate::{Capabilities, ResourceUse, caps_for, resource_use, validate_wgsl};

pub use bytemuck;
pub use naga;
pub use wgpu;
