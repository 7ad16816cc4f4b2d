//! Tests of the dense GEMM's parameters: keys, bounds, the lane layouts and the legal space.

use super::*;

#[test]
fn keys_past_the_bounds_are_refused_not_wrapped() {
    // 2³⁰ rows a register tile, 4 rows of invocations: a block of 2³² rows wrapped to 0, and every check passed.
    for (key, why) in [
        ("t1073741824x1v1-w4x8-k4-s1", "tm = 1073741824 is past 256"),
        ("t4x4v4-w65536x65536-k4-s1", "wgm = 65536 is past 1024"),
        ("t4x4v4-w8x8-k2147483648-s2", "kc = 2147483648 is past 256"),
        (
            "t4x4v4-w8x8-k4-s2147483648",
            "split_k = 2147483648 is past 65536",
        ),
        ("t0x4v4-w8x8-k4-s1", "power of two"),
        ("t4x4v4-w8x8-k4-s0", "power of two"),
    ] {
        let p = DenseParams::parse(key).expect(key);
        let e = p.check_key().expect_err(key);
        assert!(e.contains(why), "{key}: {e}");
        let e = key.parse::<DenseParams>().expect_err(key);
        assert!(e.contains(key) && e.contains(why), "{e}");
        let e = p
            .check(DType::F64, &TileLimits::WEBGPU_DEFAULT)
            .expect_err(key);
        assert!(e.contains(why), "{key}: {e}");
    }
    // At every bound at once nothing wraps: the workgroup memory is computed, not 0, and refused.
    let edge = DenseParams::parse("t256x256v4-w1024x1024-k256-s65536-b2").expect("edge key");
    assert!(edge.check_key().is_ok());
    let exact = 2 * 256 * (256 * 1024 + 4 + 256 * 1024) as u64 * 8;
    assert_eq!(u64::from(edge.shared_bytes(DType::F64)), exact);
    assert!(edge.check(DType::F64, &TileLimits::WEBGPU_DEFAULT).is_err());
    // The legal space is inside the bounds.
    assert!("t8x8v4-w16x16-k8-s1".parse::<DenseParams>().is_ok());
}

#[test]
fn spelled_accesses_count_the_unrolled_loads_and_stores() {
    let p = DenseParams::parse("t16x32v4-w4x16-k4-s1").unwrap();
    // 4 vec4 A loads + 8 B loads per k step; 128 C stores, and 128 C loads when C is read.
    assert_eq!(p.spelled_accesses(false), 140);
    assert_eq!(p.spelled_accesses(true), 268);
    // Split-K writes partial sums only, whatever β.
    let s = DenseParams { split_k: 4, ..p };
    assert_eq!(s.spelled_accesses(true), 140);
    // Scalar A loads below 4 rows, scalar B loads at vec 1.
    let q = DenseParams::parse("t2x4v1-w16x16-k8-s1").unwrap();
    assert_eq!(q.spelled_accesses(true), 2 + 4 + 2 * 8);
    // K in blocks: β = 0 compiles its own kernel and the β = 1 one the later blocks accumulate with.
    assert_eq!(p.compiled_accesses(0.0, true), vec![140, 268]);
    assert_eq!(p.compiled_accesses(1.0, true), vec![268]);
    assert_eq!(p.compiled_accesses(0.0, false), vec![140]);
    assert_eq!(s.compiled_accesses(0.5, true), vec![140]);
    // Unrolled, the 12 loads of a k step are spelled out k = 4 times.
    assert_eq!(p.unrolled().spelled_accesses(false), 12 * 4 + 128);
}

#[test]
fn groups_count_ragged_tiles_and_split_slices() {
    // 64×128 tiles.
    let p = DenseParams::parse("t4x8v4-w16x16-k8-s1").unwrap();
    assert_eq!(p.groups(4096, 4096), 64 * 32);
    assert_eq!(p.groups(65, 129), 2 * 2);
    assert_eq!(DenseParams { split_k: 4, ..p }.groups(64, 128), 4);
}

#[test]
fn keys_round_trip() {
    let p = DenseParams {
        tm: 8,
        tn: 4,
        wgm: 16,
        wgn: 32,
        kc: 8,
        vec: 4,
        split_k: 2,
        stages: 1,
        unroll: false,
        lanes: Lanes::Paired,
    };
    assert_eq!(DenseParams::parse(&p.key()), Some(p));
    let u = DenseParams { stages: 2, ..p }.unrolled();
    assert_eq!(u.key(), "t8x4v4-w16x32-k8-s2-b2-u");
    assert_eq!(DenseParams::parse(&u.key()), Some(u));
    assert_eq!(
        DenseParams::parse("t8x4v4-w16x32-k8-s2-u"),
        Some(p.unrolled())
    );
    for bad in [
        "t8x4v4-w16x32-k8-s2-u-u",
        "t8x4v4-w16x32-k8-s2-ub2",
        "t8x4v4-w16x32-k8-s2u",
    ] {
        assert_eq!(DenseParams::parse(bad), None, "{bad}");
    }
    // Lanes in rows (`-r`), before the unrolled suffix.
    let r = p.in_rows();
    assert_eq!(r.key(), "t8x4v4-w16x32-k8-s2-r");
    assert_eq!(DenseParams::parse(&r.key()), Some(r));
    assert_eq!(
        DenseParams::parse("t8x4v4-w16x32-k8-s2-b2-r-u"),
        Some(DenseParams { stages: 2, ..r }.unrolled())
    );
    for bad in ["t8x4v4-w16x32-k8-s2-u-r", "t8x4v4-w16x32-k8-s2-r-r"] {
        assert_eq!(DenseParams::parse(bad), None, "{bad}");
    }
    assert_eq!(DenseParams::parse("t8x4"), None);
    assert_eq!(DenseParams::parse("x8x4v4-w16x32-k8-s2"), None);
}

