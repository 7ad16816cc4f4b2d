//! Dense GEMM on the device against the f64 CPU reference: random shapes that are multiples of no tile,
//! α/β combinations, poisoned outputs and padding, f64 where the adapter has it, and forced chunking.

#![allow(clippy::unwrap_used)] // a failed unwrap is a failed test

use bespoke_gpu::testing::{fresh_seed, test_gpu};
use bespoke_gpu::{Gpu, GpuOptions};
use bespoke_mm::dense::bench::DenseTimer;
use bespoke_mm::dense::{DenseGemm, DenseParams, Element, GemmShape, TileLimits};
use bespoke_mm::reference::{gemm_ref, rel_err};
use bespoke_mm::{DType, MmError};
use rand::{Rng, SeedableRng, rngs::StdRng};

fn rng() -> StdRng {
    StdRng::seed_from_u64(fresh_seed())
}

fn random(r: &mut StdRng, n: usize) -> Vec<f64> {
    (0..n).map(|_| r.random_range(-1.0..1.0)).collect()
}

/// Runs one GEMM on the device and returns (relative error over the M×N result, C as read back).
fn check<T: Element>(
    gpu: &Gpu,
    r: &mut StdRng,
    s: GemmShape,
    p: DenseParams,
    alpha: f64,
    beta: f64,
) -> f64 {
    let a = random(r, s.a().min_len());
    let b = random(r, s.b().min_len());
    // C: random where β reads it, NaN where it must be overwritten; padding columns NaN either way.
    let mut c0 = vec![f64::NAN; s.m * s.ldc];
    if beta != 0.0 {
        for i in 0..s.m {
            for j in 0..s.n {
                c0[i * s.ldc + j] = r.random_range(-1.0..1.0);
            }
        }
    }
    let to_t = |v: &[f64]| v.iter().map(|&x| T::from_f64(x)).collect::<Vec<T>>();
    // The reference sees the same rounded inputs the device sees.
    let (at, bt, ct) = (to_t(&a), to_t(&b), to_t(&c0));
    let back = |v: &[T]| v.iter().map(|x| x.to_f64()).collect::<Vec<f64>>();
    let mut want = back(&ct);
    gemm_ref(
        alpha,
        &back(&at),
        s.a(),
        &back(&bt),
        s.b(),
        beta,
        &mut want,
        s.c(),
    );

    let (ab, bb, cb) = (
        gpu.upload(&at).unwrap(),
        gpu.upload(&bt).unwrap(),
        gpu.upload(&ct).unwrap(),
    );
    let g = DenseGemm::new(s, T::DTYPE, p, alpha, beta).unwrap();
    let plan = g.plan(gpu, &ab, &bb, &cb).unwrap();
    gpu.run(&plan.launches()).unwrap();
    let got = back(&gpu.read(&cb).unwrap());
    for i in 0..s.m {
        for j in s.n..s.ldc {
            assert!(
                got[i * s.ldc + j].is_nan(),
                "padding C[{i}][{j}] was written ({} {:?})",
                p.key(),
                s
            );
        }
    }
    let e = rel_err(&got, &want, s.c());
    assert!(
        e.is_finite(),
        "unwritten or non-finite output: {} {:?}",
        p.key(),
        s
    );
    e
}

/// The [`configs`] a test `keep`s that `gpu` can launch in `dtype`, each left out for the device said so (an adapter
/// with WebGPU's 16 KiB of workgroup memory cannot hold the widest double-buffered tiles); most of them fit any
/// adapter.
fn configs_on(gpu: &Gpu, dtype: DType, keep: impl Fn(&DenseParams) -> bool) -> Vec<DenseParams> {
    let limits = TileLimits::of(gpu);
    let all: Vec<DenseParams> = configs().into_iter().filter(|p| keep(p)).collect();
    let (fit, past): (Vec<DenseParams>, Vec<DenseParams>) =
        all.iter().partition(|p| p.check(dtype, &limits).is_ok());
    for p in &past {
        bespoke_gpu::testing::skipped(&format!(
            "dense {} {dtype:?} on this adapter: {}",
            p.key(),
            p.check(dtype, &limits).unwrap_err()
        ));
    }
    assert!(
        2 * fit.len() >= all.len(),
        "only {} of {} configurations fit this adapter",
        fit.len(),
        all.len()
    );
    fit
}

