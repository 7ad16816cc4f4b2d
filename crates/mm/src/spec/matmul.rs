//! `MatMul`: C = A·B + β·C for a constant A, with the kernel chosen by timing every applicable specialised
//! variant and the dense GEMM on the device. Decisions are cached on disk, so the next run does not re-tune.

use std::path::PathBuf;
use std::time::Instant;

use bespoke_gpu::{Gpu, GpuBuffer, Launch, median};

use super::compile_cost::{CompileLaws, family_key, launch_sizes};
use super::dense_budget::{dense_family, dense_within, k_blocked};
use super::floor::touch_check;
use super::operator::Operator;
use super::run::{Panel, SpecKernel, check_panels};
use super::tune_budget::{
    Budget, LONG_RUN_SECONDS, SCREEN_CUT, Verdict, dense_lost_on_model, finalist_runs,
    lost_on_first_run, spent_on_tuning, verdict, within_reach,
};
use super::tune_cache::{self, Decision};
use super::variant::{Family, ROLLED_ROWS, Variant};
use crate::dense::bench::fill;
use crate::dense::microbench::Op;
use crate::dense::{DenseGemm, DenseParams, Element, GemmPlan, GemmShape, Machine, MachineSource};
use crate::dtype::DType;
use crate::error::{MmError, Result};

/// Which kernel computes the product.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Choice {
    Spec(Variant),
    Dense(DenseParams),
}

impl Choice {
    /// A variant name, or `dense:<params key>`.
    pub fn name(&self) -> String {
        match self {
            Self::Spec(v) => v.name(),
            Self::Dense(p) => format!("dense:{}", p.key()),
        }
    }
    pub fn parse(s: &str) -> Option<Self> {
        match s.strip_prefix("dense:") {
            Some(k) => DenseParams::parse(k).map(Self::Dense),
            None => Variant::parse(s).map(Self::Spec),
        }
    }
    pub fn is_dense(&self) -> bool {
        matches!(self, Self::Dense(_))
    }
    /// The specialised variant, if this is one.
    pub fn variant(&self) -> Option<Variant> {
        match self {
            Self::Spec(v) => Some(*v),
            Self::Dense(_) => None,
        }
    }
}

/// Where the dense candidate's tiling comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DenseSource {
    /// The analytical model's pick (its inputs are measured once per adapter and cached).
    Model,
    /// A given tiling (tests use this to avoid measuring the model's inputs).
    Fixed(DenseParams),
    /// No dense candidate.
    Off,
}

/// How to tune.
#[derive(Clone, Debug)]
pub struct TuneOptions {
    /// Specialised variants to try; `None`: [`default_variants`] for the adapter.
    pub variants: Option<Vec<Variant>>,
    pub dense: DenseSource,
    /// Timed repetitions of each finalist (median kept).
    pub reps: usize,
    /// Candidates re-timed with `reps` after one screening run each.
    pub finalists: usize,
    /// Read and write decisions in the cache.
    pub use_cache: bool,
    /// Cache folder; `None`: [`Gpu::cache_dir`].
    pub cache_dir: Option<PathBuf>,
    /// Seconds one operator's tuning may spend (`None`: no bound). Candidates are compiled cheapest first
    /// (the dense kernel, then by generated source size); each unrolled candidate's compile is predicted from
    /// its family's law on this adapter (docs/mm.md, "Tuning budget"), and one whose prediction would end past
    /// the budget is skipped, not compiled — a bstream one giving way first to the cheapest-to-compile link of
    /// its [`Variant::cheaper_compile`] chain that fits. The dense and rolled kernels are always tried, and the
    /// smallest unrolled one while nothing is known. A compile cannot be abandoned once started.
    pub budget_seconds: Option<f64>,
}

impl Default for TuneOptions {
    fn default() -> Self {
        Self {
            variants: None,
            dense: DenseSource::Model,
            reps: 5,
            finalists: 3,
            use_cache: true,
            cache_dir: None,
            budget_seconds: Some(DEFAULT_TUNE_BUDGET),
        }
    }
}

/// Default bound on one operator's tuning (`TuneOptions::budget_seconds`), seconds.
pub const DEFAULT_TUNE_BUDGET: f64 = 30.0;

