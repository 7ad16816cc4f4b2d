//! The WGSL of one kernel per generator family, pinned as insta snapshots (`tests/snapshots/`): a change to a
//! generator shows up as a reviewable diff of what the driver receives. Accept an intended change with
//! `cargo insta review` (or `INSTA_UPDATE=always cargo test -p bespoke-mm --test snapshots`), then read the diff.

use bespoke_mm::DType;
use bespoke_mm::dense::{DenseParams, Epilogue, dense_wgsl, splitk_reduce_wgsl};
use bespoke_mm::popcount::popcount_wgsl;
use bespoke_mm::specialise::{Beta, Family, Layout, Operator, Variant, generate};

/// A fixed 6×5 operator with zeros, a repeated coefficient (for folding) and both signs.
fn operator() -> Operator {
    #[rustfmt::skip]
    let a = vec![
        0.5, 0.0, -1.25, 0.0, 0.0,
        0.0, 0.0, 0.0, 0.0, 0.0,
        0.5, 0.5, 0.0, 0.75, 0.0,
        0.0, -0.1, 0.0, 0.0, 2.0,
        1.0 / 3.0, 0.0, 0.0, 0.0, 0.5,
        0.0, 0.0, 0.0, -1.25, 0.0,
    ];
    Operator::from_dense("snapshot", 6, 5, a).expect("a valid operator")
}

#[test]
fn one_specialised_kernel_per_family() {
    let op = operator();
    let rows = op.rows();
    let layout = Layout::single(&rows, op.k, Beta::Other(0.5), 256, 256, 256).expect("one binding");
    for family in Family::ALL {
        let (split, fold) = match family {
            Family::CStream => (1, true),
            Family::BStream => (1, false),
            Family::BStreamMsplit | Family::CStreamKsplit => (2, false),
            Family::Rolled => (4, false),
        };
        let v = Variant::new(family, 2, split, fold);
        let src = generate(&rows, &layout, v, DType::F32)
            .unwrap_or_else(|s| panic!("{}: {}", v.name(), s.0));
        insta::assert_snapshot!(format!("spec-{}", v.name()), src);
    }
}

#[test]
fn f64_literals() {
    let op = operator();
    let rows = op.rows();
    let layout = Layout::single(&rows, op.k, Beta::Zero, 64, 64, 64).expect("one binding");
    let v = Variant::new(Family::CStream, 1, 1, false);
    let src = generate(&rows, &layout, v, DType::F64).expect("cstream applies");
    insta::assert_snapshot!("spec-cstream-f64", src);
}

#[test]
fn dense_popcount_and_reduction() {
    let p = DenseParams {
        tm: 4,
        tn: 4,
        wgm: 8,
        wgn: 8,
        kc: 8,
        vec: 4,
        split_k: 1,
        stages: 1,
        unroll: false,
        lanes: bespoke_mm::dense::Lanes::Paired,
    };
    insta::assert_snapshot!(
        "dense-t4x4v4-w8x8-k8",
        dense_wgsl(&p, DType::F32, Epilogue::Beta)
    );
    // The double-buffered member of the family (stages 2).
    insta::assert_snapshot!(
        "dense-t4x4v4-w8x8-k8-b2",
        dense_wgsl(
            &DenseParams { stages: 2, ..p },
            DType::F32,
            Epilogue::BetaZero
        )
    );
    insta::assert_snapshot!(
        "splitk-reduce-f32-v4-s4",
        splitk_reduce_wgsl(DType::F32, 4, 4, Epilogue::BetaOne)
    );
    let pop = DenseParams { vec: 1, ..p };
    insta::assert_snapshot!("popcount-t4x4v1-w8x8-k8", popcount_wgsl(&pop));
}
