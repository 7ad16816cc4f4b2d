//! The model's pick checked on the device (`dense::choose`): the shortlist (one configuration per register-tile
//! shape, in the model's order) replayed on a real GPU's screened sweep, and the checked pick on the test adapter
//! (the fastest shortlisted sample, cached, and a correct GEMM).

#![allow(clippy::unwrap_used)] // a failed unwrap is a failed test

use std::collections::{HashMap, HashSet};

use bespoke_gpu::testing::{emulating, fresh_seed, test_gpu};
use bespoke_gpu::{AdapterClass, DiskCache, Gpu, GpuOptions};
use bespoke_mm::DType;
use bespoke_mm::dense::choose::{
    SHORTLIST, check_list, checked_pick_in, shortlist, unrolled_twins,
};
use bespoke_mm::dense::{DenseParams, GemmShape, Lanes, Machine, TileLimits};
use bespoke_mm::reference::{gemm_ref, rel_err};
use rand::{Rng, SeedableRng, rngs::StdRng};

const DATA: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/h200");

/// The H200's measured model inputs (f32, machine version 9) and its screened 4096³ sweep: each configuration's
/// GFLOP/s on its sample block of C (2026-11-27, docs/perf.md). Every kernel then laid its lanes in rows (the
/// sweep's keys are read as `-r` keys), and the paired rates were not measured: taken as the others, they lay the
/// model's space in rows and price it as the model did then.
fn h200() -> (Machine, HashMap<String, f64>) {
    let mut machine: Machine = serde_json::from_str(
        &std::fs::read_to_string(format!("{DATA}/dense-machine-f32.json")).unwrap(),
    )
    .unwrap();
    machine.smem_scalar_paired_gwords = machine.smem_scalar_gwords;
    machine.smem_vec4_paired_gwords = machine.smem_vec4_gwords;
    let samples = std::fs::read_to_string(format!("{DATA}/dense-sweep-f32-4096.csv"))
        .unwrap()
        .lines()
        .filter(|l| !l.starts_with('#'))
        .map(|l| {
            let f: Vec<&str> = l.split(',').collect();
            let rows = DenseParams::parse(f[0]).unwrap().in_rows();
            (rows.key(), f[3].parse::<f64>().unwrap())
        })
        .collect();
    (machine, samples)
}

/// The H200's tile limits (Vulkan, driver 580.159.04).
fn h200_limits() -> TileLimits {
    TileLimits {
        max_invocations: 1024,
        max_wg_x: 1024,
        max_wg_y: 1024,
        shared_bytes: 49152,
    }
}

/// On the H200's own inputs the model's pick (t8x8) sampled at 0.86 of the best of 1718 configurations; the
/// shortlist holds the best itself (0.94 of it until the register bound of 2026-12-03 left out the 1024-invocation
/// t4x16 that had stood for its shape at 3.9 TFLOP/s), one configuration per register-tile shape, the model's pick
/// first.
#[test]
fn on_the_h200s_inputs_the_shortlist_holds_a_tile_within_ten_percent_of_its_best() {
    let (machine, samples) = h200();
    let limits = h200_limits();
    let shape = GemmShape::packed(4096, 4096, 4096);
    let space = machine.shape_space(DType::F32, &limits, &shape);
    // The space the sweep screened (the inputs and limits are the card's), in the sweep's layout, less the tiles
    // the register bound leaves out since 2026-12-03 (a curve measured at a smaller workgroup bounds a larger
    // one): 1024-invocation tiles past 64 registers, none of which ran within 0.7 of the best, and the two that
    // the model had ranked near its top (t8x8, t4x16: predicted ~45 TFLOP/s) at under 0.15 of it.
    assert!(space.iter().all(|p| p.lanes == Lanes::Rows));
    assert!(space.iter().all(|p| samples.contains_key(&p.key())));
    let best = samples.values().copied().fold(0.0, f64::max);
    let left_out: Vec<(&String, f64)> = samples
        .iter()
        .filter(|(k, _)| !space.iter().any(|p| &p.key() == *k))
        .map(|(k, g)| (k, *g))
        .collect();
    eprintln!(
        "{} of {} sampled configurations left out",
        left_out.len(),
        samples.len()
    );
    assert!(!left_out.is_empty() && left_out.len() < 60);
    for (key, gflops) in &left_out {
        let p = DenseParams::parse(key).unwrap();
        assert_eq!(p.threads(), 1024, "{key}");
        assert!(p.tm * p.tn + p.operand_registers() > 64, "{key}");
        assert!(*gflops < 0.7 * best, "{key}: {gflops} of {best}");
    }
    for spilled in ["t8x8v4-w32x32-k8-s1-b2-r", "t4x16v4-w32x32-k8-s1-b2-r"] {
        assert!(samples[spilled] < 0.15 * best && !space.iter().any(|p| p.key() == spilled));
    }
    let list = shortlist(&machine, &space, 4, &shape, false, SHORTLIST);
    assert_eq!(list.len(), SHORTLIST);
    let (pick, _) = machine.pick_in(&space, 4, &shape, false).unwrap();
    assert_eq!(list[0], pick);
    let shapes: HashSet<(u32, u32)> = list.iter().map(|p| (p.tm, p.tn)).collect();
    assert_eq!(shapes.len(), list.len(), "one configuration per tile shape");
    let sampled = |p: &DenseParams| samples[&p.key()];
    let checked = list.iter().map(sampled).fold(0.0, f64::max);
    eprintln!(
        "model's pick {} at {:.3} of the best sample, shortlist's best at {:.3}",
        pick.key(),
        sampled(&pick) / best,
        checked / best
    );
    assert!(checked >= 0.99 * best, "{checked} of {best}");
}

