//! The tuning budget's verdict on one candidate: what its compile is predicted to cost (the family's law,
//! probed on the operator's first rows when not known yet: compile_cost.rs) and whether that still fits the
//! budget. The tuner walks a candidate's [`Variant::cheaper_compile`] chain while the verdict is "over".

use std::time::Instant;

use bespoke_gpu::Gpu;

use super::compile_cost::{
    CompileLaws, PROBE_ACCESSES, TERMS_PER_ACCESS, family_key, launch_sizes, probe,
};
use super::matmul::{Choice, MatMul};
use super::operator::Operator;
use super::tuning::{DENSE_RETIME, SHORT_SCREEN_SECONDS};
use crate::dense::Element;
use crate::error::Result;

/// Seconds of one operator's tuning since `t0` that its budget bounds: all of them but the probing of compile
/// laws (a cost of the adapter, reported apart: [`CompileLaws::probe_family`]).
pub(crate) fn spent_on_tuning(t0: Instant, laws: &CompileLaws) -> f64 {
    t0.elapsed().as_secs_f64() - laws.probe_seconds()
}

/// What the budget says of one candidate.
pub(crate) enum Verdict {
    /// Compile it; `predicted` is the law's prediction before the margin, where the family has a law.
    Fits { predicted: Option<f64> },
    /// Skip it, for the reason in `status` (`skipped: …`).
    Over {
        predicted: Option<f64>,
        status: String,
    },
}

/// Where the tuning budget stands: its seconds (`None`: unbounded), when tuning began, whether no unrolled
/// candidate has been compiled yet, and whether the candidate is a link of another's cheaper-compile chain (a
/// link is compiled only on its law's word: no first-candidate or short-launch exemption).
#[derive(Clone, Copy)]
pub(crate) struct Budget {
    pub seconds: Option<f64>,
    pub since: Instant,
    pub first_unrolled: bool,
    pub link: bool,
}

/// The verdict on `mm` with what is left of `budget`. Only unrolled candidates are priced: rolled
/// kernels compile once whatever A is, and the dense kernel's tiling was chosen within its own share. With no
/// law (the operator's first rows could not be probed) the first unrolled candidate is tried; launches no
/// longer than the larger probe always are (they cost what probing would) — except links of a chain, which
/// need their law (a capped link has many short launches).
pub(crate) fn verdict<T: Element>(
    gpu: &Gpu,
    op: &Operator,
    beta: f64,
    mm: &MatMul<T>,
    budget: Budget,
    laws: &mut CompileLaws,
) -> Result<Verdict> {
    let Budget {
        seconds,
        since: t0,
        first_unrolled,
        link,
    } = budget;
    let (Some(budget), Choice::Spec(v)) = (seconds, mm.choice) else {
        return Ok(Verdict::Fits { predicted: None });
    };
    if !v.family.unrolled() {
        return Ok(Verdict::Fits { predicted: None });
    }
    let Some(k) = mm.spec_kernel() else {
        return Ok(Verdict::Fits { predicted: None });
    };
    let (terms, accesses, sizes) = (k.launch_terms(), k.launch_accesses(), launch_sizes(k));
    let family = family_key(v);
    let largest = terms.iter().copied().max().unwrap_or(0);
    let small = accesses.iter().all(|&a| a <= PROBE_ACCESSES[1]);
    let mut law = laws.get(&family);
    // A spent budget has no room for the candidate whatever its law says: the family waits for an operator
    // with room.
    if law.is_none() && (link || !small) && spent_on_tuning(t0, laws) < budget {
        // The probes are single launches shorter than any cap: the family's own variant, uncapped.
        law = laws.probe_family(&family, || probe::<T>(gpu, op, v.uncapped(), beta))?;
    }
    let spent = spent_on_tuning(t0, laws);
    let predicted = law.map(|l| l.predict(&sizes));
    let margin = laws.margin(&family);
    let over = match predicted {
        Some(p) => spent + margin * p > budget,
        None => link || !(small || first_unrolled),
    };
    if !over {
        return Ok(Verdict::Fits { predicted });
    }
    let how = match law {
        Some(l) => format!(
            "its compile would take about {:.1} s, ×{margin:.2} for this family's misses ({} launches of up to \
             {} loads and stores and {largest} terms; this family's law on this adapter: {:.3e}·size^{:.2} s per \
             launch up to size {}, size = accesses + terms/{})",
            predicted.unwrap_or(f64::NAN),
            accesses.len(),
            accesses.iter().max().unwrap_or(&0),
            l.a,
            l.p,
            l.reach,
            TERMS_PER_ACCESS
        ),
        None => format!(
            "its compile cost is unknown on this adapter ({} launches of up to {largest} terms; {}) and {}",
            terms.len(),
            if spent >= budget {
                "its family was not probed: the budget is spent"
            } else {
                "the operator's first rows could not be probed"
            },
            if link {
                "a cheaper-compile link is compiled only on its law's word"
            } else {
                "an unrolled kernel was already compiled"
            }
        ),
    };
    Ok(Verdict::Over {
        predicted,
        status: format!("skipped: {how}, past the {budget} s tuning budget ({spent:.1} s spent)"),
    })
}

