//! The tuner's candidates compiled at once on several workers before they are timed one by one. A GPU's driver
//! compiles a kernel when its pipeline is created, on the calling thread: on an H200 (2026-12-04) the nine f32
//! PyFR operators' 43–78 candidates took 0.02–0.3 s each, 62 of the 80 s their tuning took, one after another,
//! while the host's other 15 cores idled. The walk here takes the verdicts the serial one would (tune_budget.rs)
//! in the same order, with every earlier admitted candidate's predicted compile charged to the budget as if
//! compiled one after another, so nothing is compiled that the serial walk, its predictions holding, would not
//! have compiled; the serial walk then finds these compiled, times them, and takes the rest as before (those
//! now within the budget its clock leaves, since the compiles took less of it).

use std::collections::HashMap;
use std::time::Instant;

use bespoke_gpu::Gpu;

use super::compile_cost::{CompileLaws, family_key};
use super::dense_budget::{dense_family, k_blocked};
use super::matmul::{Choice, MatMul, dense_shape};
use super::operator::Operator;
use super::run::Panel;
use super::tune_budget::{Budget, Verdict, verdict};
use super::tuning::{ParallelCompile, TuneOptions};
use crate::dense::{DenseParams, Element};
use crate::error::Result;

/// Workers for `opts`: its own count, else every core on a GPU and one (nothing at once) on a CPU adapter, where
/// llvmpipe compiles at the first dispatch on its queue's thread whatever thread created the pipeline.
pub(crate) fn compile_threads(gpu: &Gpu, opts: &TuneOptions) -> usize {
    opts.compile_threads.unwrap_or_else(|| {
        if gpu.is_cpu() {
            1
        } else {
            std::thread::available_parallelism().map_or(1, usize::from)
        }
    })
}

/// The dense kernel's compile-law family and the sizes its law predicts from (dense_budget.rs).
pub(crate) fn dense_law_key<T: Element>(
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

/// What was compiled at once: per candidate, the seconds its kernels took on their workers and its law's
/// prediction (before the margin) where it had one.
pub(crate) struct Precompiled {
    seconds: HashMap<String, (f64, Option<f64>)>,
    pub report: ParallelCompile,
}

impl Precompiled {
    /// The seconds `name`'s kernels took on the workers and the prediction its verdict had, where it was
    /// compiled at once.
    pub fn get(&self, name: &str) -> Option<(f64, Option<f64>)> {
        self.seconds.get(name).copied()
    }
}

/// Where the tuner stands when it compiles at once.
pub(crate) struct Walk<'a> {
    pub op: &'a Operator,
    pub beta: f64,
    pub panel: Panel,
    pub budget_seconds: Option<f64>,
    pub since: Instant,
    /// The dense kernel goes last, after the others' screening decides whether it is compiled at all.
    pub dense_last: bool,
}

/// Compiles on `threads` workers the candidates of `built` (in the serial walk's order) that the budget admits
/// one after another, each charged the predicted compiles (with their family's margin) of those before it;
/// `None` with fewer than two workers or fewer than two such candidates. A `-touch` twin waits for its check
/// (floor.rs), a deferred dense kernel for the screening, a chain's cheaper links for their candidate's skip:
/// the serial walk compiles those. A kernel that fails here is compiled again there, which reports its error.
pub(crate) fn precompile<T: Element>(
    gpu: &Gpu,
    walk: &Walk<'_>,
    built: &[&MatMul<T>],
    laws: &mut CompileLaws,
    threads: usize,
) -> Result<Option<Precompiled>> {
    if threads < 2 {
        return Ok(None);
    }
    let mut charged = 0.0;
    let mut first_unrolled = true;
    let mut admitted: Vec<(String, usize, Option<f64>)> = Vec::new();
    let mut kernels = Vec::new();
    for mm in built {
        let unrolled = match mm.choice {
            Choice::Spec(v) if v.touch => continue,
            Choice::Dense(_) if walk.dense_last => continue,
            Choice::Spec(v) => v.family.unrolled(),
            Choice::Dense(_) => false,
        };
        let budget = Budget {
            seconds: walk.budget_seconds.map(|b| b - charged),
            since: walk.since,
            first_unrolled,
            link: false,
        };
        let Verdict::Fits { predicted } = verdict(gpu, walk.op, walk.beta, *mm, budget, laws)?
        else {
            continue;
        };
        // The prediction charged: with the family's margin, the dense kernel's from its own law (the verdict
        // does not price it: its tiling was chosen within a share of the budget).
        charged += match mm.choice {
            Choice::Spec(v) => predicted.map_or(0.0, |p| p * laws.margin(&family_key(v))),
            Choice::Dense(p) => {
                let (family, accesses) =
                    dense_law_key::<T>(gpu, walk.op, walk.panel, walk.beta, p)?;
                laws.get(&family)
                    .map_or(0.0, |l| l.predict(&accesses) * laws.margin(&family))
            }
        };
        if unrolled {
            first_unrolled = false;
        }
        let these = mm.kernels();
        admitted.push((mm.choice.name(), these.len(), predicted));
        kernels.extend(these);
    }
    if admitted.len() < 2 {
        return Ok(None);
    }
    let t = Instant::now();
    let each = gpu.compile_each(&kernels, threads);
    let wall_seconds = t.elapsed().as_secs_f64();
    let mut seconds = HashMap::new();
    let mut at = 0;
    for (name, n, predicted) in &admitted {
        // A kernel compiled before (by another candidate, or an earlier tuning) or failing here costs nothing
        // here; a failure is the serial walk's to report.
        let s: f64 = each[at..at + n]
            .iter()
            .filter_map(|r| r.as_ref().ok().copied().flatten())
            .sum();
        seconds.insert(name.clone(), (s, *predicted));
        at += n;
    }
    let kernel_seconds = seconds.values().map(|(s, _)| s).sum();
    Ok(Some(Precompiled {
        seconds,
        report: ParallelCompile {
            threads: threads.min(kernels.len()),
            candidates: admitted.len(),
            kernels: kernels.len(),
            wall_seconds,
            kernel_seconds,
        },
    }))
}