fn configs() -> Vec<DenseParams> {
    let p = |tm, tn, wgm, wgn, kc, vec, split_k| DenseParams {
        tm,
        tn,
        wgm,
        wgn,
        kc,
        vec,
        split_k,
        stages: 1,
        unroll: false,
        lanes: bespoke_mm::dense::Lanes::Paired,
    };
    vec![
        p(4, 4, 8, 8, 8, 1, 1),
        p(8, 8, 16, 16, 8, 4, 1),
        p(1, 4, 32, 8, 16, 4, 1),
        p(2, 1, 16, 4, 4, 1, 1),
        p(4, 4, 8, 8, 8, 4, 4),
        p(4, 2, 8, 8, 16, 1, 2),
        // Wide register tiles (the CPU adapters' pick), with rows taken as vec4 of A and ragged M.
        p(16, 32, 4, 8, 4, 4, 1),
        p(32, 16, 4, 8, 8, 4, 2),
        p(16, 8, 8, 4, 8, 1, 1),
    ]
    .into_iter()
    .chain(
        // Double-buffered: scalar and vec4 A, one and several prefetch slots per invocation, split-K.
        [
            p(4, 4, 8, 8, 8, 1, 1),
            p(8, 8, 16, 16, 8, 4, 1),
            p(2, 1, 16, 4, 4, 1, 1),
            p(4, 4, 8, 8, 8, 4, 4),
            p(16, 32, 4, 8, 4, 4, 1),
        ]
        .map(|q| DenseParams { stages: 2, ..q }),
    )
    .chain(
        // Lanes: paired across two groups of 32 a row of tiles (wgn 32) and in groups 8 rows deep (wgn 4); and laid
        // in rows (`-r`), as every kernel was until 2026-12-03.
        [
            p(4, 4, 8, 32, 8, 4, 1),
            DenseParams {
                stages: 2,
                ..p(2, 4, 16, 4, 4, 4, 1)
            },
            p(4, 4, 8, 32, 8, 4, 1).in_rows(),
            p(8, 8, 16, 16, 8, 4, 1).in_rows(),
            DenseParams {
                stages: 2,
                ..p(2, 1, 16, 4, 4, 1, 2)
            }
            .in_rows(),
        ],
    )
    .chain(
        // K steps unrolled (the GPUs' twins): scalar and vec4 A, single- and double-buffered, split-K, a deep kc.
        [
            p(4, 4, 8, 8, 8, 1, 1),
            p(8, 8, 16, 16, 8, 4, 1),
            p(1, 4, 32, 8, 16, 4, 1),
            p(4, 2, 8, 8, 16, 1, 2),
        ]
        .into_iter()
        .flat_map(|q| [q.unrolled(), DenseParams { stages: 2, ..q }.unrolled()]),
    )
    .collect()
}

/// The kernels' `tx` and `ty` as the device computes them (`dense::wgsl::lane_ids`, the lines every dense and
/// popcount kernel opens with) are the tiles `DenseParams::lane_position` says, paired and in rows, for workgroups
/// of 32 to 1024 invocations as the adapter allows.
#[test]
fn the_device_lays_lanes_as_the_layout_says() {
    let Some(gpu) = test_gpu() else { return };
    let max = gpu.limits().max_compute_invocations_per_workgroup;
    for key in [
        "t4x4v4-w8x4-k8-s1",
        "t4x4v4-w4x8-k8-s1",
        "t4x4v4-w16x16-k8-s1",
        "t4x4v4-w8x32-k8-s1",
        "t4x4v4-w4x64-k8-s1",
        "t4x4v4-w32x32-k8-s1",
        "t4x4v4-w2x16-k8-s1",
        // One row of invocations: laid in rows whatever asked.
        "t4x4v4-w1x32-k8-s1",
    ] {
        let p: DenseParams = key.parse().unwrap();
        if p.threads() > max {
            bespoke_gpu::testing::skipped(&format!(
                "lane layout {key}: {} invocations",
                p.threads()
            ));
            continue;
        }
        for q in [p, p.in_rows()] {
            let src = format!(
                "@group(0) @binding(0) var<storage, read_write> out: array<u32>;
@compute @workgroup_size({}, {}, 1)
fn main(@builtin(local_invocation_id) lid3: vec3<u32>, @builtin(local_invocation_index) lid: u32) {{
{}    out[lid] = tx | (ty << 16u);
}}
",
                q.wgn,
                q.wgm,
                bespoke_mm::dense::wgsl::lane_ids(&q)
            );
            let out = gpu.alloc_filled(q.threads() as usize, u32::MAX).unwrap();
            let l = gpu
                .prepare(
                    &bespoke_gpu::Kernel::new(format!("lanes-{}", q.key()), src),
                    &[out.arg()],
                    bespoke_gpu::Grid::d1(1),
                )
                .unwrap();
            gpu.run(&[&l]).unwrap();
            let got = gpu.read(&out).unwrap();
            for (lid, v) in got.iter().enumerate() {
                let (tx, ty) = q.lane_position(lid as u32);
                assert_eq!(
                    (v & 0xffff, v >> 16),
                    (tx, ty),
                    "{} invocation {lid}",
                    q.key()
                );
            }
        }
    }
}

