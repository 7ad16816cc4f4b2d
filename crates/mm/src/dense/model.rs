//! The analytical tile model (BLIS-style): measured machine inputs, a predicted time per configuration, the pick.
//!
//! Every constant the model uses is measured on the device by [`microbench`](super::microbench) and cached on
//! disk per adapter; the formulas are in `docs/dense-model.md`.

use std::path::PathBuf;

use bespoke_gpu::{DiskCache, Gpu, ProbeOptions};
use serde::{Deserialize, Serialize};

use super::microbench::{Measured, Op, measure};
use super::params::{DenseParams, TileLimits, legal_space};
use super::run::{DenseGemm, GemmShape};
use crate::dtype::DType;
use crate::error::{MmError, Result};

/// Bumped whenever the micro-benchmarks change, so stale caches are re-measured.
pub(crate) const MACHINE_VERSION: u32 = 9;

/// The measured inputs of the model for one adapter and precision.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct Machine {
    pub version: u32,
    pub adapter: String,
    pub dtype: String,
    /// (scalar accumulators per invocation, GFLOP/s) with the device full: the latency-hiding ramp and, past
    /// the register file, the spill cliff.
    pub fma_by_accumulators: Vec<(u32, f64)>,
    /// The same curve at larger workgroups, (invocations per workgroup, [(accumulators, GFLOP/s)]): registers are
    /// one file per multiprocessor, so where a larger workgroup's curve falls off its invocations run out of
    /// registers sooner (an H200 gives 255 registers to each of 256 invocations, 64 to each of 1024). The curve
    /// above is at `microbench::WG` invocations. Empty in older caches (version < 8).
    #[serde(default)]
    pub fma_by_accumulators_at: Vec<(u32, Vec<(u32, f64)>)>,
    /// One dependent FMA, nanoseconds.
    pub fma_latency_ns: f64,
    /// (invocations per workgroup, workgroups, GFLOP/s) at 16 accumulators each: how many workgroups of each
    /// size fill the device.
    pub fma_by_groups: Vec<(u32, u64, f64)>,
    /// Workgroup-memory loads, 10⁹ elements per second, scalar and through vec4 loads.
    pub smem_scalar_gwords: f64,
    pub smem_vec4_gwords: f64,
    /// The copy probe's figure (bytes read + written per second).
    pub copy_gbps: f64,
    /// One empty dispatch, microseconds.
    pub launch_us: f64,
    /// How much of the shorter of FMA and workgroup-memory time adds to the longer: 0 = full overlap (separate
    /// pipes, as on GPUs), 1 = none (one instruction stream, as on a CPU adapter).
    pub overlap_penalty: f64,
    /// Device time per invocation and workgroup barrier at a full device, nanoseconds: small on a GPU; on a CPU
    /// adapter, which runs a workgroup's invocations in turn, each barrier switches between them. Since version 9.
    #[serde(default)]
    pub barrier_ns: f64,
}

/// Where the model's inputs came from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum MachineSource {
    Cache(PathBuf),
    /// Measured now; saved to the path if it is `Some`.
    Measured(Option<PathBuf>),
}

impl Machine {
    /// Measures every input on `gpu` for `op` (a minute or two on a CPU adapter).
    pub fn measure(gpu: &Gpu, op: Op, quick: bool) -> Result<Self> {
        let m: Measured = measure(gpu, op, quick)?;
        let probe = gpu.copy_bandwidth(&ProbeOptions {
            bytes: if quick { 32 << 20 } else { 128 << 20 },
            warmup: 1,
            reps: 5,
        })?;
        Ok(Self {
            version: MACHINE_VERSION,
            adapter: gpu.adapter_name().to_string(),
            dtype: op.name().to_string(),
            fma_by_accumulators: m.fma_by_accumulators,
            fma_by_accumulators_at: m.fma_by_accumulators_at,
            fma_latency_ns: m.fma_latency_s * 1e9,
            fma_by_groups: m.fma_by_groups,
            smem_scalar_gwords: m.smem_scalar_words_per_s / 1e9,
            smem_vec4_gwords: m.smem_vec4_words_per_s / 1e9,
            copy_gbps: probe.gbps,
            launch_us: m.launch_s * 1e6,
            overlap_penalty: m.overlap_penalty,
            barrier_ns: m.barrier_s * 1e9,
        })
    }

    /// The cache entry's key for this adapter and operation.
    fn cache_key(gpu: &Gpu, op: Op) -> String {
        format!("{}-{}", gpu.adapter_key(), op.name())
    }

