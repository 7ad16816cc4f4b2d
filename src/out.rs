//! The CLI's standard output, which a reader that stops reading cannot stop: `bespoke info | head -3` or a
//! `bespoke lbm … | grep -m1 …` closes the pipe while the command still prints. `println!` panics there ("failed
//! printing to stdout: Broken pipe"), which ends a run before its JSON, VTK or checkpoint files are written; here
//! the first failed write ends the output, quietly for a closed pipe and with one line on stderr for any other
//! error (a full disk), and the command carries on to its files and its exit status.

use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};

/// Set once a write to standard output failed: nothing more is written there.
static STOPPED: AtomicBool = AtomicBool::new(false);

/// Writes `args` to standard output unless an earlier write failed ([`say!`](crate::say)).
pub fn write(args: std::fmt::Arguments<'_>) {
    if STOPPED.load(Ordering::Relaxed) {
        return;
    }
    let mut out = std::io::stdout().lock();
    if let Err(e) = out.write_fmt(args) {
        STOPPED.store(true, Ordering::Relaxed);
        if e.kind() != std::io::ErrorKind::BrokenPipe {
            eprintln!("warning: standard output failed ({e}); the rest of it is dropped");
        }
    }
}

/// `println!` through [`write()`]: a line on standard output, or nothing once a write there failed.
#[macro_export]
macro_rules! say {
    () => {
        $crate::out::write(format_args!("\n"))
    };
    ($($arg:tt)*) => {
        $crate::out::write(format_args!("{}\n", format_args!($($arg)*)))
    };
}