/// What the check times: the shortlist, each split-in-K entry followed by its unsplit twin (the model credits
/// split-K with occupancy it did not buy on lavapipe), nothing twice.
#[test]
fn the_check_times_each_split_entrys_unsplit_twin() {
    let (machine, _) = h200();
    let limits = h200_limits();
    // Short and deep: one K pass cannot fill the card, so the model splits.
    let shape = GemmShape::packed(256, 256, 65536);
    let space = machine.shape_space(DType::F32, &limits, &shape);
    let short = shortlist(&machine, &space, 4, &shape, false, SHORTLIST);
    assert!(
        short.iter().any(|p| p.split_k > 1),
        "nothing split: {short:?}"
    );
    let list = check_list(&machine, &space, 4, &shape, false, false);
    let mut seen = HashSet::new();
    assert!(list.iter().all(|p| seen.insert(p.key())), "twice: {list:?}");
    let mut at = 0;
    for p in &short {
        assert_eq!(list[at], *p, "the shortlist in its order");
        at += 1;
        if p.split_k > 1 {
            let twin = DenseParams { split_k: 1, ..*p };
            if space.contains(&twin) && !list[..at].contains(&twin) {
                assert_eq!(list[at], twin, "{}'s unsplit twin next", p.key());
                at += 1;
            }
        }
    }
    assert_eq!(at, list.len());
    assert!(list.len() > short.len());
    // On a GPU each of them is followed by its unrolled twin.
    let with_twins = check_list(&machine, &space, 4, &shape, false, true);
    let expected: Vec<DenseParams> = list.iter().flat_map(|p| [*p, p.unrolled()]).collect();
    assert_eq!(with_twins, expected);
}

/// On the test adapter: the checked pick is the faster of the shortlist's two fastest samples timed again, a second
/// call takes it from the cache, and the GEMM it plans matches the reference on random inputs.
#[test]
fn the_checked_pick_is_the_faster_of_the_two_fastest_cached_and_correct() {
    let Some(gpu) = test_gpu() else { return };
    let machine = hand_made_machine();
    let shape = GemmShape::packed(96, 160, 72);
    let dir = tempfile::tempdir().unwrap();
    let cache = DiskCache::at(dir.path(), "dense-pick", 1);
    let first = checked_pick_in(gpu, &machine, DType::F32, &shape, false, Some(&cache)).unwrap();
    assert!(!first.cached);
    // At most the shortlist and one unsplit twin per entry, each with its unrolled twin on a GPU.
    let per_entry = if unrolled_twins(gpu) { 4 } else { 2 };
    assert!(!first.timed.is_empty() && first.timed.len() <= per_entry * SHORTLIST);
    assert_eq!(first.timed[0].0, first.model_pick);
    // The two fastest of the first rounds were timed again, and the pick is the faster of them there.
    let mut ran: Vec<(DenseParams, f64)> = first
        .timed
        .iter()
        .filter_map(|(p, _, g)| g.map(|g| (*p, g)))
        .collect();
    ran.sort_by(|a, b| b.1.total_cmp(&a.1));
    if ran.len() >= 2 {
        let pair: Vec<DenseParams> = first.confirmed.iter().map(|c| c.0).collect();
        assert_eq!(pair, vec![ran[0].0, ran[1].0], "{first:?}");
        let faster = first
            .confirmed
            .iter()
            .filter_map(|(p, g)| g.map(|g| (*p, g)))
            .max_by(|a, b| a.1.total_cmp(&b.1))
            .unwrap();
        assert_eq!(first.params, faster.0, "{first:?}");
    } else {
        assert_eq!(first.params, ran[0].0);
        assert!(first.confirmed.is_empty());
    }
    let again = checked_pick_in(gpu, &machine, DType::F32, &shape, false, Some(&cache)).unwrap();
    assert!(again.cached);
    assert_eq!(again.params, first.params);
    assert!(again.describe().starts_with("cached"));
    // Unrolled twins where the adapter is a GPU, none on a CPU adapter.
    assert_eq!(
        first.timed.iter().any(|t| t.0.unroll),
        unrolled_twins(gpu),
        "{first:?}"
    );
    assert_gemm_matches(gpu, &shape, first.params);
}