    /// The namespace of the model's inputs in the user's cache folder, if there is one.
    pub fn cache() -> Option<DiskCache> {
        DiskCache::user("dense-model", MACHINE_VERSION)
    }

    /// The cached inputs for this adapter and operation, if a sane, current entry exists (a corrupt one is
    /// reported and read as a miss).
    pub fn load_cached(gpu: &Gpu, op: Op) -> Option<Self> {
        Self::cache()?
            .get_json::<Self>(&Self::cache_key(gpu, op))
            .filter(|m| m.version == MACHINE_VERSION && m.is_sane())
    }

    /// The cached inputs for this adapter, or measures and caches them. `remeasure` ignores the cache.
    pub fn load_or_measure(gpu: &Gpu, op: Op, remeasure: bool) -> Result<(Self, MachineSource)> {
        let cache = Self::cache();
        let key = Self::cache_key(gpu, op);
        if !remeasure
            && let Some(c) = &cache
            && let Some(m) = Self::load_cached(gpu, op)
        {
            return Ok((m, MachineSource::Cache(c.entry_path(&key))));
        }
        let m = Self::measure(gpu, op, false)?;
        // A cache that cannot be written costs a re-measurement next time, nothing else.
        let saved = cache
            .filter(|c| c.put_json(&key, &m).is_ok())
            .map(|c| c.entry_path(&key));
        Ok((m, MachineSource::Measured(saved)))
    }

    /// A dense GEMM of `shape` with the tiling this model picks (the model's inputs are `self`: measured or
    /// loaded by the caller, never by the GEMM).
    pub fn gemm(
        &self,
        gpu: &Gpu,
        shape: GemmShape,
        dtype: DType,
        alpha: f64,
        beta: f64,
    ) -> Result<DenseGemm> {
        shape.check()?;
        let (p, _) = self.pick(dtype, &TileLimits::of(gpu), &shape, beta != 0.0)?;
        DenseGemm::new(shape, dtype, p, alpha, beta)
    }

    /// Every figure positive and finite (a corrupt or hand-edited cache is re-measured).
    fn is_sane(&self) -> bool {
        let pos = |v: f64| v.is_finite() && v > 0.0;
        !self.fma_by_accumulators.is_empty()
            && !self.fma_by_groups.is_empty()
            && self.fma_by_accumulators.iter().all(|(_, g)| pos(*g))
            && self.fma_by_groups.iter().all(|(_, _, g)| pos(*g))
            && [
                self.fma_latency_ns,
                self.smem_scalar_gwords,
                self.smem_vec4_gwords,
                self.copy_gbps,
                self.launch_us,
            ]
            .into_iter()
            .all(pos)
            && (0.0..=1.0).contains(&self.overlap_penalty)
            && self.barrier_ns.is_finite()
            && self.barrier_ns >= 0.0
    }

    /// The FMA peak: the best point of either curve, GFLOP/s.
    pub fn peak_gflops(&self) -> f64 {
        let acc = self.fma_by_accumulators.iter().map(|(_, g)| *g);
        let inv = self.fma_by_groups.iter().map(|(_, _, g)| *g);
        acc.chain(inv).fold(0.0, f64::max)
    }

    /// GFLOP/s with `acc` scalar accumulators per invocation on a full device, interpolated in log₂(acc).
    pub fn gflops_at_accumulators(&self, acc: u32) -> f64 {
        interpolate_log2(
            self.fma_by_accumulators
                .iter()
                .map(|&(a, g)| (f64::from(a), g)),
            f64::from(acc.max(1)),
        )
    }

    /// The most accumulators (of the curve's precision) an invocation of a `threads`-invocation workgroup holds
    /// before the register file runs out: the cliff of the measured curve at the nearest workgroup size (the
    /// smaller one on a tie), scaled down by size / threads for a larger workgroup (one register file shared by
    /// more invocations). `u32::MAX` where the curve never falls off (a CPU adapter spills gracefully: no bound).
    pub fn accumulator_budget(&self, threads: u32) -> u32 {
        let mut curves: Vec<(u32, &[(u32, f64)])> =
            vec![(super::microbench::WG, self.fma_by_accumulators.as_slice())];
        curves.extend(
            self.fma_by_accumulators_at
                .iter()
                .map(|(t, c)| (*t, c.as_slice())),
        );
        let distance = |t: u32| (f64::from(t).log2() - f64::from(threads.max(1)).log2()).abs();
        let Some(&(size, curve)) = curves
            .iter()
            .min_by(|a, b| distance(a.0).total_cmp(&distance(b.0)).then(a.0.cmp(&b.0)))
        else {
            return u32::MAX;
        };
        match cliff(curve) {
            None => u32::MAX,
            Some(c) if threads > size => {
                (u64::from(c) * u64::from(size) / u64::from(threads)).max(1) as u32
            }
            Some(c) => c,
        }
    }

