//! Launches, tables and panels split past small binding and buffer limits; wrong sizes refused.

use super::*;

/// 4 KiB bindings: B (29 rows × 256 f32 = 1 KiB each) and C split into several blocks and launches. Where the
/// offset alignment makes an aligned block of rows larger (WebGPU's 256 B: 16 rows of C's 260 f32, 8 of the
/// packed panel's 1000), one such block: C (31 rows) still splits. Every variant at one β; one test a β, so that
/// the harness runs them at once (each on its own emulating device, whose compiles lavapipe runs on its own
/// queue thread).
fn launches_split_past_a_small_binding_limit(beta: f64) {
    let Some(shared) = test_gpu() else { return };
    let block = [256, 260, 1000]
        .map(|ld| shared.row_block_bytes::<f32>(&[ld], &[1]))
        .into_iter()
        .fold(4096, u64::max);
    let gpu = emulating(
        shared,
        GpuOptions {
            max_binding_bytes: Some(block),
            max_storage_buffers_per_stage: Some(FEW_STORAGE_BUFFERS),
            ..Default::default()
        },
    );
    let mut r = rng();
    let op = random_operator(&mut r, 31, 29, 0.5);
    let ran = all_variants::<f32>(
        &gpu,
        &mut r,
        &op,
        beta,
        Panel {
            n: 250,
            ldb: 256,
            ldc: 260,
        },
    );
    assert!(ran >= 15, "{beta}: {ran}");
    let k = SpecKernel::new(
        &gpu,
        &op,
        Variant::all()[0],
        DType::F32,
        beta,
        Panel::packed(1000),
    )
    .unwrap();
    assert!(k.sources().len() > 1, "expected several launches");
}

#[test]
fn launches_split_past_a_small_binding_limit_without_c() {
    launches_split_past_a_small_binding_limit(0.0);
}

#[test]
fn launches_split_past_a_small_binding_limit_adding_c() {
    launches_split_past_a_small_binding_limit(1.0);
}

#[test]
fn launches_split_past_a_small_binding_limit_scaling_c() {
    launches_split_past_a_small_binding_limit(0.5);
}

/// The rolled family's table lives in uniform buffers: on an adapter with small uniform bindings (512 bytes:
/// 128 offsets and columns, 128 f32 or 64 f64 coefficients) the rows go in several launches whose tables fit,
/// each checked against the CPU reference; a block of rows whose table alone does not fit is refused by name.
#[test]
fn rolled_tables_split_past_a_small_uniform_binding() {
    let Some(shared) = test_gpu() else { return };
    let gpu = Gpu::with_options(GpuOptions {
        adapter_name: Some(shared.adapter_name().to_owned()),
        max_uniform_binding_bytes: Some(512),
        ..Default::default()
    })
    .unwrap();
    assert_eq!(gpu.limits().max_uniform_buffer_binding_size, 512);
    let mut r = rng();
    // 40×30 at ~60% non-zeros: ~720 entries, several tables of at most 128 words.
    let op = random_operator(&mut r, 40, 30, 0.4);
    let panel = Panel {
        n: 70,
        ldb: 72,
        ldc: 76,
    };
    let mut ran = 0;
    for (name, dtype) in [
        ("rolled-r1", DType::F32),
        ("rolled-r4-v2", DType::F32),
        ("rolled-r1", DType::F64),
    ] {
        if dtype == DType::F64 && !gpu.has_f64() {
            continue;
        }
        for beta in [0.0, 1.0, -0.5] {
            let v = Variant::parse(name).unwrap();
            let k = SpecKernel::new(&gpu, &op, v, dtype, beta, panel).unwrap();
            assert!(
                k.sources().len() >= 4,
                "{name}: {} launches",
                k.sources().len()
            );
            let e = match dtype {
                DType::F32 => check::<f32>(&gpu, &mut r, &op, &k),
                DType::F64 => check::<f64>(&gpu, &mut r, &op, &k),
            };
            let tol = if dtype == DType::F32 { 1e-5 } else { 1e-12 };
            assert!(e <= tol, "{name} {dtype} β = {beta}: {e:e}");
            ran += 1;
        }
    }
    assert!(ran >= 6, "{ran}");
    // Blocks of 8 rows × 30 used columns need 240 coefficients: past the 128 one table holds.
    let dense = Operator::from_dense("full", 8, 30, vec![0.25; 240]).unwrap();
    let e = SpecKernel::new(
        &gpu,
        &dense,
        Variant::parse("rolled-r8").unwrap(),
        DType::F32,
        0.0,
        panel,
    )
    .unwrap_err();
    assert!(
        matches!(&e, MmError::NotApplicable { reason, .. } if reason.contains("512-byte uniform table")),
        "{e}"
    );
}