/// A GPU-class adapter (lavapipe emulating one): the check times each entry and then its twin with the K steps
/// unrolled, every one of them runs, and the pick's GEMM is right.
#[test]
fn on_a_gpu_the_check_times_each_entrys_unrolled_twin() {
    let Some(shared) = test_gpu() else { return };
    let gpu = &emulating(
        shared,
        GpuOptions {
            adapter_class: Some(AdapterClass::Gpu),
            ..Default::default()
        },
    );
    assert!(unrolled_twins(gpu));
    let machine = hand_made_machine();
    let shape = GemmShape::packed(64, 96, 40);
    let pick = checked_pick_in(gpu, &machine, DType::F32, &shape, false, None).unwrap();
    let space = machine.shape_space(DType::F32, &TileLimits::of(gpu), &shape);
    let list = check_list(&machine, &space, 4, &shape, false, true);
    let timed: Vec<DenseParams> = pick.timed.iter().map(|t| t.0).collect();
    assert_eq!(timed, list);
    assert_eq!(list.len() % 2, 0);
    for pair in list.chunks(2) {
        assert!(!pair[0].unroll, "{pair:?}");
        assert_eq!(pair[1], pair[0].unrolled());
    }
    assert!(pick.timed.iter().all(|t| t.2.is_some()), "{pick:?}");
    assert_gemm_matches(gpu, &shape, pick.params);
    // Every unrolled twin on its own, as the sweep would time it.
    for p in list.iter().filter(|p| p.unroll) {
        assert_gemm_matches(gpu, &shape, *p);
    }
}

/// Inputs made by hand: the choice's bookkeeping, not the micro-benchmarks, is under test.
fn hand_made_machine() -> Machine {
    serde_json::from_str(
        r#"{"version":9,"adapter":"test","dtype":"f32",
            "fma_by_accumulators":[[1,10.0],[8,80.0],[64,80.0]],"fma_latency_ns":2.0,
            "fma_by_groups":[[256,1,40.0],[256,4,80.0]],"smem_scalar_gwords":0.2,"smem_vec4_gwords":0.25,"smem_scalar_paired_gwords":0.2,"smem_vec4_paired_gwords":0.25,
            "copy_gbps":2.0,"launch_us":50.0,"overlap_penalty":0.9}"#,
    )
    .unwrap()
}

/// `params`' GEMM (α 1, β 0) against the reference on random inputs, output poisoned first.
fn assert_gemm_matches(gpu: &Gpu, shape: &GemmShape, params: DenseParams) {
    let shape = *shape;
    let mut rng = StdRng::seed_from_u64(fresh_seed());
    let mut random =
        |n: usize| -> Vec<f64> { (0..n).map(|_| rng.random_range(-1.0..1.0)).collect() };
    let (a, b) = (random(shape.m * shape.k), random(shape.k * shape.n));
    let to32 = |v: &[f64]| v.iter().map(|&x| x as f32).collect::<Vec<f32>>();
    let (ga, gb) = (
        gpu.upload(&to32(&a)).unwrap(),
        gpu.upload(&to32(&b)).unwrap(),
    );
    let gc = gpu
        .alloc_filled::<f32>(shape.m * shape.n, f32::NAN)
        .unwrap();
    let gemm = bespoke_mm::dense::DenseGemm::new(shape, DType::F32, params, 1.0, 0.0).unwrap();
    gpu.run(&gemm.plan(gpu, &ga, &gb, &gc).unwrap().launches())
        .unwrap();
    let got: Vec<f64> = gpu
        .read(&gc)
        .unwrap()
        .iter()
        .map(|&x| f64::from(x))
        .collect();
    let mut want = vec![0.0; shape.m * shape.n];
    gemm_ref(1.0, &a, shape.a(), &b, shape.b(), 0.0, &mut want, shape.c());
    assert!(got.iter().all(|x| x.is_finite()), "{}", params.key());
    assert!(rel_err(&got, &want, shape.c()) < 1e-5, "{}", params.key());
}

