//! The tuning budget's verdict on one candidate: what its compile is predicted to cost (the family's law,
//! probed on the operator's first rows when not known yet: compile_cost.rs) and whether that still fits the
//! budget. The tuner walks a candidate's [`Variant::cheaper_compile`] chain while the verdict is "over".

use std::time::Instant;

use bespoke_gpu::Gpu;

use super::compile_cost::{
    CompileLaws, PROBE_ACCESSES, TERMS_PER_ACCESS, family_key, launch_sizes, probe,
};
use super::matmul::{Choice, MatMul, SHORT_SCREEN_SECONDS};
use super::operator::Operator;
use crate::dense::Element;
use crate::error::Result;

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
    // A spent budget is not spent further on probing.
    if law.is_none()
        && (link || !small)
        && t0.elapsed().as_secs_f64() < budget
        // The probes are single launches shorter than any cap: the family's own variant, uncapped.
        && let Some(probes) = probe::<T>(gpu, op, v.uncapped(), beta)?
    {
        law = laws.record_probes(&family, probes);
    }
    let spent = t0.elapsed().as_secs_f64();
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

/// What a rolled candidate's compile may cost: rolled kernels do not grow with A (at most 0.69 s in 5400 compiles
/// of the whole suite on both drivers, 2026-11-25), so a first run past this plus its cut is its run's.
pub(crate) const ROLLED_COMPILE_ALLOWANCE: f64 = 2.0;

/// A candidate whose first run (compile included), less its compile allowance, took this many times the best
/// screening run so far is not screened: it could not be a finalist. Its first run is an upper bound on one run,
/// not a measurement of it, so the cut is far past the finalists' and dense's ratios (×2).
pub(crate) const SCREEN_CUT: f64 = 4.0;

/// `Some(status)` when a candidate's first run already lost the screening: `first` seconds, compile included,
/// less `allowance` (what its compile may have cost: its law's prediction times the family's margin; `None`
/// when unknown, and then it is screened) past `cut` × `best` (the best screening run so far): [`SCREEN_CUT`]
/// for any candidate, `DENSE_RETIME` for the dense kernel, screened after the others when its first run is long.
pub(crate) fn lost_on_first_run(
    first: f64,
    allowance: Option<f64>,
    best: Option<f64>,
    cut: f64,
) -> Option<String> {
    let (a, b) = (allowance?, best?);
    (first - a > cut * b).then(|| {
        format!(
            "screened out: its first run took {first:.3} s with its compile (allowed {a:.3} s), past \
             ×{cut} the best screening run ({b:.4} s)"
        )
    })
}

/// Warm-up and timed runs for one finalist whose screening run took `screen` s, with `left` seconds of the
/// tuning budget (`None`: unbounded) for it and the `finalists_left − 1` after it: a warm-up and `reps` runs
/// where they fit or the kernel is short ([`SHORT_SCREEN_SECONDS`]: at most a few tens of ms), else as many as
/// fit, at least one, no warm-up (the kernel has run twice already).
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
    } else {
        (0, fit.clamp(1, reps))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dtype::DType;
    use crate::spec::compile_cost::Law;
    use crate::spec::matmul::{DenseSource, TuneOptions};
    use crate::spec::run::{Panel, SpecKernel};
    use crate::spec::variant::Variant;

    /// The screening cut: only a first run that, less the most its compile may have cost, is past ×4 the best;
    /// never without an allowance or a best to hold it against.
    #[test]
    fn a_first_run_is_cut_only_past_its_compile_allowance_and_four_times_the_best() {
        // hex-p6-m132 on a slow hour (Mesa 22.3.6, 2026-11-25): rolled runs of 0.85 s, rolled-r1 6.4 s.
        assert!(
            lost_on_first_run(6.6, Some(ROLLED_COMPILE_ALLOWANCE), Some(0.85), SCREEN_CUT)
                .is_some()
        );
        let s = lost_on_first_run(6.6, Some(2.0), Some(0.85), SCREEN_CUT).unwrap();
        assert!(
            s.starts_with("screened out") && s.contains("0.8500 s"),
            "{s}"
        );
        // Within ×4 once the compile is allowed for: screened.
        assert!(lost_on_first_run(5.3, Some(2.0), Some(0.85), SCREEN_CUT).is_none());
        // A long compile the law foresaw is not read as a slow run.
        assert!(lost_on_first_run(20.0, Some(19.0), Some(0.5), SCREEN_CUT).is_none());
        assert!(lost_on_first_run(20.0, None, Some(0.001), SCREEN_CUT).is_none());
        assert!(lost_on_first_run(20.0, Some(0.0), None, SCREEN_CUT).is_none());
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
        assert_eq!(finalist_runs(Some(0.5), 3, 0.85, 3), (0, 1));
        assert_eq!(finalist_runs(Some(-1.0), 1, 0.85, 3), (0, 1));
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
        let op = crate::spec::tests::random_operator(160, 320, 0.97, seed);
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
        let err = crate::spec::tests::device_error(gpu, &op, &mm, seed ^ 2);
        assert!(err <= 1e-5, "{err}");
    }
}
