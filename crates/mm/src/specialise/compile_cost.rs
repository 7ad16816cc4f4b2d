//! What an unrolled kernel costs the driver to compile, predicted before compiling it.
//!
//! A driver's compile time grows faster than linearly with one kernel's length, and how much faster depends on
//! the driver and on the kernel family: lavapipe on Mesa 22.3.6 compiles a cstream-v4 launch of 5, 10, 20 and 42
//! rows (hex p3 m3) in 0.11, 0.25, 0.82 and 3.5 s; Mesa 25.0.7 compiles the same four in 0.9, 3.4, 12.5 and
//! ~50 s, and its cstream-v2 launch of 20 rows in 2.7 s (docs/perf.md). One cost per byte, measured on one kernel,
//! therefore misjudges the next one by the ratio of their sizes. The tuner instead keeps a law per family, vector
//! width and folding, `seconds = a · size^p` for one launch (size: the loads and stores of B and C its source
//! spells out — what the compile grows with on lavapipe, where each is a loop over SIMD lanes — plus its terms
//! over [`TERMS_PER_ACCESS`]; not the terms alone, which overstate bstream's, each row of B loaded once for all
//! its terms, nor bytes, which count the fixed prelude), with `p` measured by compiling the family on the first
//! rows of the operator at two sizes (the fewest leading rows that spell out 64 and 128 loads and stores, against
//! CPU launches of up to 256 terms: probes of 24 and 48 terms fitted p = 1.1 for cstream-v2 on Mesa 25.0.7, where
//! fixed costs still dominate, and under-predicted a 256-term launch 5×), then refitted to the probes and every
//! real compile of the family as their tightest upper envelope ([`envelope`]). A candidate's predicted compile is
//! the sum over its launches (each launch is its own pipeline, compiled on its first dispatch).
//!
//! An envelope bounds the compiles it has seen, not the next one: past the largest launch seen the law grows at
//! [`BEYOND_EXPONENT`], and the tuner holds a prediction times the family's margin against the budget (at least
//! [`MIN_MARGIN`], else the largest ratio of a recent real compile to what was predicted for it; the cap until
//! [`MIN_CHECKED`] real compiles have been checked).

use std::time::Instant;

use bespoke_gpu::Gpu;

use super::operator::Operator;
use super::run::{Panel, SpecKernel};
use super::tuning::TuneOptions;
use super::variant::Variant;
use crate::dense::Element;
use crate::dense::bench::fill;
use crate::error::Result;

/// Loads and stores in the two probe kernels (the second twice the first).
pub(crate) const PROBE_ACCESSES: [usize; 2] = [64, 128];

/// Terms of A that cost a compile about what one load or store of B or C does: an unrolled launch's size is its
/// accesses plus its terms over this ([`launch_sizes`]). Fitted on Mesa 25.0.7's 449 real compiles of the PyFR
/// suite (two runs): by accesses alone, bstream's compiles scatter ×1.39 (rms) about the fit and the densest
/// operators (tet-p5-m132: 224 accesses, 8976 terms, 37.8 s) sit ×3.1 above it; with terms/64 added, ×1.33 and
/// ×2.2 (1/100 to 1/50 fit about as well). cstream's terms are its accesses, so the change leaves it as it was.
pub(crate) const TERMS_PER_ACCESS: usize = 64;

/// Past the largest launch a law was fitted to, compiles are assumed to grow this steeply (or as the law does,
/// if steeper): the law's exponent is a fit to sizes seen, and replaying Mesa 25.0.7's suite compiles in order,
/// extrapolating it under-predicted kernels past the largest seen by up to ×3.9.
const BEYOND_EXPONENT: f64 = 2.5;

/// The factor a family's prediction is multiplied by before it is held against the budget, at least: compiles of
/// kernels of one size scatter ×1.3–2 on lavapipe (layout, register pressure, the VM), and replaying the suite,
/// a third of the compiles past 10 s came out above the envelope of those before them, by up to ×1.3.
pub(crate) const MIN_MARGIN: f64 = 1.25;

/// The margin never exceeds this: one compile that took far more than predicted (a stall of the VM) must not
/// price a family out for good.
const MAX_MARGIN: f64 = 2.0;

/// Until this many real compiles of a family (of at least [`MARGIN_MIN_SECONDS`]) have been held against their
/// predictions, its margin is [`MAX_MARGIN`]: there is nothing yet to measure a margin from, and a law fitted to
/// its probes alone (two compiles of tenths of a second) is an extrapolation. On Mesa 25.0.7's suite the third
/// compile of bstream at vec1 took 35.3 s against 22.9 predicted (×1.54) while the floor margin held.
pub(crate) const MIN_CHECKED: usize = 4;

