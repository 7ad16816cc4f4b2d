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

/// hex-p6-m132 as the shipped file has it, planned in one binding of B and C each at N = 1024 under a launch cap,
/// and the rows of B a plan's launches read (once each a launch), summed.
struct HexP6M132 {
    op: Operator,
    rows: Vec<RowTerms>,
    beta: Beta,
}

impl HexP6M132 {
    fn load() -> Self {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/data/pyfr/hex-p6-m132-dflt.mtx");
        let op = read_mtx(&path).unwrap();
        let rows = op.rows();
        let beta = Beta::of(op.beta_hint.unwrap());
        Self { op, rows, beta }
    }

    fn plan(&self, cap: LaunchCap) -> Vec<Layout> {
        plan_whole(&self.op, &self.rows, self.beta, 1024, cap)
    }

    fn b_rows(&self, layouts: &[Layout]) -> usize {
        layouts
            .iter()
            .map(|l| super::emit::used_rows(&super::generate::work(&self.rows, l)).len())
            .sum()
    }
}

/// hex-p6-m132 (343×1029, 7056 non-zeros) at a GPU's default launch length goes in 4 launches that read B's rows
/// 1776 times (1.73× its 1029; 2093, 2.03×, in row order: the launches group rows that share rows of B); every
/// unrolled family's long twin takes it in one launch that reads each once, and its source validates (issue 35:
/// the operator's goal is twice the access floor, which reads B once).
#[test]
fn long_twins_read_each_row_of_b_once_on_hex_p6_m132_without_a_device() {
    use super::generate::cap_of;
    let hex = HexP6M132::load();
    let (op, rows) = (&hex.op, &hex.rows);
    let plan = |cap| hex.plan(cap);
    let b_rows = |layouts: &[Layout]| hex.b_rows(layouts);
    let gpu_default = cap_of(Variant::new(Family::CStream, 1, 1, false), false, 2048);
    let short = plan(gpu_default);
    assert_eq!((short.len(), b_rows(&short)), (4, 1776));
    assert!(short.iter().any(|l| matches!(l.rows, LaunchRows::List(_))));
    for name in [
        "cstream",
        "bstream",
        "bstream-msplit-s4",
        "cstream-ksplit-s4",
    ] {
        let long = Variant::parse(name).unwrap().long_twin().unwrap();
        let layouts = plan(cap_of(long, false, 2048));
        assert_eq!((layouts.len(), b_rows(&layouts)), (1, op.k), "{long}");
        let src = generate(rows, &layouts[0], long, DType::F32).unwrap();
        validate_everywhere(&src, DType::F32.caps()).unwrap_or_else(|e| panic!("{long}: {e}"));
    }
    // Two invocation rows would each keep 172 accumulators: past the register budget, refused.
    let s2 = Variant::parse("bstream-msplit-s2-a4096").unwrap();
    let e = generate(rows, &plan(cap_of(s2, false, 2048))[0], s2, DType::F32).unwrap_err();
    assert!(e.0.contains("register budget"), "{}", e.0);
}