/// A candidate whose first full run (after its compile, which a one-workgroup launch of each of its launches
/// takes: [`bespoke_gpu::Launch::one_group`]) took this many times the best screening run so far is not
/// screened: it could not be a finalist. A short first run holds first-run costs (bind group creation, caches
/// and TLBs cold: tens of ms at most), so the cut is far past the finalists' and dense's ratios (×2)…
pub(crate) const SCREEN_CUT: f64 = 4.0;

/// …but a run at least this long is its own measurement: those first-run costs are a few per cent of it, and one
/// run of a kernel of 1.2–8 s strayed at most ×1.23 from the next on lavapipe in a slow hour
/// (`examples/run_spread.rs`, docs/perf.md 2026-11-26). Such a first run is cut at [`LONG_SCREEN_CUT`], stands
/// as the candidate's screening run, and outside [`FINALIST_REACH`] of the best is not timed again.
pub(crate) const LONG_RUN_SECONDS: f64 = 0.5;

/// The screening cut for a long first run ([`LONG_RUN_SECONDS`]): ×2 the best has lost (on pyr-p6-m6 in a slow
/// hour rolled-r1's 5.4 s against rolled-r8's 1.0 s was screened, then timed again as a finalist: 16 s of the
/// operator's 33 s).
pub(crate) const LONG_SCREEN_CUT: f64 = 2.0;

/// A first run shorter than this is never cut: it may be mostly first-run costs (a 12×10 operator's cstream-v2
/// ran 1 ms first against a best of 0.18 ms), and screening it costs little.
pub(crate) const MIN_CUT_SECONDS: f64 = 0.1;

/// A candidate whose screening run is long ([`LONG_RUN_SECONDS`]) and more than this times the best screening
/// run is not a finalist (nor the dense kernel's baseline re-timed): its screening run stands as its time. Past
/// the ×1.23 one long run strayed from the next: a candidate left out by it is, at best, within that spread.
pub(crate) const FINALIST_REACH: f64 = 1.5;

/// `Some(status)` when a candidate's first full run (`first` s, its compile already done) lost the screening:
/// past `cut` × `best` (the best screening run so far; `None`: nothing to hold it against, and it is screened;
/// never under [`MIN_CUT_SECONDS`]):
/// [`SCREEN_CUT`] for any candidate, `DENSE_RETIME` for the dense kernel, screened after the others when its
/// first run is long; at most [`LONG_SCREEN_CUT`] for a long run. The compile is timed apart (a one-workgroup
/// launch first) rather than allowed for: a compile law is a fit to this host's compiles, not a bound, and
/// the VM's speed drifts — in a slow hour pyr-p3-m0's bstream-v2 compiled in ~0.9 s against 0.74 s allowed
/// (law × margin) and hex-p4-m132's in 12.7 s against 11.8, so their 10 and 77 ms kernels were read as runs
/// of 0.18 and 0.96 s and cut, and kernels ×3.2–4.5 slower were chosen (2026-11-26).
pub(crate) fn lost_on_first_run(first: f64, best: Option<f64>, cut: f64) -> Option<String> {
    let b = best?;
    if first < MIN_CUT_SECONDS {
        return None;
    }
    let cut = if first >= LONG_RUN_SECONDS {
        cut.min(LONG_SCREEN_CUT)
    } else {
        cut
    };
    (first > cut * b).then(|| {
        format!(
            "screened out: its first run (compiled apart) took {first:.3} s, past ×{cut} the best screening run \
             ({b:.4} s)"
        )
    })
}

