//! Dense tiled GEMM: parameter space, WGSL generator, runner.

pub mod bench;
pub mod choose;
pub mod microbench;
pub mod model;
pub mod params;
pub mod run;
pub mod sample;
pub mod sweep;
pub mod wgsl;

pub use choose::{CheckedPick, checked_pick, checked_pick_on, shortlist};
pub use model::{Machine, MachineSource, Prediction};
pub use params::{DenseParams, Lanes, MAX_ACC_BYTES, TileLimits, legal_space};
pub use run::{DenseGemm, Element, GemmPlan, GemmShape};
pub use wgsl::{
    Ablation, Epilogue, ablated_reference, ablated_wgsl, dense_wgsl, splitk_reduce_wgsl,
};

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dtype::DType;
    use bespoke_gpu::{validate_everywhere, validate_wgsl};

    /// Wide limits (1024 invocations, 32 KiB of workgroup memory): the legal space the generator tests validate.
    fn wide_limits() -> TileLimits {
        TileLimits {
            max_invocations: 1024,
            max_wg_x: 1024,
            max_wg_y: 1024,
            shared_bytes: 32768,
        }
    }

    /// Every legal configuration, both precisions, the two structurally different stores: naga accepts them all.
    #[test]
    fn every_legal_kernel_validates_without_a_device() {
        let lim = wide_limits();
        // Every legal point with β (the general epilogue); the other epilogues once per register-tile shape (their
        // text differs from β's only in the store, and wgm/wgn/kc change only constants).
        let mut n = 0;
        let mut shapes = std::collections::HashSet::new();
        let mut workgroups = std::collections::HashSet::new();
        for dtype in [DType::F32, DType::F64] {
            for p in legal_space(dtype, &lim) {
                // Lanes paired (the space's own) and, once per workgroup shape, laid in rows (`-r`).
                let mut kernels = vec![(p, Epilogue::Beta)];
                // A register-tile shape's first tiling also in every backend's language (naga's SPIR-V, MSL,
                // HLSL and GLSL writers, `validate_everywhere`): three times the cost, so once per shape.
                let new_shape = shapes.insert((dtype, p.tm, p.tn, p.vec));
                if new_shape {
                    kernels.extend(
                        [Epilogue::BetaZero, Epilogue::BetaOne, Epilogue::Partial].map(|e| (p, e)),
                    );
                }
                if workgroups.insert((dtype, p.wgm, p.wgn)) {
                    kernels.push((p.in_rows(), Epilogue::Beta));
                }
                for (q, epi) in kernels {
                    let src = dense_wgsl(&q, dtype, epi);
                    let checked = if new_shape {
                        validate_everywhere(&src, dtype.caps())
                    } else {
                        validate_wgsl(&src, dtype.caps()).map(|_| ())
                    };
                    if let Err(e) = checked {
                        panic!("{} {dtype} {epi:?}: {e}", q.key());
                    }
                    n += 1;
                }
            }
        }
        assert!(n > 500, "{n} kernels validated");
    }

    /// Unrolled twins (`-u`): once per register tile, staging and precision, with the deepest kc the space has,
    /// each of its kc steps spelled out with a constant index and no K-step loop left.
    #[test]
    fn unrolled_twins_validate_without_a_device() {
        let lim = wide_limits();
        let mut deepest = std::collections::HashMap::new();
        for dtype in [DType::F32, DType::F64] {
            for p in legal_space(dtype, &lim) {
                let e = deepest
                    .entry((dtype, p.tm, p.tn, p.vec, p.stages))
                    .or_insert(p);
                if p.kc > e.kc {
                    *e = p;
                }
            }
        }
        assert!(deepest.len() > 100, "{}", deepest.len());
        for ((dtype, ..), p) in deepest {
            let u = p.unrolled();
            let src = dense_wgsl(&u, dtype, Epilogue::Beta);
            if let Err(e) = validate_everywhere(&src, dtype.caps()) {
                panic!("{} {dtype}: {e}", u.key());
            }
            assert!(!src.contains("for (var kk"), "{}", u.key());
            for k in [0, p.kc - 1] {
                assert!(src.contains(&format!("let kk = {k}u;")), "{}", u.key());
            }
            assert!(
                !src.contains(&format!("let kk = {}u;", p.kc)),
                "{}",
                u.key()
            );
            let rolled = dense_wgsl(&p, dtype, Epilogue::Beta);
            assert!(rolled.contains("for (var kk = 0u;"), "{}", p.key());
            assert!(!rolled.contains("let kk = 0u;"), "{}", p.key());
        }
        let pop = crate::dense::params::DenseParams::parse("t4x4v1-w8x8-k8-s1-u").unwrap();
        let src = crate::popcount::popcount_wgsl(&pop);
        validate_everywhere(&src, DType::F32.caps()).unwrap();
        assert!(src.contains("let kk = 7u;") && !src.contains("for (var kk"));
    }

    /// The ablated kernels (`mm dense-bench --ablate`): once per register tile, staging and precision, rolled and
    /// unrolled, both ablations validate; stage-once has no loads of A or B inside its K loop and no prefetch,
    /// fragments-once reads each tile's fragments at its first step only.
    #[test]
    fn ablated_kernels_validate_without_a_device() {
        let lim = wide_limits();
        let mut one = std::collections::HashMap::new();
        for dtype in [DType::F32, DType::F64] {
            for p in legal_space(dtype, &lim) {
                one.entry((dtype, p.tm, p.tn, p.vec, p.stages)).or_insert(p);
            }
        }
        assert!(one.len() > 100, "{}", one.len());
        for ((dtype, ..), p) in one {
            for q in [p, p.unrolled()] {
                // One epilogue: the ablations change the K loop, which every epilogue shares.
                for epi in [Epilogue::BetaZero] {
                    let plain = dense_wgsl(&q, dtype, epi);
                    for a in [Ablation::StageOnce, Ablation::FragmentsOnce] {
                        let src = ablated_wgsl(&q, dtype, epi, a);
                        if let Err(e) = validate_everywhere(&src, dtype.caps()) {
                            panic!("{} {dtype} {a:?}: {e}", q.key());
                        }
                        assert_ne!(src, plain);
                    }
                    let once = ablated_wgsl(&q, dtype, epi, Ablation::StageOnce);
                    let k_loop = once.split("for (var k0").nth(1).unwrap();
                    assert!(
                        !k_loop.contains("= a[") && !k_loop.contains("= b["),
                        "{}",
                        q.key()
                    );
                    assert!(
                        !once.contains("pa_0") && !once.contains("pb_0"),
                        "{}",
                        q.key()
                    );
                    let frag = ablated_wgsl(&q, dtype, epi, Ablation::FragmentsOnce);
                    assert!(!frag.contains("kk * AROW") && frag.contains("0u * AROW"));
                    assert!(plain.contains("kk * AROW") && !plain.contains("0u * AROW"));
                }
            }
        }
        assert_eq!(
            "fragments-once".parse::<Ablation>(),
            Ok(Ablation::FragmentsOnce)
        );
        assert!(
            "stage"
                .parse::<Ablation>()
                .unwrap_err()
                .contains("stage-once")
        );
    }

    /// The ablations' reference on a hand-worked case: K = 3 in tiles of 2 (one padded), 1×1.
    #[test]
    fn the_ablated_reference_counts_what_each_ablation_reads() {
        let (a, b) = ([1.0, 2.0, 3.0], [10.0, 100.0, 1000.0]);
        let run = |x| ablated_reference(x, 2, &a, &b, (1, 1, 3))[0];
        assert_eq!(run(Ablation::None), 3210.0);
        // Both tiles on the first: (10 + 200) twice.
        assert_eq!(run(Ablation::StageOnce), 420.0);
        // Each tile's first step twice: (10 + 3000) × 2.
        assert_eq!(run(Ablation::FragmentsOnce), 6020.0);
    }

    #[test]
    fn every_epilogue_and_reduction_validates() {
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
            lanes: crate::dense::Lanes::Paired,
        };
        for dtype in [DType::F32, DType::F64] {
            for epi in [
                Epilogue::BetaZero,
                Epilogue::BetaOne,
                Epilogue::Beta,
                Epilogue::Partial,
            ] {
                validate_everywhere(&dense_wgsl(&p, dtype, epi), dtype.caps()).unwrap();
                for vec in [1, 4] {
                    validate_everywhere(&splitk_reduce_wgsl(dtype, vec, 4, epi), dtype.caps())
                        .unwrap();
                }
            }
        }
    }
}