/// Compiles shorter than this do not move the margin (their ratio to the prediction is mostly timer noise and
/// they cannot overrun a budget).
const MARGIN_MIN_SECONDS: f64 = 1.0;

/// Measured misses (seconds over predicted) kept per family for its margin.
const MAX_MISSES: usize = 16;

/// The size of each of `k`'s launches for its compile law: loads and stores plus terms / [`TERMS_PER_ACCESS`].
pub(crate) fn launch_sizes(k: &SpecKernel) -> Vec<usize> {
    k.launch_accesses()
        .iter()
        .zip(k.launch_terms())
        .map(|(a, t)| a + t / TERMS_PER_ACCESS)
        .collect()
}

/// Bounds on the fitted exponent: below 1 is timing noise on a fast compiler, above 2.5 an outlier.
const EXPONENT_RANGE: (f64, f64) = (1.0, 2.5);

/// Compiles this short are below the timer's resolution for fitting an exponent.
const MIN_FIT_SECONDS: f64 = 0.01;

/// `seconds = a · size^p` for one launch of one family, up to `reach` (the largest launch it was fitted to);
/// past it, growth at [`BEYOND_EXPONENT`].
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub(crate) struct Law {
    pub a: f64,
    pub p: f64,
    /// The largest launch behind the law; 0: none known (the law is extrapolated as is).
    #[serde(default)]
    pub reach: usize,
}

impl Law {
    /// Fits the law through two (accesses, seconds) probes; none when the larger is not at least 1.25× the
    /// smaller (too close to fit an exponent).
    pub fn fit(small: (usize, f64), large: (usize, f64)) -> Option<Self> {
        let (b1, t1) = (small.0 as f64, small.1.max(0.0));
        let (b2, t2) = (large.0 as f64, large.1.max(0.0));
        if !(b2 >= 1.25 * b1 && b1 > 0.0 && t2.is_finite() && t1.is_finite()) {
            return None;
        }
        let p = if t1 < MIN_FIT_SECONDS || t2 <= t1 {
            EXPONENT_RANGE.0
        } else {
            ((t2 / t1).ln() / (b2 / b1).ln()).clamp(EXPONENT_RANGE.0, EXPONENT_RANGE.1)
        };
        // Through the larger probe, and never below the smaller one.
        let a = (t2 / b2.powf(p)).max(t1 / b1.powf(p));
        Some(Self {
            a,
            p,
            reach: large.0,
        })
    }

    /// Predicted seconds for launches of these sizes.
    pub fn predict(&self, launch_sizes: &[usize]) -> f64 {
        launch_sizes.iter().map(|&b| self.one(b as f64)).sum()
    }

    fn one(&self, b: f64) -> f64 {
        let reach = self.reach as f64;
        if self.reach == 0 || b <= reach {
            self.a * b.powf(self.p)
        } else {
            self.a * reach.powf(self.p) * (b / reach).powf(BEYOND_EXPONENT.max(self.p))
        }
    }

    /// Raises `a` so the law covers a measured compile of these launches, and its reach to them.
    pub fn cover(&mut self, launch_sizes: &[usize], seconds: f64) {
        let unit: f64 = launch_sizes.iter().map(|&b| (b as f64).powf(self.p)).sum();
        if unit > 0.0 && seconds.is_finite() {
            self.a = self.a.max(seconds / unit);
        }
        if self.reach > 0 {
            self.reach = self
                .reach
                .max(launch_sizes.iter().copied().max().unwrap_or(0));
        }
    }
}

/// The law's key: family, vector width and folding (`cstream-v4-fold`), which the name of a non-split variant
/// already is. A launch cap (`bstream-a256`) is not part of it: the law prices each launch by its size, and a
/// capped variant only has shorter launches. Nor is `-touch`: its extra load of each row of C is counted in the
/// launch's size, as a β ≠ 0 kernel's read of C is. Nor msplit's stage (`-smem32`): the same source in fewer,
/// longer chunks.
pub(crate) fn family_key(v: Variant) -> String {
    Variant {
        touch: false,
        stage: 0,
        ..v.uncapped()
    }
    .name()
}

/// The laws known for one adapter: for the process, and in the `compile-law` namespace of the disk cache when
/// the tuner uses the cache, so a later run predicts without probing again.
pub(crate) struct CompileLaws {
    adapter: String,
    disk: Option<bespoke_gpu::DiskCache>,
    known: Vec<(String, Entry)>,
    /// Seconds spent probing families since these laws were loaded ([`CompileLaws::probe_family`]).
    probe_seconds: f64,
}