#[test]
fn f32_matches_reference_on_ragged_shapes() {
    let Some(gpu) = test_gpu() else { return };
    let mut r = rng();
    let shapes = [
        (1, 4, 1),
        (37, 52, 29),
        (65, 132, 7),
        (130, 64, 301),
        (9, 1000, 64),
    ];
    for (m, n, k) in shapes {
        for p in configs_on(gpu, DType::F32, |_| true) {
            for (alpha, beta) in [(1.0, 0.0), (0.5, 1.0), (-1.5, 0.25)] {
                // Padded leading dimensions (ldc > n) keep vec4 alignment and must stay untouched.
                let s = GemmShape {
                    m,
                    n,
                    k,
                    lda: k + 3,
                    ldb: n + 4,
                    ldc: n + 8,
                };
                let e = check::<f32>(gpu, &mut r, s, p, alpha, beta);
                assert!(
                    e <= 1e-5,
                    "{} {s:?} α={alpha} β={beta}: rel err {e:e}",
                    p.key()
                );
            }
        }
    }
}

#[test]
fn f64_matches_reference_where_available() {
    let Some(gpu) = test_gpu() else { return };
    if !DType::F64.supported(gpu) {
        eprintln!("adapter has no SHADER_F64: f64 GEMM not run (expected on GL, Metal, DX12)");
        return;
    }
    let mut r = rng();
    for p in configs_on(gpu, DType::F64, |p| p.tm * p.tn <= 32) {
        for (alpha, beta) in [(1.0, 0.0), (0.75, -2.0)] {
            let s = GemmShape {
                m: 45,
                n: 68,
                k: 77,
                lda: 80,
                ldb: 72,
                ldc: 68,
            };
            let e = check::<f64>(gpu, &mut r, s, p, alpha, beta);
            assert!(e <= 1e-12, "{} α={alpha} β={beta}: rel err {e:e}", p.key());
        }
    }
}

#[test]
fn blocks_past_the_binding_limit() {
    if test_gpu().is_none() {
        return;
    }
    // 32 KiB bindings: A, B, C and the split-K workspace each need several row blocks, so K blocks accumulate with β = 1.
    // On an adapter whose offset alignment puts more than 32 KiB in one aligned block of rows (WebGPU's 256 bytes:
    // 32 rows of A's 360 B and C's 1040 B), one such block.
    let shared = test_gpu().expect("checked above");
    let mut r = rng();
    let s = GemmShape {
        m: 70,
        n: 256,
        k: 90,
        lda: 90,
        ldb: 256,
        ldc: 260,
    };
    let mut k_split = false;
    for p in [configs()[1], configs()[4]] {
        let block =
            shared.row_block_bytes::<f32>(&[s.lda, s.ldc, s.ldc], &[1, 1, p.split_k as usize]);
        let gpu = Gpu::with_options(GpuOptions {
            max_binding_bytes: Some(block.max(32 << 10)),
            ..Default::default()
        })
        .unwrap();
        let blocks = |rows, lds: &[usize], copies: &[usize]| {
            gpu.row_blocks::<f32>(rows, lds, copies).unwrap().len()
        };
        assert!(
            blocks(s.m, &[s.lda, s.ldc, s.ldc], &[1, 1, p.split_k as usize]) > 1,
            "{}: M in one block",
            p.key()
        );
        k_split |= blocks(s.k, &[s.ldb], &[1]) > 1;
        for (alpha, beta) in [(1.0, 0.0), (2.0, 0.5)] {
            let e = check::<f32>(&gpu, &mut r, s, p, alpha, beta);
            assert!(e <= 1e-5, "{} α={alpha} β={beta}: rel err {e:e}", p.key());
        }
    }
    assert!(k_split, "K in one block for every tiling");
}

