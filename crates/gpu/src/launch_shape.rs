//! What the step tuners of the kernel crates share (bespoke-lbm's and bespoke-fv's `shape`): the workgroup sizes
//! a kernel is timed at, and the rule that keeps the default unless a candidate is clearly faster.

use crate::context::Gpu;

/// Workgroup sizes a step kernel is timed at (those past the adapter's limits are left out).
pub const WORKGROUP_SIZES: [u32; 5] = [64, 128, 256, 512, 1024];

/// A candidate replaces the default only when it takes less than this fraction of the default's time: timing
/// noise is not a reason to change.
pub const TUNE_MARGIN: f64 = 0.97;

/// Why a launch-shape tuner took its default without timing anything: [`tuning_off`].
pub const UNTUNED: &str = "default (BESPOKE_NO_TUNING)";

/// Whether `BESPOKE_NO_TUNING` is set (to anything but empty or `0`): the launch-shape tuners a run reaches
/// through the user's cache (the LBM step's, the FV step's shape and layout) take their defaults, timing nothing
/// and caching nothing, and report [`UNTUNED`] as the source. For runs whose launch shapes do not matter and whose
/// tuning would cost more than they do: the tests under emulated devices in CI (each emulation is an adapter of its
/// own, tuned from nothing) and a GPU session's test stage. Every candidate shape gives the default's bits
/// (tested), so only the time moves. The tuners called with a cache of their own still time.
pub fn tuning_off() -> bool {
    crate::env_flag("BESPOKE_NO_TUNING")
}

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

/// Items per invocation a step tuner tries at its chosen workgroup size (cells of a lattice, tets of a mesh).
pub const PER_INVOCATION: [u32; 3] = [1, 2, 4];

/// The second stage of a step tuner: at the workgroup size already chosen (where one item per invocation took
/// `one` seconds), times every other count of [`PER_INVOCATION`] with `time` and keeps the fastest unless one per
/// invocation is within the margin ([`fastest_unless_close`]). Returns the choice and every (count, seconds).
pub fn tune_per_invocation<E>(
    one: f64,
    mut time: impl FnMut(u32) -> Result<f64, E>,
) -> Result<(u32, Vec<(u32, f64)>), E> {
    let mut timed = vec![(1, one)];
    for count in PER_INVOCATION.into_iter().filter(|&c| c > 1) {
        timed.push((count, time(count)?));
    }
    Ok((fastest_unless_close(&timed, 1), timed))
}

/// The block of work a workgroup takes in a kernel with the grid prelude ([`crate::GRID_WGSL`]), of `blocks` blocks
/// in all, as WGSL statements to put first in the entry point (where `wid` is its `workgroup_id`) and the
/// expression that then names the block: the workgroup's linear index, or where `descending` the blocks counted
/// from the last (workgroup 0 takes the last block; the surplus workgroups of a grid laid out in rows return at
/// once, as every invocation of theirs would). The step kernels walk backwards so on every other step (the LBM
/// lattice's and the FV step's `alternate` shapes): each step then begins where the step before ended, on what a
/// GPU's L2 cache still holds.
pub fn workgroup_block(descending: bool, blocks: usize) -> (String, &'static str) {
    if descending {
        (
            format!(
                "let lin = bespoke_workgroup_linear(wid);\n    if lin >= {blocks}u {{ return; }}\n    \
                 let w = {blocks}u - 1u - lin;\n    "
            ),
            "w",
        )
    } else {
        (String::new(), "bespoke_workgroup_linear(wid)")
    }
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

    #[test]
    fn per_invocation_counts_are_all_timed_and_one_stays_unless_beaten() {
        // 2 at 0.96 and 4 at 0.92 of one's time: 4 beats the margin.
        let (pick, timed) =
            tune_per_invocation::<()>(1.0, |c| Ok(1.0 - 0.02 * f64::from(c))).unwrap();
        assert_eq!(
            timed.iter().map(|t| t.0).collect::<Vec<_>>(),
            PER_INVOCATION
        );
        assert_eq!(pick, 4);
        // Within the margin: one stays.
        let (pick, _) = tune_per_invocation::<()>(1.0, |_| Ok(0.98)).unwrap();
        assert_eq!(pick, 1);
        // A failed timing is the tuner's error.
        assert_eq!(
            tune_per_invocation(1.0, |c| if c == 4 { Err("no") } else { Ok(0.5) }),
            Err("no")
        );
    }
}
