//! The dense baseline's tiling within the tuning budget.
//!
//! The dense kernel's source depends on its tiling, not on A, and its compile grows with the loads and stores the
//! register tile spells out ([`DenseParams::spelled_accesses`]): lavapipe on Mesa 25.0.7 compiled 74, 140 and 268
//! of them in 2.3, 8.5 and 29.5 s whatever the tiling and β, Mesa 22.3.6 in 0.6, 1.5 and 3.2 s (docs/perf.md).
//! The analytical model picks tilings by run time alone, so on Mesa 25.0.7 its 16×32 pick with β = 1 spent the
//! whole 30 s budget of an operator before any specialised candidate compiled. The tuner therefore predicts the
//! pick's compile with the same kind of law as the unrolled families (`seconds = a · accesses^p`, one law per
//! element type and vector width, probed on two tilings of the operator's own space at 64 and 128 accesses,
//! raised by real compiles, cached on disk), and when the prediction passes [`DENSE_BUDGET_SHARE`] of the budget
//! it takes the model's best tiling whose prediction fits. Picks of up to 128 accesses compile without a law:
//! they cost what probing would.

use std::time::Instant;

use bespoke_gpu::Gpu;

use super::compile_cost::{CompileLaws, Law, PROBE_ACCESSES};
use super::matmul::dense_shape;
use super::operator::Operator;
use super::run::Panel;
use super::tuning::Candidate;
use crate::dense::bench::fill;
use crate::dense::microbench::Op;
use crate::dense::{DenseGemm, DenseParams, Element, GemmShape, Machine, TileLimits};
use crate::dtype::DType;
use crate::error::Result;

/// The part of one operator's tuning budget the dense baseline's compile may take: the rest is the specialised
/// candidates'.
pub(crate) const DENSE_BUDGET_SHARE: f64 = 1.0 / 3.0;

/// The compile law's key for dense kernels of `dtype` with `vec`-wide B and C accesses.
pub(crate) fn dense_family(dtype: DType, vec: u32) -> String {
    format!("dense-{dtype}-v{vec}")
}

/// The model's dense tiling for `op`'s product with `panel`, within the tuning budget when there is one, and, when
/// the model's own pick was set aside, the candidate entry that says why.
pub(crate) fn model_dense_within<T: Element>(
    gpu: &Gpu,
    op: &Operator,
    panel: Panel,
    beta: f64,
    laws: &mut CompileLaws,
    budget: Option<f64>,
) -> Result<(DenseParams, Option<Candidate>)> {
    let (machine, _) = Machine::load_or_measure(gpu, Op::Fma(T::DTYPE), false)?;
    dense_within::<T>(gpu, &machine, op, panel, beta, laws, budget)
}

