//! Specialised kernels on the device against the f64 CPU reference: every variant × f32/f64 × β ∈ {0, 1, 0.5},
//! N not a multiple of the workgroup or the vector width, ldb/ldc > N, random operators at 0–99 % zeros and the
//! shipped PyFR matrices, outputs and padding poisoned, and launches split past a small binding limit.

#![allow(clippy::unwrap_used)] // a failed unwrap is a failed test

use bespoke_gpu::testing::{emulating, fresh_seed, test_gpu};
use bespoke_gpu::{AdapterClass, Gpu, GpuBuffer, GpuOptions, Launch};
use bespoke_mm::dense::Element;
use bespoke_mm::reference::{Shape, gemm_ref, rel_err};
use bespoke_mm::specialise::{AccessFloor, Family, Operator, Panel, SpecKernel, Variant, read_mtx};
use bespoke_mm::{DType, MmError};
use rand::{Rng, SeedableRng, rngs::StdRng};

fn rng() -> StdRng {
    StdRng::seed_from_u64(fresh_seed())
}

/// Tuner options for these variants beside a small fixed dense tiling (no model to measure), `reps` timed runs
/// a finalist, decisions not cached.
fn fixed_options(variants: &[&str], reps: usize) -> bespoke_mm::specialise::TuneOptions {
    use bespoke_mm::dense::DenseParams;
    use bespoke_mm::specialise::{DenseSource, TuneOptions};
    TuneOptions {
        variants: Some(
            variants
                .iter()
                .map(|n| Variant::parse(n).unwrap())
                .collect(),
        ),
        dense: DenseSource::Fixed(DenseParams::parse("t4x4v4-w8x8-k8-s1").unwrap()),
        reps,
        use_cache: false,
        ..Default::default()
    }
}

/// A random operator with about `zeros` of its entries zero, drawn from few magnitudes of both signs (so
/// folding has work) plus some unique values.
fn random_operator(r: &mut StdRng, m: usize, k: usize, zeros: f64) -> Operator {
    let pool: Vec<f64> = (0..5).map(|_| r.random_range(0.1..2.0)).collect();
    let a = (0..m * k)
        .map(|_| {
            if r.random_bool(zeros) {
                0.0
            } else if r.random_bool(0.7) {
                pool[r.random_range(0..pool.len())] * if r.random_bool(0.5) { 1.0 } else { -1.0 }
            } else {
                r.random_range(-1.0..1.0)
            }
        })
        .collect();
    Operator::from_dense(format!("random{m}x{k}"), m, k, a).unwrap()
}

/// Fresh random B and C for `op` on panel `p` in f64: NaN in the padding past N, and in all of C at β = 0 (which
/// must overwrite it).
fn random_panels(r: &mut StdRng, op: &Operator, p: Panel, beta: f64) -> (Vec<f64>, Vec<f64>) {
    let mut b = vec![f64::NAN; op.k * p.ldb];
    let mut c = vec![f64::NAN; op.m * p.ldc];
    for i in 0..op.k {
        for j in 0..p.n {
            b[i * p.ldb + j] = r.random_range(-1.0..1.0);
        }
    }
    if beta != 0.0 {
        for i in 0..op.m {
            for j in 0..p.n {
                c[i * p.ldc + j] = r.random_range(-1.0..1.0);
            }
        }
    }
    (b, c)
}

/// Uploads B and C (rounded to `T`), runs `launches` of the kernel `plan` binds, and returns the C it left
/// (in f64) after checking that the padding past N was not written, with the rounded inputs.
fn run_on_device<T: Element>(
    gpu: &Gpu,
    (b, c): (&[f64], &[f64]),
    m: usize,
    p: Panel,
    what: &str,
    plan: impl Fn(&GpuBuffer<T>, &GpuBuffer<T>) -> Vec<Launch>,
) -> (Vec<f64>, Vec<f64>, Vec<f64>) {
    let to_t = |v: &[f64]| v.iter().map(|&x| T::from_f64(x)).collect::<Vec<T>>();
    let back = |v: &[T]| v.iter().map(|x| x.to_f64()).collect::<Vec<f64>>();
    let (bt, ct) = (to_t(b), to_t(c));
    let (bb, cb) = (gpu.upload(&bt).unwrap(), gpu.upload(&ct).unwrap());
    let launches = plan(&bb, &cb);
    gpu.run(&launches.iter().collect::<Vec<_>>()).unwrap();
    let got = back(&gpu.read(&cb).unwrap());
    for i in 0..m {
        for j in p.n..p.ldc {
            assert!(
                got[i * p.ldc + j].is_nan(),
                "{what}: padding C[{i}][{j}] written"
            );
        }
    }
    (got, back(&bt), back(&ct))
}

