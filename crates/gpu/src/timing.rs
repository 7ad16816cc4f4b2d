//! GPU timing: timestamp queries around each repetition where the adapter has them, wall clock otherwise.

use std::time::{Duration, Instant};

use crate::context::Gpu;
use crate::dispatch::Launch;
use crate::error::{GpuError, Result};

/// Where the samples came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum TimingSource {
    GpuTimestamps,
    WallClock,
}

impl TimingSource {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::GpuTimestamps => "gpu-timestamps",
            Self::WallClock => "wall-clock",
        }
    }
}

/// Seconds per repetition.
#[derive(Clone, Debug)]
pub struct Timing {
    pub samples: Vec<f64>,
    pub source: TimingSource,
    /// Wall seconds of the launches run before the timed repetitions to raise a GPU's clocks from idle
    /// ([`WARM_SECONDS`]; 0 on a CPU adapter, or when a timing had just ended and the clocks were still up).
    pub warmed_seconds: f64,
}

/// Least wall seconds a GPU is kept busy with the timed launches before a timing, unless a timing ended within
/// [`STILL_WARM`]: a GPU lowers its clocks when idle and raises them only after a spell of load. On the H200 on
/// 2026-11-28 (`nvidia-smi` every 200 ms beside the lab, docs/perf.md) the SM clock sat at 345 MHz when idle, took
/// 200–400 ms of load to reach 1980 MHz, stayed at 345–855 MHz through every lab row's 50 ms warm-up and 0.14 s of
/// timed steps, and held 1980 MHz for 1.8–3 s after a load ended. At idle clocks the D2Q9 step ran at 0.35 of
/// copy, at full clocks 0.90 (the same kernel on the same buffers, a round later). After this minimum the warm-up
/// goes on until a batch runs at the rate of one 0.1 s earlier ([`WARM_STEADY`]), up to [`WARM_MAX_SECONDS`].
pub const WARM_SECONDS: f64 = 0.5;

/// Most wall seconds a warm-up runs (a kernel longer than this runs once).
pub const WARM_MAX_SECONDS: f64 = 2.0;

/// Two batches' seconds per repetition within this fraction of each other count as steady clocks.
pub const WARM_STEADY: f64 = 0.02;

/// A batch's rate is compared with that of the batch this many seconds of load earlier (a slow rise moves a few
/// per cent over it where neighbouring batches differ by less than [`WARM_STEADY`]).
const WARM_WINDOW_SECONDS: f64 = 0.1;

/// Wall seconds a warm-up batch aims at (batches grow to it, never shrink).
const WARM_BATCH_SECONDS: f64 = 0.025;

/// How long after the heater ran (`Gpu::time`'s warm-up or its check) the clocks count as still raised: the
/// H200 held them 1.8–3 s after a load ended. Only the heater sets it: a timing of short launches does not keep a
/// card busy enough to hold its clocks (on 2026-12-04, chained within a second of each other, the tuner's timings
/// kept "still warm" going while the SM clock sat at 345–585 MHz).
pub const STILL_WARM: Duration = Duration::from_millis(1000);

/// Runs batches of repetitions through `run_batch(n)` (which runs `n` and returns their wall seconds) until at
/// least [`WARM_SECONDS`] have passed and the last batch ran at the rate of the batch of the same size
/// [`WARM_WINDOW_SECONDS`] earlier ([`WARM_STEADY`]), or [`WARM_MAX_SECONDS`] have passed; returns the seconds
/// spent. Batches grow from one repetition to [`WARM_BATCH_SECONDS`] at the fastest rate seen so far (at most
/// 4096), so a rate measured while the clocks rise is never compared with one of another batch size, and a long
/// kernel runs once.
pub(crate) fn warm_up(run_batch: impl FnMut(usize) -> Result<f64>) -> Result<f64> {
    warm_up_agreed(run_batch, |spent, rate| Ok((spent, rate)))
}