/// Unrolled terms up to which CPU adapters also try cstream (with and without folding): llvmpipe compiles it at
/// 5–17 ms per term cold, against 1.5–3 ms for bstream-v2 (docs/perf.md), and bstream is as fast or faster
/// wherever it applies — also where its rows go in blocks past the register budget (hex p3–p5 M6 on Mesa
/// 22.3.6: blocked bstream-v2 1.3–1.6× faster than cstream-v2, which took 4–16 s to compile).
pub const CPU_CSTREAM_TERMS: usize = 512;

/// Variants worth timing for `op` against `panel` in `dtype` on `gpu`. GPUs try every variant the panel's
/// alignment allows. On a CPU adapter one workgroup runs on one thread, so the families that split rows or K
/// across invocation rows add barriers without parallelism (llvmpipe compiles each barrier as a coroutine
/// split: a 384-term cstream-ksplit-s4-v4 took 36.7 s to compile against 0.05 s for cstream-v4); and unrolled
/// kernels compile slowly there, so the candidates are the ones that won on llvmpipe at a bounded compile cost:
/// bstream at vec2 (as fast as vec4, half the compile time), cstream at vec2 for short operators (on hex p3 m3
/// cstream-v2 ran in 12.3 ms against cstream-v4's 18.3 on Mesa 22.3.6, and Mesa 25.0.7 compiles a vec4 launch
/// 4.6× slower than a vec2 one: docs/perf.md), and the rolled family, which compiles once for any A. (`dtype`
/// does not change the list today: the register budget is met by blocking, not by dropping bstream.)
pub fn default_variants(gpu: &Gpu, op: &Operator, _dtype: DType, panel: Panel) -> Vec<Variant> {
    let align = panel.alignment() as u32;
    if !gpu.is_cpu() {
        // A GPU pays `-touch`'s extra read of C and gains nothing from it.
        return Variant::all()
            .into_iter()
            .filter(|v| align.is_multiple_of(v.vec) && !v.touch)
            .collect();
    }
    let widest = |cap: u32| {
        [4, 2, 1]
            .into_iter()
            .find(|v| *v <= cap && align.is_multiple_of(*v))
            .unwrap_or(1)
    };
    let bstream = Variant::new(Family::BStream, widest(2), 1, false);
    // At β = 0 also its `-touch` twin (skipped at other β, and by the tuner where the access floor says the read
    // does not pay, `floor::touch_check`): on an Intel Xeon VM lavapipe's β = 0 bstream ran 2× faster reading each
    // row of C before storing it (hex-p4-m0 14.9 → 6.7 ms, docs/perf.md).
    let mut out = vec![bstream];
    out.extend(bstream.with_touch());
    if op.nnz() <= CPU_CSTREAM_TERMS {
        out.push(Variant::new(Family::CStream, widest(2), 1, false));
        out.push(Variant::new(Family::CStream, widest(2), 1, true));
    }
    for r in ROLLED_ROWS {
        out.push(Variant::new(Family::Rolled, widest(4), r, false));
    }
    out
}

/// A screening run shorter than this is repeated [`SHORT_SCREEN_REPS`] times (median): one run of a sub-ms kernel
/// on llvmpipe varied 2–5× and once kept bstream-v2 out of the finalists of quad-p3-m3, where it runs 5× faster
/// than the cstream-v2 that was kept (docs/perf.md). Costs at most 50 ms per candidate.
pub const SHORT_SCREEN_SECONDS: f64 = 0.01;
/// Screening runs of a candidate whose first screening run was short.
pub const SHORT_SCREEN_REPS: usize = 5;

/// Screening ratio past which the dense candidate is not re-timed (see [`MatMul::tuned`]).
pub const DENSE_RETIME: f64 = 2.0;

/// The status of a finalist whose screening run stands as its time: a long run, and the budget spent.
pub const FINALIST_ON_SCREEN: &str = "finalist: its screening run stands, the budget spent";

/// A first run of the dense kernel longer than this defers its screening run until the others are screened.
pub const DEFER_DENSE_SCREEN_SECONDS: f64 = 1.0;

/// The dense kernel's compile-law family and the sizes its law predicts from (dense_budget.rs).
fn dense_law_key<T: Element>(
    gpu: &Gpu,
    op: &Operator,
    panel: Panel,
    beta: f64,
    p: DenseParams,
) -> Result<(String, Vec<usize>)> {
    let blocked = k_blocked::<T>(gpu, &dense_shape(op, panel))?;
    Ok((
        dense_family(T::DTYPE, p.vec),
        p.compiled_accesses(beta, blocked),
    ))
}