/// `Some(status)` when the dense kernel, whose one run the dense model puts at `run` s, is not worth compiling:
/// that run is past `DENSE_RETIME` × `best` (the best screening run so far), or its compile (`compile`: its law's
/// prediction times the family's margin, where known) and that run pass `left` (what is left of the budget).
/// The model's time is a lower bound on the kernel's: its rate was within 1 % of the measured one or above it at
/// every one of the 1 933 points of its sweeps (predicted ÷ measured GFLOP/s ≥ 0.99, median 1.26;
/// docs/data/dense-sweeps-lavapipe-f32.json.gz), ×3.8 above it at 1024³ (docs/dense-model.md), and ×2.5–2.7 on
/// hex-p6-m132's panel (7.3 GFLOP/s predicted, 2.7–2.9 measured on 2026-11-25/26).
pub(crate) fn dense_lost_on_model(
    run: f64,
    best: Option<f64>,
    left: Option<f64>,
    compile: Option<f64>,
) -> Option<String> {
    if let Some(b) = best
        && run > DENSE_RETIME * b
    {
        return Some(format!(
            "skipped: the dense model puts one run at {run:.3} s (its rate is an upper bound), past \
             ×{DENSE_RETIME} the best screening run ({b:.4} s)"
        ));
    }
    match (left, compile) {
        (Some(l), Some(c)) if c + run > l => Some(format!(
            "skipped: its compile (about {c:.1} s with its family's margin) and one run ({run:.3} s by the \
             dense model) would pass what is left of the budget ({:.1} s)",
            l.max(0.0)
        )),
        _ => None,
    }
}

/// Whether a screened candidate (screening run `screen` s, the best `best`) is timed again as a finalist, by its
/// screening rank alone: a long run outside [`FINALIST_REACH`] of the best is a measurement that already lost.
pub(crate) fn within_reach(screen: f64, best: f64) -> bool {
    screen < LONG_RUN_SECONDS || screen <= FINALIST_REACH * best
}

