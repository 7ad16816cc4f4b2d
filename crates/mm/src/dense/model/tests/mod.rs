//! The model against hand-made machines: derived inputs, the register budget, picks.

use super::rates::interpolate_log2;
use super::*;
use crate::dense::params::{DenseParams, Lanes};

mod registers;

/// A GPU-like machine: 20 TFLOP/s from 8 accumulators up, spill past 64, workgroup memory at 1/4 of the FMA
/// word rate, 1 TB/s.
fn gpu_like() -> Machine {
    Machine {
        version: MACHINE_VERSION,
        adapter: "model".into(),
        dtype: "f32".into(),
        fma_by_accumulators: vec![
            (1, 5000.0),
            (2, 10000.0),
            (4, 15000.0),
            (8, 20000.0),
            (16, 20000.0),
            (32, 20000.0),
            (64, 19000.0),
            (128, 4000.0),
            (256, 1500.0),
            (512, 600.0),
            (1024, 300.0),
        ],
        fma_by_accumulators_at: Vec::new(),
        fma_latency_ns: 2.0,
        // Rate set by total invocations, whatever the workgroup size.
        fma_by_groups: [32u32, 64, 128, 256, 512, 1024]
            .into_iter()
            .flat_map(|t| {
                [
                    (256u64, 100.0),
                    (4096, 2000.0),
                    (65536, 15000.0),
                    (262144, 20000.0),
                ]
                .map(|(inv, r)| (t, inv / u64::from(t), r))
            })
            .collect(),
        smem_scalar_gwords: 2500.0,
        smem_vec4_gwords: 5000.0,
        smem_scalar_paired_gwords: 2500.0,
        smem_vec4_paired_gwords: 5000.0,
        copy_gbps: 1000.0,
        launch_us: 5.0,
        overlap_penalty: 0.0,
        barrier_ns: 0.0,
    }
}

fn big_limits() -> TileLimits {
    TileLimits {
        max_invocations: 1024,
        max_wg_x: 1024,
        max_wg_y: 1024,
        shared_bytes: 32768,
    }
}

#[test]
fn interpolation_is_log_linear_and_flat_outside() {
    let pts = [(1.0, 1.0), (4.0, 3.0)];
    assert_eq!(interpolate_log2(pts, 0.5), 1.0);
    assert!((interpolate_log2(pts, 2.0) - 2.0).abs() < 1e-12);
    assert_eq!(interpolate_log2(pts, 64.0), 3.0);
}

#[test]
fn one_high_point_does_not_raise_the_plateau() {
    // lavapipe's 256-invocation curve: saturated from 4 groups, one noisy point 12 % higher at 1024.
    let mut m = gpu_like();
    m.fma_by_groups = [
        (1, 37.6),
        (4, 74.8),
        (16, 74.5),
        (64, 75.2),
        (256, 75.9),
        (1024, 84.5),
    ]
    .into_iter()
    .map(|(g, r)| (256, g, r))
    .collect();
    m.fma_by_accumulators = vec![(8, 85.8)];
    assert_eq!(m.plateau(256), 75.2, "median of the saturated points");
    assert_eq!(m.groups_to_fill(256), 4);
    // More workgroups promise nothing once saturated: split-K gains no occupancy.
    assert_eq!(m.occupancy(256, 64.0), m.occupancy(256, 1024.0));
    assert!((m.occupancy(256, 1.0) / m.occupancy(256, 64.0) - 37.6 / 75.2).abs() < 1e-12);
}

#[test]
fn derived_inputs() {
    let m = gpu_like();
    assert_eq!(m.peak_gflops(), 20000.0);
    assert_eq!(m.groups_to_fill(256), 1024);
    assert_eq!(m.groups_to_fill(48), 0, "not measured");
    assert!((m.occupancy(256, 16.0) - 0.1).abs() < 1e-12);
    assert_eq!(m.groups_to_fill(64), 4096);
    assert!(
        (m.occupancy(256, 64.0) - 8500.0 / 20000.0).abs() < 1e-12,
        "log-interpolated"
    );
    assert_eq!(
        m.occupancy(200, 16.0),
        m.occupancy(256, 16.0),
        "nearest size"
    );
    assert!((m.fmas_in_flight() - 20000.0).abs() < 1e-9);
}

