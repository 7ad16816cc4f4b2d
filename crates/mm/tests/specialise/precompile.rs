//! The tuner's candidates compiled at once on several workers (`TuneOptions::compile_threads`; on a GPU every
//! core by default): the same candidates compiled and timed as one by one, nothing compiled at once that the
//! budget would not admit one after another (a refused pipeline: tune.rs).

use super::*;
use bespoke_mm::specialise::{MatMul, ParallelCompile, TuneOptions};

fn options(variants: &[&str], threads: usize, budget: Option<f64>) -> TuneOptions {
    TuneOptions {
        budget_seconds: budget,
        compile_threads: Some(threads),
        ..fixed_options(variants, 1)
    }
}

/// What the tuning compiled at once, or a panic listing its candidates.
fn compiled_at_once(mm: &MatMul<f32>) -> ParallelCompile {
    mm.report
        .parallel_compile
        .clone()
        .unwrap_or_else(|| panic!("nothing compiled at once: {:?}", mm.report.candidates))
}

#[test]
fn candidates_compiled_at_once_are_the_ones_the_budget_admits_and_timed_as_before() {
    let Some(shared) = test_gpu() else { return };
    // A device of its own, held as a GPU: the compile laws this test probes are kept per adapter (and its
    // emulation) for the process, and the budget test beside it counts on finding none for these families.
    let gpu = &emulating(
        shared,
        GpuOptions {
            adapter_class: Some(AdapterClass::Gpu),
            ..Default::default()
        },
    );
    let mut r = rng();
    let panel = Panel::packed(512);
    let variants = ["cstream-v2", "bstream-v2", "rolled-r4"];
    // Sparse rows over a long K: every unrolled launch spells out more than the probes' 128 loads and stores,
    // so each family's law is probed and prices it.
    let long = random_operator(&mut r, 32, 300, 0.96);
    // An ample budget on two workers: every candidate compiled at once, its workers' seconds part of its
    // compile, timed and screened as one by one; the choice right.
    let mm =
        MatMul::<f32>::tuned(gpu, &long, 0.0, panel, &options(&variants, 2, Some(1e6))).unwrap();
    let c = &mm.report.candidates;
    let at_once = compiled_at_once(&mm);
    assert_eq!((at_once.threads, at_once.candidates), (2, 4), "{at_once:?}");
    assert!(
        at_once.kernels >= 4 && at_once.wall_seconds > 0.0,
        "{at_once:?}"
    );
    for cand in c {
        let (Some(all), Some(pre)) = (cand.compile_seconds, cand.precompiled_seconds) else {
            panic!("{cand:?} was not compiled at once: {c:?}");
        };
        assert!(pre >= 0.0 && all >= pre, "{cand:?}");
        assert!(
            cand.seconds.is_some() || cand.status.contains("first run"),
            "{cand:?}"
        );
    }
    assert!(check_matmul(gpu, &mut r, &long, &mm) <= 1e-5);

    // No budget left, the laws known from the run above: the unrolled candidates are past it, and only what
    // the budget always tries (the dense and rolled kernels) is compiled at once; the skipped ones not at all.
    let long2 = random_operator(&mut r, 32, 300, 0.96);
    let mm =
        MatMul::<f32>::tuned(gpu, &long2, 0.0, panel, &options(&variants, 2, Some(0.0))).unwrap();
    let c = &mm.report.candidates;
    let at_once = compiled_at_once(&mm);
    assert_eq!(at_once.candidates, 2, "{at_once:?} {c:?}");
    for cand in c {
        let always = cand.name.starts_with("dense") || cand.name == "rolled-r4";
        if always {
            assert!(cand.precompiled_seconds.is_some(), "{cand:?}");
        } else {
            assert!(
                cand.compile_seconds.is_none() && cand.precompiled_seconds.is_none(),
                "{cand:?}"
            );
            assert!(cand.status.contains("tuning budget"), "{cand:?}");
        }
    }
    assert!(check_matmul(gpu, &mut r, &long2, &mm) <= 1e-5);

    // One worker: one by one, as before.
    let mm = MatMul::<f32>::tuned(gpu, &long2, 0.0, panel, &options(&variants, 1, None)).unwrap();
    assert!(mm.report.parallel_compile.is_none());
    assert!(
        mm.report
            .candidates
            .iter()
            .all(|c| c.precompiled_seconds.is_none())
    );
}