/// One measured compile: the loads and stores of each launch, and the seconds all of them took.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub(crate) struct Point {
    pub launches: Vec<usize>,
    pub seconds: f64,
}

/// Compiles kept per family to refit its law (the oldest real one goes first past this).
const MAX_POINTS: usize = 32;

/// A family's law, the compiles it was fitted to (its probes, then real compiles), and how far real compiles
/// came out above what the law predicted for them beforehand (seconds over predicted, the latest last).
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
struct Entry {
    law: Law,
    points: Vec<Point>,
    #[serde(default)]
    misses: Vec<f64>,
}

impl Entry {
    fn margin(&self) -> f64 {
        if self.misses.len() < MIN_CHECKED {
            return MAX_MARGIN;
        }
        self.misses
            .iter()
            .copied()
            .fold(MIN_MARGIN, f64::max)
            .min(MAX_MARGIN)
    }
}

/// (adapter, family, entry) for this process.
static LAWS: std::sync::Mutex<Vec<(String, String, Entry)>> = std::sync::Mutex::new(Vec::new());

/// The law that predicts every one of `points` at least at its measured time (an upper envelope, as the budget
/// needs) and, among those, is closest to them in log terms: `p` on a grid over the allowed range, `a` the least
/// that covers every point at that `p`; its reach is the largest launch among them. Compiles below [`MIN_FIT_SECONDS`] bound `a` but do not steer `p`. `None`
/// when fewer than two points of at least that time differ in size by 1.25× (no exponent to fit).
pub(crate) fn envelope(points: &[Point]) -> Option<Law> {
    let size = |q: &Point| q.launches.iter().copied().max().unwrap_or(0) as f64;
    let timed: Vec<&Point> = points
        .iter()
        .filter(|q| q.seconds >= MIN_FIT_SECONDS && q.seconds.is_finite() && size(q) > 0.0)
        .collect();
    let lo = timed.iter().map(|q| size(q)).fold(f64::INFINITY, f64::min);
    let hi = timed.iter().map(|q| size(q)).fold(0.0, f64::max);
    if timed.len() < 2 || hi < 1.25 * lo {
        return None;
    }
    let unit = |q: &Point, p: f64| -> f64 { q.launches.iter().map(|&b| (b as f64).powf(p)).sum() };
    let (e0, e1) = EXPONENT_RANGE;
    let steps = ((e1 - e0) * 100.0).round() as usize;
    (0..=steps)
        .map(|i| {
            let p = e0 + i as f64 / 100.0;
            let a = points
                .iter()
                .filter(|q| q.seconds.is_finite() && unit(q, p) > 0.0)
                .map(|q| q.seconds.max(0.0) / unit(q, p))
                .fold(0.0, f64::max);
            let err: f64 = timed
                .iter()
                .map(|q| ((a * unit(q, p)).ln() - q.seconds.ln()).powi(2))
                .sum();
            (Law { a, p, reach: 0 }, err)
        })
        .min_by(|x, y| x.1.total_cmp(&y.1))
        .map(|(l, _)| Law {
            reach: points.iter().map(|q| size(q) as usize).max().unwrap_or(0),
            ..l
        })
}

impl CompileLaws {
    pub fn load(gpu: &Gpu, opts: &TuneOptions) -> Self {
        let adapter = gpu.adapter_key();
        let disk = opts
            .cache_dir
            .clone()
            .or_else(Gpu::cache_dir)
            .filter(|_| opts.use_cache)
            .map(|d| bespoke_gpu::DiskCache::at(&d, "compile-law", 3));
        let stored = disk
            .as_ref()
            .and_then(|d| d.get_json::<Vec<(String, Entry)>>(&adapter))
            .unwrap_or_default();
        let here: Vec<(String, Entry)> = LAWS
            .lock()
            .map(|v| {
                v.iter()
                    .filter(|(a, _, _)| *a == adapter)
                    .map(|(_, f, e)| (f.clone(), e.clone()))
                    .collect()
            })
            .unwrap_or_default();
        let mut laws = Self {
            adapter,
            disk,
            known: Vec::new(),
            probe_seconds: 0.0,
        };
        // The process's laws are at least as recent as the disk's.
        for (f, e) in stored.into_iter().chain(here) {
            laws.set(&f, e);
        }
        laws
    }

