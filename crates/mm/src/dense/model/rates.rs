//! What the model derives from its measured inputs: the FMA peak and rate at a register tile, the register
//! budget per invocation, occupancy and latency hiding.

use super::Machine;
use crate::dense::params::{DenseParams, Lanes};

/// How much faster than lanes apart neighbouring lanes on one address must load workgroup memory for the kernels
/// to pair their lanes ([`Machine::lanes`]): NVIDIA's packing would double the rate; noise is within a few percent.
pub const PAIRING_GAIN: f64 = 1.25;

impl Machine {
    /// The lane layout a kernel whose B fragments are `vec4` loads (else scalars) takes on this machine: paired
    /// where neighbouring lanes on one address load such words [`PAIRING_GAIN`] times as fast as lanes apart (vec4
    /// loads: an NVIDIA multiprocessor packs such pairs), else in rows, the layout every kernel had until
    /// 2026-12-03. lavapipe read the pairs at 0.87 of the others (2026-12-03): where pairing does not pay, nothing
    /// changes.
    pub fn lanes(&self, vec4: bool) -> Lanes {
        let (paired, apart) = if vec4 {
            (self.smem_vec4_paired_gwords, self.smem_vec4_gwords)
        } else {
            (self.smem_scalar_paired_gwords, self.smem_scalar_gwords)
        };
        if paired >= PAIRING_GAIN * apart {
            Lanes::Paired
        } else {
            Lanes::Rows
        }
    }

    /// Workgroup-memory loads a second (elements) where neighbouring lanes load one address (a row of tiles
    /// loading its A fragment; a column its B fragment when paired): the paired rate, or the other where that is
    /// faster (sharing an address never costs more than loading two; a lower paired figure is noise or the bench's
    /// own index arithmetic).
    pub fn shared_gwords(&self, vec4: bool) -> f64 {
        if vec4 {
            self.smem_vec4_paired_gwords.max(self.smem_vec4_gwords)
        } else {
            self.smem_scalar_paired_gwords.max(self.smem_scalar_gwords)
        }
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
    /// more invocations), and never past the point where a curve measured at a smaller workgroup halved, scaled so
    /// (what the register file holds, shared by more invocations). `u32::MAX` where the curves never fall off (a
    /// CPU adapter spills gracefully: no bound; lavapipe's f64 curves fall by 0.55–0.6 a doubling, not halving).
    ///
    /// Why the smaller curves too: the H200's f32 curve at 1024 invocations falls only past 128 accumulators (its
    /// cliff 96: its chains spill to a cache nothing else uses), but 96 registers for each of 1024 invocations are
    /// past its 65 536; its 256-invocation curve first falls at 256 (65 536 over 256), which over 1024 invocations
    /// leaves 64. Its 4096³ sweep (fourth session) ran 1024-invocation tiles needing 80 and 84 registers by this
    /// count (t8x8, t4x16) at 5.3 and 4.4 TFLOP/s, where 512-invocation ones ran them at 31.9 and 37.2 and the
    /// model had predicted ~45; one needing 52 (t8x4, double-buffered) at 30.4.
    pub fn accumulator_budget(&self, threads: u32) -> u32 {
        let mut curves: Vec<(u32, &[(u32, f64)])> = vec![(
            crate::dense::microbench::WG,
            self.fma_by_accumulators.as_slice(),
        )];
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
        let scaled = |c: u32, size: u32| {
            (u64::from(c) * u64::from(size) / u64::from(threads.max(1))).max(1) as u32
        };
        let nearest = match cliff(curve) {
            None => u32::MAX,
            Some(c) if threads > size => scaled(c, size),
            Some(c) => c,
        };
        curves
            .iter()
            .filter(|(s, _)| *s < threads)
            .filter_map(|(s, c)| halving(c).map(|fallen| scaled(fallen, *s)))
            .fold(nearest, u32::min)
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
    pub(super) fn nearest_size(&self, threads: u32) -> u32 {
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
}

/// Where a curve of (accumulators, GFLOP/s) falls off: from its best point on, the first point below half of the
/// point before it or below a quarter of the best (the register file ran out there: spills); the cliff is midway
/// between that point and the one before (the points double, so the midpoint is within a third of either). None
/// when the curve never falls so (a CPU adapter spills gracefully).
///
/// Until 2026-11-27 the cliff was the first point below half of the best: lavapipe's f64 curve peaked at 8
/// accumulators at twice the level of the rest and then drifted down, so 128 fell under half the best and bounded
/// a CPU adapter at 96 accumulators (its 16×32 tiles, 1.4–1.5× faster there, left out). Every GPU curve stored
/// (`tests/data/h200`, the H200's f64 curves of 2026-11-27) falls by more than half in one doubling and keeps its
/// cliff.
pub(super) fn cliff(curve: &[(u32, f64)]) -> Option<u32> {
    let (best, after) = from_best(curve)?;
    let fall = after
        .windows(2)
        .position(|w| w[1].1 < 0.5 * w[0].1 || w[1].1 < 0.25 * best)?;
    Some((after[fall].0 + after[fall + 1].0) / 2)
}

/// The first point, from a curve's best on, below half of the point before it: where a GPU's register file ran
/// out (a spill halves the rate within one doubling; a CPU adapter's rate falls gradually, and has none).
fn halving(curve: &[(u32, f64)]) -> Option<u32> {
    let (_, after) = from_best(curve)?;
    after
        .windows(2)
        .find(|w| w[1].1 < 0.5 * w[0].1)
        .map(|w| w[1].0)
}

/// A curve's best rate and its points from there on.
fn from_best(curve: &[(u32, f64)]) -> Option<(f64, &[(u32, f64)])> {
    let (best_at, best) = curve
        .iter()
        .enumerate()
        .max_by(|a, b| a.1.1.total_cmp(&b.1.1))
        .map(|(i, (_, g))| (i, *g))?;
    Some((best, &curve[best_at..]))
}

/// Piecewise-linear in log₂ x through sorted points, flat past either end.
pub(super) fn interpolate_log2(points: impl IntoIterator<Item = (f64, f64)>, x: f64) -> f64 {
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