    /// Whether `p`'s register tile fits [`accumulator_budget`](Self::accumulator_budget): its `tm·tn`
    /// accumulators, the `tm + tn` operands of a k step and, double-buffered, the staged values it carries
    /// ([`DenseParams::operand_registers`]).
    pub fn fits_registers(&self, p: &DenseParams) -> bool {
        let need = u64::from(p.tm * p.tn + p.operand_registers());
        need <= u64::from(self.accumulator_budget(p.threads()))
    }

    /// Independent FMAs that must be in flight device-wide to hide latency (Little's law: rate × latency).
    pub fn fmas_in_flight(&self) -> f64 {
        self.peak_gflops() / 2.0 * self.fma_latency_ns
    }

    /// The measured workgroup size nearest to `threads` (in log₂).
    fn nearest_size(&self, threads: u32) -> u32 {
        let distance = |t: u32| (f64::from(t).log2() - f64::from(threads).log2()).abs();
        self.fma_by_groups
            .iter()
            .map(|(t, _, _)| *t)
            .min_by(|a, b| distance(*a).total_cmp(&distance(*b)))
            .unwrap_or(threads)
    }

    /// The rate workgroups of `threads` invocations (nearest measured size) settle at: the median of that
    /// curve's points within 80 % of its best. Not the best point itself: the curves are noisy (±7 % on
    /// lavapipe), and one high point would promise gains from more workgroups (split-K) that the other saturated
    /// points do not show.
    pub fn plateau(&self, threads: u32) -> f64 {
        let size = self.nearest_size(threads);
        let curve = || {
            self.fma_by_groups
                .iter()
                .filter(move |(t, _, _)| *t == size)
                .map(|(_, _, r)| *r)
        };
        let best = curve().fold(0.0, f64::max);
        let mut top: Vec<f64> = curve().filter(|r| *r >= 0.8 * best).collect();
        top.sort_by(f64::total_cmp);
        match top.len() {
            0 => 0.0,
            n if n % 2 == 1 => top[n / 2],
            n => 0.5 * (top[n / 2 - 1] + top[n / 2]),
        }
    }

    /// Fraction of the device's FMA rate that `groups` workgroups of `threads` invocations reach: the measured
    /// curve for that workgroup size (the nearest measured size otherwise), interpolated in log₂ groups and
    /// capped at the curve's [`plateau`](Self::plateau).
    pub fn occupancy(&self, threads: u32, groups: f64) -> f64 {
        let size = self.nearest_size(threads);
        let curve = self
            .fma_by_groups
            .iter()
            .filter(|(t, _, _)| *t == size)
            .map(|&(_, g, r)| (g as f64, r));
        let rate = interpolate_log2(curve, groups.max(1.0)).min(self.plateau(threads));
        (rate / self.peak_gflops()).clamp(1e-6, 1.0)
    }

    /// Workgroups of `threads` invocations the device needs before its FMA rate reaches 90 % of that size's
    /// [`plateau`](Self::plateau); 0 when that size was not measured.
    pub fn groups_to_fill(&self, threads: u32) -> u64 {
        let plateau = self.plateau(threads);
        self.fma_by_groups
            .iter()
            .filter(|(t, _, _)| *t == threads)
            .find(|(_, _, r)| *r >= 0.9 * plateau)
            .map_or(0, |(_, n, _)| *n)
    }