/// hex-p6-m132's mid twins go in 2 launches reading B's rows 1372 times (1.33× its 1029, a slab of the tensor
/// product each, against 1421 in row order and the default's 1.73×), msplit's at most 50 accumulators an
/// invocation at s4 (87 in one launch); in one launch, msplit-s8 keeps 44 (one more than dealt; f64 within the
/// register budget, which s4's are not), and its `-smem48` stage takes B in chunks of 192 rows (f32) instead of
/// 64; in one launch at s4 the invocation rows load 1913 staged rows of B a column, not one per term. Every such
/// source validates.
#[test]
fn mid_twins_and_stages_on_hex_p6_m132_without_a_device() {
    use super::generate::cap_of;
    let hex = HexP6M132::load();
    let rows = &hex.rows;
    let plan = |v: Variant| hex.plan(cap_of(v, false, 2048));
    let b_rows = |layouts: &[Layout]| hex.b_rows(layouts);
    let accumulators = |src: &str| src.matches("    var acc_").count();
    let checked = |v: Variant, dtype: DType| -> Vec<String> {
        plan(v)
            .iter()
            .map(|l| {
                let src =
                    generate(rows, l, v, dtype).unwrap_or_else(|e| panic!("{v} {dtype}: {e}"));
                validate_everywhere(&src, dtype.caps())
                    .unwrap_or_else(|e| panic!("{v} {dtype}: {e}"));
                src
            })
            .collect()
    };
    let mid = Variant::parse("bstream-msplit-s4-a1024").unwrap();
    let layouts = plan(mid);
    assert_eq!((layouts.len(), b_rows(&layouts)), (2, 1372));
    let most = checked(mid, DType::F32)
        .iter()
        .map(|s| accumulators(s))
        .max();
    assert_eq!(most, Some(50));
    checked(mid, DType::F64);
    let s8 = Variant::parse("bstream-msplit-s8-a4096").unwrap();
    for dtype in [DType::F32, DType::F64] {
        let src = checked(s8, dtype);
        assert_eq!(src.len(), 1);
        assert_eq!(accumulators(&src[0]), 44, "{dtype}");
        assert_eq!(
            src[0].matches("// chunk ").count(),
            1029usize.div_ceil(16384 / (64 * dtype.size()))
        );
    }
    let s4 = Variant::parse("bstream-msplit-s4-a4096").unwrap();
    // Each invocation row loads a staged row of B once for all its accumulators (scatter order), its rows
    // grouped by the rows of B they share: 1913 loads of workgroup memory a column, where in consecutive slices
    // (z-slabs of the 7³ lattice) they load 2226, dealt by non-zeros 2808, and a dot product per row one per
    // term (7056).
    let src = checked(s4, DType::F32);
    assert_eq!(src[0].matches(" = sb[").count(), 1913);
    let e = generate(rows, &plan(s4)[0], s4, DType::F64).unwrap_err();
    assert!(e.0.contains("register budget"), "{}", e.0);
    let staged = s8.with_stage(48).unwrap();
    let src = checked(staged, DType::F32);
    assert!(src[0].contains("var<workgroup> sb: array<f32, 12288>;"));
    assert_eq!(src[0].matches("// chunk ").count(), 1029usize.div_ceil(192));
}

/// The rolled family's tables group the rows that read the same rows of B: on hex-p6-m132 (its rows read three
/// lines of a 7 × 7 × 7 lattice each) fewer loads of B a column than consecutive blocks, in launches whose
/// tables fit the 64 KiB uniform bindings, every row in exactly one block of one launch.
#[test]
fn rolled_blocks_load_b_fewer_times_than_consecutive_rows_on_hex_p6_m132() {
    use super::families::{TableSize, rolled_table};
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/pyfr/hex-p6-m132-dflt.mtx");
    let op = read_mtx(&path).unwrap();
    let rows = op.rows();
    let size = TableSize::default();
    let t0 = std::time::Instant::now();
    for (r, before) in [(4, 5558), (8, 5059)] {
        let layouts = plan_layouts(
            &rows,
            Beta::Zero,
            std::slice::from_ref(&(0..op.k)),
            std::slice::from_ref(&(0..op.m)),
            (1024, 1024, 1024),
            2,
            LaunchCap::Table {
                r,
                tab_words: size.tab_words(),
                coef_elems: size.coef_elems(DType::F32),
            },
        )
        .unwrap();
        let mut seen = vec![0; op.m];
        let mut loads = 0;
        for l in &layouts {
            let t = rolled_table(&rows, l, r);
            t.bytes(DType::F32, size).unwrap();
            let (blocks, entries) = super::layout::rolled_blocks(&rows, l.rows.span(), &l.ks, r);
            assert_eq!(t.blocks, blocks.len());
            for i in blocks.into_iter().flatten() {
                seen[i] += 1;
            }
            loads += entries;
        }
        assert!(seen.iter().all(|&s| s == 1), "r = {r}: {seen:?}");
        // Consecutive blocks of the whole operator loaded `before` (rolled-r8-v4 is what the H200 ran on
        // 2026-11-28); grouped, 5197 and 4350.
        assert!(
            loads * 100 < before * 95,
            "r = {r}: {loads} loads against {before}"
        );
        eprintln!(
            "r = {r}: {} launches, {loads} loads of B a column (consecutive rows: {before})",
            layouts.len()
        );
    }
    eprintln!("planned in {:.2} s", t0.elapsed().as_secs_f64());
}

