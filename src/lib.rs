#![doc = include_str!("../README.md")]
//!
//! This root package re-exports the kernel crates and holds what the CLI and the benches share: the registry
//! of `bespoke bench` sections and the JSON reports.

// Standard output goes through `say!` (`out`): a closed pipe ends the output, not the run.
#![deny(clippy::print_stdout)]

pub use bespoke_comm as comm;
pub use bespoke_fv as fv;
pub use bespoke_gpu as gpu;
pub use bespoke_lbm as lbm;
pub use bespoke_mm as mm;

pub mod bench;
pub mod host;
pub mod out;
pub mod report;

/// Errors the CLI prints (with their causes) before exiting non-zero.
pub type Error = Box<dyn std::error::Error + Send + Sync>;

/// Where a command's time goes (`BESPOKE_PHASE_TIMES`): the gpu crate's, so the kernel crates' tuners print theirs.
pub use bespoke_gpu::{phase, phase_note, phase_since};

/// Set (to anything but empty or `0`): timings skip a GPU's clock warm-up (`GpuOptions::skip_warm_up`, tuned
/// choices keyed apart). The CLI's tests set it: they check results, and on a GPU each cold timing would first
/// spend 0.5–2 s raising the clocks.
pub const SKIP_WARM_UP: &str = "BESPOKE_SKIP_WARM_UP";

/// The options every device of the CLI and the bench opens with ([`SKIP_WARM_UP`]).
pub fn gpu_options() -> bespoke_gpu::GpuOptions {
    bespoke_gpu::GpuOptions {
        skip_warm_up: bespoke_gpu::env_flag(SKIP_WARM_UP),
        ..bespoke_gpu::GpuOptions::default()
    }
}