    /// No law known, none remembered on disk (a test's clean slate).
    #[cfg(test)]
    pub fn empty(gpu: &Gpu) -> Self {
        Self {
            adapter: gpu.adapter_key(),
            disk: None,
            known: Vec::new(),
            probe_seconds: 0.0,
        }
    }

    fn set(&mut self, family: &str, entry: Entry) {
        let law = entry.law;
        if !(law.a.is_finite() && law.a >= 0.0 && law.p.is_finite()) {
            return;
        }
        match self.known.iter_mut().find(|e| e.0 == family) {
            Some(e) => e.1 = entry,
            None => self.known.push((family.to_owned(), entry)),
        }
    }

    pub fn get(&self, family: &str) -> Option<Law> {
        self.known
            .iter()
            .find(|(f, _)| f == family)
            .map(|e| e.1.law)
    }

    /// What `family`'s predictions are multiplied by before they are held against a budget: the largest ratio
    /// of a real compile (of at least a second) to its prediction among the family's latest, within
    /// [[`MIN_MARGIN`], 2]; 2 until [`MIN_CHECKED`] of them have been seen.
    pub fn margin(&self, family: &str) -> f64 {
        self.known
            .iter()
            .find(|(f, _)| f == family)
            .map_or(MIN_MARGIN, |e| e.1.margin())
    }

    /// A law for `family` given as is (no compiles behind it).
    #[cfg(test)]
    pub fn record_probe(&mut self, family: &str, law: Law) {
        self.set(
            family,
            Entry {
                law,
                points: Vec::new(),
                misses: Vec::new(),
            },
        );
        self.save();
    }

    /// Probes `family`'s law: `probes` makes the two probe compiles ([`probe`], or the dense kernel's), and
    /// their law is kept with them. The probing is timed into [`CompileLaws::probe_seconds`]: it is a cost of
    /// the adapter, once per family (then cached on disk), not of the operator that happens to meet the family
    /// first, so the tuner keeps it off that operator's budget and reports it apart, as it does the dense model's
    /// inputs. On Mesa 25.0.7 a cold hex-p3-m3 probed the dense law and cstream-v2-fold's in 22.6 s, and counted
    /// against its budget they left bstream-v2 no room: it took a rolled kernel at ×4.1 its access floor where
    /// bstream-v2 runs at ×2.3 (docs/perf.md 2026-11-26, later).
    pub fn probe_family(
        &mut self,
        family: &str,
        probes: impl FnOnce() -> Result<Option<[(usize, f64); 2]>>,
    ) -> Result<Option<Law>> {
        let t = Instant::now();
        let probed = probes();
        self.probe_seconds += t.elapsed().as_secs_f64();
        Ok(probed?.and_then(|p| self.record_probes(family, p)))
    }

    /// Seconds spent in [`CompileLaws::probe_family`] since these laws were loaded.
    pub fn probe_seconds(&self) -> f64 {
        self.probe_seconds
    }

    /// Two probe compiles of `family` (one launch each: accesses, seconds): their law, kept with them. Private:
    /// the tuner's probes go through [`CompileLaws::probe_family`], which times them off the budget.
    fn record_probes(&mut self, family: &str, probes: [(usize, f64); 2]) -> Option<Law> {
        let law = Law::fit(probes[0], probes[1])?;
        let points = probes
            .iter()
            .map(|&(b, t)| Point {
                launches: vec![b],
                seconds: t,
            })
            .collect();
        self.set(
            family,
            Entry {
                law,
                points,
                misses: Vec::new(),
            },
        );
        self.save();
        Some(law)
    }

    /// A real compile of `family`'s launches, and what the law predicted for it beforehand. Where the family
    /// has a law, the law is refitted to its probes and real compiles together ([`envelope`]: never below any of
    /// them), so one noisy probe's exponent gives way to what the family's real kernels cost, and the miss
    /// (seconds over predicted) goes into the family's margin; one compile alone makes no law (it would have to
    /// assume an exponent, and under-predict larger kernels).
    pub fn record_compile(
        &mut self,
        family: &str,
        launch_sizes: &[usize],
        seconds: f64,
        predicted: Option<f64>,
    ) {
        let Some(entry) = self
            .known
            .iter_mut()
            .find(|e| e.0 == family)
            .map(|e| &mut e.1)
        else {
            return;
        };
        if !seconds.is_finite() || launch_sizes.is_empty() {
            return;
        }
        if let Some(p) = predicted.filter(|&p| p > 0.0 && seconds >= MARGIN_MIN_SECONDS) {
            entry.misses.push(seconds / p);
            if entry.misses.len() > MAX_MISSES {
                entry.misses.remove(0);
            }
        }
        entry.points.push(Point {
            launches: launch_sizes.to_vec(),
            seconds,
        });
        if entry.points.len() > MAX_POINTS {
            // The probes (first two) stay; the oldest real compile goes.
            entry.points.remove(2.min(entry.points.len() - 1));
        }
        match envelope(&entry.points) {
            Some(law) => entry.law = law,
            None => entry.law.cover(launch_sizes, seconds),
        }
        self.save();
    }