/// Every workgroup shape of the legal space and a few past it: each layout gives every invocation a tile of
/// its own; paired, lanes l and l ^ 1 share a column and l and l ^ 2 a row, and a group of 32 covers 2, 4 or 8
/// rows; workgroups that cannot be cut so (one column, or fewer rows than a group covers) are laid in rows.
#[test]
fn each_lane_layout_takes_every_tile_once() {
    let base = DenseParams::parse("t4x4v4-w4x4-k8-s1").unwrap();
    let mut paired_shapes = 0;
    for wgm in [1, 2, 4, 8, 16, 32, 64] {
        for wgn in [1, 2, 4, 8, 16, 32, 64, 128] {
            let p = DenseParams { wgm, wgn, ..base };
            for q in [p, p.in_rows()] {
                let mut seen = std::collections::HashSet::new();
                for lid in 0..q.threads() {
                    let (tx, ty) = q.lane_position(lid);
                    assert!(tx < wgn && ty < wgm, "{}: {lid} → ({tx}, {ty})", q.key());
                    assert!(seen.insert((tx, ty)), "{}: ({tx}, {ty}) twice", q.key());
                }
            }
            if wgn < 2 || wgm * wgn.min(16) < 32 {
                assert_eq!(p.paired_group(), None, "{}", p.key());
                continue;
            }
            let (w, h) = p.paired_group().expect("a paired group");
            paired_shapes += 1;
            assert_eq!((w, h), (wgn.min(16), 32 / wgn.min(16)));
            assert_eq!(p.in_rows().paired_group(), None);
            for lid in 0..p.threads() {
                let (tx, ty) = p.lane_position(lid);
                let (tx1, ty1) = p.lane_position(lid ^ 1);
                let (tx2, ty2) = p.lane_position(lid ^ 2);
                assert!(
                    tx1 == tx && ty1 != ty,
                    "{}: lanes {lid}, {}",
                    p.key(),
                    lid ^ 1
                );
                assert!(
                    ty2 == ty && tx2 != tx,
                    "{}: lanes {lid}, {}",
                    p.key(),
                    lid ^ 2
                );
            }
        }
    }
    assert!(paired_shapes >= 20, "{paired_shapes}");
    for dtype in [DType::F32, DType::F64] {
        for p in legal_space(dtype, &TileLimits::WEBGPU_DEFAULT) {
            assert!(p.paired_group().is_some(), "{}", p.key());
        }
    }
}

#[test]
fn space_respects_limits() {
    let lim = TileLimits::WEBGPU_DEFAULT;
    let s32 = legal_space(DType::F32, &lim);
    let s64 = legal_space(DType::F64, &lim);
    assert!(s32.len() > 100, "{}", s32.len());
    assert!(s64.len() < s32.len());
    for p in &s32 {
        assert!(
            p.threads() <= 256 && p.shared_bytes(DType::F32) <= 16384 && p.tn % p.vec == 0,
            "{p:?}"
        );
    }
    // CUTLASS's SIMT SGEMM point (128×128×8, 8×8 per thread, 256 threads) is legal at the default limits.
    let cutlass = DenseParams {
        tm: 8,
        tn: 8,
        wgm: 16,
        wgn: 16,
        kc: 8,
        vec: 4,
        split_k: 1,
        stages: 1,
        unroll: false,
        lanes: Lanes::Paired,
    };
    assert!(s32.contains(&cutlass));
    // In f64 its staging, A rows padded against bank conflicts, passes 16 KiB: 8·(132 + 128)·8 B.
    assert_eq!(cutlass.shared_bytes(DType::F64), 16640);
    assert!(cutlass.check(DType::F64, &lim).is_err());
    assert!(
        DenseParams { kc: 4, ..cutlass }
            .check(DType::F64, &lim)
            .is_ok()
    );
    // Double-buffered it needs twice the workgroup memory and carries one vec4 of A and one of B per
    // invocation (8·128/4 and 8·16·2 staged vectors over 256 invocations).
    let b2 = DenseParams {
        stages: 2,
        ..cutlass
    };
    assert_eq!(
        b2.shared_bytes(DType::F32),
        2 * cutlass.shared_bytes(DType::F32)
    );
    assert_eq!(b2.prefetch_slots(), (1, 1));
    assert_eq!(b2.operand_registers(), 8 + 8 + 4 + 4);
    assert!(!s32.contains(&b2), "16 640 B past the default 16 KiB");
    let lim32k = TileLimits {
        shared_bytes: 32768,
        ..lim
    };
    assert!(legal_space(DType::F32, &lim32k).contains(&b2));
    assert_eq!(DenseParams::parse(&b2.key()), Some(b2));
    assert_eq!(b2.key(), "t8x8v4-w16x16-k8-s1-b2");
    let widest = DenseParams {
        tm: 32,
        tn: 32,
        wgm: 4,
        wgn: 8,
        kc: 4,
        ..cutlass
    };
    assert!(widest.check(DType::F32, &lim).is_ok());
    assert!(
        widest.check(DType::F64, &lim).is_err(),
        "1024 f64 accumulators exceed the measured curve"
    );
}