/// On a machine whose workgroup memory is 4× slower per word than its FMA rate, the pick for a big square
/// GEMM meets the BLIS bound m_t·n_t/(m_t+n_t) ≥ 2 and does not spill.
#[test]
fn pick_for_a_big_square_respects_the_blis_bounds() {
    let m = gpu_like();
    let shape = GemmShape::packed(4096, 4096, 4096);
    let (p, pred) = m.pick(DType::F32, &big_limits(), &shape, false).unwrap();
    let (tm, tn) = (f64::from(p.tm), f64::from(p.tn));
    assert!(tm * tn / (tm + tn) >= 2.0, "{} {pred:?}", p.key());
    assert!(p.tm * p.tn <= 64, "{}", p.key());
    assert_eq!(p.split_k, 1);
    // 8×8 tiles beat 1×1 tiles by the workgroup-memory ratio.
    let small = DenseParams {
        tm: 1,
        tn: 1,
        vec: 1,
        ..p
    };
    assert!(m.predict(&small, 4, &shape, false).seconds > 4.0 * pred.seconds);
}

/// A short, deep GEMM cannot fill the device with one K pass: the model splits K.
#[test]
fn short_deep_shapes_split_k() {
    let m = gpu_like();
    let shape = GemmShape::packed(64, 64, 65536);
    let (p, _) = m.pick(DType::F32, &big_limits(), &shape, false).unwrap();
    assert!(p.split_k > 1, "{}", p.key());
}

#[test]
fn space_uses_the_widest_vector_the_shape_allows() {
    let m = gpu_like();
    let lim = big_limits();
    assert!(
        m.shape_space(DType::F32, &lim, &GemmShape::packed(64, 100, 64))
            .iter()
            .all(|p| p.vec == 4)
    );
    assert!(
        m.shape_space(DType::F32, &lim, &GemmShape::packed(64, 101, 64))
            .iter()
            .all(|p| p.vec == 1)
    );
}

#[test]
fn fma_and_workgroup_memory_add_by_the_measured_overlap() {
    // θ is measured as t(both) = max + θ·min; the prediction composes the two the same way.
    let p: DenseParams = "t8x8v4-w16x16-k8-s1-b2".parse().unwrap();
    let shape = GemmShape::packed(2048, 2048, 2048);
    let mut m = gpu_like();
    let at = |m: &Machine| m.predict(&p, 4, &shape, false);
    let apart = at(&m);
    assert!(apart.fma_s > 0.0 && apart.smem_s > 0.0);
    let longest = apart.fma_s.max(apart.smem_s).max(apart.global_s);
    assert!((apart.seconds - apart.launch_s - longest).abs() < 1e-12 * longest);
    m.overlap_penalty = 1.0;
    let one_stream = at(&m);
    let sum = one_stream.fma_s + one_stream.smem_s;
    assert!(sum > one_stream.global_s);
    assert!((one_stream.seconds - one_stream.launch_s - sum).abs() < 1e-12 * sum);
    m.overlap_penalty = 0.5;
    let half = at(&m);
    let (hi, lo) = (half.fma_s.max(half.smem_s), half.fma_s.min(half.smem_s));
    assert!((half.seconds - half.launch_s - (hi + 0.5 * lo)).abs() < 1e-12 * hi);
}

