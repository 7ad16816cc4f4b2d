//! The register file in the model (issue 36): the accumulator budget from the measured curves, on the H200's
//! measured curves and an H200-like machine.

use super::super::rates::cliff;
use super::super::*;
use super::gpu_like;
use crate::dense::params::{DenseParams, legal_space};

/// An H200-like f64 machine (the card gave 25.8–31.6 TFLOP/s f64 and 4 TB/s on 2026-11-26): at 256
/// invocations the rate holds to 64 f64 accumulators (128 registers) and falls past 128 (the 255-register
/// limit); at 1024 invocations it falls past 16 (64 registers each: 65 536 per multiprocessor).
fn h200_like_f64() -> Machine {
    let curve = |pts: &[(u32, f64)]| pts.to_vec();
    Machine {
        version: MACHINE_VERSION,
        adapter: "H200-like".into(),
        dtype: "f64".into(),
        fma_by_accumulators: curve(&[
            (1, 2000.0),
            (2, 4000.0),
            (4, 8000.0),
            (8, 16000.0),
            (16, 25000.0),
            (32, 26000.0),
            (64, 25500.0),
            (128, 6000.0),
            (256, 2000.0),
            (512, 900.0),
            (1024, 450.0),
        ]),
        fma_by_accumulators_at: vec![(
            1024,
            curve(&[
                (8, 25000.0),
                (16, 25800.0),
                (32, 5000.0),
                (64, 1800.0),
                (128, 900.0),
                (256, 450.0),
                (512, 220.0),
                (1024, 110.0),
            ]),
        )],
        fma_latency_ns: 4.0,
        fma_by_groups: [32u32, 64, 128, 256, 512, 1024]
            .into_iter()
            .flat_map(|t| {
                [
                    (1024u64, 500.0),
                    (16384, 6000.0),
                    (131072, 25000.0),
                    (1048576, 26000.0),
                ]
                .map(|(inv, r)| (t, (inv / u64::from(t)).max(1), r))
            })
            .collect(),
        // 128 B per clock per multiprocessor at 1.98 GHz over 132 of them: ~4.2 T f64 words/s through vec4.
        smem_scalar_gwords: 2000.0,
        smem_vec4_gwords: 4000.0,
        smem_scalar_paired_gwords: 2000.0,
        smem_vec4_paired_gwords: 4000.0,
        copy_gbps: 4000.0,
        launch_us: 5.0,
        overlap_penalty: 0.0,
        barrier_ns: 0.0,
    }
}

/// The register file bounds the tile (issue 36): without the bound the model's pick for 4096³ f64 on an
/// H200-like machine asks more accumulators per invocation than its workgroup size leaves each (as the
/// pick that ran at 0.005 of peak on the H200 did: t8x8v4-w32x32, 64 f64 accumulators at 1024 invocations);
/// with it, the pick fits.
#[test]
fn the_pick_fits_the_register_file() {
    let m = h200_like_f64();
    let limits = TileLimits {
        max_invocations: 1024,
        max_wg_x: 1024,
        max_wg_y: 1024,
        shared_bytes: 49152,
    };
    // Midway between the last point at half the best or more and the first below.
    assert_eq!(m.accumulator_budget(256), 96);
    assert_eq!(m.accumulator_budget(1024), 24);
    assert_eq!(
        m.accumulator_budget(512),
        48,
        "scaled from 256 (the nearer on a tie)"
    );
    assert_eq!(m.accumulator_budget(64), 96);
    let shape = GemmShape::packed(4096, 4096, 4096);
    // The model as it was: every legal single-buffered tiling at the widest vector, no register bound, and
    // no charge for waiting on a tile's loads (θ = 0 here; a single buffer pays since 2026-11-26, so only its
    // own family is compared). Today's pick is among its best (8×8 tiles tie whatever their workgroup:
    // FMA-bound at the rate the 256-invocation curve gives 64 accumulators), and it does not fit: 1024
    // invocations leave 24 f64 values each.
    let unbounded: Vec<DenseParams> = legal_space(DType::F64, &limits)
        .into_iter()
        .filter(|p| p.vec == 4 && p.stages == 1)
        .collect();
    let waiting = |p: &DenseParams| {
        let r = m.predict(p, 8, &shape, false);
        r.seconds - r.fma_s.max(r.smem_s).min(r.global_s)
    };
    let best = unbounded.iter().map(waiting).fold(f64::INFINITY, f64::min);
    let today = DenseParams::parse("t8x8v4-w32x32-k4-s1").unwrap();
    assert!(unbounded.contains(&today));
    let t = waiting(&today);
    assert!((t - best).abs() <= 1e-9 * t, "{t} against the best {best}");
    assert!(!m.fits_registers(&today));
    let (after, pred) = m.pick(DType::F64, &limits, &shape, false).unwrap();
    assert!(m.fits_registers(&after), "{} {pred:?}", after.key());
    assert!(
        m.shape_space(DType::F64, &limits, &shape)
            .iter()
            .all(|p| m.fits_registers(p)),
        "the space holds a tile past the register file"
    );
    assert!(
        after.tm * after.tn >= 16,
        "{}: registers left idle",
        after.key()
    );
    // A CPU-like curve that never falls off bounds nothing.
    let flat = Machine {
        fma_by_accumulators: (0..11).map(|i| (1u32 << i, 50.0)).collect(),
        fma_by_accumulators_at: Vec::new(),
        ..m
    };
    assert_eq!(flat.accumulator_budget(1024), u32::MAX);
}