/// Runs `kernel` on fresh random B and C (NaN where C must be overwritten, NaN padding) and returns the
/// relative error against the f64 reference computed on the same rounded inputs.
fn check<T: Element>(gpu: &Gpu, r: &mut StdRng, op: &Operator, kernel: &SpecKernel) -> f64 {
    let p = kernel.panel;
    let (sb, sc) = (Shape::new(op.k, p.n, p.ldb), Shape::new(op.m, p.n, p.ldc));
    let (b, c) = random_panels(r, op, p, kernel.beta);
    let what = format!("{} on {}", kernel.variant, op.name);
    let (got, b, mut want) = run_on_device::<T>(gpu, (&b, &c), op.m, p, &what, |bb, cb| {
        kernel.plan(gpu, bb, cb).unwrap()
    });
    let a: Vec<f64> = op
        .values()
        .iter()
        .map(|&x| T::from_f64(x).to_f64())
        .collect();
    gemm_ref(
        1.0,
        &a,
        Shape::new(op.m, op.k, op.k),
        &b,
        sb,
        kernel.beta,
        &mut want,
        sc,
    );
    let e = rel_err(&got, &want, sc);
    assert!(e.is_finite(), "{what}: unwritten or non-finite output");
    e
}

/// Every applicable variant of `op` for one precision, β and panel; returns how many ran.
fn all_variants<T: Element>(
    gpu: &Gpu,
    r: &mut StdRng,
    op: &Operator,
    beta: f64,
    panel: Panel,
) -> usize {
    let tol = if T::DTYPE == DType::F32 { 1e-5 } else { 1e-12 };
    let mut ran = 0;
    // A variant whose kernels are an earlier one's but for the header naming it (a larger stage than the rows of
    // B fill: one chunk either way) runs what already ran, as the tuner knows.
    let mut seen: Vec<Vec<String>> = Vec::new();
    for v in Variant::all() {
        let kernel = match SpecKernel::new(gpu, op, v, T::DTYPE, beta, panel) {
            Ok(k) => k,
            Err(MmError::NotApplicable { .. }) => continue,
            Err(e) => panic!("{v}: {e}"),
        };
        let bodies: Vec<String> = kernel
            .sources()
            .iter()
            .map(|s| s.split_once('\n').map_or(*s, |(_, b)| b).to_owned())
            .collect();
        if seen.contains(&bodies) {
            continue;
        }
        seen.push(bodies);
        let e = check::<T>(gpu, r, op, &kernel);
        assert!(
            e <= tol,
            "{v} {} β={beta} {panel:?}: rel err {e:e}",
            op.name
        );
        ran += 1;
    }
    ran
}

/// A device on `shared`'s adapter that kernels treat as `class` (the other branch of a CPU/GPU choice).
fn as_class(shared: &Gpu, class: AdapterClass) -> Gpu {
    emulating(
        shared,
        GpuOptions {
            adapter_class: Some(class),
            ..Default::default()
        },
    )
}

/// Storage buffers per stage in the binding-limit tests: lavapipe grants 32, an NVIDIA GPU thousands. Pinned to
/// lavapipe's, so that the 4 KiB bindings split launches on every adapter as they do there (on the H200 they all
/// fit one launch and the tests that expected a split failed).
const FEW_STORAGE_BUFFERS: u32 = 32;

/// Runs a tuned product on random B and C and returns its error against the reference.
fn check_matmul(
    gpu: &Gpu,
    r: &mut StdRng,
    op: &Operator,
    mm: &bespoke_mm::specialise::MatMul<f32>,
) -> f64 {
    let p = mm.panel;
    let (sb, sc) = (Shape::new(op.k, p.n, p.ldb), Shape::new(op.m, p.n, p.ldc));
    let b: Vec<f32> = (0..sb.min_len())
        .map(|_| r.random_range(-1.0..1.0))
        .collect();
    let c: Vec<f32> = (0..sc.min_len())
        .map(|_| r.random_range(-1.0..1.0))
        .collect();
    let back = |v: &[f32]| v.iter().map(|x| f64::from(*x)).collect::<Vec<f64>>();
    let a = back(&op.values().iter().map(|v| *v as f32).collect::<Vec<_>>());
    let mut want = back(&c);
    gemm_ref(
        1.0,
        &a,
        Shape::new(op.m, op.k, op.k),
        &back(&b),
        sb,
        mm.beta,
        &mut want,
        sc,
    );
    let (bb, cb) = (gpu.upload(&b).unwrap(), gpu.upload(&c).unwrap());
    mm.run(gpu, &bb, &cb).unwrap();
    rel_err(&back(&gpu.read(&cb).unwrap()), &want, sc)
}

mod floor;
mod limits;
mod precompile;
mod tune;
mod variants;
