//! What an unrolled kernel costs the driver to compile, predicted before compiling it.
//!
//! A driver's compile time grows faster than linearly with one kernel's length, and how much faster depends on
//! the driver and on the kernel family: lavapipe on Mesa 22.3.6 compiles a cstream-v4 launch of 5, 10, 20 and 42
//! rows (hex p3 m3) in 0.11, 0.25, 0.82 and 3.5 s; Mesa 25.0.7 compiles the same four in 0.9, 3.4, 12.5 and
//! ~50 s, and its cstream-v2 launch of 20 rows in 2.7 s (docs/perf.md). One cost per byte, measured on one kernel,
//! therefore misjudges the next one by the ratio of their sizes. The tuner instead keeps a law per family, vector
//! width and folding, `seconds = a · accesses^p` for one launch (accesses: the loads and stores of B and C its
//! source spells out — what the compile grows with on lavapipe, where each is a loop over SIMD lanes; not the
//! terms, which overstate bstream's, each row of B loaded once for all its terms, nor bytes, which count the
//! fixed prelude), with `p` measured by compiling the family on the first rows of the operator at two sizes
//! (the fewest leading rows that spell out 64 and 128 loads and stores, against CPU launches of up to 256
//! terms: probes of 24 and 48 terms fitted p = 1.1 for cstream-v2 on Mesa 25.0.7, where fixed costs still
//! dominate, and under-predicted a 256-term launch 5×) and `a` raised whenever a real compile costs more than the law said. A candidate's predicted compile is
//! the sum over its launches (each launch is its own pipeline, compiled on its first dispatch).

use std::time::Instant;

use bespoke_gpu::Gpu;

use super::matmul::TuneOptions;
use super::operator::Operator;
use super::run::{Panel, SpecKernel};
use super::variant::Variant;
use crate::dense::Element;
use crate::dense::bench::fill;
use crate::error::Result;

/// Terms of A in the two probe kernels (the second about twice the first).
/// Loads and stores in the two probe kernels (the second twice the first).
pub(crate) const PROBE_ACCESSES: [usize; 2] = [64, 128];

/// Bounds on the fitted exponent: below 1 is timing noise on a fast compiler, above 2.5 an outlier.
const EXPONENT_RANGE: (f64, f64) = (1.0, 2.5);

/// Compiles this short are below the timer's resolution for fitting an exponent.
const MIN_FIT_SECONDS: f64 = 0.01;

/// `seconds = a · accesses^p` for one launch of one family.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub(crate) struct Law {
    pub a: f64,
    pub p: f64,
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
        Some(Self { a, p })
    }

    /// Predicted seconds for launches with these numbers of accesses.
    pub fn predict(&self, launch_accesses: &[usize]) -> f64 {
        launch_accesses
            .iter()
            .map(|&b| self.a * (b as f64).powf(self.p))
            .sum()
    }

    /// Raises `a` so the law covers a measured compile of these launches.
    pub fn cover(&mut self, launch_accesses: &[usize], seconds: f64) {
        let unit: f64 = launch_accesses
            .iter()
            .map(|&b| (b as f64).powf(self.p))
            .sum();
        if unit > 0.0 && seconds.is_finite() {
            self.a = self.a.max(seconds / unit);
        }
    }
}

/// The law's key: family, vector width and folding (`cstream-v4-fold`), which the name of a non-split variant
/// already is.
pub(crate) fn family_key(v: Variant) -> String {
    v.name()
}

/// The laws known for one adapter: for the process, and in the `compile-law` namespace of the disk cache when
/// the tuner uses the cache, so a later run predicts without probing again.
pub(crate) struct CompileLaws {
    adapter: String,
    disk: Option<bespoke_gpu::DiskCache>,
    known: Vec<(String, Law)>,
}

/// (adapter, family, law) for this process.
static LAWS: std::sync::Mutex<Vec<(String, String, Law)>> = std::sync::Mutex::new(Vec::new());

impl CompileLaws {
    pub fn load(gpu: &Gpu, opts: &TuneOptions) -> Self {
        let adapter = gpu.adapter_key();
        let disk = opts
            .cache_dir
            .clone()
            .or_else(Gpu::cache_dir)
            .filter(|_| opts.use_cache)
            .map(|d| bespoke_gpu::DiskCache::at(&d, "compile-law", 1));
        let stored = disk
            .as_ref()
            .and_then(|d| d.get_json::<Vec<(String, Law)>>(&adapter))
            .unwrap_or_default();
        let here: Vec<(String, Law)> = LAWS
            .lock()
            .map(|v| {
                v.iter()
                    .filter(|(a, _, _)| *a == adapter)
                    .map(|(_, f, l)| (f.clone(), *l))
                    .collect()
            })
            .unwrap_or_default();
        let mut laws = Self {
            adapter,
            disk,
            known: Vec::new(),
        };
        // The process's laws are at least as recent as the disk's.
        for (f, l) in stored.into_iter().chain(here) {
            laws.set(&f, l);
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
        }
    }

