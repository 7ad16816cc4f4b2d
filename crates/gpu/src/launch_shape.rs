//! What the step tuners of the kernel crates share (bespoke-lbm's and bespoke-fv's `shape`): the workgroup sizes
//! a kernel is timed at, and the rule that keeps the default unless a candidate is clearly faster.

use crate::context::Gpu;

/// Workgroup sizes a step kernel is timed at (those past the adapter's limits are left out).
pub const WORKGROUP_SIZES: [u32; 5] = [64, 128, 256, 512, 1024];

/// A candidate replaces the default only when it takes less than this fraction of the default's time: timing
/// noise is not a reason to change.
pub const TUNE_MARGIN: f64 = 0.97;

impl Gpu {
    /// The sizes of [`WORKGROUP_SIZES`] a one-dimensional workgroup can have on this adapter.
    pub fn workgroup_sizes(&self) -> Vec<u32> {
        let l = self.limits();
        WORKGROUP_SIZES
            .into_iter()
            .filter(|&w| {
                w <= l.max_compute_invocations_per_workgroup && w <= l.max_compute_workgroup_size_x
            })
            .collect()
    }
}

/// The fastest size of `timed` (size, seconds), unless `default` was timed and the fastest is not below
/// [`TUNE_MARGIN`] of its time: then `default`.
pub fn fastest_unless_close(timed: &[(u32, f64)], default: u32) -> u32 {
    let default_time = timed.iter().find(|(w, _)| *w == default).map(|p| p.1);
    timed
        .iter()
        .copied()
        .min_by(|a, b| a.1.total_cmp(&b.1))
        .filter(|(_, t)| default_time.is_none_or(|d| *t < TUNE_MARGIN * d))
        .map_or(default, |(w, _)| w)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_stays_unless_beaten_by_the_margin() {
        assert_eq!(fastest_unless_close(&[(64, 1.0), (256, 0.98)], 64), 64);
        assert_eq!(fastest_unless_close(&[(64, 1.0), (256, 0.9)], 64), 256);
        assert_eq!(fastest_unless_close(&[(64, 1.0), (256, 1.2)], 64), 64);
        // The default not timed: the fastest.
        assert_eq!(fastest_unless_close(&[(128, 1.0), (256, 0.99)], 64), 256);
        assert_eq!(fastest_unless_close(&[], 64), 64);
    }
}
