#![doc = include_str!("../README.md")]
//!
//! This root package re-exports the kernel crates and holds what the CLI and the benches share: the registry
//! of `bespoke bench` sections and the JSON reports.

pub use bespoke_comm as comm;
pub use bespoke_fv as fv;
pub use bespoke_gpu as gpu;
pub use bespoke_lbm as lbm;
pub use bespoke_mm as mm;

pub mod bench;
pub mod host;
pub mod report;

/// Errors the CLI prints (with their causes) before exiting non-zero.
pub type Error = Box<dyn std::error::Error + Send + Sync>;

/// Where a command's time goes (`BESPOKE_PHASE_TIMES`): the gpu crate's, so the kernel crates' tuners print theirs.
pub use bespoke_gpu::{phase, phase_since};