/// `warm_up` where several processes must run the same batches (ranks whose steps exchange halos): after each
/// batch, `agree(spent, rate)` turns this process's seconds so far and seconds per repetition into values every
/// process sees alike (the least seconds spent and the slowest rate over the ranks), and every decision (the
/// stop, the next batch's size) is made on those, so every process runs the same count. Returns this process's
/// own seconds.
pub fn warm_up_agreed<E>(
    mut run_batch: impl FnMut(usize) -> std::result::Result<f64, E>,
    mut agree: impl FnMut(f64, f64) -> std::result::Result<(f64, f64), E>,
) -> std::result::Result<f64, E> {
    let mut spent = 0.0;
    let mut batch = 1usize;
    // (agreed seconds spent when the batch ended, its size, its agreed seconds per repetition)
    let mut seen: Vec<(f64, usize, f64)> = Vec::new();
    loop {
        let seconds = run_batch(batch)?;
        spent += seconds;
        let (all_spent, rate) = agree(spent, seconds / batch as f64)?;
        let earlier = seen
            .iter()
            .rev()
            .find(|(end, _, _)| *end <= all_spent - WARM_WINDOW_SECONDS);
        let steady =
            earlier.is_some_and(|&(_, n, r)| n == batch && (rate - r).abs() <= WARM_STEADY * r);
        if all_spent >= WARM_MAX_SECONDS || (all_spent >= WARM_SECONDS && steady) {
            return Ok(spent);
        }
        seen.push((all_spent, batch, rate));
        let wanted = (WARM_BATCH_SECONDS / rate.max(1e-9)).ceil() as usize;
        batch = batch.max(wanted.clamp(1, 4096));
    }
}

/// The median of `samples` (the mean of the middle two of an even count); NaN for none.
pub fn median(samples: &[f64]) -> f64 {
    let mut s = samples.to_vec();
    s.sort_by(f64::total_cmp);
    match s.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => s[n / 2],
        n => 0.5 * (s[n / 2 - 1] + s[n / 2]),
    }
}

impl Timing {
    pub fn median(&self) -> f64 {
        median(&self.samples)
    }
    pub fn min(&self) -> f64 {
        self.samples.iter().copied().fold(f64::INFINITY, f64::min)
    }
}

/// Most timestamp pairs one query set holds (wgpu caps a set at 4096 queries).
const MAX_TIMED_REPS: usize = 2048;

impl Gpu {
    /// Runs `launches` `warmup` times, then times `reps` repetitions of the whole list (each repetition in its
    /// own compute pass, bracketed by timestamps).
    /// On a GPU the heater first raises the clocks (`heater.rs`: for at least [`WARM_SECONDS`], or one short
    /// batch that finds them still up), unless it ran within [`STILL_WARM`].
    pub fn time(&self, launches: &[&Launch], warmup: usize, reps: usize) -> Result<Timing> {
        self.time_warm(launches, warmup, reps)
    }

    /// Times each of `groups` (a list of launches each) once per round, the groups in turn, `rounds` times,
    /// after `warmup` runs of each; returns each round's seconds, one per group. A quantity derived from several
    /// timings (a ratio, a difference) taken from the same round and then its median over rounds is not skewed by
    /// a machine whose speed drifts between the timings, as separate medians are (a shared VM's: the dense
    /// model's overlap and barrier costs on lavapipe read 0.05–1.0 and 0–4.9 ns that way, 2026-11-27).
    pub fn time_in_turn(
        &self,
        groups: &[&[&Launch]],
        warmup: usize,
        rounds: usize,
    ) -> Result<Vec<Vec<f64>>> {
        if warmup > 0 {
            for g in groups {
                self.run_n(g, warmup)?;
            }
        }
        (0..rounds.max(1))
            .map(|_| {
                groups
                    .iter()
                    .map(|g| Ok(self.time(g, 0, 1)?.median()))
                    .collect()
            })
            .collect()
    }

    fn time_warm(&self, launches: &[&Launch], warmup: usize, reps: usize) -> Result<Timing> {
        let reps = reps.clamp(1, MAX_TIMED_REPS);
        let warmed_seconds = self.raise_clocks()?;
        if warmup > 0 {
            self.run_n(launches, warmup)?;
        }
        if self.has_timestamps() {
            let timed = self.time_with_timestamps(launches, reps)?;
            // Some drivers return zeros for passes that are too short or unsupported, some implausible times
            // (below): fall back.
            if timed.0.iter().all(|s| *s > 0.0) && plausible(&timed) {
                return Ok(Timing {
                    samples: timed.0,
                    source: crate::TimingSource::GpuTimestamps,
                    warmed_seconds,
                });
            }
        }
        let mut samples = Vec::with_capacity(reps);
        for _ in 0..reps {
            let t = Instant::now();
            self.run(launches)?;
            samples.push(t.elapsed().as_secs_f64());
        }
        Ok(Timing {
            samples,
            source: TimingSource::WallClock,
            warmed_seconds,
        })
    }