/// [`model_dense_within`] with the model's inputs given.
pub(crate) fn dense_within<T: Element>(
    gpu: &Gpu,
    machine: &Machine,
    op: &Operator,
    panel: Panel,
    beta: f64,
    laws: &mut CompileLaws,
    budget: Option<f64>,
) -> Result<(DenseParams, Option<Candidate>)> {
    let shape = dense_shape(op, panel);
    shape.check()?;
    let reads_c = beta != 0.0;
    let size = T::DTYPE.size();
    // The shape's space, best predicted run time first.
    let mut ranked: Vec<(DenseParams, f64)> = machine
        .shape_space(T::DTYPE, &TileLimits::of(gpu), &shape)
        .into_iter()
        .map(|p| (p, machine.predict(&p, size, &shape, reads_c).seconds))
        .collect();
    ranked.sort_by(|a, b| a.1.total_cmp(&b.1));
    let ranked: Vec<DenseParams> = ranked.into_iter().map(|(p, _)| p).collect();
    // The model's pick (an empty space is the model's error to report).
    let pick = match ranked.first() {
        Some(p) => *p,
        None => {
            return Ok((
                machine
                    .pick(T::DTYPE, &TileLimits::of(gpu), &shape, reads_c)?
                    .0,
                None,
            ));
        }
    };
    let Some(budget) = budget else {
        return Ok((pick, None));
    };
    let k_blocked = k_blocked::<T>(gpu, &shape)?;
    let accesses = pick.compiled_accesses(beta, k_blocked);
    if accesses.iter().all(|&a| a <= PROBE_ACCESSES[1]) {
        return Ok((pick, None));
    }
    let family = dense_family(T::DTYPE, pick.vec);
    let law = match laws.get(&family) {
        Some(l) => Some(l),
        None => laws.probe_family(&family, || probe_dense::<T>(gpu, &ranked, pick.vec, beta))?,
    };
    // No law (the space had no two tilings far enough apart to fit one): the model's pick, unbounded.
    let Some(law) = law else {
        return Ok((pick, None));
    };
    // The share is held against the law's prediction times the family's margin (compile_cost.rs).
    let margin = laws.margin(&family);
    let share = DENSE_BUDGET_SHARE * budget / margin;
    let chosen = within_share(
        &ranked,
        |p| p.compiled_accesses(beta, k_blocked),
        &law,
        share,
    )
    .unwrap_or(pick);
    if chosen == pick {
        return Ok((pick, None));
    }
    let predicted = law.predict(&accesses);
    let kernels = match accesses.as_slice() {
        [one] => format!("{one} loads and stores"),
        more => format!(
            "kernels of {} loads and stores (K in blocks: the later ones accumulate with β = 1)",
            more.iter()
                .map(|a| a.to_string())
                .collect::<Vec<_>>()
                .join(" and ")
        ),
    };
    let note = Candidate::skipped(
        format!("dense:{}", pick.key()),
        Some(predicted),
        format!(
            "skipped: its compile would take about {predicted:.1} s, ×{margin:.2} for this family's misses \
             ({kernels}; the dense law on this adapter: {:.3e}·accesses^{:.2} s up to {} accesses), past {:.0} % of \
             the {budget} s tuning budget; the model's best within it, dense:{}, stands in",
            law.a,
            law.p,
            law.reach,
            DENSE_BUDGET_SHARE * 100.0,
            chosen.key()
        ),
    );
    Ok((chosen, Some(note)))
}

/// The first of `ranked` (best first) whose compile `law` predicts within `share` seconds, or, when none is, the
/// one with the fewest loads and stores (the cheapest to compile; the earliest of those); `None` for an empty list.
/// `accesses`: those of each distinct kernel a tiling compiles ([`DenseParams::compiled_accesses`]).
pub(crate) fn within_share(
    ranked: &[DenseParams],
    accesses: impl Fn(&DenseParams) -> Vec<usize>,
    law: &Law,
    share: f64,
) -> Option<DenseParams> {
    let cost = |p: &DenseParams| law.predict(&accesses(p));
    ranked
        .iter()
        .find(|p| cost(p) <= share)
        .or_else(|| {
            ranked
                .iter()
                .min_by_key(|p| accesses(p).iter().sum::<usize>())
        })
        .copied()
}

/// Whether the product binds B in several K blocks (past the binding limit), so that the blocks after the first
/// accumulate with a β = 1 kernel of their own.
pub(crate) fn k_blocked<T: Element>(gpu: &Gpu, shape: &GemmShape) -> Result<bool> {
    Ok(gpu.row_blocks::<T>(shape.k, &[shape.ldb], &[1])?.len() > 1)
}