#[test]
fn bad_configurations_are_errors() {
    let Some(gpu) = test_gpu() else { return };
    let p = configs()[1];
    // vec4 with N not a multiple of 4
    assert!(matches!(
        DenseGemm::new(GemmShape::packed(8, 10, 8), DType::F32, p, 1.0, 0.0),
        Err(MmError::Params { .. })
    ));
    assert!(matches!(
        DenseGemm::new(GemmShape::packed(8, 8, 8), DType::F32, p, f64::NAN, 0.0),
        Err(MmError::NonFinite { what: "alpha", .. })
    ));
    assert!(matches!(
        DenseGemm::new(
            GemmShape {
                m: 4,
                n: 8,
                k: 4,
                lda: 3,
                ldb: 8,
                ldc: 8
            },
            DType::F32,
            p,
            1.0,
            0.0
        ),
        Err(MmError::Shape(_))
    ));
    // Buffers too short for the shape.
    let g = DenseGemm::new(GemmShape::packed(8, 8, 8), DType::F32, p, 1.0, 0.0).unwrap();
    let short = gpu.alloc::<f32>(10).unwrap();
    let ok = gpu.alloc::<f32>(64).unwrap();
    let c = gpu.alloc::<f32>(64).unwrap();
    let e = g.plan(gpu, &short, &ok, &c).unwrap_err().to_string();
    assert!(e.contains("A holds 10 elements"), "{e}");
    // C written while it is read as A or B (A and B may be one buffer: both are only read).
    for (a, b, input) in [(&ok, &c, "B"), (&c, &ok, "A")] {
        let e = g.plan(gpu, a, b, &c).unwrap_err().to_string();
        assert!(
            e.starts_with(&format!("C and {input} are the same buffer")),
            "{e}"
        );
    }
    assert!(g.plan(gpu, &ok, &ok, &c).is_ok());
    // Tiles the device cannot hold.
    let huge = DenseParams {
        tm: 8,
        tn: 8,
        wgm: 64,
        wgn: 64,
        kc: 32,
        vec: 4,
        split_k: 1,
        stages: 1,
        unroll: false,
        lanes: bespoke_mm::dense::Lanes::Paired,
    };
    let g = DenseGemm::new(GemmShape::packed(8, 8, 8), DType::F32, huge, 1.0, 0.0).unwrap();
    assert!(matches!(
        g.plan(gpu, &ok, &ok, &ok),
        Err(MmError::Params { .. })
    ));
    // A tile of 2³² rows (2³⁰ a register tile, 4 invocations): its products wrapped to 0 in u32, and the timer
    // reported the warm-up's "empty GEMM 0×4×4" where the parameters are what is wrong.
    let wraps = DenseParams {
        tm: 1 << 30,
        tn: 1,
        wgm: 4,
        wgn: 8,
        kc: 4,
        vec: 1,
        ..huge
    };
    let timer = DenseTimer::new(gpu, DType::F32, GemmShape::packed(8, 8, 8)).unwrap();
    let e = timer.time(gpu, wraps, 1).unwrap_err();
    assert!(
        matches!(&e, MmError::Params { reason, .. } if reason.contains("tm = 1073741824 is past 256")),
        "{e}"
    );
}