/// Screens a candidate whose compile took `compile` s and whose first full run after it took `first` s: that run
/// where it is long ([`LONG_RUN_SECONDS`]: its own measurement), else one run more, or the median of
/// [`SHORT_SCREEN_REPS`] when short.
fn screen_candidate<T: Element>(
    gpu: &Gpu,
    name: String,
    plan: &MatMulPlan<T>,
    first: f64,
    compile: f64,
    predicted: Option<f64>,
) -> Result<Candidate> {
    let mut screen = first;
    if first < LONG_RUN_SECONDS {
        screen = gpu.time(&plan.launches(), 0, 1)?.median();
        if screen < SHORT_SCREEN_SECONDS {
            screen = gpu.time(&plan.launches(), 0, SHORT_SCREEN_REPS)?.median();
        }
    }
    Ok(Candidate {
        name,
        seconds: Some(screen),
        screen_seconds: Some(screen),
        compile_seconds: Some(compile),
        predicted_compile_seconds: predicted,
        status: "screened".into(),
    })
}

/// One candidate as the tuner saw it.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Candidate {
    pub name: String,
    /// Median of the finalist timing, else the screening run.
    pub seconds: Option<f64>,
    /// The screening run (a median of several where it was short): what the choice of finalists compared,
    /// kept after a finalist's own timing replaces `seconds`.
    pub screen_seconds: Option<f64>,
    /// Binding the candidate and a one-workgroup launch of each of its launches: the driver's compile, whether
    /// it compiles at pipeline creation or, as llvmpipe does, at the first dispatch.
    pub compile_seconds: Option<f64>,
    /// What the compile law predicted for its compile beforehand, where the family had a law (before the
    /// margin: docs/mm.md).
    pub predicted_compile_seconds: Option<f64>,
    /// `finalist`, [`FINALIST_ON_SCREEN`], `screened`, `screened out: <reason>` or `skipped: <reason>`.
    pub status: String,
}

impl Candidate {
    /// A candidate that was not compiled, for `status` (`skipped: …`), with its prediction where it had one.
    pub fn skipped(name: String, predicted: Option<f64>, status: String) -> Self {
        Self {
            name,
            seconds: None,
            screen_seconds: None,
            compile_seconds: None,
            predicted_compile_seconds: predicted,
            status,
        }
    }
}

/// What tuning did (or that the decision came from the cache).
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct TuneReport {
    pub from_cache: bool,
    /// This operator's tuning, from after the dense model's inputs were at hand and less `probe_seconds`: what
    /// the tuning budget bounds.
    pub tune_seconds: f64,
    /// Measuring the dense model's inputs for this adapter and precision before tuning could start: once per
    /// adapter and precision (then read from the user's cache), 0 when they were cached; outside the budget.
    pub model_seconds: f64,
    /// Probing the compile laws of the families this operator met first on this adapter (two compiles each,
    /// then cached): once per family and adapter, outside the budget; 0 when every law was known.
    pub probe_seconds: f64,
    pub candidates: Vec<Candidate>,
    /// The chosen kernel's median time when tuned.
    pub seconds: Option<f64>,
    /// The dense kernel's time when tuned: the median of the finalist runs, or its one screening run when it
    /// lost the screening by more than [`DENSE_RETIME`]×.
    pub dense_seconds: Option<f64>,
}

enum Imp<T: Element> {
    Spec(SpecKernel),
    Dense(DenseGemm, GpuBuffer<T>),
}

/// C = A·B + β·C for one operator, precision, β and panel, with its kernel chosen.
pub struct MatMul<T: Element> {
    pub op: Operator,
    pub beta: f64,
    pub panel: Panel,
    pub choice: Choice,
    pub report: TuneReport,
    imp: Imp<T>,
}

impl<T: Element> std::fmt::Debug for MatMul<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "MatMul({} {}×{} {} β={} {:?})",
            self.op.name,
            self.op.m,
            self.op.k,
            self.choice.name(),
            self.beta,
            self.panel
        )
    }
}

/// Launches bound to buffers, plus what they keep alive.
#[derive(Debug)]
pub struct MatMulPlan<T: Element> {
    spec: Vec<Launch>,
    dense: Option<GemmPlan<T>>,
}