/// On the H200's inputs (60 TFLOP/s f32) every sample the check (0.5 GFLOP) and the session's screens (0.05–0.5)
/// time at issue 36's shapes keeps C whole, so each runs the full shape's grid of workgroups and its waves fall on
/// the card's multiprocessors as the full run's do; the K cut a multiple of 32 per split-K slice.
#[test]
fn on_the_h200s_inputs_every_sample_keeps_c_whole() {
    use bespoke_mm::dense::choose::CHECK_GFLOP;
    use bespoke_mm::dense::sweep::sample_shape;
    let (machine, _) = h200();
    let limits = h200_limits();
    for (m, n, k) in [
        (2048, 2048, 2048),
        (4096, 4096, 4096),
        (8192, 8192, 8192),
        (96, 100_000, 64),
        (343, 100_000, 1029),
    ] {
        let shape = GemmShape::packed(m, n, k);
        let space = machine.shape_space(DType::F32, &limits, &shape);
        assert!(!space.is_empty());
        for p in &space {
            for g in [CHECK_GFLOP, 0.05] {
                let s = sample_shape(&machine, p, &shape, g);
                assert_eq!((s.m, s.n), (m, n), "{} at {m}×{n}×{k}: {s:?}", p.key());
                assert!(s.k == k || s.k.is_multiple_of(32 * p.split_k as usize));
                assert!(s.flops() >= g * 1e9);
            }
        }
    }
}

/// The H200's model inputs (machine version 12: paired-lane rates measured) and its three screened sweeps of the
/// sixth session (2026-12-04, docs/perf.md): 4096³ f32, the 96×100 000×64 f32 panel and 2048³ f64, every
/// configuration of the model's space and its unrolled twin, each at its sample's GFLOP/s.
fn h200_2026_12_04(dtype: &str, sweep: &str) -> (Machine, HashMap<String, f64>) {
    let dir = format!("{DATA}/2026-12-04");
    let machine: Machine = serde_json::from_str(
        &std::fs::read_to_string(format!("{dir}/dense-machine-{dtype}.json")).unwrap(),
    )
    .unwrap();
    let samples = std::fs::read_to_string(format!("{dir}/sweep-{dtype}-{sweep}.csv"))
        .unwrap()
        .lines()
        .filter(|l| !l.starts_with('#'))
        .map(|l| {
            let (key, gflops) = l.split_once(',').unwrap();
            (key.to_owned(), gflops.parse::<f64>().unwrap())
        })
        .collect();
    (machine, samples)
}

/// Issue 36's goal for the pick, on the card's own measurements: what the library times (the model's shortlist,
/// one configuration per register-tile shape, each with its unrolled twin on a GPU) holds a configuration within
/// 10 % of the best the sweep found at each of the three shapes; the model's own first choice does not at two
/// (it ranks loops and their twins alike, and prices the panel's 128-accumulator tiles at the copy rate where
/// they ran at 0.4 of it). Checked pick at 0.99, 0.97 and 1.00 of the best sample; the model's pick at 0.82,
/// 0.61 and 0.90 (2026-12-04).
#[test]
fn on_the_h200s_sweeps_of_the_sixth_session_the_checked_list_holds_a_tile_within_ten_percent_without_a_device()
 {
    let limits = h200_limits();
    for (dtype, dt, sweep, (m, n, k), model_at_least) in [
        ("f32", DType::F32, "4096x4096x4096", (4096, 4096, 4096), 0.8),
        ("f32", DType::F32, "96x100000x64", (96, 100_000, 64), 0.55),
        (
            "f64",
            DType::F64,
            "2048x2048x2048",
            (2048, 2048, 2048),
            0.85,
        ),
    ] {
        let (machine, samples) = h200_2026_12_04(dtype, sweep);
        let shape = GemmShape::packed(m, n, k);
        let space = machine.shape_space(dt, &limits, &shape);
        // The sweep screened the model's space as it is now, twins and all.
        for p in &space {
            assert!(
                samples.contains_key(&p.key()),
                "{sweep}: {} not swept",
                p.key()
            );
            assert!(
                samples.contains_key(&p.unrolled().key()),
                "{sweep}: {}",
                p.key()
            );
        }
        let best = samples.values().copied().fold(0.0, f64::max);
        let size = dt.size();
        let (pick, _) = machine.pick_in(&space, size, &shape, false).unwrap();
        let list = check_list(&machine, &space, size, &shape, false, true);
        let sampled = |p: &DenseParams| samples[&p.key()];
        let checked = list.iter().map(sampled).fold(0.0, f64::max);
        eprintln!(
            "{dtype} {sweep}: model's pick {} at {:.3} of the best sample, the checked list's best at {:.3} ({} timed)",
            pick.key(),
            sampled(&pick) / best,
            checked / best,
            list.len()
        );
        assert!(checked >= 0.9 * best, "{sweep}: {checked} of {best}");
        // The model alone where it stood: a change that moves it either way says so here.
        assert!(
            sampled(&pick) >= model_at_least * best,
            "{sweep}: the model's pick {} at {} of {best}",
            pick.key(),
            sampled(&pick)
        );
    }
}