    /// Predicted time of `p` on `shape` with `size`-byte elements (β = 0 when `reads_c` is false).
    pub fn predict(
        &self,
        p: &DenseParams,
        size: usize,
        shape: &GemmShape,
        reads_c: bool,
    ) -> Prediction {
        let (m, n) = (shape.m as f64, shape.n as f64);
        let size = size as f64;
        let (bm, bn, kc) = (f64::from(p.bm()), f64::from(p.bn()), p.kc as usize);
        let split = f64::from(p.split_k);
        let k_per_split = (shape.k.div_ceil(p.split_k as usize).div_ceil(kc) * kc) as f64;
        let groups = (m / bm).ceil() * (n / bn).ceil() * split;
        let invocations = groups * f64::from(p.threads());
        let acc = f64::from(p.tm * p.tn);

        // Parallelism: enough invocations to occupy the device, and enough independent FMAs to hide latency.
        let occupancy = self.occupancy(p.threads(), groups);
        let latency = (invocations * acc / self.fmas_in_flight()).min(1.0);
        let fma_rate = self.gflops_at_accumulators(p.tm * p.tn) / 2.0 * 1e9;
        let fmas = groups * bm * bn * k_per_split;
        let fma_s = fmas / (fma_rate * occupancy.min(latency));

        // Workgroup memory: per k step each invocation loads tm A words (vec4 loads when tm is a multiple of 4) and
        // tn B words (vec4 loads when vec = 4); each workgroup stores its bm + bn staged words.
        let scalar = self.smem_scalar_gwords * 1e9;
        let vec4 = self.smem_vec4_gwords * 1e9;
        let a_rate = if p.a_vec4() { vec4 } else { scalar };
        let b_rate = if p.vec == 4 { vec4 } else { scalar };
        let per_step = invocations * (f64::from(p.tm) / a_rate + f64::from(p.tn) / b_rate)
            + groups * (bm / a_rate + bn / b_rate);
        let smem_s = per_step * k_per_split / occupancy;

        // Device memory: every workgroup streams its A and B panels; C is written (and read when β ≠ 0);
        // split-K writes and re-reads its partial slices.
        let mut bytes =
            size * (groups * k_per_split * (bm + bn) + m * n * if reads_c { 2.0 } else { 1.0 });
        let mut launches = 1.0;
        if p.split_k > 1 {
            bytes += size * 2.0 * split * m * n;
            launches = 2.0;
        }
        let global_s = bytes / (self.copy_gbps * 1e9);
        let launch_s = launches * self.launch_us * 1e-6;

        // Barriers, every invocation waiting at each: two per K tile with one staging buffer (the tile visible,
        // then the buffer free again); with two, one after the first tile's staging and one per tile.
        let tiles = k_per_split / kc as f64;
        let per_invocation = if p.stages < 2 {
            2.0 * tiles
        } else {
            1.0 + tiles
        };
        let barrier_s = invocations * per_invocation * self.barrier_ns * 1e-9 / occupancy;

        // FMAs and workgroup-memory loads issue from the same invocations: θ of the shorter adds to the longer
        // (θ is measured as exactly that: t(both) = max + θ·min for a balanced mix); the barriers stop both.
        let compute = fma_s.max(smem_s) + self.overlap_penalty * fma_s.min(smem_s) + barrier_s;
        let (bound, mut body) = if global_s > compute {
            ("device memory", global_s)
        } else if smem_s > fma_s {
            ("workgroup memory", compute)
        } else {
            ("fma", compute)
        };
        // One staging buffer: a workgroup waits for its tile's loads, then computes, so where loads and FMAs
        // could run on separate pipes (θ < 1, GPUs) the shorter of the two phases adds to the longer by (1 − θ);
        // double buffering overlaps them. Where one instruction stream does both (θ = 1, CPU adapters) nothing
        // overlaps either way and the two tie (the single buffer comes first in the space, and wins the tie).
        if p.stages < 2 {
            body += (1.0 - self.overlap_penalty) * global_s.min(compute);
        }
        Prediction {
            seconds: body + launch_s,
            fma_s,
            smem_s,
            barrier_s,
            global_s,
            launch_s,
            bound,
        }
    }

    /// The configurations worth timing for `shape`: the legal space at the widest vector width the shape's
    /// alignment allows, plus split-K variants when one K pass reaches less than 90 % of the device's rate.
    pub fn shape_space(
        &self,
        dtype: DType,
        limits: &TileLimits,
        shape: &GemmShape,
    ) -> Vec<DenseParams> {
        let vec = widest_vec(shape);
        let mut out = Vec::new();
        // A tiling whose block would still cover the shape's M (or N) with half its rows (columns) per invocation
        // only adds wasted work to that narrower tiling: dropped, which keeps small shapes' spaces small.
        let dominated = |p: &DenseParams| {
            (p.tm > 1 && (p.bm() / 2) as usize >= shape.m)
                || (p.tn > p.vec && (p.bn() / 2) as usize >= shape.n)
        };
        let legal: Vec<DenseParams> = legal_space(dtype, limits)
            .into_iter()
            .filter(|p| p.vec == vec && !dominated(p))
            .collect();
        // Never past the register file (the pick that ran at 0.005 of peak on an H200 asked 1024 invocations for
        // 64 f64 accumulators each: it spilled); where nothing fits, the tiles with the fewest accumulators.
        let fewest = legal.iter().map(|p| p.tm * p.tn).min().unwrap_or(1);
        let fitting: Vec<DenseParams> = legal
            .iter()
            .copied()
            .filter(|p| self.fits_registers(p))
            .collect();
        let kept = if fitting.is_empty() {
            legal
                .into_iter()
                .filter(|p| p.tm * p.tn == fewest)
                .collect()
        } else {
            fitting
        };
        for p in kept {
            out.push(p);
            let groups = shape.m.div_ceil(p.bm() as usize) * shape.n.div_ceil(p.bn() as usize);
            if self.occupancy(p.threads(), groups as f64) < 0.9 {
                for split_k in [2, 4, 8, 16] {
                    if shape.k >= split_k as usize * 4 * p.kc as usize {
                        out.push(DenseParams { split_k, ..p });
                    }
                }
            }
        }
        out
    }