/// The law of `vec`-wide dense kernels, from compiling two tilings of `ranked` (best first; one K pass only), for
/// each probe size the best-ranked of those with at most 1.25× the fewest loads and stores past it, on a
/// one-workgroup shape. With the operator's own β, so a probe tiling the budget then settles on is already
/// compiled. `None` when the space has no two such tilings far
/// enough apart; else (accesses, seconds) of each, for `CompileLaws::record_probes`.
fn probe_dense<T: Element>(
    gpu: &Gpu,
    ranked: &[DenseParams],
    vec: u32,
    beta: f64,
) -> Result<Option<[(usize, f64); 2]>> {
    let reads_c = beta != 0.0;
    let mut points = Vec::new();
    for target in PROBE_ACCESSES {
        let past: Vec<&DenseParams> = ranked
            .iter()
            .filter(|p| p.vec == vec && p.split_k == 1 && p.spelled_accesses(reads_c) >= target)
            .collect();
        let Some(fewest) = past.iter().map(|p| p.spelled_accesses(reads_c)).min() else {
            return Ok(None);
        };
        // The best-ranked of those about as short as the shortest: the tiling the budget most likely settles on.
        let Some(p) = past
            .into_iter()
            .find(|p| 4 * p.spelled_accesses(reads_c) <= 5 * fewest)
        else {
            return Ok(None);
        };
        let (m, n, k) = (p.bm() as usize, p.bn() as usize, 4 * p.kc as usize);
        let g = DenseGemm::new(GemmShape::packed(m, n, k), T::DTYPE, *p, 1.0, beta)?;
        let a = gpu.upload(&fill::<T>(m * k, 7))?;
        let b = gpu.upload(&fill::<T>(k * n, 8))?;
        let c = gpu.upload(&fill::<T>(m * n, 9))?;
        let t = Instant::now();
        let plan = g.plan(gpu, &a, &b, &c)?;
        gpu.run(&plan.launches())?;
        let first = t.elapsed().as_secs_f64();
        let warm = gpu.time(&plan.launches(), 0, 1)?.median();
        points.push((p.spelled_accesses(reads_c), (first - warm).max(0.0)));
    }
    Ok(Some([points[0], points[1]]))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(key: &str) -> DenseParams {
        DenseParams::parse(key).unwrap()
    }

    #[test]
    fn the_best_ranked_tiling_within_the_share_stands_in() {
        // Mesa 25.0.7's law through its 74- and 140-access compiles (2.3 s, 8.5 s): p ≈ 2.
        let law = Law::fit((74, 2.3), (140, 8.5)).unwrap();
        let big = p("t16x32v4-w4x16-k4-s1"); // 268 accesses with β ≠ 0: ~31 s
        let mid = p("t8x32v4-w4x32-k4-s1"); // 138: ~8.3 s
        let small = p("t4x32v4-w8x32-k4-s1"); // 73: ~2.3 s
        let ranked = [big, mid, small];
        let one = |reads_c: bool| move |p: &DenseParams| vec![p.spelled_accesses(reads_c)];
        // Past its largest compile (140) the law grows as size^2.5, above the 29.5 s the 268-access one took.
        assert!(
            law.predict(&[268]) > 29.5 && law.predict(&[268]) < 50.0,
            "{law:?}"
        );
        // Within 10 s (a third of 30 s): the next best.
        assert_eq!(within_share(&ranked, one(true), &law, 10.0), Some(mid));
        // β = 0 halves the epilogue: the pick (140 accesses) fits.
        assert_eq!(within_share(&ranked, one(false), &law, 10.0), Some(big));
        // Nothing fits: the cheapest to compile.
        assert_eq!(within_share(&ranked, one(true), &law, 0.0), Some(small));
        // Everything fits: the model's pick.
        assert_eq!(within_share(&ranked, one(true), &law, 1e9), Some(big));
        assert_eq!(within_share(&[], one(true), &law, 1e9), None);
        // K in blocks at β = 0: the β = 1 kernel of the later blocks counts too (140 + 268 accesses).
        let blocked = |p: &DenseParams| p.compiled_accesses(0.0, true);
        assert_eq!(within_share(&ranked, blocked, &law, 10.0), Some(small));
    }

    /// A CPU-adapter-like model: FMA rate flat in accumulators up to the end of the curve and workgroup memory
    /// slow, so the model wants the largest register tiles (as it does on lavapipe).
    fn cpu_like() -> Machine {
        Machine {
            version: crate::dense::model::MACHINE_VERSION,
            adapter: "model".into(),
            dtype: "f32".into(),
            fma_by_accumulators: [1u32, 4, 16, 64, 256, 1024]
                .into_iter()
                .map(|a| (a, 50.0))
                .collect(),
            fma_by_accumulators_at: Vec::new(),
            fma_latency_ns: 2.0,
            fma_by_groups: [32u32, 64, 128, 256]
                .into_iter()
                .flat_map(|t| [(t, 1u64, 25.0), (t, 64, 50.0)])
                .collect(),
            smem_scalar_gwords: 2.0,
            smem_vec4_gwords: 4.0,
            smem_scalar_paired_gwords: 2.0,
            smem_vec4_paired_gwords: 4.0,
            copy_gbps: 10.0,
            launch_us: 20.0,
            overlap_penalty: 1.0,
            barrier_ns: 0.0,
        }
    }

    /// On the device: the model's pick stands without a budget; a law that prices it past the dense share sets it
    /// aside, names it and its prediction, and the stand-in is the best-ranked tiling within the share, which
    /// computes the right product; with no law known, two tilings are compiled to fit one, and it is kept.
    #[test]
    fn the_dense_baseline_is_chosen_within_its_share_on_the_device() {
        use crate::specialise::matmul::{Choice, MatMul};
        use crate::specialise::tuning::TuneOptions;
        let Some(gpu) = bespoke_gpu::testing::test_gpu() else {
            return;
        };
        let op = crate::specialise::tests::random_operator(
            64,
            96,
            0.0,
            bespoke_gpu::testing::fresh_seed(),
        );
        let panel = Panel::packed(4096);
        let machine = cpu_like();
        let opts = TuneOptions {
            use_cache: false,
            ..Default::default()
        };
        let mut laws = CompileLaws::load(gpu, &opts);
        let (pick, none) =
            dense_within::<f32>(gpu, &machine, &op, panel, 1.0, &mut laws, None).unwrap();
        assert!(none.is_none());
        assert!(
            pick.spelled_accesses(true) > PROBE_ACCESSES[1],
            "the test needs a pick past the probe sizes: {}",
            pick.key()
        );
        // A preset law (0.0625 s per access) times the margin of a law no real compile has checked yet (the
        // cap, 2): of the 10 s share of 30 s, 80 accesses fit.
        let family = dense_family(DType::F32, pick.vec);
        let law = Law {
            a: 0.0625,
            p: 1.0,
            reach: 0,
        };
        laws.record_probe(&family, law);
        let fit = (10.0 / (0.0625 * laws.margin(&family))) as usize;
        assert_eq!(fit, 80);
        let (chosen, note) =
            dense_within::<f32>(gpu, &machine, &op, panel, 1.0, &mut laws, Some(30.0)).unwrap();
        assert!(chosen.spelled_accesses(true) <= fit, "{}", chosen.key());
        let note = note.unwrap();
        assert_eq!(note.name, format!("dense:{}", pick.key()));
        assert!(
            note.status.contains("would take about") && note.status.contains(&chosen.key()),
            "{}",
            note.status
        );
        // The stand-in is the best the model ranks within the share.
        let shape = dense_shape(&op, panel);
        let t = |p: &DenseParams| machine.predict(p, 4, &shape, true).seconds;
        for p in machine.shape_space(DType::F32, &TileLimits::of(gpu), &shape) {
            if p.spelled_accesses(true) <= fit {
                assert!(
                    t(&chosen) <= t(&p),
                    "{} ranks above {}",
                    p.key(),
                    chosen.key()
                );
            }
        }
        // It computes the product: C = A·B + C (β = 1: C is read, so random rather than poisoned) against the
        // f64 CPU reference on fresh random B and C.
        let mm = MatMul::<f32>::with_choice(gpu, &op, 1.0, panel, Choice::Dense(chosen)).unwrap();
        let err = crate::specialise::tests::device_error(
            gpu,
            &op,
            &mm,
            bespoke_gpu::testing::fresh_seed(),
        );
        assert!(err <= 1e-5, "{err}");
        // No law known: two tilings are compiled, a law is fitted and kept for the family.
        let mut fresh = CompileLaws::empty(gpu);
        let _ = dense_within::<f32>(gpu, &machine, &op, panel, 1.0, &mut fresh, Some(1e9)).unwrap();
        assert!(fresh.get(&family).is_some(), "no law was probed");
    }

    #[test]
    fn dense_laws_are_keyed_by_element_and_width() {
        assert_ne!(dense_family(DType::F32, 4), dense_family(DType::F64, 4));
        assert_ne!(dense_family(DType::F32, 4), dense_family(DType::F32, 1));
        // Never a specialised family's key.
        assert!(dense_family(DType::F32, 4).starts_with("dense-"));
    }
}