#[test]
fn wrong_buffer_sizes_are_refused() {
    let Some(gpu) = test_gpu() else { return };
    let op = Operator::from_dense("x", 3, 2, vec![1.0; 6]).unwrap();
    let k = SpecKernel::new(
        gpu,
        &op,
        Variant::all()[0],
        DType::F32,
        0.0,
        Panel::packed(64),
    )
    .unwrap();
    let b = gpu.alloc::<f32>(2 * 64 - 1).unwrap();
    let c = gpu.alloc::<f32>(3 * 64).unwrap();
    let e = k.plan(gpu, &b, &c).unwrap_err().to_string();
    assert!(e.contains("B holds 127 elements"), "{e}");
    // One buffer as B and C: refused by name (wgpu refused the dispatch, in its own words).
    let bc = gpu.alloc::<f32>(3 * 64).unwrap();
    let e = k.plan(gpu, &bc, &bc).unwrap_err().to_string();
    assert!(e.starts_with("C and B are the same buffer"), "{e}");
    assert!(
        SpecKernel::new(
            gpu,
            &op,
            Variant::all()[0],
            DType::F32,
            f64::NAN,
            Panel::packed(4)
        )
        .is_err()
    );
    let e = SpecKernel::new(
        gpu,
        &op,
        Variant::all()[0],
        DType::F32,
        0.0,
        Panel {
            n: 8,
            ldb: 4,
            ldc: 8,
        },
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("ldb = 4"), "{e}");
}

/// A panel whose B passes the adapter's largest buffer (hex-p6-m132's at N = 2^20 on an H200 stopped `bespoke
/// bench`) goes in column blocks: here a 64 KiB `max_buffer_size` makes a 29-row B of 1000 f32 columns (116 KB)
/// two blocks. The blocked product equals the one-block product on the unconstrained device bit for bit, for
/// scalar, vector and rolled kernels at β = 0 (C poisoned) and β ≠ 0, and `bench_operator` runs there.
#[test]
fn panels_past_the_largest_buffer_go_in_column_blocks() {
    use bespoke_mm::specialise::{Choice, ColumnBlocks, MatMul, TuneOptions, bench_operator};
    let Some(shared) = test_gpu() else { return };
    let small = emulating(
        shared,
        GpuOptions {
            max_buffer_bytes: Some(1 << 16),
            ..Default::default()
        },
    );
    assert_eq!(small.limits().max_buffer_size, 1 << 16);
    let mut r = rng();
    let op = random_operator(&mut r, 13, 29, 0.5);
    let n = 1000;
    let blocks = ColumnBlocks::for_adapter(&small, op.m, op.k, DType::F32, n).unwrap();
    assert!(blocks.count >= 2, "{blocks:?}");
    let (b, _) = random_panels(&mut r, &op, Panel::packed(n), 0.0);
    let b: Vec<f32> = b.iter().map(|&v| v as f32).collect();
    // The GPU's failure, here: the whole B is past the buffer limit.
    let e = small.upload(&b).unwrap_err().to_string();
    assert!(e.contains("maximum"), "{e}");
    for name in ["cstream", "bstream-v4", "rolled-r4-v4"] {
        for beta in [0.0, 0.5] {
            let (_, c0) = random_panels(&mut r, &op, Panel::packed(n), beta);
            let c0: Vec<f32> = c0.iter().map(|&v| v as f32).collect();
            let choice = Choice::Spec(Variant::parse(name).unwrap());
            let blocked =
                MatMul::<f32>::with_choice(&small, &op, beta, blocks.panel(), choice).unwrap();
            let mut got = c0.clone();
            blocked
                .run_host(&small, &blocks, (&b, n), (&mut got, n))
                .unwrap();
            let whole =
                MatMul::<f32>::with_choice(shared, &op, beta, Panel::packed(n), choice).unwrap();
            let mut want = c0.clone();
            whole
                .run_host(shared, &ColumnBlocks::whole(n), (&b, n), (&mut want, n))
                .unwrap();
            let differ = got
                .iter()
                .zip(&want)
                .filter(|(g, w)| g.to_bits() != w.to_bits())
                .count();
            assert_eq!(differ, 0, "{name} β={beta}: {differ} values differ");
            // And both are right.
            let mut reference: Vec<f64> = c0.iter().map(|&v| f64::from(v)).collect();
            let bf: Vec<f64> = b.iter().map(|&v| f64::from(v)).collect();
            let a: Vec<f64> = op.values().iter().map(|&v| f64::from(v as f32)).collect();
            let sc = Shape::new(op.m, n, n);
            gemm_ref(
                1.0,
                &a,
                Shape::new(op.m, op.k, op.k),
                &bf,
                Shape::new(op.k, n, n),
                beta,
                &mut reference,
                sc,
            );
            let got: Vec<f64> = got.iter().map(|&v| f64::from(v)).collect();
            let e = rel_err(&got, &reference, sc);
            assert!(e <= 1e-5, "{name} β={beta}: rel err {e:e}");
        }
    }
    // The bench path: tuned and checked on a block, timed over both.
    let opts = TuneOptions {
        variants: Some(vec![Variant::parse("bstream-v2").unwrap()]),
        dense: bespoke_mm::specialise::DenseSource::Off,
        use_cache: false,
        reps: 1,
        budget_seconds: None,
        ..Default::default()
    };
    let r = bench_operator::<f32>(&small, &op, 0.5, Panel::packed(n), &opts, fresh_seed()).unwrap();
    assert!(r.rel_err <= 1e-5 && r.seconds > 0.0, "{r:?}");
    // A random operator at half zeros may have a column of zeros already (13 rows: about 1 draw in 300), so the
    // count is read, not assumed.
    let used = op.used_columns();
    assert_eq!(r.bytes, (4 * n * (used.len() + 2 * op.m)) as f64);
    // A column of zeros in A needs no row of B: the minimum bytes leave that row out.
    let hole = used[0];
    let mut a = op.values().to_vec();
    for i in 0..op.m {
        a[i * op.k + hole] = 0.0;
    }
    let holed = Operator::from_dense("holed", op.m, op.k, a).unwrap();
    assert_eq!(holed.used_columns().len(), used.len() - 1);
    let r =
        bench_operator::<f32>(&small, &holed, 0.5, Panel::packed(n), &opts, fresh_seed()).unwrap();
    assert!(r.rel_err <= 1e-5, "{r:?}");
    assert_eq!(r.bytes, (4 * n * (used.len() - 1 + 2 * op.m)) as f64);
}

