//! The sweep's bookkeeping on the device: every configuration timed, the model's pick and the best found are
//! the right points, E = pick ÷ best, and a configuration the device refuses is recorded, not fatal; a screened
//! sweep times every point on a sample and only the fastest and the pick on the full shape.

#![allow(clippy::unwrap_used)] // a failed unwrap is a failed test

use bespoke_gpu::testing::test_gpu;
use bespoke_mm::DType;
use bespoke_mm::dense::choose::CHECK_GFLOP;
use bespoke_mm::dense::sweep::{Method, sample_shape, sweep_space};
use bespoke_mm::dense::{DenseParams, GemmShape, Machine};

fn machine() -> Machine {
    // Hand-made inputs: the sweep's logic, not the micro-benchmarks, is under test.
    serde_json::from_str(
        r#"{"version":6,"adapter":"test","dtype":"f32",
            "fma_by_accumulators":[[1,10.0],[8,80.0],[64,80.0]],"fma_latency_ns":2.0,
            "fma_by_groups":[[256,1,40.0],[256,4,80.0]],"smem_scalar_gwords":0.2,"smem_vec4_gwords":0.25,"smem_scalar_paired_gwords":0.2,"smem_vec4_paired_gwords":0.25,
            "copy_gbps":2.0,"launch_us":50.0,"overlap_penalty":0.9}"#,
    )
    .unwrap()
}

/// A tiling of 8 invocations across, kc 8, vec4 B, one K pass, K steps in a loop.
fn tiling(tm: u32, tn: u32, wgm: u32, stages: u32) -> DenseParams {
    DenseParams {
        tm,
        tn,
        wgm,
        wgn: 8,
        kc: 8,
        vec: 4,
        split_k: 1,
        stages,
        unroll: false,
        lanes: bespoke_mm::dense::Lanes::Paired,
    }
}

#[test]
fn sweep_times_every_point_and_reports_pick_best_and_efficiency() {
    let Some(gpu) = test_gpu() else { return };
    let shape = GemmShape::packed(64, 64, 64);
    let p = |tm, tn| tiling(tm, tn, 8, 1);
    // The last point needs 4 invocations × 4096 — past every device's workgroup limit: recorded as an error.
    let too_big = DenseParams {
        wgm: 64,
        wgn: 64,
        ..p(4, 4)
    };
    let space = [p(1, 4), p(4, 4), p(8, 8), too_big];
    let mut calls = 0;
    let s = sweep_space(
        gpu,
        &machine(),
        DType::F32,
        shape,
        &space,
        Method::Exhaustive,
        2,
        |done, total| {
            calls += 1;
            assert_eq!(total, 4);
            assert_eq!(done, calls);
        },
    )
    .unwrap();
    assert_eq!(s.points.len(), 4);
    assert_eq!(s.timed(), 3);
    assert!(matches!(s.points[3].measured, Some(Err(_))));
    assert!(s.points.iter().all(|p| p.sample.is_none()));
    let best = s
        .points
        .iter()
        .filter_map(|p| p.gflops())
        .fold(0.0, f64::max);
    assert_eq!(s.best_gflops(), best);
    // The model's pick is the point with the least predicted time.
    let fastest_pred = (0..4)
        .min_by(|&a, &b| {
            s.points[a]
                .predicted
                .seconds
                .total_cmp(&s.points[b].predicted.seconds)
        })
        .unwrap();
    assert_eq!(s.pick, fastest_pred);
    assert!((s.efficiency() - s.pick_gflops() / best).abs() < 1e-12);
    assert!(s.efficiency() > 0.0 && s.efficiency() <= 1.0);
    // Exhaustive: the checked pick is the shortlist's fastest on the full shape, so never slower than the pick.
    assert!(s.checked_gflops() >= s.pick_gflops());
}

#[test]
fn screened_sweep_confirms_the_fastest_samples_and_the_pick() {
    let Some(gpu) = test_gpu() else { return };
    let shape = GemmShape::packed(96, 2048, 64);
    let p = |tm, tn, wgm| tiling(tm, tn, wgm, 1);
    let space = [p(1, 4, 4), p(4, 4, 4), p(8, 8, 8), p(4, 8, 4), p(2, 4, 8)];
    let mut last = (0, 0);
    let s = sweep_space(
        gpu,
        &machine(),
        DType::F32,
        shape,
        &space,
        Method::Screened {
            sample_gflop: 0.001,
            confirm: 2,
        },
        1,
        |done, total| {
            assert!(done > last.0 && done <= total);
            last = (done, total);
        },
    )
    .unwrap();
    assert_eq!(last.0, last.1, "progress reaches its total");
    assert_eq!(s.screened(), 5);
    for pt in &s.points {
        let (sub, _) = pt.sample.clone().unwrap();
        assert!(sub.m <= shape.m && sub.n <= shape.n && sub.k == shape.k);
        assert!(sub.m == shape.m || sub.m.is_multiple_of(pt.params.bm() as usize));
        assert!(sub.n == shape.n || sub.n.is_multiple_of(pt.params.bn() as usize));
    }
    // The checked pick: the check run as the library runs it on the check's list (the model's shortlist, one point
    // per register-tile shape), its choice the faster of its two finalists.
    let space: Vec<_> = s.points.iter().map(|p| p.params).collect();
    let list = bespoke_mm::dense::choose::check_list(&machine(), &space, 4, &shape, false, false);
    let check = s.check.clone().unwrap();
    let timed: Vec<DenseParams> = check.timed.iter().map(|t| t.0).collect();
    assert_eq!(timed, list);
    assert_eq!(space[s.checked], check.params);
    if let [(a, Some(ga)), (b, Some(gb))] = check.confirmed[..] {
        assert_eq!(check.params, if gb > ga { b } else { a }, "{check:?}");
    } else {
        panic!("five candidates ran and two finalists did not: {check:?}");
    }
    assert!(s.checked_efficiency() > 0.0 && s.checked_efficiency() <= 1.0);
    // The two fastest samples, the model's pick and the checked pick, and nothing else, ran on the full shape.
    let mut by_sample: Vec<usize> = (0..5).collect();
    by_sample.sort_by(|&a, &b| {
        s.points[b]
            .sample_gflops()
            .unwrap()
            .total_cmp(&s.points[a].sample_gflops().unwrap())
    });
    let mut confirmed: Vec<usize> = (0..5).filter(|&i| s.points[i].measured.is_some()).collect();
    let mut expected = vec![by_sample[0], by_sample[1], s.pick, s.checked];
    expected.sort_unstable();
    expected.dedup();
    confirmed.sort_unstable();
    assert_eq!(confirmed, expected);
    assert_eq!(s.timed(), expected.len());
    assert!(s.points[s.best].gflops().is_some());
    assert!(s.efficiency() > 0.0 && s.efficiency() <= 1.0);
    assert!(s.pick_sample_rank().unwrap() < 5);
}

