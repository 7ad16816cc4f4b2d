//! Steps in batches that grow towards a quarter of a second, stopping early on request: how `fv run` drives a
//! [`Diffusion`](crate::Diffusion) or a [`DistDiffusion`](crate::DistDiffusion) (as `bespoke_lbm`'s case runner
//! drives a lattice).

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use bespoke_comm::Comm;

use crate::error::Result;

/// Wall-clock seconds a batch grows towards.
pub const BATCH_SECONDS: f64 = 0.25;

/// Which steps a run takes and what may cut it short.
#[derive(Debug)]
pub struct Schedule<'a> {
    /// The step the run starts at (a resumed run's checkpoint step; 0 otherwise).
    pub from: usize,
    /// The step it ends at.
    pub to: usize,
    /// Also `save` after every step that is a multiple of one of these (checkpoints, frames of a time series),
    /// counted from the run's start (not `to` itself: the caller saves the end); zeros are ignored.
    pub save_every: Vec<usize>,
    /// Raised (by a signal handler) to stop after the batch in flight.
    pub stop: &'a AtomicBool,
    /// The ranks of a distributed run (`None`: one domain).
    pub comm: Option<&'a dyn Comm>,
}

/// Runs the schedule's steps through `step(k)` in batches and returns the step reached. Batches start at one
/// step and grow (at most doubling) towards [`BATCH_SECONDS`] on rank 0, whose next size every rank takes when
/// the ranks agree after each batch, so every rank steps alike; a batch ends at each `save_every` multiple, where
/// `save(step)` runs on every rank. Once `stop` is raised on any rank, every rank stops after the same batch.
/// `progress(step)` follows each batch. The batches change no bit: the same steps run in the same order.
pub fn step_batches(
    s: Schedule<'_>,
    mut progress: impl FnMut(usize),
    mut step: impl FnMut(usize) -> Result<()>,
    mut save: impl FnMut(usize) -> Result<()>,
) -> Result<usize> {
    let (mut at, mut batch) = (s.from, 1usize);
    while at < s.to {
        let mut end = s.to.min(at + batch);
        for &n in s.save_every.iter().filter(|&&n| n > 0) {
            end = end.min((at / n + 1) * n);
        }
        let k = end - at;
        let t = Instant::now();
        step(k)?;
        at = end;
        progress(at);
        if s.save_every.iter().any(|&n| n > 0 && at % n == 0) && at < s.to {
            save(at)?;
        }
        // The rate this batch measured, to at most twice the batch planned: one cut short by a save does not
        // shrink the next.
        let grown = (k as f64 * BATCH_SECONDS / t.elapsed().as_secs_f64().max(1e-9))
            .clamp(1.0, 2.0 * batch as f64);
        let mut mine = vec![u8::from(s.stop.load(Ordering::Relaxed))];
        mine.extend((grown as u64).to_le_bytes());
        let all = match s.comm {
            Some(c) => c.all_gather_bytes(&mine)?,
            None => vec![mine],
        };
        if all.iter().any(|b| b.first() == Some(&1)) {
            break;
        }
        batch = all[0]
            .get(1..9)
            .and_then(|b| b.try_into().ok())
            .map_or(k, |b| u64::from_le_bytes(b) as usize)
            .max(1);
    }
    Ok(at)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sched<'a>(
        from: usize,
        to: usize,
        save_every: &[usize],
        stop: &'a AtomicBool,
        comm: Option<&'a dyn Comm>,
    ) -> Schedule<'a> {
        Schedule {
            from,
            to,
            save_every: save_every.to_vec(),
            stop,
            comm,
        }
    }

    #[test]
    fn batches_end_at_each_save_counted_from_the_runs_start_without_a_device() {
        let stop = AtomicBool::new(false);
        let (mut ran, mut saves) = (Vec::new(), Vec::new());
        // A run resumed at step 13 of 60, saving every 10 steps: saves at 20 … 50, not at 60 (the caller's).
        let at = step_batches(
            sched(13, 60, &[10], &stop, None),
            |_| {},
            |k| {
                ran.push(k);
                Ok(())
            },
            |s| {
                saves.push(s);
                Ok(())
            },
        )
        .unwrap();
        assert_eq!(at, 60);
        assert_eq!(ran.iter().sum::<usize>(), 47);
        assert_eq!(saves, [20, 30, 40, 50]);
        // Instant steps: 1, 2, 4, 8 from step 13, then 2 to the save at 30; after that cut the batch is whole
        // again (the save interval), not 4 (twice the cut batch, as before 2026-12-02).
        assert_eq!(ran, [1, 2, 4, 8, 2, 10, 10, 10]);
        let err = step_batches(
            sched(0, 30, &[4], &stop, None),
            |_| {},
            |_| Ok(()),
            |s| Err(crate::FvError::Shape(format!("the save at {s} failed"))),
        )
        .unwrap_err();
        assert!(err.to_string().contains("at 4"), "{err}");
        // Two cadences (checkpoints every 10, frames every 4): a save at each multiple of either.
        let mut saves = Vec::new();
        step_batches(
            sched(0, 30, &[10, 4], &stop, None),
            |_| {},
            |_| Ok(()),
            |s| {
                saves.push(s);
                Ok(())
            },
        )
        .unwrap();
        assert_eq!(saves, [4, 8, 10, 12, 16, 20, 24, 28]);
    }

    #[test]
    fn every_step_runs_once_in_growing_batches_without_a_device() {
        let stop = AtomicBool::new(false);
        let (mut batches, mut seen) = (Vec::new(), Vec::new());
        let done = step_batches(
            sched(0, 1000, &[], &stop, None),
            |d| seen.push(d),
            |k| {
                batches.push(k);
                Ok(())
            },
            |_| panic!("no saves asked"),
        )
        .unwrap();
        assert_eq!(done, 1000);
        assert_eq!(batches.iter().sum::<usize>(), 1000);
        // Instant steps: each batch doubles the last (the last one cut to what remains).
        assert_eq!(&batches[..4], &[1, 2, 4, 8]);
        assert!(batches.windows(2).all(|w| w[1] <= 2 * w[0]), "{batches:?}");
        assert_eq!(seen.last(), Some(&1000));
        assert!(seen.windows(2).all(|w| w[0] < w[1]));
    }

    #[test]
    fn a_raised_stop_ends_after_the_batch_in_flight_without_a_device() {
        let stop = AtomicBool::new(false);
        let mut ran = 0;
        let done = step_batches(
            sched(0, 1000, &[], &stop, None),
            |_| {},
            |k| {
                ran += k;
                if ran >= 7 {
                    stop.store(true, Ordering::Relaxed);
                }
                Ok(())
            },
            |_| Ok(()),
        )
        .unwrap();
        // Batches 1, 2, 4: the stop raised in the third ends the run after it.
        assert_eq!((done, ran), (7, 7));
        let err = step_batches(
            sched(0, 5, &[], &stop, None),
            |_| {},
            |_| Err(crate::FvError::Shape("the step failed".into())),
            |_| Ok(()),
        )
        .unwrap_err();
        assert!(err.to_string().contains("the step failed"), "{err}");
    }

    #[test]
    fn ranks_take_rank_0s_batches_and_stop_together_without_a_device() {
        // Rank 1 raises its stop after 3 steps; rank 0 never does. Both stop after the same batch.
        let results = bespoke_comm::run_threads(2, |comm| {
            let stop = AtomicBool::new(false);
            let mut batches = Vec::new();
            let done = step_batches(
                sched(0, 10_000, &[], &stop, Some(&comm)),
                |_| {},
                |k| {
                    batches.push(k);
                    if comm.rank() == 1 && batches.iter().sum::<usize>() >= 3 {
                        stop.store(true, Ordering::Relaxed);
                    }
                    Ok(())
                },
                |_| Ok(()),
            )?;
            Ok::<_, crate::FvError>((done, batches))
        })
        .unwrap();
        assert_eq!(results[0], results[1]);
        assert_eq!(results[0].0, 3);
    }
}
