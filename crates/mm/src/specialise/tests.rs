//! Every variant × precision × β on random operators of every sparsity, on the shipped PyFR matrices and on
//! multi-binding layouts: the generated WGSL parses and validates with naga, no device needed.

use bespoke_gpu::validate_everywhere;

use super::*;
use crate::dtype::DType;

/// A deterministic pseudo-random operator with about `zeros` of its entries zero and few distinct magnitudes.
pub(crate) fn random_operator(m: usize, k: usize, zeros: f64, seed: u64) -> Operator {
    let mut rng = bespoke_gpu::rng::seeded(seed);
    let mut next = || bespoke_gpu::rng::Rng::random::<f64>(&mut rng);
    let a = (0..m * k)
        .map(|_| {
            if next() < zeros {
                0.0
            } else {
                // Few magnitudes so folding has something to do, both signs.
                let v = [0.5, 1.25, -0.75, 0.3333333333333333][(next() * 4.0) as usize % 4];
                if next() < 0.5 { v } else { -v * 1.0000001 }
            }
        })
        .collect();
    Operator::from_dense("random", m, k, a).unwrap()
}

/// Runs `mm` once on fresh random B and C against the f64 CPU reference (`bench::check_against_cpu`).
pub(crate) fn device_error(
    gpu: &bespoke_gpu::Gpu,
    op: &Operator,
    mm: &MatMul<f32>,
    seed: u64,
) -> f64 {
    super::bench::check_against_cpu(gpu, op, mm, seed).unwrap()
}

fn validate_all(op: &Operator, n: usize, ldb: usize, ldc: usize, blocks: bool) -> usize {
    let rows = op.rows();
    let mut ok = 0;
    for beta in [Beta::Zero, Beta::One, Beta::Other(0.5)] {
        let layouts = if blocks {
            // B and C split into blocks of 5 and 3 rows, at most 6 bindings per launch.
            let b: Vec<_> = (0..op.k).step_by(5).map(|s| s..(s + 5).min(op.k)).collect();
            let c: Vec<_> = (0..op.m).step_by(3).map(|s| s..(s + 3).min(op.m)).collect();
            plan_layouts(&rows, beta, &b, &c, (n, ldb, ldc), 6, LaunchCap::Terms(40)).unwrap()
        } else {
            Layout::single(&rows, op.k, beta, n, ldb, ldc)
                .into_iter()
                .collect()
        };
        for layout in &layouts {
            for dtype in [DType::F32, DType::F64] {
                for v in Variant::all() {
                    match generate(&rows, layout, v, dtype) {
                        Ok(src) => {
                            if let Err(e) = validate_everywhere(&src, dtype.caps()) {
                                panic!("{} {dtype} {beta:?}: {e}\n{src}", v.name());
                            }
                            ok += 1;
                        }
                        Err(Skip(reason)) => assert!(!reason.is_empty()),
                    }
                }
            }
        }
    }
    ok
}

#[test]
fn every_variant_validates_on_random_operators_without_a_device() {
    for (i, zeros) in [0.0, 0.5, 0.9, 0.99].into_iter().enumerate() {
        let op = random_operator(13, 11, zeros, i as u64 + 1);
        let n = validate_all(&op, 64, 64, 68, false);
        assert!(n >= 3 * 2 * 15, "{zeros}: {n} kernels");
    }
}

#[test]
fn multi_binding_layouts_validate() {
    let op = random_operator(10, 17, 0.6, 7);
    assert!(validate_all(&op, 36, 40, 36, true) > 100);
}

#[test]
fn bstream_past_the_register_budget_goes_in_blocks() {
    // 48 rows at 30 % zeros: every row open at once, past 512 bytes at vec4 (16 f64 or 32 f32 accumulators).
    let op = random_operator(48, 6, 0.3, 11);
    let rows = op.rows();
    let l = Layout::single(&rows, op.k, Beta::One, 64, 64, 64).unwrap();
    for (dtype, vec, blocked) in [
        (DType::F64, 4, true),
        (DType::F32, 4, true),
        (DType::F32, 1, false),
    ] {
        let v = Variant::new(Family::BStream, vec, 1, false);
        let src = generate(&rows, &l, v, dtype).unwrap();
        validate_everywhere(&src, dtype.caps())
            .unwrap_or_else(|e| panic!("{} {dtype}: {e}", v.name()));
        assert_eq!(src.contains("// block 1:"), blocked, "{} {dtype}", v.name());
        // Every row of C stored once; B loaded at most once per block, never more than cstream would.
        let nnz = rows.iter().map(Vec::len).sum::<usize>();
        let filled = rows.iter().filter(|r| !r.is_empty()).count();
        assert_eq!(
            src.matches("c0[").count(),
            filled * 2,
            "{} {dtype}",
            v.name()
        );
        let loads = src.matches("b0[").count();
        assert!(
            loads <= nnz,
            "{} {dtype}: {loads} loads of B for {nnz} terms",
            v.name()
        );
        if !blocked {
            assert_eq!(loads, 6, "{} {dtype}", v.name());
        }
    }
}