/// Lanes paired where the measured pairs load twice as fast (an NVIDIA multiprocessor packing them): the space is
/// paired and a tile's B fragment loads cost half; where pairs read as fast or slower (lavapipe: 0.87), the space
/// stays in rows and every prediction is the one the model made before pairs were measured.
#[test]
fn lanes_pair_where_the_measured_pairs_pay() {
    let shape = GemmShape::packed(2048, 2048, 2048);
    let (rows, paired): (DenseParams, DenseParams) = (
        "t8x8v4-w16x16-k8-s1-b2-r".parse().unwrap(),
        "t8x8v4-w16x16-k8-s1-b2".parse().unwrap(),
    );
    let before = gpu_like();
    assert_eq!(before.lanes(true), Lanes::Rows);
    let space = before.shape_space(DType::F32, &big_limits(), &shape);
    assert!(!space.is_empty() && space.iter().all(|p| p.lanes == Lanes::Rows));

    // Pairs slower (as lavapipe read them): still rows, and the same prediction as with no pairs measured.
    let mut slow = gpu_like();
    slow.smem_scalar_paired_gwords *= 0.87;
    slow.smem_vec4_paired_gwords *= 0.87;
    assert_eq!(
        (slow.lanes(true), slow.lanes(false)),
        (Lanes::Rows, Lanes::Rows)
    );
    assert_eq!(
        slow.predict(&rows, 4, &shape, false).seconds,
        before.predict(&rows, 4, &shape, false).seconds
    );
    assert_eq!(
        slow.pick(DType::F32, &big_limits(), &shape, false)
            .unwrap()
            .0,
        before
            .pick(DType::F32, &big_limits(), &shape, false)
            .unwrap()
            .0
    );

    // Vec4 pairs twice as fast, scalar ones not (as NVIDIA's packing would read): vec4 kernels pair their lanes.
    let mut packed = gpu_like();
    packed.smem_vec4_paired_gwords *= 2.0;
    assert_eq!(
        (packed.lanes(true), packed.lanes(false)),
        (Lanes::Paired, Lanes::Rows)
    );
    let space = packed.shape_space(DType::F32, &big_limits(), &shape);
    assert!(space.iter().all(|p| p.lanes == Lanes::Paired), "vec4 space");
    // Per k step: tm A words and tn B words per invocation; pairs halve the A loads in either layout and the B
    // loads only when paired; the staging stores cost the same.
    let staged = |m: &Machine, p: &DenseParams| {
        let per_step = |words: f64, rate: f64| words / (rate * 1e9);
        let inv = p.groups(2048, 2048) as f64 * f64::from(p.threads());
        let groups = p.groups(2048, 2048) as f64;
        let a_shared = per_step(8.0, m.shared_gwords(true));
        let b = if p.lanes == Lanes::Paired {
            m.shared_gwords(true)
        } else {
            m.smem_vec4_gwords
        };
        let stores = per_step(f64::from(p.bm() + p.bn()), m.smem_vec4_gwords);
        (inv * (a_shared + per_step(8.0, b)) + groups * stores) * 2048.0
            / m.occupancy(p.threads(), groups)
    };
    for (p, want_b_rate) in [(rows, 5000.0), (paired, 10000.0)] {
        let got = packed.predict(&p, 4, &shape, false).smem_s;
        let want = staged(&packed, &p);
        assert!(
            (got - want).abs() <= 1e-9 * want,
            "{}: {got} against {want}",
            p.key()
        );
        assert_eq!(
            if p.lanes == Lanes::Paired {
                packed.shared_gwords(true)
            } else {
                packed.smem_vec4_gwords
            },
            want_b_rate
        );
    }
    assert!(
        packed.predict(&paired, 4, &shape, false).smem_s
            < 0.6 * before.predict(&rows, 4, &shape, false).smem_s
    );
    // A popcount machine (scalar loads) only pairs where its scalar pairs pay.
    let mut scalar = gpu_like();
    scalar.smem_scalar_paired_gwords *= 2.0;
    assert_eq!(
        (scalar.lanes(true), scalar.lanes(false)),
        (Lanes::Rows, Lanes::Paired)
    );
}