/// Rows grouped out of order store where they belong: in an operator whose rows i, i + 4, i + 8, … read the same
/// eight columns, the rolled blocks are those rows, not consecutive ones (22 rows: the last block is short), and
/// rolled-r4 and rolled-r8 compute C = A·B + β·C against the f64 CPU reference on fresh random B and C (C
/// poisoned at β = 0).
#[test]
fn rolled_blocks_of_rows_out_of_order_store_each_row_where_it_belongs() {
    use super::matmul::{Choice, MatMul};
    use bespoke_gpu::rng::Rng;
    let Some(gpu) = bespoke_gpu::testing::test_gpu() else {
        return;
    };
    let (m, k) = (22, 32);
    let seed = bespoke_gpu::testing::fresh_seed();
    let mut rng = bespoke_gpu::rng::seeded(seed);
    let a: Vec<f64> = (0..m * k)
        .map(|x| {
            let (i, p) = (x / k, x % k);
            let v: f64 = rng.random_range(0.1..2.0);
            if p / 8 == i % 4 {
                if rng.random_bool(0.5) { v } else { -v }
            } else {
                0.0
            }
        })
        .collect();
    let op = Operator::from_dense("interleaved", m, k, a).unwrap();
    let rows = op.rows();
    for r in [4, 8] {
        let (blocks, entries) = super::layout::rolled_blocks(&rows, 0..m, &(0..k), r as usize);
        assert!(
            blocks
                .iter()
                .any(|b| b.windows(2).any(|w| w[1] != w[0] + 1)),
            "r = {r}: {blocks:?}"
        );
        // Consecutive blocks would read all 32 columns each.
        assert!(entries < 32 * m.div_ceil(r as usize), "r = {r}: {entries}");
        for beta in [0.0, 0.5] {
            let v = Variant::new(Family::Rolled, 4, r, false);
            let panel = Panel {
                n: 100,
                ldb: 104,
                ldc: 108,
            };
            let mm = MatMul::<f32>::with_choice(gpu, &op, beta, panel, Choice::Spec(v)).unwrap();
            let e = device_error(gpu, &op, &mm, seed ^ u64::from(r));
            assert!(e <= 1e-5, "{} β = {beta}: rel err {e:e}", v.name());
        }
    }
}

/// On the shipped operators at a CPU adapter's caps and a GPU's (default and mid launches): every row of C in
/// exactly one launch, each launch within its cap, and never more rows of B loaded than the launches in row
/// order load (fewer on the tensor-product operators: hex-p3-m0 at 256 terms a launch 93 against 128).
#[test]
fn launches_grouped_by_shared_rows_of_b_on_the_shipped_operators_without_a_device() {
    use super::layout::in_order_loads;
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/pyfr");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "mtx"))
        .collect();
    files.sort();
    assert_eq!(files.len(), 9);
    let (mut fewer, mut grouped) = (0, 0);
    for f in &files {
        let op = read_mtx(f).unwrap();
        let rows = op.rows();
        let beta = Beta::of(op.beta_hint.unwrap_or(0.0));
        for cap in [
            LaunchCap::Terms(256),
            LaunchCap::Accesses(512),
            LaunchCap::Terms(2048),
            LaunchCap::Accesses(1024),
        ] {
            let what = format!("{} {cap:?}", op.name);
            let layouts = plan_whole(&op, &rows, beta, 64, cap);
            let mut seen = vec![0; op.m];
            for l in &layouts {
                let work = super::generate::work(&rows, l);
                let b = super::emit::used_rows(&work).len();
                let (terms, stores) = (
                    work.iter().map(|(_, t)| t.len()).sum::<usize>(),
                    l.rows
                        .iter()
                        .filter(|&i| l.writes(&rows, i))
                        .map(|i| {
                            if beta == Beta::Zero || rows[i].is_empty() {
                                1
                            } else {
                                2
                            }
                        })
                        .sum::<usize>(),
                );
                let size = match cap {
                    LaunchCap::Terms(_) => terms,
                    _ => b + stores,
                };
                let limit = match cap {
                    LaunchCap::Terms(t) | LaunchCap::Accesses(t) => t,
                    LaunchCap::Table { .. } => unreachable!(),
                };
                assert!(
                    size <= limit || l.rows.len() == 1,
                    "{what}: a launch of {size}"
                );
                for i in l.rows.iter() {
                    seen[i] += 1;
                }
                grouped += usize::from(matches!(l.rows, LaunchRows::List(_)));
            }
            assert!(seen.iter().all(|&n| n == 1), "{what}: {seen:?}");
            let loads: usize = layouts
                .iter()
                .map(|l| super::emit::used_rows(&super::generate::work(&rows, l)).len())
                .sum();
            let before = in_order_loads(&rows, 0..op.m, &(0..op.k), beta, cap);
            assert!(
                loads <= before,
                "{what}: {loads} rows of B against {before} in order"
            );
            fewer += usize::from(loads < before);
            if op.name.starts_with("hex-p3-m0") && cap == LaunchCap::Terms(256) {
                assert_eq!((loads, before), (93, 128), "{what}");
            }
        }
    }
    assert!(
        fewer >= 5 && grouped > 0,
        "{fewer} plans load fewer, {grouped} launches grouped"
    );
}
