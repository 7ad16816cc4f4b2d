//! Steps in batches that grow towards a quarter of a second, stopping early on request: how `fv run` drives a
//! [`Diffusion`](crate::Diffusion) or a [`DistDiffusion`](crate::DistDiffusion) (as `bespoke_lbm`'s case runner
//! drives a lattice).

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use bespoke_comm::Comm;

use crate::error::Result;

/// Wall-clock seconds a batch grows towards.
pub const BATCH_SECONDS: f64 = 0.25;

/// Runs `steps` steps through `step(k)` in batches and returns the steps done. Batches start at one step and grow
/// (at most doubling) towards [`BATCH_SECONDS`] on rank 0, whose next size every rank takes when the ranks agree
/// after each batch (`comm`; `None`: one domain), so every rank steps alike. Once `stop` is raised on any rank
/// (a signal handler), every rank stops after the same batch. `progress(done)` follows each batch. The batches
/// change no bit: the same steps run in the same order.
pub fn step_batches(
    steps: usize,
    stop: &AtomicBool,
    comm: Option<&dyn Comm>,
    mut progress: impl FnMut(usize),
    mut step: impl FnMut(usize) -> Result<()>,
) -> Result<usize> {
    let (mut done, mut batch) = (0, 1usize);
    while done < steps {
        let k = batch.min(steps - done);
        let t = Instant::now();
        step(k)?;
        done += k;
        progress(done);
        let grown = (k as f64 * BATCH_SECONDS / t.elapsed().as_secs_f64().max(1e-9))
            .clamp(1.0, 2.0 * k as f64);
        let mut mine = vec![u8::from(stop.load(Ordering::Relaxed))];
        mine.extend((grown as u64).to_le_bytes());
        let all = match comm {
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
    Ok(done)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_step_runs_once_in_growing_batches_without_a_device() {
        let stop = AtomicBool::new(false);
        let (mut batches, mut seen) = (Vec::new(), Vec::new());
        let done = step_batches(
            1000,
            &stop,
            None,
            |d| seen.push(d),
            |k| {
                batches.push(k);
                Ok(())
            },
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
            1000,
            &stop,
            None,
            |_| {},
            |k| {
                ran += k;
                if ran >= 7 {
                    stop.store(true, Ordering::Relaxed);
                }
                Ok(())
            },
        )
        .unwrap();
        // Batches 1, 2, 4: the stop raised in the third ends the run after it.
        assert_eq!((done, ran), (7, 7));
        let err = step_batches(
            5,
            &stop,
            None,
            |_| {},
            |_| Err(crate::FvError::Shape("the step failed".into())),
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
                10_000,
                &stop,
                Some(&comm),
                |_| {},
                |k| {
                    batches.push(k);
                    if comm.rank() == 1 && batches.iter().sum::<usize>() >= 3 {
                        stop.store(true, Ordering::Relaxed);
                    }
                    Ok(())
                },
            )?;
            Ok::<_, crate::FvError>((done, batches))
        })
        .unwrap();
        assert_eq!(results[0], results[1]);
        assert_eq!(results[0].0, 3);
    }
}