impl<T: Element> MatMulPlan<T> {
    pub fn launches(&self) -> Vec<&Launch> {
        match &self.dense {
            Some(p) => p.launches(),
            None => self.spec.iter().collect(),
        }
    }
}

impl<T: Element> MatMul<T> {
    /// The product with a given kernel (no tuning).
    pub fn with_choice(
        gpu: &Gpu,
        op: &Operator,
        beta: f64,
        panel: Panel,
        choice: Choice,
    ) -> Result<Self> {
        panel.check()?;
        T::DTYPE.require(gpu, "specialised matmul")?;
        let imp = match choice {
            Choice::Spec(v) => Imp::Spec(SpecKernel::new(gpu, op, v, T::DTYPE, beta, panel)?),
            Choice::Dense(p) => {
                let shape = dense_shape(op, panel);
                let a: Vec<T> = op.values().iter().map(|&v| T::from_f64(v)).collect();
                Imp::Dense(
                    DenseGemm::new(shape, T::DTYPE, p, 1.0, beta)?,
                    gpu.upload(&a)?,
                )
            }
        };
        Ok(Self {
            op: op.clone(),
            beta,
            panel,
            choice,
            report: TuneReport::default(),
            imp,
        })
    }

    /// The fastest of the candidates, from the cache when this (A, precision, β, N bucket, alignment, adapter)
    /// was tuned before, else by timing them now (and caching the decision).
    pub fn tuned(
        gpu: &Gpu,
        op: &Operator,
        beta: f64,
        panel: Panel,
        opts: &TuneOptions,
    ) -> Result<Self> {
        panel.check()?;
        T::DTYPE.require(gpu, "specialised matmul")?;
        let key = tune_cache::key(&gpu.adapter_key(), op, T::DTYPE, beta, panel);
        let cache = opts
            .cache_dir
            .clone()
            .or_else(Gpu::cache_dir)
            .map(|d| tune_cache::cache(&d))
            .filter(|_| opts.use_cache);
        if let Some(d) = cache.as_ref().and_then(|c| c.get_json::<Decision>(&key))
            && let Some(choice) = Choice::parse(&d.choice)
            && let Ok(mut mm) = Self::with_choice(gpu, op, beta, panel, choice)
        {
            mm.report = TuneReport {
                from_cache: true,
                ..Default::default()
            };
            return Ok(mm);
        }
        let mut mm = Self::tune(gpu, op, beta, panel, opts)?;
        if let Some(c) = &cache {
            let decision = Decision {
                choice: mm.choice.name(),
                seconds: mm.report.seconds,
                dense_seconds: mm.report.dense_seconds,
                n: panel.n,
            };
            // A decision that cannot be written costs a re-tune next time, nothing else; say so.
            if let Err(e) = c.put_json(&key, &decision) {
                eprintln!("bespoke: could not remember the tuning decision: {e}");
            }
        }
        mm.report.from_cache = false;
        Ok(mm)
    }