    /// The model's pick for `shape`: the configuration with the least predicted time.
    pub fn pick(
        &self,
        dtype: DType,
        limits: &TileLimits,
        shape: &GemmShape,
        reads_c: bool,
    ) -> Result<(DenseParams, Prediction)> {
        self.pick_in(
            &self.shape_space(dtype, limits, shape),
            dtype.size(),
            shape,
            reads_c,
        )
    }

    /// The point of `space` with the least predicted time for `shape` with `size`-byte elements.
    pub fn pick_in(
        &self,
        space: &[DenseParams],
        size: usize,
        shape: &GemmShape,
        reads_c: bool,
    ) -> Result<(DenseParams, Prediction)> {
        space
            .iter()
            .map(|p| (*p, self.predict(p, size, shape, reads_c)))
            .min_by(|a, b| a.1.seconds.total_cmp(&b.1.seconds))
            .ok_or_else(|| MmError::Shape(format!("no legal tiling for {shape:?} on this device")))
    }
}

/// The model's breakdown for one configuration.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Prediction {
    pub seconds: f64,
    pub fma_s: f64,
    pub smem_s: f64,
    /// Time the invocations spend at workgroup barriers (part of the compute time).
    pub barrier_s: f64,
    pub global_s: f64,
    pub launch_s: f64,
    /// Which of fma, workgroup memory, device memory bounds it.
    pub bound: &'static str,
}

/// Where a curve of (accumulators, GFLOP/s) falls off: midway between the last point, from its best on, still at
/// half the best or more and the first below half (the register file ran out there: spills; the points double,
/// so the midpoint is within a third of either); None when no point falls below half.
fn cliff(curve: &[(u32, f64)]) -> Option<u32> {
    let (best_at, best) = curve
        .iter()
        .enumerate()
        .max_by(|a, b| a.1.1.total_cmp(&b.1.1))
        .map(|(i, (_, g))| (i, *g))?;
    let after = &curve[best_at..];
    let fall = after.iter().position(|(_, g)| *g < 0.5 * best)?;
    Some((after[fall - 1].0 + after[fall].0) / 2)
}

/// 4 when N, ldb and ldc allow vec4 loads, else 1.
pub fn widest_vec(shape: &GemmShape) -> u32 {
    if [shape.n, shape.ldb, shape.ldc]
        .iter()
        .all(|d| d.is_multiple_of(4))
    {
        4
    } else {
        1
    }
}