    /// Raises a GPU's clocks with the heater ([`Gpu::heat`]) unless it ran within [`STILL_WARM`]; returns the
    /// seconds spent. A CPU adapter has no clocks to raise: 0. The timed launches are not the load: short ones,
    /// each batch waited for, kept the H200 half idle and its clocks at a third of full (2026-12-04).
    fn raise_clocks(&self) -> Result<f64> {
        let warm = self
            .warm_until
            .lock()
            .ok()
            .and_then(|w| *w)
            .is_some_and(|until| Instant::now() < until);
        if !self.warms_up() || warm {
            return Ok(0.0);
        }
        let spent = self.heat()?;
        if let Ok(mut w) = self.warm_until.lock() {
            *w = Some(Instant::now() + STILL_WARM);
        }
        Ok(spent)
    }

    /// Timestamp samples, with the wall-clock seconds of the one submission that holds them all.
    fn time_with_timestamps(&self, launches: &[&Launch], reps: usize) -> Result<(Vec<f64>, f64)> {
        let count = (2 * reps) as u32;
        let qs = self.device.create_query_set(&wgpu::QuerySetDescriptor {
            label: Some("bespoke timing"),
            ty: wgpu::QueryType::Timestamp,
            count,
        });
        let bytes = u64::from(count) * 8;
        let resolve = self.device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("timestamp resolve"),
            size: bytes,
            usage: wgpu::BufferUsages::QUERY_RESOLVE | wgpu::BufferUsages::COPY_SRC,
            mapped_at_creation: false,
        });
        let staging = self.device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("timestamp readback"),
            size: bytes,
            usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        let mut enc = self.device.create_command_encoder(&Default::default());
        for r in 0..reps as u32 {
            let mut pass = enc.begin_compute_pass(&wgpu::ComputePassDescriptor {
                label: Some("timed"),
                timestamp_writes: Some(wgpu::ComputePassTimestampWrites {
                    query_set: &qs,
                    beginning_of_pass_write_index: Some(2 * r),
                    end_of_pass_write_index: Some(2 * r + 1),
                }),
            });
            for l in launches {
                l.record(&mut pass);
            }
        }
        enc.resolve_query_set(&qs, 0..count, &resolve, 0);
        enc.copy_buffer_to_buffer(&resolve, 0, &staging, 0, bytes);
        let wall = Instant::now();
        self.submit_and_map(enc, &staging, bytes, "timing kernels")?;
        let wall = wall.elapsed().as_secs_f64();
        let ticks: Vec<u64> = {
            let view = staging.get_mapped_range(..).map_err(|e| GpuError::Wgpu {
                context: "viewing timestamps".into(),
                message: format!("{e:?}"),
            })?;
            bytemuck::pod_collect_to_vec(&view)
        };
        staging.unmap();
        let period_ns = f64::from(self.queue.get_timestamp_period());
        let samples = ticks
            .chunks_exact(2)
            .map(|p| p[1].saturating_sub(p[0]) as f64 * period_ns * 1e-9)
            .collect();
        Ok((samples, wall))
    }
}

/// Passes longer than this are checked against the wall clock.
const CHECKED_PASS_SECONDS: f64 = 0.01;

