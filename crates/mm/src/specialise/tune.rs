//! The tuner: C = A·B + β·C with its kernel chosen by timing every applicable specialised variant and the dense
//! GEMM on the device, within a compile budget. Decisions are cached on disk, so the next run does not re-tune.

use std::time::Instant;

use bespoke_gpu::{Gpu, Launch, median};

use super::candidates::default_variants;
use super::compile_cost::{CompileLaws, family_key, launch_sizes};
use super::dense_budget::dense_within;
use super::floor::touch_check;
use super::matmul::{Choice, MatMul, MatMulPlan, dense_shape};
use super::operator::Operator;
use super::run::Panel;
use super::tune_budget::{
    Budget, LONG_RUN_SECONDS, SCREEN_CUT, Verdict, dense_lost_on_model, finalist_runs,
    lost_on_first_run, spent_on_tuning, verdict, within_reach,
};
use super::tune_cache::{self, Decision};
use super::tune_precompile::{Walk, compile_threads, dense_law_key, precompile};
use super::tuning::{
    Candidate, DEFER_DENSE_SCREEN_SECONDS, DENSE_RETIME, DenseSource, FINALIST_ON_SCREEN,
    SHORT_SCREEN_REPS, SHORT_SCREEN_SECONDS, TuneOptions, TuneReport,
};
use super::variant::Family;
use crate::dense::bench::fill;
use crate::dense::microbench::Op;
use crate::dense::{DenseParams, Element, Machine, MachineSource};
use crate::dtype::DType;
use crate::error::{MmError, Result};

/// What a candidate's failure says where it is the candidate's own (the driver refused its pipeline, a limit it
/// passes): the tuner goes on without it. A lost device, or anything not the GPU's, is the tuning's error.
fn refused(e: MmError) -> Result<String> {
    match e {
        MmError::Gpu(g) if g.is_kernels_own() => Ok(g.to_string()),
        e => Err(e),
    }
}

/// A hash of a generated kernel without its first line (the header naming its variant): two variants whose
/// kernels hash alike compile and run alike.
fn body_hash(source: &str) -> u64 {
    use std::hash::{Hash, Hasher};
    let body = source.split_once('\n').map_or(source, |(_, b)| b);
    let mut h = std::collections::hash_map::DefaultHasher::new();
    body.hash(&mut h);
    h.finish()
}

/// Screens a candidate whose compile took `compile` s and whose first full run after it took `first` s: that run
/// where it is long ([`LONG_RUN_SECONDS`]: its own measurement), else one run more, or the median of
/// [`SHORT_SCREEN_REPS`] when short.
fn screen_candidate<T: Element>(
    gpu: &Gpu,
    name: String,
    plan: &MatMulPlan<T>,
    first: f64,
    (compile, precompiled): (f64, Option<f64>),
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
        precompiled_seconds: precompiled,
    })
}

impl<T: Element> MatMul<T> {
    /// The fastest of the candidates, from the cache when this (A, precision, β, N bucket, alignment, adapter)
    /// was tuned before (unless `opts.refresh`), else by timing them now (and caching the decision).
    pub fn tuned(
        gpu: &Gpu,
        op: &Operator,
        beta: f64,
        panel: Panel,
        opts: &TuneOptions,
    ) -> Result<Self> {
        panel.check()?;
        T::DTYPE.require(gpu, "specialised matmul")?;
        let key = tune_cache::key(
            &gpu.adapter_key(),
            op,
            T::DTYPE,
            beta,
            panel,
            opts.variants.as_deref(),
        );
        let cache = opts
            .cache_dir
            .clone()
            .or_else(Gpu::cache_dir)
            .map(|d| tune_cache::cache(&d))
            .filter(|_| opts.use_cache);
        if let Some(d) = cache
            .as_ref()
            .filter(|_| !opts.refresh)
            .and_then(|c| c.get_json::<Decision>(&key))
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
        // time and source size. A candidate whose kernels are an earlier one's (a mid or long twin of an operator
        // that fits one launch either way, a larger stage than the operator's rows of B fill) is not a candidate.
        let mut built = Vec::new();
        let mut sources: Vec<(Vec<u64>, String)> = Vec::new();
        for choice in choices {
            match Self::with_choice(gpu, op, beta, panel, choice) {
                Ok(mm) => {
                    let these: Vec<u64> = mm.sources().iter().map(|s| body_hash(s)).collect();
                    if let Some((_, same)) = sources.iter().find(|(s, _)| *s == these) {
                        skipped.push(Candidate::skipped(
                            choice.name(),
                            None,
                            format!("skipped: the same kernels as {same}"),
                        ));
                        continue;
                    }
                    sources.push((these, choice.name()));
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
        // On a GPU the candidates the budget admits are compiled at once first (tune_precompile.rs).
        let walk = Walk {
            op,
            beta,
            panel,
            budget_seconds: opts.budget_seconds,
            since: t0,
            dense_last,
        };
        let all: Vec<&Self> = built.iter().map(|(mm, _)| mm).collect();
        let pre = precompile(gpu, &walk, &all, &mut laws, compile_threads(gpu, opts))?;
        drop(all);
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
            let mut predicted = None;
            let mut link = false;
            // A candidate compiled at once was admitted then: its compile is spent, whatever the clock says now.
            let pre_this = pre.as_ref().and_then(|p| p.get(&mm.choice.name()));
            if let Some((_, p)) = pre_this {
                predicted = p;
            }
            while pre_this.is_none() {
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
            // A pipeline the driver refuses (its compiler past its own limits, a workgroup past what Metal allows
            // the pipeline) costs that candidate, not the tuning: said in the report, the others timed.
            let compiled = mm.plan(gpu, &b, &c).and_then(|plan| {
                let one: Vec<Launch> = plan.launches().iter().map(|l| l.one_group()).collect();
                gpu.run(&one.iter().collect::<Vec<_>>())?;
                Ok(plan)
            });
            let plan = match compiled {
                Ok(plan) => plan,
                Err(e) => {
                    let reason = refused(e)?;
                    skipped.push(Candidate {
                        compile_seconds: Some(t.elapsed().as_secs_f64()),
                        ..Candidate::skipped(choice.name(), predicted, format!("failed: {reason}"))
                    });
                    continue;
                }
            };
            // Compiled at once, its kernels' seconds on their workers count too; the law learns only from
            // compiles timed alone (a driver that serialises compiles inside would charge each its wait).
            let precompiled = pre_this.map(|(s, _)| s);
            let compile = t.elapsed().as_secs_f64() + precompiled.unwrap_or(0.0);
            let law = unrolled.map(|_| (family, sizes)).or(dense_compiled);
            if let (Some((family, sizes)), None) = (&law, precompiled) {
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
                    precompiled_seconds: precompiled,
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
            let compiled = (compile, precompiled);
            let cand = screen_candidate(gpu, choice.name(), &plan, first, compiled, predicted)?;
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
                    let compiled = (compile, None);
                    let cand = screen_candidate(gpu, name, &plan, first, compiled, predicted)?;
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
            parallel_compile: pre.map(|p| p.report),
        };
        let mut mm = cands.swap_remove(best).0;
        report.tune_seconds = spent_on_tuning(t0, &laws);
        mm.report = report;
        Ok(mm)
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