/// A space with unrolled twins (`dense-sweep --unrolled`): every point and twin timed, the model's pick one with K
/// steps in a loop (the model does not tell them apart), and the checked pick the fastest of the check's list,
/// twins included.
#[test]
fn a_sweep_with_unrolled_twins_times_them_and_the_check_may_take_one() {
    let Some(gpu) = test_gpu() else { return };
    let shape = GemmShape::packed(48, 64, 32);
    let p = |tm, tn| tiling(tm, tn, 8, 2);
    let space: Vec<DenseParams> = [p(1, 4), p(4, 4)]
        .into_iter()
        .flat_map(|q| [q, q.unrolled()])
        .collect();
    let s = sweep_space(
        gpu,
        &machine(),
        DType::F32,
        shape,
        &space,
        Method::Exhaustive,
        1,
        |_, _| {},
    )
    .unwrap();
    assert_eq!(s.timed(), 4);
    assert!(!s.points[s.pick].params.unroll);
    let list = bespoke_mm::dense::choose::check_list(
        &machine(),
        &[p(1, 4), p(4, 4)],
        4,
        &shape,
        false,
        true,
    );
    assert_eq!(list.len(), 4, "{list:?}");
    let fastest = (0..4)
        .max_by(|&a, &b| {
            let g = |i: usize| s.points[i].gflops().unwrap();
            g(a).total_cmp(&g(b))
        })
        .unwrap();
    assert_eq!(s.checked, fastest);
    assert_eq!(s.best, fastest);
}

/// Samples with C whole and K cut (`sample_shape`, as on a GPU, where a block of C would time the tail of its
/// last wave): a machine of 1 GFLOP/s gives a budget of 1 MFLOP, 256 of 32×64×4096's depth. Every configuration
/// runs on that sample, the check's candidates on theirs (its 0.5 GFLOP holds the whole shape), the confirmed
/// ones on the full shape.
#[test]
fn samples_with_k_cut_run_and_the_full_shape_confirms_them() {
    let Some(gpu) = test_gpu() else { return };
    let slow: Machine = serde_json::from_str(
        r#"{"version":6,"adapter":"test","dtype":"f32",
            "fma_by_accumulators":[[1,0.125],[8,1.0]],"fma_latency_ns":2.0,
            "fma_by_groups":[[32,1,0.5],[32,4,1.0]],"smem_scalar_gwords":0.2,"smem_vec4_gwords":0.25,"smem_scalar_paired_gwords":0.2,"smem_vec4_paired_gwords":0.25,
            "copy_gbps":2.0,"launch_us":50.0,"overlap_penalty":0.9}"#,
    )
    .unwrap();
    let shape = GemmShape::packed(32, 64, 4096);
    let p = |tm, tn, stages| tiling(tm, tn, 4, stages);
    let space = [p(1, 4, 1), p(4, 4, 1), p(4, 8, 2), p(8, 8, 1)];
    let s = sweep_space(
        gpu,
        &slow,
        DType::F32,
        shape,
        &space,
        Method::Screened {
            sample_gflop: 0.0001,
            confirm: 1,
        },
        1,
        |_, _| {},
    )
    .unwrap();
    for pt in &s.points {
        let (sub, g) = pt.sample.clone().unwrap();
        assert_eq!((sub.m, sub.n, sub.k), (32, 64, 256), "{}", pt.params.key());
        assert_eq!((sub.lda, sub.ldb, sub.ldc), (4096, 64, 64));
        assert!(g.unwrap() > 0.0);
    }
    let check = s.check.clone().unwrap();
    for (q, sample, g) in &check.timed {
        let sub = sample_shape(&slow, q, &shape, CHECK_GFLOP);
        assert_eq!(*sample, [sub.m, sub.n, sub.k]);
        assert_eq!(sub, shape);
        assert!(g.is_some(), "{check:?}");
    }
    assert!(s.points[s.best].gflops().is_some());
    assert!(s.points[s.pick].gflops().is_some());
}
