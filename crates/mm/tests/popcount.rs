//! Popcount GEMM and LD r² on the device against the CPU: bit-exact counts on random bits and ragged shapes,
//! poisoned outputs and padding, padded row strides, forced row blocks, and bad input.

#![allow(clippy::unwrap_used)] // a failed unwrap is a failed test

use bespoke_gpu::testing::{fresh_seed, test_gpu};
use bespoke_gpu::{Gpu, GpuOptions};
use bespoke_mm::dense::DenseParams;
use bespoke_mm::ld::{SnpMatrix, ld, ld_ref};
use bespoke_mm::popcount::{PopShape, popcount_plan, popcount_ref};
use rand::{Rng, SeedableRng, rngs::StdRng};

const POISON: u32 = u32::MAX;

fn params(tm: u32, tn: u32, wgm: u32, wgn: u32, kc: u32) -> DenseParams {
    DenseParams {
        tm,
        tn,
        wgm,
        wgn,
        kc,
        vec: 1,
        split_k: 1,
        stages: 1,
        unroll: false,
        lanes: bespoke_mm::dense::Lanes::Paired,
    }
}

/// Runs one popcount GEMM with padded strides; checks every count bit-exactly and the padding untouched.
fn check(gpu: &Gpu, r: &mut StdRng, s: PopShape, p: DenseParams) {
    let a: Vec<u32> = (0..s.m * s.lda).map(|_| r.random()).collect();
    let b: Vec<u32> = (0..s.n * s.ldb).map(|_| r.random()).collect();
    let (da, db) = (gpu.upload(&a).unwrap(), gpu.upload(&b).unwrap());
    let dc = gpu.alloc_filled(s.m * s.ldc, POISON).unwrap();
    let plan = popcount_plan(gpu, &s, &p, &da, &db, &dc).unwrap();
    gpu.run(&plan.launches()).unwrap();
    let got = gpu.read(&dc).unwrap();
    let want = popcount_ref(&s, &a, &b);
    for i in 0..s.m {
        for j in 0..s.ldc {
            let g = got[i * s.ldc + j];
            if j < s.n {
                assert_eq!(g, want[i * s.n + j], "{s:?} {} at ({i}, {j})", p.key());
            } else {
                assert_eq!(g, POISON, "{s:?} {}: padding ({i}, {j}) written", p.key());
            }
        }
    }
}

#[test]
fn counts_are_bit_exact_on_ragged_shapes() {
    let Some(gpu) = test_gpu() else { return };
    let mut r = StdRng::seed_from_u64(fresh_seed());
    let configs = [
        params(1, 1, 8, 8, 4),
        params(4, 4, 8, 16, 8),
        params(8, 8, 16, 16, 8),
        params(2, 8, 16, 8, 32),
        // The K steps unrolled (`-u`).
        params(4, 4, 8, 16, 8).unrolled(),
        params(2, 8, 16, 8, 32).unrolled(),
    ];
    for (m, n, w) in [
        (1, 1, 1),
        (37, 45, 5),
        (130, 3, 70),
        (3, 129, 33),
        (64, 64, 8),
    ] {
        for p in configs {
            let s = PopShape {
                m,
                n,
                words: w,
                lda: w + 3,
                ldb: w + 1,
                ldc: n + 2,
            };
            check(gpu, &mut r, s, p);
        }
    }
}

#[test]
fn row_blocks_past_the_binding_limit() {
    if test_gpu().is_none() {
        return;
    }
    let gpu = Gpu::with_options(GpuOptions {
        max_binding_bytes: Some(16 << 10),
        ..Default::default()
    })
    .unwrap();
    let mut r = StdRng::seed_from_u64(fresh_seed());
    // A is 300 × 40 words = 48 KB and C 300 × 50 = 60 KB: several row blocks.
    check(
        &gpu,
        &mut r,
        PopShape::packed(300, 50, 40),
        params(4, 4, 8, 8, 8),
    );
}

#[test]
fn ld_matches_the_cpu() {
    let Some(gpu) = test_gpu() else { return };
    let seed = fresh_seed();
    let a = SnpMatrix::random(61, 1000, seed).unwrap();
    let b = SnpMatrix::random(35, 1000, seed ^ 1).unwrap();
    let got = ld(gpu, &a, &b, Some(params(4, 4, 8, 8, 8)), None, 0).unwrap();
    let want = ld_ref(&a, &b).unwrap();
    assert_eq!(got.r2.len(), 61 * 35);
    for (g, w) in got.r2.iter().zip(&want) {
        assert!(
            g.is_nan() == w.is_nan() && (g.is_nan() || (g - w).abs() <= 1e-6),
            "{g} vs {w}"
        );
    }
    // LD of a set with itself: the diagonal is 1 and the generator's copied neighbours are strong.
    let selfld = ld(gpu, &a, &a, Some(params(2, 2, 8, 8, 4)), None, 0).unwrap();
    for i in 0..a.snps {
        assert!((selfld.r2[i * a.snps + i] - 1.0).abs() < 1e-12);
    }
    assert!(
        selfld.r2[1] > 0.5,
        "SNP 1 copies SNP 0: r² = {}",
        selfld.r2[1]
    );
}

#[test]
fn bad_input_is_an_error() {
    let Some(gpu) = test_gpu() else { return };
    let a = SnpMatrix::random(4, 64, 1).unwrap();
    let b = SnpMatrix::random(4, 65, 1).unwrap();
    let e = ld(gpu, &a, &b, Some(params(4, 4, 8, 8, 8)), None, 0).unwrap_err();
    assert!(e.to_string().contains("64 and 65 samples"), "{e}");
    let s = PopShape::packed(4, 4, 2);
    let da = gpu.upload(&[0u32; 7]).unwrap();
    let dc = gpu.alloc::<u32>(16).unwrap();
    let e = popcount_plan(gpu, &s, &params(4, 4, 8, 8, 8), &da, &da, &dc).unwrap_err();
    assert!(e.to_string().contains("A holds 7 words"), "{e}");
    let vec4 = DenseParams {
        vec: 4,
        ..params(4, 4, 8, 8, 8)
    };
    let db = gpu.upload(&[0u32; 8]).unwrap();
    assert!(popcount_plan(gpu, &s, &vec4, &db, &db, &dc).is_err());
    // C written while it is read.
    let dc8 = gpu.alloc::<u32>(16).unwrap();
    let p = params(4, 4, 8, 8, 8);
    assert!(popcount_plan(gpu, &s, &p, &db, &db, &dc8).is_ok());
    let e = popcount_plan(gpu, &s, &p, &db, &dc8, &dc8)
        .unwrap_err()
        .to_string();
    assert!(e.starts_with("C and B are the same buffer"), "{e}");
    // The popcount kernel stages through one buffer: a double-buffered key is refused, not run single-buffered
    // under its name.
    let b2 = DenseParams {
        stages: 2,
        ..params(4, 4, 8, 8, 8)
    };
    let e = popcount_plan(gpu, &s, &b2, &db, &db, &dc).unwrap_err();
    assert!(e.to_string().contains("one staging buffer"), "{e}");
    assert!(
        bespoke_mm::popcount::popcount_space(&bespoke_mm::dense::TileLimits::of(gpu))
            .iter()
            .all(|p| p.stages == 1)
    );
}