/// Whether timestamp samples can be believed: when the submission took at least 10 ms per pass by the wall clock,
/// the passes must account for two thirds of it. llvmpipe (Mesa 22.3) fails this once any kernel in the process
/// has written a storage texture: its timestamps then read from 2× to 1000× too short (docs/perf.md).
fn plausible((samples, wall): &(Vec<f64>, f64)) -> bool {
    let per_pass = wall / samples.len().max(1) as f64;
    per_pass < CHECKED_PASS_SECONDS || samples.iter().sum::<f64>() >= 2.0 / 3.0 * wall
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_of_even_and_odd_counts() {
        let t = |s: &[f64]| Timing {
            samples: s.to_vec(),
            source: TimingSource::WallClock,
            warmed_seconds: 0.0,
        };
        assert_eq!(t(&[3.0, 1.0, 2.0]).median(), 2.0);
        assert_eq!(t(&[4.0, 1.0, 2.0, 3.0]).median(), 2.5);
        assert_eq!(t(&[4.0, 1.0]).min(), 1.0);
        assert!(t(&[]).median().is_nan());
    }

    /// An emulated GPU whose repetitions run `slow`× longer until `ramp` seconds of load have passed (its clocks
    /// rising at once, as the H200's did), `per_rep` seconds each after; returns the warm-up's seconds and the rate
    /// its last batch saw.
    fn warm_on(per_rep: f64, slow: f64, ramp: f64) -> (f64, f64) {
        warm_on_curve(per_rep, |now| if now < ramp { slow } else { 1.0 })
    }

    /// The same with the slowdown a function of the seconds of load so far.
    fn warm_on_curve(per_rep: f64, slowdown: impl Fn(f64) -> f64) -> (f64, f64) {
        let mut now = 0.0;
        let mut last_rate = f64::NAN;
        let spent = warm_up(|n| {
            let start = now;
            for _ in 0..n {
                now += per_rep * slowdown(now);
            }
            last_rate = (now - start) / n as f64;
            Ok(now - start)
        })
        .unwrap();
        assert!(
            (spent - now).abs() < 1e-9,
            "the warm-up's seconds are its batches'"
        );
        (spent, last_rate)
    }

    #[test]
    fn the_warm_up_outlasts_a_clock_ramp_and_ends_at_full_speed() {
        // The H200's: 0.35 of full speed for 300 ms of load (2026-11-28), a 1.3 ms kernel and a 20 µs one.
        for per_rep in [1.3e-3, 2e-5] {
            let (spent, rate) = warm_on(per_rep, 1.0 / 0.35, 0.3);
            assert!(
                (WARM_SECONDS..WARM_MAX_SECONDS).contains(&spent),
                "{per_rep}: warmed {spent} s"
            );
            assert!(
                (rate - per_rep).abs() < 1e-3 * per_rep,
                "{per_rep}: ended at {rate} s a repetition"
            );
        }
        // Clocks still rising at the minimum (3× slow at first, full speed after 1.2 s of load): the warm-up
        // waits for them. (Clocks that only start rising after the minimum cannot be told from steady ones:
        // the minimum is what covers the ramp the H200 showed.)
        let (spent, rate) = warm_on_curve(1e-3, |now| 3.0 - 2.0 * (now / 1.2).min(1.0));
        assert!(spent > 1.1 && spent < WARM_MAX_SECONDS, "warmed {spent} s");
        assert!(
            (rate - 1e-3).abs() < 0.03e-3,
            "ended at {rate} s a repetition"
        );
        // Clocks that keep falling (a card throttling) stop at the cap; a kernel longer than the cap runs once.
        let (spent, _) = warm_on_curve(1e-3, |now| 1.0 + now);
        assert!(
            (WARM_MAX_SECONDS..WARM_MAX_SECONDS + 0.1).contains(&spent),
            "warmed {spent} s"
        );
        let (spent, _) = warm_on(3.0, 1.0, 0.0);
        assert_eq!(spent, 3.0);
        // Steady from the start: the minimum, not more than a few batches past it.
        let (spent, _) = warm_on(1e-4, 1.0, 0.0);
        assert!(
            (WARM_SECONDS..WARM_SECONDS + 0.1).contains(&spent),
            "warmed {spent} s"
        );
    }

    #[test]
    fn timestamps_far_below_the_wall_clock_are_refused() {
        // Long passes: the samples must cover two thirds of the wall clock.
        assert!(plausible(&(vec![0.1; 10], 1.05)));
        assert!(!plausible(&(vec![0.05; 10], 1.05)));
        assert!(!plausible(&(vec![1e-5; 10], 1.05)));
        // Short passes are dominated by submission overhead: not checked.
        assert!(plausible(&(vec![1e-6; 100], 0.5)));
    }
}