#[test]
fn barriers_are_charged_per_tile_and_buffer() {
    // Deeper K tiles wait at fewer barriers; double buffering waits at one per tile instead of two.
    let shape = GemmShape::packed(1024, 1024, 1024);
    let mut m = gpu_like();
    let at = |m: &Machine, key: &str| m.predict(&key.parse().unwrap(), 4, &shape, false);
    let free = at(&m, "t8x8v4-w16x16-k4-s1");
    assert_eq!(free.barrier_s, 0.0);
    m.barrier_ns = 1.0;
    let (k4, k8) = (at(&m, "t8x8v4-w16x16-k4-s1"), at(&m, "t8x8v4-w16x16-k8-s1"));
    assert!(k4.barrier_s > 0.0 && k4.seconds > free.seconds);
    assert!((k4.barrier_s / k8.barrier_s - 2.0).abs() < 1e-9);
    // 256 tiles: 512 barriers single-buffered, 1 + 256 double-buffered.
    let b2 = at(&m, "t8x8v4-w16x16-k4-s1-b2");
    assert!((k4.barrier_s / b2.barrier_s - 512.0 / 257.0).abs() < 1e-9);
    // The barriers stop FMAs and loads alike: they add to the compute time.
    m.overlap_penalty = 1.0;
    let p = at(&m, "t8x8v4-w16x16-k4-s1");
    let compute = p.fma_s + p.smem_s + p.barrier_s;
    assert!(compute > p.global_s);
    assert!((p.seconds - p.launch_s - compute).abs() < 1e-12 * compute);
}

#[test]
fn split_k_reduction_runs_after_the_product() {
    // The reduction is a second launch after the product: its bytes (the slices, C read when β ≠ 0, C written)
    // add to the product's time; the product writes its slices instead of C. (Double-buffered: no single-buffer
    // term.)
    let m = gpu_like();
    let shape = GemmShape::packed(512, 512, 8192);
    let rate = m.copy_gbps * 1e9;
    let cells = 512.0 * 512.0;
    let unsplit = m.predict(&"t8x8v4-w16x16-k8-s1-b2".parse().unwrap(), 4, &shape, false);
    assert_eq!(unsplit.reduce_s, 0.0);
    for (beta, c_passes) in [(false, 1.0), (true, 2.0)] {
        let split = m.predict(&"t8x8v4-w16x16-k8-s4-b2".parse().unwrap(), 4, &shape, beta);
        let want = 4.0 * cells * (4.0 + c_passes) / rate;
        assert!(
            (split.reduce_s - want).abs() < 1e-12 * want,
            "{} vs {want}",
            split.reduce_s
        );
        let compute = split.fma_s.max(split.smem_s)
            + m.overlap_penalty * split.fma_s.min(split.smem_s)
            + split.barrier_s;
        let product = compute.max(split.global_s);
        assert!(
            (split.seconds - split.launch_s - product - split.reduce_s).abs()
                < 1e-12 * split.seconds,
            "β {beta}: the reduction must add after the product"
        );
        // The product streams its panels and writes 4 slices of C (not C itself).
        let unsplit_b = m.predict(&"t8x8v4-w16x16-k8-s1-b2".parse().unwrap(), 4, &shape, beta);
        let slices_minus_c = 4.0 * cells * (4.0 - c_passes) / rate;
        let panels_ratio = (split.global_s - slices_minus_c) / unsplit_b.global_s;
        assert!(
            (panels_ratio - 1.0).abs() < 1e-9,
            "β {beta}: the product's bytes, less its slices, are the unsplit product's ({panels_ratio})"
        );
    }
}

#[test]
fn corrupt_cache_is_not_sane() {
    let mut m = gpu_like();
    assert!(m.is_sane());
    m.copy_gbps = f64::NAN;
    assert!(!m.is_sane());
}