/// Warm-up and timed runs for one finalist whose screening run took `screen` s, with `left` seconds of the
/// tuning budget (`None`: unbounded) for it and the `finalists_left − 1` after it: a warm-up and `reps` runs
/// where they fit or the kernel is short ([`SHORT_SCREEN_SECONDS`]: at most a few tens of ms), else as many as
/// fit, no warm-up (the kernel has run twice already) — at least one, except that a long screening run
/// ([`LONG_RUN_SECONDS`]) stands as the finalist's time when none fits: `(0, 0)`.
pub(crate) fn finalist_runs(
    left: Option<f64>,
    finalists_left: usize,
    screen: f64,
    reps: usize,
) -> (usize, usize) {
    let reps = reps.max(1);
    let Some(left) = left else { return (1, reps) };
    if screen < SHORT_SCREEN_SECONDS {
        return (1, reps);
    }
    let fit = (left.max(0.0) / (finalists_left.max(1) as f64 * screen)).floor() as usize;
    if fit > reps {
        (1, reps)
    } else if fit == 0 && screen >= LONG_RUN_SECONDS {
        (0, 0)
    } else {
        (0, fit.clamp(1, reps))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dtype::DType;
    use crate::specialise::compile_cost::Law;
    use crate::specialise::run::{Panel, SpecKernel};
    use crate::specialise::tuning::{DenseSource, TuneOptions};
    use crate::specialise::variant::Variant;

    /// The screening cut: a short first run past ×4 the best, a long one past ×2; never without a best to hold
    /// it against. hex-p6-m132 on a slow hour (Mesa 22.3.6, 2026-11-25): rolled runs of 0.85 s, rolled-r1 6.4 s;
    /// pyr-p6-m6: rolled-r8 screened at 1.0 s, rolled-r1's first run 5.5 s.
    #[test]
    fn a_first_run_is_cut_past_four_times_the_best_or_twice_when_long() {
        let s = lost_on_first_run(6.4, Some(0.85), SCREEN_CUT).unwrap();
        assert!(
            s.starts_with("screened out") && s.contains("0.8500 s") && s.contains("×2 the best"),
            "{s}"
        );
        let s = lost_on_first_run(5.5, Some(1.0), SCREEN_CUT).unwrap();
        assert!(s.contains("×2 the best"), "{s}");
        // A long run within ×2: screened.
        assert!(lost_on_first_run(1.9, Some(1.0), SCREEN_CUT).is_none());
        // A short run: the ×4 cut (first-run costs a short run holds).
        assert!(lost_on_first_run(0.39, Some(0.1), SCREEN_CUT).is_none());
        assert!(lost_on_first_run(0.41, Some(0.1), SCREEN_CUT).is_some());
        // pyr-p3-m0's bstream-v2, its compile timed apart: a 12 ms first run against a 39 ms best.
        assert!(lost_on_first_run(0.012, Some(0.039), SCREEN_CUT).is_none());
        // A first run under MIN_CUT_SECONDS may be mostly first-run costs: screened, however far past the best.
        assert!(lost_on_first_run(0.001, Some(0.000_18), SCREEN_CUT).is_none());
        assert!(lost_on_first_run(0.099, Some(0.001), SCREEN_CUT).is_none());
        assert!(lost_on_first_run(0.101, Some(0.001), SCREEN_CUT).is_some());
        // Nothing to hold it against.
        assert!(lost_on_first_run(20.0, None, SCREEN_CUT).is_none());
        // The dense kernel's own cut is already ×2; a long run does not loosen it.
        assert!(lost_on_first_run(3.1, Some(1.5), 2.0).is_some());
        assert!(lost_on_first_run(0.29, Some(0.1), 2.0).is_some());
    }

    /// The dense kernel, placed last when the model says its run is long, is skipped where the model's run (a
    /// lower bound) already lost ×2, or where its compile and that run pass what is left of the budget.
    #[test]
    fn a_long_dense_run_is_skipped_on_the_models_word() {
        // hex-p6-m132 on a slow hour: the model's 3.2 s against rolled-r8's 0.88 s.
        let s = dense_lost_on_model(3.2, Some(0.88), Some(20.0), Some(4.0)).unwrap();
        assert!(s.contains("×2 the best") && s.contains("3.200 s"), "{s}");
        // Within ×2: compiled, if it fits.
        assert!(dense_lost_on_model(1.5, Some(0.88), Some(20.0), Some(4.0)).is_none());
        let s = dense_lost_on_model(1.5, Some(0.88), Some(5.0), Some(4.0)).unwrap();
        assert!(s.contains("what is left of the budget"), "{s}");
        // Nothing screened yet, no budget, or no law: only what is known decides.
        assert!(dense_lost_on_model(9.0, None, None, Some(4.0)).is_none());
        assert!(dense_lost_on_model(9.0, None, Some(1.0), None).is_none());
        assert!(dense_lost_on_model(9.0, None, Some(1.0), Some(0.5)).is_some());
    }

    /// Finalists by screening rank: short runs always (their screening run is noisy), long ones within ×1.5 of
    /// the best (pyr-p6-m132 in a slow hour: rolled-r4 2.7 s against rolled-r8's 1.55 s is not timed again).
    #[test]
    fn long_screening_runs_outside_the_reach_are_not_timed_again() {
        assert!(within_reach(0.3, 0.01));
        assert!(within_reach(3.0, 2.1));
        assert!(!within_reach(2.7, 1.55));
        assert!(within_reach(1.0, 1.0));
    }

    /// Finalists' runs: a warm-up and all reps with no budget, for short kernels, or where they fit; else what
    /// fits of what is left, shared with the finalists after it, at least one run.
    #[test]
    fn finalists_run_within_what_is_left_of_the_budget() {
        assert_eq!(finalist_runs(None, 3, 5.0, 3), (1, 3));
        assert_eq!(finalist_runs(Some(-4.0), 3, 0.001, 3), (1, 3));
        assert_eq!(finalist_runs(Some(20.0), 2, 0.5, 3), (1, 3));
        // 6 s left for three finalists of 0.85 s: two runs each, no warm-up.
        assert_eq!(finalist_runs(Some(6.0), 3, 0.85, 3), (0, 2));
        assert_eq!(finalist_runs(Some(0.5), 3, 0.85, 3), (0, 0));
        assert_eq!(finalist_runs(Some(1.0), 1, 0.85, 3), (0, 1));
        // Nothing left: a long screening run stands as the finalist's time; a shorter one runs once.
        assert_eq!(finalist_runs(Some(-1.0), 1, 0.85, 3), (0, 0));
        assert_eq!(finalist_runs(Some(0.5), 3, 0.3, 3), (0, 1));
        assert_eq!(finalist_runs(Some(100.0), 1, 0.85, 0), (1, 1));
    }

    /// On the device: a bstream candidate priced past the budget gives way along its chain (vec2, vec1, then
    /// launches capped at 256 and 128 loads and stores) to the first link that fits; every link skipped is
    /// listed with its prediction, the capped kernel's launches respect the cap, and it computes C = A·B + C
    /// against the f64 CPU reference on fresh random B and C.
    #[test]
    fn an_over_budget_bstream_gives_way_to_a_cheaper_compile() {
        let Some(gpu) = bespoke_gpu::testing::test_gpu() else {
            return;
        };
        let seed = bespoke_gpu::testing::fresh_seed();
        // 160 rows of ~10 terms over 320 rows of B: every link's launches are longer than the larger probe.
        let op = crate::specialise::tests::random_operator(160, 320, 0.97, seed);
        let panel = Panel::packed(256);
        let v = |n: &str| Variant::parse(n).unwrap();
        let opts = TuneOptions {
            variants: Some(vec![v("bstream-v2")]),
            dense: DenseSource::Off,
            reps: 1,
            use_cache: false,
            budget_seconds: Some(30.0),
            ..Default::default()
        };
        let kernel =
            |name: &str| SpecKernel::new(gpu, &op, v(name), DType::F32, 1.0, panel).unwrap();
        let (k0, k256, k128) = (
            kernel("bstream"),
            kernel("bstream-a256"),
            kernel("bstream-a128"),
        );
        assert!(
            k128.launch_accesses().iter().all(|&a| a <= 128),
            "{:?}",
            k128.launch_accesses()
        );
        assert!(k128.launch_accesses().len() > k256.launch_accesses().len());
        // Laws for this process (no disk): vec2 far past the budget; vec1 steep (size^5), scaled so that its
        // 128-capped launches are predicted at 5 s with the margin, which leaves the longer ones past 30 s.
        let mut laws = CompileLaws::load(gpu, &opts);
        laws.record_probe(
            "bstream-v2",
            Law {
                a: 1.0,
                p: 1.0,
                reach: 0,
            },
        );
        let unit = Law {
            a: 1.0,
            p: 5.0,
            reach: 0,
        };
        let margin = laws.margin("bstream");
        let a = 5.0 / (margin * unit.predict(&launch_sizes(&k128)));
        let law = Law { a, ..unit };
        for k in [&k0, &k256] {
            assert!(
                margin * law.predict(&launch_sizes(k)) > 30.0,
                "{:?}",
                k.launch_accesses()
            );
        }
        laws.record_probe("bstream", law);
        let mm = MatMul::<f32>::tuned(gpu, &op, 1.0, panel, &opts).unwrap();
        let c = &mm.report.candidates;
        assert_eq!(mm.choice.name(), "bstream-a128", "{c:?}");
        for name in ["bstream-v2", "bstream", "bstream-a256"] {
            let s = c
                .iter()
                .find(|x| x.name == name)
                .unwrap_or_else(|| panic!("{name}: {c:?}"));
            assert!(
                s.status.contains("would take about") && s.predicted_compile_seconds.is_some(),
                "{s:?}"
            );
        }
        let k = mm.spec_kernel().unwrap();
        assert!(
            k.launch_accesses().iter().all(|&a| a <= 128),
            "{:?}",
            k.launch_accesses()
        );
        // The product: C = A·B + C against the CPU.
        let err = crate::specialise::tests::device_error(gpu, &op, &mm, seed ^ 2);
        assert!(err <= 1e-5, "{err}");
    }
}