/// The kernels run without naga's runtime bounds checks (every index is in range by construction); with them
/// (`bounds_checked`, to measure their cost) every configuration gives the same bits on ragged shapes, and the
/// padding columns of C stay poisoned either way.
#[test]
fn bounds_checks_change_nothing_but_the_cost() {
    let Some(gpu) = test_gpu() else { return };
    let mut r = rng();
    for s in [
        GemmShape {
            m: 37,
            n: 44,
            k: 29,
            lda: 31,
            ldb: 48,
            ldc: 52,
        },
        GemmShape {
            m: 70,
            n: 13,
            k: 65,
            lda: 65,
            ldb: 13,
            ldc: 17,
        },
    ] {
        let a: Vec<f32> = random(&mut r, s.a().min_len())
            .iter()
            .map(|&v| v as f32)
            .collect();
        let b: Vec<f32> = random(&mut r, s.b().min_len())
            .iter()
            .map(|&v| v as f32)
            .collect();
        let c0: Vec<f32> = (0..s.m * s.ldc)
            .map(|i| {
                if i % s.ldc < s.n {
                    r.random_range(-1.0..1.0)
                } else {
                    f32::NAN
                }
            })
            .collect();
        for p in configs_on(gpu, DType::F32, |_| true) {
            if p.vec > 1 && [s.n, s.ldb, s.ldc].iter().any(|d| d % p.vec as usize != 0) {
                continue;
            }
            let run = |checked: bool| {
                let (ab, bb, cb) = (
                    gpu.upload(&a).unwrap(),
                    gpu.upload(&b).unwrap(),
                    gpu.upload(&c0).unwrap(),
                );
                let g = DenseGemm {
                    bounds_checked: checked,
                    ..DenseGemm::new(s, DType::F32, p, 0.75, 0.5).unwrap()
                };
                gpu.run(&g.plan(gpu, &ab, &bb, &cb).unwrap().launches())
                    .unwrap();
                gpu.read(&cb).unwrap()
            };
            let (unchecked, checked) = (run(false), run(true));
            let differ = bespoke_gpu::testing::differing_bits(&unchecked, &checked);
            assert_eq!(differ, 0, "{} {s:?}: {differ} entries differ", p.key());
            for i in 0..s.m {
                for j in 0..s.ldc {
                    let v = unchecked[i * s.ldc + j];
                    assert_eq!(j >= s.n, v.is_nan(), "{} {s:?}: C[{i}][{j}] = {v}", p.key());
                }
            }
        }
    }
}

/// The ablated kernels (`mm dense-bench --ablate`) compute what `ablated_reference` says they do, on ragged shapes
/// with C poisoned: a timing of an ablation is a timing of that work, not of a kernel that skipped it.
#[test]
fn ablated_kernels_compute_their_reference() {
    use bespoke_mm::dense::{Ablation, ablated_reference};
    let Some(gpu) = test_gpu() else { return };
    let mut r = rng();
    let (m, n, k) = (37, 52, 43);
    let s = GemmShape::packed(m, n, k);
    let round = |v: Vec<f64>| v.iter().map(|&x| f64::from(x as f32)).collect::<Vec<f64>>();
    for p in configs_on(gpu, DType::F32, |p| p.split_k == 1) {
        for ablation in [Ablation::StageOnce, Ablation::FragmentsOnce] {
            let a = round(random(&mut r, m * k));
            let b = round(random(&mut r, k * n));
            let want = ablated_reference(ablation, p.kc as usize, &a, &b, (m, n, k));
            let f32s = |v: &[f64]| v.iter().map(|&x| x as f32).collect::<Vec<f32>>();
            let (ab, bb) = (
                gpu.upload(&f32s(&a)).unwrap(),
                gpu.upload(&f32s(&b)).unwrap(),
            );
            let cb = gpu.upload(&vec![f32::NAN; m * n]).unwrap();
            let g = DenseGemm {
                ablation,
                ..DenseGemm::new(s, DType::F32, p, 1.0, 0.0).unwrap()
            };
            gpu.run(&g.plan(gpu, &ab, &bb, &cb).unwrap().launches())
                .unwrap();
            let got: Vec<f64> = gpu
                .read(&cb)
                .unwrap()
                .iter()
                .map(|&x| f64::from(x))
                .collect();
            let e = rel_err(&got, &want, s.c());
            assert!(e < 1e-5, "{} {ablation:?}: relative error {e}", p.key());
            // Not the product: the ablation changed what was computed.
            let mut product = vec![0.0; m * n];
            bespoke_mm::reference::gemm_ref(1.0, &a, s.a(), &b, s.b(), 0.0, &mut product, s.c());
            assert!(
                rel_err(&got, &product, s.c()) > 1e-2,
                "{} {ablation:?}",
                p.key()
            );
        }
    }
}