/// Piecewise-linear in log₂ x through sorted points, flat past either end.
fn interpolate_log2(points: impl IntoIterator<Item = (f64, f64)>, x: f64) -> f64 {
    let pts: Vec<(f64, f64)> = points
        .into_iter()
        .filter(|(a, _)| *a > 0.0)
        .map(|(a, g)| (a.log2(), g))
        .collect();
    let lx = x.log2();
    match pts.iter().position(|(a, _)| *a >= lx) {
        None => pts.last().map_or(0.0, |p| p.1),
        Some(0) => pts[0].1,
        Some(i) => {
            let ((x0, y0), (x1, y1)) = (pts[i - 1], pts[i]);
            y0 + (y1 - y0) * (lx - x0) / (x1 - x0)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A GPU-like machine: 20 TFLOP/s from 8 accumulators up, spill past 64, workgroup memory at 1/4 of the FMA
    /// word rate, 1 TB/s.
    fn gpu_like() -> Machine {
        Machine {
            version: MACHINE_VERSION,
            adapter: "model".into(),
            dtype: "f32".into(),
            fma_by_accumulators: vec![
                (1, 5000.0),
                (2, 10000.0),
                (4, 15000.0),
                (8, 20000.0),
                (16, 20000.0),
                (32, 20000.0),
                (64, 19000.0),
                (128, 4000.0),
                (256, 1500.0),
                (512, 600.0),
                (1024, 300.0),
            ],
            fma_by_accumulators_at: Vec::new(),
            fma_latency_ns: 2.0,
            // Rate set by total invocations, whatever the workgroup size.
            fma_by_groups: [32u32, 64, 128, 256, 512, 1024]
                .into_iter()
                .flat_map(|t| {
                    [
                        (256u64, 100.0),
                        (4096, 2000.0),
                        (65536, 15000.0),
                        (262144, 20000.0),
                    ]
                    .map(|(inv, r)| (t, inv / u64::from(t), r))
                })
                .collect(),
            smem_scalar_gwords: 2500.0,
            smem_vec4_gwords: 5000.0,
            copy_gbps: 1000.0,
            launch_us: 5.0,
            overlap_penalty: 0.0,
            barrier_ns: 0.0,
        }
    }

    fn big_limits() -> TileLimits {
        TileLimits {
            max_invocations: 1024,
            max_wg_x: 1024,
            max_wg_y: 1024,
            shared_bytes: 32768,
        }
    }

    #[test]
    fn interpolation_is_log_linear_and_flat_outside() {
        let pts = [(1.0, 1.0), (4.0, 3.0)];
        assert_eq!(interpolate_log2(pts, 0.5), 1.0);
        assert!((interpolate_log2(pts, 2.0) - 2.0).abs() < 1e-12);
        assert_eq!(interpolate_log2(pts, 64.0), 3.0);
    }

    #[test]
    fn one_high_point_does_not_raise_the_plateau() {
        // lavapipe's 256-invocation curve: saturated from 4 groups, one noisy point 12 % higher at 1024.
        let mut m = gpu_like();
        m.fma_by_groups = [
            (1, 37.6),
            (4, 74.8),
            (16, 74.5),
            (64, 75.2),
            (256, 75.9),
            (1024, 84.5),
        ]
        .into_iter()
        .map(|(g, r)| (256, g, r))
        .collect();
        m.fma_by_accumulators = vec![(8, 85.8)];
        assert_eq!(m.plateau(256), 75.2, "median of the saturated points");
        assert_eq!(m.groups_to_fill(256), 4);
        // More workgroups promise nothing once saturated: split-K gains no occupancy.
        assert_eq!(m.occupancy(256, 64.0), m.occupancy(256, 1024.0));
        assert!((m.occupancy(256, 1.0) / m.occupancy(256, 64.0) - 37.6 / 75.2).abs() < 1e-12);
    }

    #[test]
    fn derived_inputs() {
        let m = gpu_like();
        assert_eq!(m.peak_gflops(), 20000.0);
        assert_eq!(m.groups_to_fill(256), 1024);
        assert_eq!(m.groups_to_fill(48), 0, "not measured");
        assert!((m.occupancy(256, 16.0) - 0.1).abs() < 1e-12);
        assert_eq!(m.groups_to_fill(64), 4096);
        assert!(
            (m.occupancy(256, 64.0) - 8500.0 / 20000.0).abs() < 1e-12,
            "log-interpolated"
        );
        assert_eq!(
            m.occupancy(200, 16.0),
            m.occupancy(256, 16.0),
            "nearest size"
        );
        assert!((m.fmas_in_flight() - 20000.0).abs() < 1e-9);
    }

    /// On a machine whose workgroup memory is 4× slower per word than its FMA rate, the pick for a big square
    /// GEMM meets the BLIS bound m_t·n_t/(m_t+n_t) ≥ 2 and does not spill.
    #[test]
    fn pick_for_a_big_square_respects_the_blis_bounds() {
        let m = gpu_like();
        let shape = GemmShape::packed(4096, 4096, 4096);
        let (p, pred) = m.pick(DType::F32, &big_limits(), &shape, false).unwrap();
        let (tm, tn) = (f64::from(p.tm), f64::from(p.tn));
        assert!(tm * tn / (tm + tn) >= 2.0, "{} {pred:?}", p.key());
        assert!(p.tm * p.tn <= 64, "{}", p.key());
        assert_eq!(p.split_k, 1);
        // 8×8 tiles beat 1×1 tiles by the workgroup-memory ratio.
        let small = DenseParams {
            tm: 1,
            tn: 1,
            vec: 1,
            ..p
        };
        assert!(m.predict(&small, 4, &shape, false).seconds > 4.0 * pred.seconds);
    }

    /// A short, deep GEMM cannot fill the device with one K pass: the model splits K.
    #[test]
    fn short_deep_shapes_split_k() {
        let m = gpu_like();
        let shape = GemmShape::packed(64, 64, 65536);
        let (p, _) = m.pick(DType::F32, &big_limits(), &shape, false).unwrap();
        assert!(p.split_k > 1, "{}", p.key());
    }

    #[test]
    fn space_uses_the_widest_vector_the_shape_allows() {
        let m = gpu_like();
        let lim = big_limits();
        assert!(
            m.shape_space(DType::F32, &lim, &GemmShape::packed(64, 100, 64))
                .iter()
                .all(|p| p.vec == 4)
        );
        assert!(
            m.shape_space(DType::F32, &lim, &GemmShape::packed(64, 101, 64))
                .iter()
                .all(|p| p.vec == 1)
        );
    }

    /// An H200-like f64 machine (the card gave 25.8–31.6 TFLOP/s f64 and 4 TB/s on 2026-11-26): at 256
    /// invocations the rate holds to 64 f64 accumulators (128 registers) and falls past 128 (the 255-register
    /// limit); at 1024 invocations it falls past 16 (64 registers each: 65 536 per multiprocessor).
    fn h200_like_f64() -> Machine {
        let curve = |pts: &[(u32, f64)]| pts.to_vec();
        Machine {
            version: MACHINE_VERSION,
            adapter: "H200-like".into(),
            dtype: "f64".into(),
            fma_by_accumulators: curve(&[
                (1, 2000.0),
                (2, 4000.0),
                (4, 8000.0),
                (8, 16000.0),
                (16, 25000.0),
                (32, 26000.0),
                (64, 25500.0),
                (128, 6000.0),
                (256, 2000.0),
                (512, 900.0),
                (1024, 450.0),
            ]),
            fma_by_accumulators_at: vec![(
                1024,
                curve(&[
                    (8, 25000.0),
                    (16, 25800.0),
                    (32, 5000.0),
                    (64, 1800.0),
                    (128, 900.0),
                    (256, 450.0),
                    (512, 220.0),
                    (1024, 110.0),
                ]),
            )],
            fma_latency_ns: 4.0,
            fma_by_groups: [32u32, 64, 128, 256, 512, 1024]
                .into_iter()
                .flat_map(|t| {
                    [
                        (1024u64, 500.0),
                        (16384, 6000.0),
                        (131072, 25000.0),
                        (1048576, 26000.0),
                    ]
                    .map(|(inv, r)| (t, (inv / u64::from(t)).max(1), r))
                })
                .collect(),
            // 128 B per clock per multiprocessor at 1.98 GHz over 132 of them: ~4.2 T f64 words/s through vec4.
            smem_scalar_gwords: 2000.0,
            smem_vec4_gwords: 4000.0,
            copy_gbps: 4000.0,
            launch_us: 5.0,
            overlap_penalty: 0.0,
            barrier_ns: 0.0,
        }
    }

    /// The register file bounds the tile (issue 36): without the bound the model's pick for 4096³ f64 on an
    /// H200-like machine asks more accumulators per invocation than its workgroup size leaves each (as the
    /// pick that ran at 0.005 of peak on the H200 did: t8x8v4-w32x32, 64 f64 accumulators at 1024 invocations);
    /// with it, the pick fits.
    #[test]
    fn the_pick_fits_the_register_file() {
        let m = h200_like_f64();
        let limits = TileLimits {
            max_invocations: 1024,
            max_wg_x: 1024,
            max_wg_y: 1024,
            shared_bytes: 49152,
        };
        // Midway between the last point at half the best or more and the first below.
        assert_eq!(m.accumulator_budget(256), 96);
        assert_eq!(m.accumulator_budget(1024), 24);
        assert_eq!(
            m.accumulator_budget(512),
            48,
            "scaled from 256 (the nearer on a tie)"
        );
        assert_eq!(m.accumulator_budget(64), 96);
        let shape = GemmShape::packed(4096, 4096, 4096);
        // The model as it was: every legal single-buffered tiling at the widest vector, no register bound, and
        // no charge for waiting on a tile's loads (θ = 0 here; a single buffer pays since 2026-11-26, so only its
        // own family is compared). Today's pick is among its best (8×8 tiles tie whatever their workgroup:
        // FMA-bound at the rate the 256-invocation curve gives 64 accumulators), and it does not fit: 1024
        // invocations leave 24 f64 values each.
        let unbounded: Vec<DenseParams> = legal_space(DType::F64, &limits)
            .into_iter()
            .filter(|p| p.vec == 4 && p.stages == 1)
            .collect();
        let waiting = |p: &DenseParams| {
            let r = m.predict(p, 8, &shape, false);
            r.seconds - r.fma_s.max(r.smem_s).min(r.global_s)
        };
        let best = unbounded.iter().map(waiting).fold(f64::INFINITY, f64::min);
        let today = DenseParams::parse("t8x8v4-w32x32-k4-s1").unwrap();
        assert!(unbounded.contains(&today));
        let t = waiting(&today);
        assert!((t - best).abs() <= 1e-9 * t, "{t} against the best {best}");
        assert!(!m.fits_registers(&today));
        let (after, pred) = m.pick(DType::F64, &limits, &shape, false).unwrap();
        assert!(m.fits_registers(&after), "{} {pred:?}", after.key());
        assert!(
            m.shape_space(DType::F64, &limits, &shape)
                .iter()
                .all(|p| m.fits_registers(p)),
            "the space holds a tile past the register file"
        );
        assert!(
            after.tm * after.tn >= 16,
            "{}: registers left idle",
            after.key()
        );
        // A CPU-like curve that never falls off bounds nothing.
        let flat = Machine {
            fma_by_accumulators: (0..11).map(|i| (1u32 << i, 50.0)).collect(),
            fma_by_accumulators_at: Vec::new(),
            ..m
        };
        assert_eq!(flat.accumulator_budget(1024), u32::MAX);
    }

    #[test]
    fn fma_and_workgroup_memory_add_by_the_measured_overlap() {
        // θ is measured as t(both) = max + θ·min; the prediction composes the two the same way.
        let p: DenseParams = "t8x8v4-w16x16-k8-s1-b2".parse().unwrap();
        let shape = GemmShape::packed(2048, 2048, 2048);
        let mut m = gpu_like();
        let at = |m: &Machine| m.predict(&p, 4, &shape, false);
        let apart = at(&m);
        assert!(apart.fma_s > 0.0 && apart.smem_s > 0.0);
        let longest = apart.fma_s.max(apart.smem_s).max(apart.global_s);
        assert!((apart.seconds - apart.launch_s - longest).abs() < 1e-12 * longest);
        m.overlap_penalty = 1.0;
        let one_stream = at(&m);
        let sum = one_stream.fma_s + one_stream.smem_s;
        assert!(sum > one_stream.global_s);
        assert!((one_stream.seconds - one_stream.launch_s - sum).abs() < 1e-12 * sum);
        m.overlap_penalty = 0.5;
        let half = at(&m);
        let (hi, lo) = (half.fma_s.max(half.smem_s), half.fma_s.min(half.smem_s));
        assert!((half.seconds - half.launch_s - (hi + 0.5 * lo)).abs() < 1e-12 * hi);
    }

    #[test]
    fn barriers_are_charged_per_tile_and_buffer() {
        // Deeper K tiles wait at fewer barriers; double buffering waits at one per tile instead of two.
        let shape = GemmShape::packed(1024, 1024, 1024);
        let mut m = gpu_like();
        let at = |m: &Machine, key: &str| m.predict(&key.parse().unwrap(), 4, &shape, false);
        let free = at(&m, "t8x8v4-w16x16-k4-s1");
        assert_eq!(free.barrier_s, 0.0);
        m.barrier_ns = 1.0;
        let (k4, k8) = (at(&m, "t8x8v4-w16x16-k4-s1"), at(&m, "t8x8v4-w16x16-k8-s1"));
        assert!(k4.barrier_s > 0.0 && k4.seconds > free.seconds);
        assert!((k4.barrier_s / k8.barrier_s - 2.0).abs() < 1e-9);
        // 256 tiles: 512 barriers single-buffered, 1 + 256 double-buffered.
        let b2 = at(&m, "t8x8v4-w16x16-k4-s1-b2");
        assert!((k4.barrier_s / b2.barrier_s - 512.0 / 257.0).abs() < 1e-9);
        // The barriers stop FMAs and loads alike: they add to the compute time.
        m.overlap_penalty = 1.0;
        let p = at(&m, "t8x8v4-w16x16-k4-s1");
        let compute = p.fma_s + p.smem_s + p.barrier_s;
        assert!(compute > p.global_s);
        assert!((p.seconds - p.launch_s - compute).abs() < 1e-12 * compute);
    }

    #[test]
    fn corrupt_cache_is_not_sane() {
        let mut m = gpu_like();
        assert!(m.is_sane());
        m.copy_gbps = f64::NAN;
        assert!(!m.is_sane());
    }
}
