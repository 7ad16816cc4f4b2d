//! Where a command's time goes on a new machine, without a profiler: `BESPOKE_PHASE_TIMES=1` prints each phase's
//! time when it ends (`[phase] WHAT: S s`: opening a device, the copy probe, the set-up with its tuning, each
//! tuning candidate, the run); `BESPOKE_PHASE_TIMES=2` also prints `[phase] WHAT …` when it starts, so a run that
//! never ends shows the phase it is stuck in.

use std::time::Instant;

/// 0: quiet, 1: each phase's time, 2: its start too.
fn level() -> u8 {
    match std::env::var("BESPOKE_PHASE_TIMES").as_deref() {
        Err(_) | Ok("") | Ok("0") => 0,
        Ok("2") => 2,
        Ok(_) => 1,
    }
}

/// `[phase] TEXT` on stderr in one write, so that the lines of ranks sharing a terminal (mpirun's) do not
/// interleave within a line.
fn line(text: String) {
    use std::io::Write;
    let _ = std::io::stderr().write_all(format!("[phase] {text}\n").as_bytes());
}

/// Runs `f`, printing on stderr how long it took where `BESPOKE_PHASE_TIMES` asks for it.
pub fn phase<T>(what: impl std::fmt::Display, f: impl FnOnce() -> T) -> T {
    if level() >= 2 {
        line(format!("{what} …"));
    }
    let started = Instant::now();
    let out = f();
    phase_since(what, started);
    out
}

/// Prints `[phase] WHAT` where `BESPOKE_PHASE_TIMES` asks for phase times: a fact a phase found (the device a rank
/// took), not a time.
pub fn phase_note(what: impl std::fmt::Display) {
    if level() >= 1 {
        line(what.to_string());
    }
}

/// Prints `[phase] WHAT: S s` for the time since `started`, where `BESPOKE_PHASE_TIMES` asks for it ([`phase`]).
pub fn phase_since(what: impl std::fmt::Display, started: Instant) {
    if level() >= 1 {
        line(format!("{what}: {:.2} s", started.elapsed().as_secs_f64()));
    }
}