/// The H200's measured accumulator curves (driver 580, 2026-11-27): f32 and f64, at 256 and 1024 invocations.
const H200_F32_256: &[(u32, f64)] = &[
    (1, 23559.0),
    (2, 35649.0),
    (4, 48158.0),
    (8, 54895.0),
    (16, 58508.0),
    (32, 58305.0),
    (64, 59705.0),
    (128, 54361.0),
    (256, 24223.0),
    (512, 758.0),
    (1024, 260.0),
];
const H200_F32_1024: &[(u32, f64)] = &[
    (8, 14384.0),
    (16, 15406.0),
    (32, 15578.0),
    (64, 8133.0),
    (128, 883.0),
    (256, 404.0),
    (512, 555.0),
    (1024, 650.0),
];
const H200_F64_256: &[(u32, f64)] = &[
    (1, 16560.0),
    (2, 23688.0),
    (4, 28581.0),
    (8, 29382.0),
    (16, 31655.0),
    (32, 31685.0),
    (64, 30060.0),
    (128, 12176.0),
    (256, 468.0),
    (512, 438.0),
    (1024, 160.0),
];
const H200_F64_1024: &[(u32, f64)] = &[
    (8, 29453.0),
    (16, 31745.0),
    (32, 6817.0),
    (64, 1019.0),
    (128, 549.0),
    (256, 491.0),
    (512, 472.0),
    (1024, 173.0),
];

/// The spill cliff on measured curves: an H200's (driver 580, 2026-11-27: f32 and f64, at 256 and 1024
/// invocations), where the rate falls by more than half within one doubling, and lavapipe's f64 (Mesa 22.3.6,
/// 2026-11-27), whose early peak at 8 accumulators is twice the level of the rest: not a register file's end.
#[test]
fn the_spill_cliff_is_a_fall_not_an_early_peak() {
    let c = |pts: &[(u32, f64)]| pts.to_vec();
    let h200 = [
        (H200_F32_256, 192),
        (H200_F32_1024, 96),
        (H200_F64_256, 96),
        (H200_F64_1024, 24),
    ];
    for (curve, want) in h200 {
        assert_eq!(cliff(curve), Some(want), "{curve:?}");
    }
    // lavapipe f64: half the best (46.5) is passed at 128 (23.2), a quarter only at 1024.
    let lavapipe = c(&[
        (1, 8.7),
        (2, 17.3),
        (4, 31.3),
        (8, 46.5),
        (16, 30.9),
        (32, 29.0),
        (64, 27.2),
        (128, 23.2),
        (256, 24.4),
        (512, 17.5),
        (1024, 9.9),
    ]);
    assert_eq!(cliff(&lavapipe), Some(768));
    // A gradual fall is still found: below a quarter of the best, two doublings on.
    assert_eq!(
        cliff(&c(&[(8, 100.0), (16, 60.0), (32, 35.0), (64, 20.0)])),
        Some(48)
    );
    // Flat, or never below half of the last point and a quarter of the best: no bound.
    assert_eq!(cliff(&c(&[(8, 50.0), (16, 50.0), (32, 49.0)])), None);
    assert_eq!(cliff(&c(&[(8, 50.0), (16, 30.0), (32, 20.0)])), None);
    assert_eq!(cliff(&[]), None);
}

/// The H200's f32 curves (2026-11-27): at 1024 invocations its own curve falls only past 64 accumulators (cliff
/// 96), but the 256-invocation curve first falls at 256 (the register file over 256 invocations), which leaves 64
/// to each of 1024; at 512 the nearest curve's 96 stands, at 256 and below its 192. In f64 the 1024 curve's own
/// cliff (24) is already below what the 256 curve leaves (128 / 4 = 32).
#[test]
fn a_smaller_workgroups_curve_bounds_a_larger_one() {
    let curves = |at256: &[(u32, f64)], at1024: &[(u32, f64)]| Machine {
        fma_by_accumulators: at256.to_vec(),
        fma_by_accumulators_at: vec![(1024, at1024.to_vec())],
        ..gpu_like()
    };
    let f32 = curves(H200_F32_256, H200_F32_1024);
    assert_eq!(
        [64, 256, 512, 1024].map(|t| f32.accumulator_budget(t)),
        [192, 192, 96, 64]
    );
    // t8x8 double-buffered at 32×32 invocations (88 by this count) ran at 5.3 TFLOP/s there: out; at 16×32 in.
    let t8x8: DenseParams = "t8x8v4-w32x32-k8-s1-b2".parse().unwrap();
    assert!(!f32.fits_registers(&t8x8));
    assert!(f32.fits_registers(&DenseParams { wgm: 16, ..t8x8 }));
    let f64 = curves(H200_F64_256, H200_F64_1024);
    assert_eq!(f64.accumulator_budget(1024), 24);
    // A CPU adapter's curves never fall: no bound at any size.
    let flat = curves(
        &[(8, 40.0), (64, 38.0), (1024, 30.0)],
        &[(8, 40.0), (1024, 25.0)],
    );
    assert_eq!(
        [64, 1024].map(|t| flat.accumulator_budget(t)),
        [u32::MAX; 2]
    );
    // lavapipe's f64 curves (2026-12-03) fall gradually, to a quarter of their best at 1024 (cliffs 768): the
    // 256-invocation curve, which never halves in a doubling, does not bound 1024-invocation tiles.
    let lavapipe = curves(
        &[
            (8, 128.8),
            (16, 109.1),
            (64, 102.3),
            (256, 91.7),
            (512, 54.7),
            (1024, 30.4),
        ],
        &[
            (8, 135.5),
            (64, 115.3),
            (256, 99.9),
            (512, 59.7),
            (1024, 30.9),
        ],
    );
    assert_eq!(
        [256, 1024].map(|t| lavapipe.accumulator_budget(t)),
        [768, 768]
    );
}
