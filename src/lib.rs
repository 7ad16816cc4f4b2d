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
pub mod report;

/// Errors the CLI prints (with their causes) before exiting non-zero.
pub type Error = Box<dyn std::error::Error + Send + Sync>;

/// Runs `f`; with `BESPOKE_PHASE_TIMES` set (not empty, not 0) prints on stderr how long it took, as
/// `[phase] WHAT: S s`: where a command's time goes on a new machine (opening a device, the copy probe, the set-up
/// with its tuning, the run) without a profiler.
pub fn phase<T>(what: impl std::fmt::Display, f: impl FnOnce() -> T) -> T {
    let started = std::time::Instant::now();
    let out = f();
    phase_since(what, started);
    out
}

/// Prints `[phase] WHAT: S s` for the time since `started`, where `BESPOKE_PHASE_TIMES` asks for it ([`phase`]).
pub fn phase_since(what: impl std::fmt::Display, started: std::time::Instant) {
    if std::env::var("BESPOKE_PHASE_TIMES").is_ok_and(|v| !v.is_empty() && v != "0") {
        eprintln!("[phase] {what}: {:.2} s", started.elapsed().as_secs_f64());
    }
}
