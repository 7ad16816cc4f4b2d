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

/// Seconds a GPU is kept busy with the timed launches before a timing, unless a timing ended within
/// [`STILL_WARM`]: a GPU lowers its clocks when idle and raises them only after milliseconds of load, so a short
/// kernel timed on a device that had idled (a host-side check, a compile) runs at idle clocks. On the H200 on
/// 2026-11-26 the copy probe read 4050 GB/s when it came straight after other work and 1500–1700 GB/s at the
/// operators' sizes, where it followed a host-side check (docs/gpu.md, "Timing").
pub const WARM_SECONDS: f64 = 0.05;

/// How long after a timing the clocks count as still raised.
pub const STILL_WARM: Duration = Duration::from_millis(100);

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
    /// On a GPU the launches first run for [`WARM_SECONDS`] unless a timing ended within [`STILL_WARM`].
    pub fn time(&self, launches: &[&Launch], warmup: usize, reps: usize) -> Result<Timing> {
        let timing = self.time_warm(launches, warmup, reps);
        if let Ok(mut w) = self.warm_until.lock() {
            *w = Some(Instant::now() + STILL_WARM);
        }
        timing
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
        let warmed_seconds = self.raise_clocks(launches)?;
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

    /// Runs `launches` for [`WARM_SECONDS`] of wall time on a GPU whose last timing ended more than
    /// [`STILL_WARM`] ago (batches doubling from one repetition, so a long kernel runs once); returns the
    /// seconds spent. A CPU adapter has no clocks to raise: 0.
    fn raise_clocks(&self, launches: &[&Launch]) -> Result<f64> {
        let warm = self
            .warm_until
            .lock()
            .ok()
            .and_then(|w| *w)
            .is_some_and(|until| Instant::now() < until);
        if self.is_cpu() || warm {
            return Ok(0.0);
        }
        let t0 = Instant::now();
        let mut batch = 1;
        while t0.elapsed().as_secs_f64() < WARM_SECONDS {
            self.run_n(launches, batch)?;
            batch = (batch * 2).min(4096);
        }
        Ok(t0.elapsed().as_secs_f64())
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