#[test]
fn odd_n_allows_only_scalar_columns() {
    let op = random_operator(4, 4, 0.3, 3);
    let rows = op.rows();
    let l = Layout::single(&rows, 4, Beta::Zero, 33, 36, 33).unwrap();
    for v in Variant::all() {
        let r = generate(&rows, &l, v, DType::F32);
        if v.vec > 1 {
            assert!(r.unwrap_err().0.contains("multiples"), "{}", v.name());
        } else if !v.fold {
            assert!(r.is_ok(), "{}", v.name());
        }
    }
}

#[test]
fn shipped_pyfr_matrices_validate_without_a_device() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/pyfr");
    let mut n = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "mtx") {
            let op = read_mtx(&path).unwrap();
            assert!(op.beta_hint.is_some(), "{}", path.display());
            let rows = op.rows();
            let l = Layout::single(
                &rows,
                op.k,
                Beta::of(op.beta_hint.unwrap()),
                1024,
                1024,
                1024,
            )
            .unwrap();
            for v in Variant::all().into_iter().filter(|v| v.vec != 2) {
                if let Ok(src) = generate(&rows, &l, v, DType::F64) {
                    validate_everywhere(&src, DType::F64.caps())
                        .unwrap_or_else(|e| panic!("{} {}: {e}", op.name, v.name()));
                    n += 1;
                }
            }
        }
    }
    assert!(n > 50, "{n}");
}

#[test]
fn literals_are_exact_and_zero_rows_follow_beta() {
    // Row 1 is empty: β = 0 writes zero, β = 1 leaves it, other β scales it.
    let op = Operator::from_dense("z", 2, 2, vec![0.1, -1.0 / 3.0, 0.0, 0.0]).unwrap();
    let rows = op.rows();
    let cs = Variant::new(Family::CStream, 1, 1, false);
    let src = |beta, dtype| {
        let l = Layout::single(&rows, 2, beta, 8, 8, 8).unwrap();
        generate(&rows, &l, cs, dtype).unwrap()
    };
    let s = src(Beta::Zero, DType::F64);
    assert!(s.contains("1.0000000000000001e-1lf"), "{s}");
    assert!(s.contains("-3.3333333333333331e-1lf"), "{s}");
    assert!(
        s.contains("c0[col + 8u] = 0.0lf") || s.contains("c0[col + 8u] = 0.0000000000000000e0lf"),
        "{s}"
    );
    let s = src(Beta::Zero, DType::F32);
    assert!(s.contains("0.1 ") || s.contains("0.1;"), "{s}");
    assert!(!src(Beta::One, DType::F32).contains("c0[col + 8u]"));
    assert!(src(Beta::Other(0.25), DType::F32).contains("c0[col + 8u] = c0[col + 8u] * 0.25;"));
}

#[test]
fn folding_multiplies_once_per_magnitude() {
    let op = Operator::from_dense("f", 1, 4, vec![0.5, -0.5, 0.5, 0.25]).unwrap();
    let rows = op.rows();
    let l = Layout::single(&rows, 4, Beta::Zero, 4, 4, 4).unwrap();
    let s = generate(
        &rows,
        &l,
        Variant::new(Family::CStream, 1, 1, true),
        DType::F32,
    )
    .unwrap();
    assert_eq!(s.matches("* 0.5").count(), 1, "{s}");
    assert!(s.contains(" - b0[col + 4u]"), "{s}");
    assert_eq!(s.matches("fma(").count(), 1, "{s}");
    let plain = Operator::from_dense("p", 1, 2, vec![0.5, 0.25]).unwrap();
    let rows = plain.rows();
    let l = Layout::single(&rows, 2, Beta::Zero, 4, 4, 4).unwrap();
    let r = generate(
        &rows,
        &l,
        Variant::new(Family::CStream, 1, 1, true),
        DType::F32,
    );
    assert!(r.unwrap_err().0.contains("nothing to fold"));
}