    fn tune(gpu: &Gpu, op: &Operator, beta: f64, panel: Panel, opts: &TuneOptions) -> Result<Self> {
        // The dense model's inputs are measured once per adapter and precision (~30 s on lavapipe) and cached:
        // a cost of the first operator ever tuned, not of its candidates, so it stays off the budget's clock.
        let t_model = Instant::now();
        let machine = match opts.dense {
            DenseSource::Model => Some(Machine::load_or_measure(gpu, Op::Fma(T::DTYPE), false)?),
            _ => None,
        };
        let model_seconds = match &machine {
            Some((_, MachineSource::Measured(_))) => t_model.elapsed().as_secs_f64(),
            _ => 0.0,
        };
        let t0 = Instant::now();
        let b = gpu.upload(&fill::<T>(op.k * panel.ldb, 3))?;
        let c = gpu.upload(&fill::<T>(op.m * panel.ldc, 4))?;
        let mut cands: Vec<(Self, Candidate)> = Vec::new();
        let mut skipped = Vec::new();
        let variants = opts
            .variants
            .clone()
            .unwrap_or_else(|| default_variants(gpu, op, T::DTYPE, panel));
        let mut choices: Vec<Choice> = variants.into_iter().map(Choice::Spec).collect();
        // What each unrolled candidate, and the dense kernel, will cost to compile: a law per family on this
        // adapter (probed when not known yet; compile_cost.rs, dense_budget.rs).
        let mut laws = CompileLaws::load(gpu, opts);
        // The model's run time for the dense kernel, where the model chose it (its rate is an upper bound:
        // tune_budget.rs, `dense_lost_on_model`).
        let mut dense_run = None;
        match (opts.dense, &machine) {
            (DenseSource::Model, Some((machine, _))) => {
                let (p, set_aside) = dense_within::<T>(
                    gpu,
                    machine,
                    op,
                    panel,
                    beta,
                    &mut laws,
                    opts.budget_seconds,
                )?;
                let shape = dense_shape(op, panel);
                dense_run = Some(
                    machine
                        .predict(&p, T::DTYPE.size(), &shape, beta != 0.0)
                        .seconds,
                );
                choices.push(Choice::Dense(p));
                skipped.extend(set_aside);
            }
            (DenseSource::Fixed(p), _) => choices.push(Choice::Dense(p)),
            _ => {}
        }
        // Generate every candidate first (cheap), then compile the cheapest first: dense, then by predicted compile
        // time and source size.
        let mut built = Vec::new();
        for choice in choices {
            match Self::with_choice(gpu, op, beta, panel, choice) {
                Ok(mm) => {
                    let bytes: usize = mm.sources().iter().map(|s| s.len()).sum();
                    built.push((mm, bytes));
                }
                Err(MmError::NotApplicable { reason, .. }) => skipped.push(Candidate::skipped(
                    choice.name(),
                    None,
                    format!("skipped: {reason}"),
                )),
                Err(e) => return Err(e),
            }
        }
        // Unrolled candidates whose family has a law go by predicted compile time (a short cstream-fold source
        // can take 10× bstream's compile: on Mesa 25.0.7 one took 29 s first and left bstream-v2, predicted 2.5 s,
        // past the budget); the rest keep source order ahead of them, as their law is probed when they come.
        let predicted = |mm: &Self| match mm.choice {
            Choice::Spec(v) if v.family.unrolled() => laws.get(&family_key(v)).map_or(0.0, |l| {
                l.predict(&mm.spec_kernel().map(launch_sizes).unwrap_or_default())
            }),
            _ => 0.0,
        };
        // Rolled kernels (no law: they compile once whatever A is) go by rows per invocation, most first: more rows
        // share each load of B, and where one run is long, so that the screening cut matters, the most rows won
        // (12 of 14 rolled choices of Mesa 22.3.6's suite, 2026-11-25): a slow rolled-r1 screened first, against
        // the dense kernel alone, escaped the cut (pyr-p6-m6: 5.7 s, twice, beside rolled-r8's 1.0 s).
        let rows_first = |mm: &Self| match mm.choice {
            Choice::Spec(v) if v.family == Family::Rolled => u32::MAX - v.split,
            _ => u32::MAX,
        };
        // The dense kernel goes first (its compile is charged first), unless the model says one run of it is long:
        // then it goes last, and only where it can still be within DENSE_RETIME of the best (on a slow hour
        // hex-p6-m132's dense first run took 10–20 s of the 30 against rolled kernels' 0.9–1.2 s).
        let dense_last = dense_run.is_some_and(|s| s > DEFER_DENSE_SCREEN_SECONDS);
        let rank = |mm: &Self| match (mm.choice.is_dense(), dense_last) {
            (true, false) => 0,
            (false, _) => 1,
            (true, true) => 2,
        };
        built.sort_by(|(a, ab), (b, bb)| {
            (rank(a), predicted(a), rows_first(a), *ab)
                .partial_cmp(&(rank(b), predicted(b), rows_first(b), *bb))
                .unwrap_or(std::cmp::Ordering::Equal)
        });
        // Unrolled candidates are predicted from their family's law and skipped past the budget (tune_budget.rs);
        // a skipped bstream candidate gives way to the next of its `cheaper_compile` chain that is not a
        // candidate already.
        let mut names: Vec<String> = built.iter().map(|(mm, _)| mm.choice.name()).collect();
        let mut first_unrolled = true;
        let mut deferred = None;
        'candidates: for (mm, _bytes) in built {
            if let Choice::Dense(p) = mm.choice
                && dense_last
            {
                let (family, accesses) = dense_law_key::<T>(gpu, op, panel, beta, p)?;
                let law = laws.get(&family);
                let compile = law.map(|l| l.predict(&accesses) * laws.margin(&family));
                if let Some(status) = dense_lost_on_model(
                    dense_run.unwrap_or(0.0),
                    cands.iter().filter_map(|(_, c)| c.seconds).reduce(f64::min),
                    opts.budget_seconds.map(|b| b - spent_on_tuning(t0, &laws)),
                    compile,
                ) {
                    let predicted = law.map(|l| l.predict(&accesses));
                    skipped.push(Candidate::skipped(mm.choice.name(), predicted, status));
                    continue;
                }
            }
            let mut mm = mm;
            let mut predicted;
            let mut link = false;
            loop {
                let budget = Budget {
                    seconds: opts.budget_seconds,
                    since: t0,
                    first_unrolled,
                    link,
                };
                match verdict(gpu, op, beta, &mm, budget, &mut laws)? {
                    Verdict::Fits { predicted: p } => {
                        predicted = p;
                        break;
                    }
                    Verdict::Over { predicted, status } => {
                        skipped.push(Candidate::skipped(mm.choice.name(), predicted, status));
                        link = true;
                        // The next link that is not a candidate already and applies to this operator.
                        let mut next = mm.choice.variant().and_then(|v| v.cheaper_compile());
                        mm = loop {
                            let Some(v) = next else {
                                continue 'candidates;
                            };
                            next = v.cheaper_compile();
                            if names.contains(&v.name()) {
                                continue;
                            }
                            names.push(v.name());
                            match Self::with_choice(gpu, op, beta, panel, Choice::Spec(v)) {
                                Ok(m) => break m,
                                Err(MmError::NotApplicable { reason, .. }) => {
                                    skipped.push(Candidate::skipped(
                                        v.name(),
                                        None,
                                        format!("skipped: {reason}"),
                                    ))
                                }
                                Err(e) => return Err(e),
                            }
                        };
                    }
                }
            }
            // A `-touch` twin of the default list is compiled only where reading C speeds the accesses up: checked
            // once its compile fits the budget (its floors' paired runs are not spent on a twin priced out).
            if let Choice::Spec(v) = mm.choice
                && v.touch
                && opts.variants.is_none()
                && let Some(status) = touch_check(gpu, op, panel, v, &b, &c)?
            {
                skipped.push(Candidate::skipped(v.name(), predicted, status));
                continue;
            }
            let choice = mm.choice;
            let unrolled = match choice {
                Choice::Spec(v) if v.family.unrolled() => Some(v),
                _ => None,
            };
            let family = unrolled.map(family_key).unwrap_or_default();
            let sizes = mm.spec_kernel().map(launch_sizes).unwrap_or_default();
            // The dense kernel's prediction, for its law's margin (its tiling was chosen within its share).
            let dense_compiled = match choice {
                Choice::Dense(p) => {
                    let (family, accesses) = dense_law_key::<T>(gpu, op, panel, beta, p)?;
                    predicted = laws.get(&family).map(|l| l.predict(&accesses));
                    Some((family, accesses))
                }
                Choice::Spec(_) => None,
            };
            // The compile apart from the first run: binding, then one workgroup of each launch (llvmpipe compiles
            // at the first dispatch), recorded against the family's law whatever the run then shows.
            let t = Instant::now();
            let plan = mm.plan(gpu, &b, &c)?;
            let one: Vec<Launch> = plan.launches().iter().map(|l| l.one_group()).collect();
            gpu.run(&one.iter().collect::<Vec<_>>())?;
            let compile = t.elapsed().as_secs_f64();
            let law = unrolled.map(|_| (family, sizes)).or(dense_compiled);
            if let Some((family, sizes)) = &law {
                laws.record_compile(family, sizes, compile, predicted);
            }
            if unrolled.is_some() {
                first_unrolled = false;
            }
            let t = Instant::now();
            gpu.run(&plan.launches())?;
            let first = t.elapsed().as_secs_f64();
            // A first run that already lost the screening by far is not run again: on a slow hour one run of a big
            // operator's loser took seconds (tune_budget.rs).
            let best_so_far = cands.iter().filter_map(|(_, c)| c.seconds).reduce(f64::min);
            if let Some(status) = lost_on_first_run(first, best_so_far, SCREEN_CUT) {
                skipped.push(Candidate {
                    compile_seconds: Some(compile),
                    ..Candidate::skipped(choice.name(), predicted, status)
                });
                continue;
            }
            // The dense kernel goes first (its compile is charged first); a long first run of it is screened
            // after the others, and only if it can still be within DENSE_RETIME of the best.
            if mm.choice.is_dense() && first > DEFER_DENSE_SCREEN_SECONDS {
                drop(plan);
                deferred = Some((mm, first, compile, predicted));
                continue;
            }
            let cand = screen_candidate(gpu, choice.name(), &plan, first, compile, predicted)?;
            drop(plan);
            cands.push((mm, cand));
        }
        if let Some((mm, first, compile, predicted)) = deferred {
            let best = cands.iter().filter_map(|(_, c)| c.seconds).reduce(f64::min);
            match lost_on_first_run(first, best, DENSE_RETIME) {
                Some(status) => skipped.push(Candidate {
                    compile_seconds: Some(compile),
                    ..Candidate::skipped(mm.choice.name(), predicted, status)
                }),
                None => {
                    let plan = mm.plan(gpu, &b, &c)?;
                    let name = mm.choice.name();
                    let cand = screen_candidate(gpu, name, &plan, first, compile, predicted)?;
                    drop(plan);
                    cands.push((mm, cand));
                }
            }
        }
        if cands.is_empty() {
            return Err(MmError::NotApplicable {
                variant: "every candidate".into(),
                reason: skipped
                    .iter()
                    .map(|c| format!("{} ({})", c.name, c.status))
                    .collect::<Vec<_>>()
                    .join("; "),
            });
        }
        // Finalists: the best screened, and dense whenever it is within reach (the baseline the choice must not
        // lose to). Dense screened at more than DENSE_RETIME times the best has lost: its one screening run
        // stands as its time (a long run, so a stable one) rather than paying `reps` more of them; so does any
        // long screening run outside FINALIST_REACH of the best (tune_budget.rs).
        cands.sort_by(|a, b| {
            a.1.seconds
                .partial_cmp(&b.1.seconds)
                .unwrap_or(std::cmp::Ordering::Equal)
        });
        let best_screen = cands[0].1.seconds.unwrap_or(f64::INFINITY);
        let mut dense_seconds = None;
        let finalist = |i: usize, mm: &Self, cand: &Candidate| {
            let dense = mm.choice.is_dense();
            let screen = cand.seconds.unwrap_or(f64::INFINITY);
            let lost = (dense && screen > DENSE_RETIME * best_screen)
                || !within_reach(screen, best_screen);
            !lost && (i < opts.finalists.max(1) || dense)
        };
        let finalists: Vec<usize> = (0..cands.len())
            .filter(|&i| finalist(i, &cands[i].0, &cands[i].1))
            .collect();
        for (i, (mm, cand)) in cands.iter().enumerate() {
            if mm.choice.is_dense() && !finalist(i, mm, cand) {
                dense_seconds = cand.seconds;
            }
        }
        // Each finalist's runs within what is left of the budget, as if they ran one after the other (none past
        // it for a long screening run, which then stands as its time) …
        let mut left = opts.budget_seconds.map(|s| s - spent_on_tuning(t0, &laws));
        let mut runs = Vec::with_capacity(finalists.len());
        for (n, &i) in finalists.iter().enumerate() {
            let screen = cands[i].1.seconds.unwrap_or(0.0);
            let (warmup, reps) = finalist_runs(left, finalists.len() - n, screen, opts.reps);
            left = left.map(|l| l - (warmup + reps) as f64 * screen);
            runs.push((warmup, reps));
        }
        // … taken in rounds, one run of each finalist per round (A B C A B C): on a VM whose speed drifts within
        // seconds, a finalist timed in a block of its own can catch a slow moment the others miss (pyr-p5-m0's
        // chosen kernel timed 43.9 ms as a finalist and 79.7 ms a minute later, docs/perf.md).
        let plans = finalists
            .iter()
            .zip(&runs)
            .map(|(&i, &(_, reps))| (reps > 0).then(|| cands[i].0.plan(gpu, &b, &c)).transpose())
            .collect::<Result<Vec<_>>>()?;
        for (plan, &(warmup, _)) in plans.iter().zip(&runs) {
            if let (Some(plan), true) = (plan, warmup > 0) {
                gpu.run(&plan.launches())?;
            }
        }
        let mut samples = vec![Vec::new(); finalists.len()];
        for round in 0..runs.iter().map(|r| r.1).max().unwrap_or(0) {
            for (j, plan) in plans.iter().enumerate() {
                if let (Some(plan), true) = (plan, runs[j].1 > round) {
                    samples[j].push(gpu.time(&plan.launches(), 0, 1)?.median());
                }
            }
        }
        drop(plans);
        for (j, &i) in finalists.iter().enumerate() {
            let (mm, cand) = &mut cands[i];
            if samples[j].is_empty() {
                cand.status = FINALIST_ON_SCREEN.into();
            } else {
                cand.seconds = Some(median(&samples[j]));
                cand.status = "finalist".into();
            }
            if mm.choice.is_dense() {
                dense_seconds = cand.seconds;
            }
        }
        let best = cands
            .iter()
            .enumerate()
            .filter(|(_, (_, c))| c.status.starts_with("finalist"))
            .min_by(|a, b| {
                a.1.1
                    .seconds
                    .partial_cmp(&b.1.1.seconds)
                    .unwrap_or(std::cmp::Ordering::Equal)
            })
            .map(|(i, _)| i)
            .unwrap_or(0);
        let mut report = TuneReport {
            from_cache: false,
            tune_seconds: 0.0,
            model_seconds,
            probe_seconds: laws.probe_seconds(),
            candidates: cands
                .iter()
                .map(|(_, c)| c.clone())
                .chain(skipped)
                .collect(),
            seconds: cands[best].1.seconds,
            dense_seconds,
        };
        let mut mm = cands.swap_remove(best).0;
        report.tune_seconds = spent_on_tuning(t0, &laws);
        mm.report = report;
        Ok(mm)
    }

    /// Binds the product to `b` (K×N, ldb) and `c` (M×N, ldc).
    pub fn plan(&self, gpu: &Gpu, b: &GpuBuffer<T>, c: &GpuBuffer<T>) -> Result<MatMulPlan<T>> {
        check_panels(self.op.m, self.op.k, self.panel, b.len(), c.len())?;
        Ok(match &self.imp {
            Imp::Spec(k) => MatMulPlan {
                spec: k.plan(gpu, b, c)?,
                dense: None,
            },
            Imp::Dense(g, a) => MatMulPlan {
                spec: Vec::new(),
                dense: Some(g.plan(gpu, a, b, c)?),
            },
        })
    }

    /// Runs C = A·B + β·C once.
    pub fn run(&self, gpu: &Gpu, b: &GpuBuffer<T>, c: &GpuBuffer<T>) -> Result<()> {
        let plan = self.plan(gpu, b, c)?;
        Ok(gpu.run(&plan.launches())?)
    }

    /// The generated sources (empty for the dense kernel).
    pub fn sources(&self) -> Vec<&str> {
        match &self.imp {
            Imp::Spec(k) => k.sources(),
            Imp::Dense(..) => Vec::new(),
        }
    }

    pub fn dtype(&self) -> DType {
        T::DTYPE
    }

    /// The specialised kernel, if that is the choice.
    pub fn spec_kernel(&self) -> Option<&SpecKernel> {
        match &self.imp {
            Imp::Spec(k) => Some(k),
            Imp::Dense(..) => None,
        }
    }
}

/// The dense GEMM's shape for A (lda = K) against a panel.
pub(crate) fn dense_shape(op: &Operator, p: Panel) -> GemmShape {
    GemmShape {
        m: op.m,
        n: p.n,
        k: op.k,
        lda: op.k,
        ldb: p.ldb,
        ldc: p.ldc,
    }
}

/// The dense tiling the analytical model picks for `op`'s product: the model's inputs are loaded from the
/// per-adapter cache, or measured once and cached, here in the tuner (the GEMM itself never measures).
pub fn model_dense(
    gpu: &Gpu,
    op: &Operator,
    panel: Panel,
    dtype: DType,
    beta: f64,
) -> Result<DenseParams> {
    let (machine, _) = Machine::load_or_measure(gpu, Op::Fma(dtype), false)?;
    Ok(machine
        .gemm(gpu, dense_shape(op, panel), dtype, 1.0, beta)?
        .params)
}