    fn set(&mut self, family: &str, law: Law) {
        if !(law.a.is_finite() && law.a >= 0.0 && law.p.is_finite()) {
            return;
        }
        match self.known.iter_mut().find(|e| e.0 == family) {
            Some(e) => e.1 = law,
            None => self.known.push((family.to_owned(), law)),
        }
    }

    pub fn get(&self, family: &str) -> Option<Law> {
        self.known.iter().find(|(f, _)| f == family).map(|e| e.1)
    }

    /// A probe's law for `family`.
    pub fn record_probe(&mut self, family: &str, law: Law) {
        self.set(family, law);
        self.save();
    }

    /// A real compile of `family`'s launches: its law, if it has one, is raised to cover it. One compile alone
    /// makes no law (it would have to assume an exponent, and under-predict larger kernels).
    pub fn record_compile(&mut self, family: &str, launch_accesses: &[usize], seconds: f64) {
        let Some(mut law) = self.get(family) else {
            return;
        };
        law.cover(launch_accesses, seconds);
        self.set(family, law);
        self.save();
    }

    fn save(&self) {
        if let Ok(mut v) = LAWS.lock() {
            v.retain(|(a, _, _)| *a != self.adapter);
            v.extend(
                self.known
                    .iter()
                    .map(|(f, l)| (self.adapter.clone(), f.clone(), *l)),
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

/// Compiles `variant` on the leading rows of `op` at the two probe sizes (one workgroup's panel) and fits the
/// law; `None` where a probe cannot be built (see [`probe_kernel`]) or the two came out too close in size.
pub(crate) fn probe<T: Element>(
    gpu: &Gpu,
    op: &Operator,
    variant: Variant,
    beta: f64,
) -> Result<Option<Law>> {
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
        points.push((kernel.launch_accesses()[0], (first - warm).max(0.0)));
    }
    Ok(Law::fit(points[0], points[1]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn law_fits_a_power_and_predicts_per_launch() {
        // t = 2e-9 · b^2 exactly.
        let t = |b: f64| 2e-9 * b * b;
        let law = Law::fit((3000, t(3000.0)), (6000, t(6000.0))).unwrap();
        assert!((law.p - 2.0).abs() < 1e-9, "{law:?}");
        assert!((law.predict(&[12000]) - t(12000.0)).abs() < 1e-9);
        // Two launches of half the size cost half of one launch of the whole under p = 2.
        assert!((law.predict(&[6000, 6000]) - t(12000.0) / 2.0).abs() < 1e-9);
    }

    #[test]
    fn law_clamps_noise_and_outliers() {
        // Shorter than the timer resolves: linear through the larger point.
        let l = Law::fit((1000, 0.001), (2000, 0.004)).unwrap();
        assert_eq!(l.p, 1.0);
        assert!((l.a - 0.004 / 2000.0).abs() < 1e-15);
        // The larger kernel compiled faster (noise): linear, and the smaller point still covered.
        let l = Law::fit((1000, 0.5), (2000, 0.3)).unwrap();
        assert_eq!(l.p, 1.0);
        assert!(l.predict(&[1000]) >= 0.5 - 1e-12);
        // A 100× jump for 2× the size is capped at 2.5.
        let l = Law::fit((1000, 0.1), (2000, 10.0)).unwrap();
        assert_eq!(l.p, 2.5);
        assert!(l.predict(&[2000]) >= 10.0 - 1e-9);
        // Degenerate sizes give no law.
        assert!(Law::fit((2000, 0.1), (2000, 0.2)).is_none());
        assert!(Law::fit((2000, 0.1), (2400, 0.2)).is_none());
        assert!(Law::fit((0, 0.1), (2000, 0.2)).is_none());
    }

    #[test]
    fn cover_raises_only() {
        let mut l = Law { a: 1e-6, p: 1.5 };
        l.cover(&[1000], 1e-9);
        assert_eq!(l.a, 1e-6);
        l.cover(&[1000, 1000], 1.0);
        assert!((l.predict(&[1000, 1000]) - 1.0).abs() < 1e-9);
    }

    #[test]
    fn leading_rows_take_a_prefix() {
        let a: Vec<f64> = (0..6 * 4).map(|i| i as f64 + 1.0).collect();
        let op = Operator::from_dense("t", 6, 4, a).unwrap();
        let s = leading_rows(&op, 3).unwrap();
        assert_eq!((s.m, s.k), (3, 4));
        assert_eq!(s.get(2, 3), 12.0);
        assert_eq!(leading_rows(&op, 100).unwrap().m, 6);
        assert_eq!(leading_rows(&op, 0).unwrap().m, 1);
    }
}