/// Held to WebGPU's limits (256 invocations a workgroup, 16 KiB of workgroup memory), bstream-msplit-s8 (512
/// invocations) and the larger stages (`-smem32`, `-smem48`) are refused by the limit they pass; on the adapter's
/// own limits each runs where it fits (lavapipe: 1024 invocations, 32 KiB, so `-smem48` is refused there) and
/// matches the CPU reference with more rows of B than one default chunk holds (several chunks of 64 or 128 rows).
#[test]
fn msplit_workgroups_and_stages_follow_the_adapters_limits() {
    let Some(shared) = test_gpu() else { return };
    let web = emulating(
        shared,
        GpuOptions {
            limits: Some(bespoke_gpu::LimitsProfile::WebGpu),
            ..Default::default()
        },
    );
    let mut r = rng();
    // 140 rows of B: 3 chunks at the default 16 KiB (64 f32 rows of 64 columns), 2 at 32 KiB.
    let op = random_operator(&mut r, 12, 140, 0.9);
    let panel = Panel::packed(520);
    let refused = |gpu: &Gpu, name: &str| -> Option<String> {
        match SpecKernel::new(
            gpu,
            &op,
            Variant::parse(name).unwrap(),
            DType::F32,
            0.5,
            panel,
        ) {
            Err(MmError::NotApplicable { reason, .. }) => Some(reason),
            Err(e) => panic!("{name}: {e}"),
            Ok(_) => None,
        }
    };
    let e = refused(&web, "bstream-msplit-s8").unwrap();
    assert!(e.contains("64×8") && e.contains("256 invocations"), "{e}");
    let e = refused(&web, "bstream-msplit-s4-smem32").unwrap();
    assert!(e.contains("32768 bytes") && e.contains("16384"), "{e}");
    assert_eq!(refused(&web, "bstream-msplit-s4"), None);
    let limits = shared.limits();
    for name in [
        "bstream-msplit-s8",
        "bstream-msplit-s8-smem32",
        "bstream-msplit-s2-smem48",
        "bstream-msplit-s4-a1024-smem32",
    ] {
        let v = Variant::parse(name).unwrap();
        let fits = v.workgroup().0 * v.workgroup().1
            <= limits.max_compute_invocations_per_workgroup
            && v.stage_bytes() <= limits.max_compute_workgroup_storage_size as usize;
        assert_eq!(refused(shared, name).is_none(), fits, "{name}");
        if fits {
            for beta in [0.0, 0.5] {
                let k = SpecKernel::new(shared, &op, v, DType::F32, beta, panel).unwrap();
                let e = check::<f32>(shared, &mut r, &op, &k);
                assert!(e <= 1e-5, "{name} β={beta}: rel err {e:e}");
            }
        }
    }
}