    fn save(&self) {
        if let Ok(mut v) = LAWS.lock() {
            v.retain(|(a, _, _)| *a != self.adapter);
            v.extend(
                self.known
                    .iter()
                    .map(|(f, e)| (self.adapter.clone(), f.clone(), e.clone())),
            );
        }
        if let Some(d) = &self.disk {
            // A law that cannot be remembered costs a probe next run, nothing else.
            let _ = d.put_json(&self.adapter, &self.known);
        }
    }
}

/// The first `rows` rows of `op`.
pub(crate) fn leading_rows(op: &Operator, rows: usize) -> Result<Operator> {
    let rows = rows.clamp(1, op.m);
    let a = op.values()[..rows * op.k].to_vec();
    Operator::from_dense(format!("{}[probe {rows} rows]", op.name), rows, op.k, a)
}

/// `variant` generated for the fewest leading rows of `op` whose one launch spells out at least `target` loads
/// and stores (they grow with the rows); `None` where even all rows fall short, the rows split into several
/// launches, or the variant does not apply to them (e.g. nothing to fold).
fn probe_kernel<T: Element>(
    gpu: &Gpu,
    op: &Operator,
    variant: Variant,
    beta: f64,
    panel: Panel,
    target: usize,
) -> Result<Option<SpecKernel>> {
    let build = |rows: usize| -> Result<Option<SpecKernel>> {
        match SpecKernel::new(
            gpu,
            &leading_rows(op, rows)?,
            variant,
            T::DTYPE,
            beta,
            panel,
        ) {
            Ok(k) => Ok(Some(k)),
            Err(crate::error::MmError::NotApplicable { .. }) => Ok(None),
            Err(e) => Err(e),
        }
    };
    let reaches = |k: &Option<SpecKernel>| {
        k.as_ref()
            .is_some_and(|k| k.launch_accesses().iter().sum::<usize>() >= target)
    };
    // Generating is cheap (no compile): double, then bisect, on the row count.
    let mut hi = 1;
    while hi < op.m && !reaches(&build(hi)?) {
        hi = (hi * 2).min(op.m);
    }
    let found = build(hi)?;
    if !reaches(&found) {
        return Ok(None);
    }
    let (mut lo, mut best) = (hi / 2, found);
    let mut top = hi;
    while lo + 1 < top {
        let mid = (lo + top) / 2;
        let k = build(mid)?;
        if reaches(&k) {
            top = mid;
            best = k;
        } else {
            lo = mid;
        }
    }
    Ok(best.filter(|k| k.launch_accesses().len() == 1))
}

/// Compiles `variant` on the leading rows of `op` at the two probe sizes (one workgroup's panel): (accesses,
/// seconds) of each, for [`CompileLaws::record_probes`]; `None` where a probe cannot be built (see [`probe_kernel`]) or the two came out too close in size.
pub(crate) fn probe<T: Element>(
    gpu: &Gpu,
    op: &Operator,
    variant: Variant,
    beta: f64,
) -> Result<Option<[(usize, f64); 2]>> {
    let panel = Panel::packed(64 * variant.vec as usize);
    let mut points = Vec::new();
    for target in PROBE_ACCESSES {
        let Some(kernel) = probe_kernel::<T>(gpu, op, variant, beta, panel, target)? else {
            return Ok(None);
        };
        let b = gpu.upload(&fill::<T>(op.k * panel.ldb, 5))?;
        let c = gpu.upload(&fill::<T>(kernel.m * panel.ldc, 6))?;
        let t = Instant::now();
        let launches = kernel.plan(gpu, &b, &c)?;
        let refs: Vec<_> = launches.iter().collect();
        gpu.run(&refs)?;
        let first = t.elapsed().as_secs_f64();
        let warm = gpu.time(&refs, 0, 1)?.median();
        points.push((launch_sizes(&kernel)[0], (first - warm).max(0.0)));
    }
    Ok(Some([points[0], points[1]]))
}

#[cfg(test)]
mod tests;