/// The compile law's size (loads and stores of B and C in the source) counts what the families spell out:
/// cstream one load per term, bstream one per used row of B, both one store per written row (and one read of
/// C per row when β ≠ 0).
#[test]
fn storage_accesses_count_what_each_family_spells_out() {
    use super::run::storage_accesses;
    assert_eq!(
        storage_accesses("c0[col + 0u] = b0[col + 3u] * x + b12[col]; abc0[1]; vb1[2]; As[3]"),
        3
    );
    let op = random_operator(9, 14, 0.6, 7);
    let rows = op.rows();
    let written = rows.iter().filter(|r| !r.is_empty()).count();
    let used_b = op.used_columns().len();
    for (beta, c_reads) in [(Beta::Zero, 0), (Beta::One, written)] {
        let layout = Layout::single(&rows, op.k, beta, 64, 64, 64).unwrap();
        let count = |name: &str| {
            let v = Variant::parse(name).unwrap();
            storage_accesses(&generate(&rows, &layout, v, DType::F32).unwrap())
        };
        // Rows without terms store zero (β = 0) or are left alone (β = 1).
        let stores = if beta == Beta::Zero { op.m } else { written };
        assert_eq!(count("cstream"), op.nnz() + stores + c_reads, "{beta:?}");
        assert_eq!(count("bstream"), used_b + stores + c_reads, "{beta:?}");
        if beta == Beta::Zero {
            // `-touch` reads every row of C it stores, once, right at its store.
            assert_eq!(count("cstream-touch"), op.nnz() + 2 * stores);
            assert_eq!(count("bstream-v2-touch"), used_b + 2 * stores);
        } else {
            let v = Variant::parse("bstream-touch").unwrap();
            let e = generate(&rows, &layout, v, DType::F32).unwrap_err();
            assert!(e.0.contains("only changes β = 0"), "{}", e.0);
        }
    }
}

/// A capped bstream variant (`bstream-a256`, `-a128`) is capped by its own loads and stores on any adapter, the
/// uncapped one by the adapter's default; each launch of a capped plan spells out at most the cap (measured on
/// the generated source) and validates.
#[test]
fn capped_bstream_launches_respect_the_cap_and_validate() {
    use super::generate::cap_of;
    use super::run::storage_accesses;
    let bs = |vec, cap| {
        Variant::new(Family::BStream, vec, 1, false)
            .with_launch_cap(cap)
            .unwrap()
    };
    assert_eq!(cap_of(bs(1, 128), false, 2048), LaunchCap::Accesses(128));
    assert_eq!(cap_of(bs(2, 256), true, 256), LaunchCap::Accesses(256));
    assert_eq!(
        cap_of(bs(2, 0), true, 256),
        LaunchCap::Accesses(CPU_BSTREAM_ACCESSES)
    );
    assert_eq!(cap_of(bs(2, 0), false, 2048), LaunchCap::Terms(2048));
    let cs = Variant::new(Family::CStream, 2, 1, false);
    assert_eq!(cap_of(cs, true, 256), LaunchCap::Terms(256));
    // Banded, as PyFR's operators mostly are (row i reads 6 rows of B from 5i/3 on), so no launch needs
    // accumulator blocks: blocked bstream reloads rows of B per block, past what the cap counts (each row of B
    // once per launch; the compile law sees the kernel's own count, run.rs `storage_accesses`).
    let (m, k) = (120, 206);
    let mut dense = vec![0.0; m * k];
    for i in 0..m {
        for j in 0..6 {
            dense[i * k + i * 5 / 3 + j] = 0.25 + (i + j) as f64 / 64.0;
        }
    }
    let op = Operator::from_dense("banded", m, k, dense).unwrap();
    let rows = op.rows();
    for cap in LAUNCH_CAPS {
        for vec in [1, 2] {
            let v = bs(vec, cap);
            for beta in [Beta::Zero, Beta::One] {
                let layouts = plan_whole(&op, &rows, beta, 64, cap_of(v, true, 256));
                assert!(layouts.len() > 1, "{}: one launch", v.name());
                for layout in &layouts {
                    for dtype in [DType::F32, DType::F64] {
                        let src = generate(&rows, layout, v, dtype).unwrap();
                        validate_everywhere(&src, dtype.caps())
                            .unwrap_or_else(|e| panic!("{} {dtype}: {e}", v.name()));
                        let n = storage_accesses(&src);
                        assert!(n <= cap as usize, "{} {beta:?}: {n} accesses", v.name());
                    }
                }
            }
        }
    }
}

/// `op`'s launches (its rows `rows`) with B and C in one binding each, N = ldb = ldc = `n`, at most 8 bindings,
/// under `cap`.
fn plan_whole(
    op: &Operator,
    rows: &[RowTerms],
    beta: Beta,
    n: usize,
    cap: LaunchCap,
) -> Vec<Layout> {
    let (bk, cm) = (0..op.k, 0..op.m);
    plan_layouts(
        rows,
        beta,
        std::slice::from_ref(&bk),
        std::slice::from_ref(&cm),
        (n, n, n),
        8,
        cap,
    )
    .unwrap()
}

mod loads;
