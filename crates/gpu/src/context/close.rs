//! Devices of one process close one at a time.

use std::sync::Mutex;

/// Devices of one process close one at a time. On an NVIDIA H200 (driver 580.159.04, 2026-11-27) four devices on
/// the one adapter closed at once from four threads (the CLI's thread ranks) hung the process after every rank had
/// finished, in 4 of 6 runs; two never did, and closing them in turn passed twice. A `Gpu`'s fields drop in
/// declaration order: `_close_turn` first waits for the turn, the device and everything made from it drop, then
/// `_close_done` hands the turn on.
static CLOSING: (Mutex<bool>, std::sync::Condvar) = (Mutex::new(false), std::sync::Condvar::new());

pub(super) struct CloseTurn;

impl Drop for CloseTurn {
    fn drop(&mut self) {
        let (busy, turn) = &CLOSING;
        let mut b = busy
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        while *b {
            b = turn
                .wait(b)
                .unwrap_or_else(std::sync::PoisonError::into_inner);
        }
        *b = true;
    }
}

pub(super) struct CloseDone;

impl Drop for CloseDone {
    fn drop(&mut self) {
        let (busy, turn) = &CLOSING;
        *busy
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = false;
        turn.notify_one();
    }
}
