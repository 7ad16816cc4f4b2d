//! Kernels against their CPU references through the one dispatch path: grids, chunks, bindings, order.

use super::*;

#[test]
fn kernel_matches_cpu_reference() {
    let Some(gpu) = test_gpu() else { return };
    let mut r = rng();
    let n = 50_001usize;
    let x: Vec<f32> = (0..n).map(|_| r.random_range(-1.0..1.0)).collect();
    let y: Vec<f32> = (0..n).map(|_| r.random_range(-1.0..1.0)).collect();
    let a: f32 = r.random_range(0.5..2.0);
    let (xb, yb) = (gpu.upload(&x).unwrap(), gpu.upload(&y).unwrap());
    let zb = gpu.alloc_filled(n, f32::NAN).unwrap();
    let k = Kernel::new("axpy", AXPY);
    let l = gpu
        .prepare(
            &k,
            &[
                xb.arg(),
                yb.arg(),
                zb.arg(),
                Arg::uniform(&[a.to_bits(), n as u32]),
            ],
            Grid::cover(n as u64, 64).unwrap(),
        )
        .unwrap();
    gpu.run(&[&l]).unwrap();
    let z = gpu.read(&zb).unwrap();
    for i in 0..n {
        let want = a.mul_add(x[i], y[i]);
        assert!(
            (z[i] - want).abs() <= 1e-6 * want.abs().max(1.0),
            "z[{i}] = {} want {want}",
            z[i]
        );
    }
    // The second prepare of the same kernel hits the pipeline cache: the same compiled pipeline comes back (not a
    // count of pipelines, which the tests running beside this one on the shared device change).
    let first = gpu.pipeline(&k).unwrap();
    gpu.prepare(
        &k,
        &[xb.arg(), yb.arg(), zb.arg(), Arg::uniform(&[0u32, 0])],
        Grid::d1(1),
    )
    .unwrap();
    assert!(std::sync::Arc::ptr_eq(&first, &gpu.pipeline(&k).unwrap()));
}

/// A one-workgroup launch runs the same pipeline and bindings over the grid's first workgroup only: the rest of
/// the output keeps its poison.
#[test]
fn one_group_runs_the_first_workgroup_only() {
    let Some(gpu) = test_gpu() else { return };
    let mut r = rng();
    let n = 1000usize;
    let x: Vec<f32> = (0..n).map(|_| r.random_range(-1.0..1.0)).collect();
    let y: Vec<f32> = (0..n).map(|_| r.random_range(-1.0..1.0)).collect();
    let (xb, yb) = (gpu.upload(&x).unwrap(), gpu.upload(&y).unwrap());
    let zb = gpu.alloc_filled(n, f32::NAN).unwrap();
    let l = gpu
        .prepare(
            &Kernel::new("axpy", AXPY),
            &[
                xb.arg(),
                yb.arg(),
                zb.arg(),
                Arg::uniform(&[2.0f32.to_bits(), n as u32]),
            ],
            Grid::cover(n as u64, 64).unwrap(),
        )
        .unwrap();
    let one = l.one_group();
    assert_eq!(one.dispatch_count(), 1);
    gpu.run(&[&one]).unwrap();
    let z = gpu.read(&zb).unwrap();
    for i in 0..64 {
        let want = 2.0f32.mul_add(x[i], y[i]);
        assert!(
            (z[i] - want).abs() <= 1e-6 * want.abs().max(1.0),
            "z[{i}] = {}",
            z[i]
        );
    }
    assert!(
        z[64..].iter().all(|v| v.is_nan()),
        "past the first workgroup"
    );
    gpu.run(&[&l]).unwrap();
    assert!(gpu.read(&zb).unwrap().iter().all(|v| v.is_finite()));
}

/// f64 kernels run where the adapter has SHADER_F64, and are refused by name where not: on this adapter and on a
/// device opened without the feature (Apple's GPUs through Metal, Intel's Arc), so both branches run anywhere.
#[test]
fn f64_kernels_run_where_the_adapter_has_them() {
    let Some(shared) = test_gpu() else { return };
    let bare = emulating(
        shared,
        GpuOptions {
            without_features: bespoke_gpu::wgpu::Features::SHADER_F64,
            ..Default::default()
        },
    );
    assert!(!bare.has_f64());
    for gpu in [shared, &bare] {
        f64_kernel_runs_or_is_refused(gpu);
    }
}

fn f64_kernel_runs_or_is_refused(gpu: &Gpu) {
    let src = "@group(0) @binding(0) var<storage, read_write> x: array<f64>;
               @compute @workgroup_size(64) fn main(@builtin(global_invocation_id) g: vec3<u32>) {
                   if g.x < arrayLength(&x) { x[g.x] = fma(x[g.x], 3.0lf, 1.0lf / 3.0lf); } }";
    let k = Kernel::new("f64_fma", src);
    let mut r = rng();
    let v: Vec<f64> = (0..1000).map(|_| r.random_range(-1.0..1.0)).collect();
    let b = gpu.upload(&v).unwrap();
    match gpu.prepare(&k, &[b.arg()], Grid::cover(1000, 64).unwrap()) {
        Ok(l) => {
            assert!(
                gpu.has_f64(),
                "an f64 kernel compiled on an adapter without SHADER_F64"
            );
            gpu.run(&[&l]).unwrap();
            let out = gpu.read(&b).unwrap();
            for (o, i) in out.iter().zip(&v) {
                assert_eq!(
                    *o,
                    i.mul_add(3.0, 1.0 / 3.0),
                    "f64 must be true double precision"
                );
            }
        }
        // Expected failure on adapters without f64 (GL, Metal, DX12): a clear error naming the feature.
        Err(GpuError::MissingFeature { feature, .. }) => {
            assert!(!gpu.has_f64());
            assert_eq!(feature, "SHADER_F64");
        }
        Err(e) => panic!("unexpected error: {e}"),
    }
}

#[test]
fn data_past_the_binding_limit_is_chunked() {
    if test_gpu().is_none() {
        return;
    }
    // A second device whose binding limit is forced down to 64 KiB, so 1.6 MB needs 25 windows.
    let gpu = Gpu::with_options(GpuOptions {
        max_binding_bytes: Some(64 << 10),
        ..Default::default()
    })
    .unwrap();
    assert_eq!(gpu.binding_limit(), 64 << 10);
    let mut r = rng();
    let n = 100_003;
    let data: Vec<[f32; 4]> = (0..n)
        .map(|_| [r.random(), r.random(), r.random(), r.random()])
        .collect();
    let src = gpu.upload(&data).unwrap();
    let windows = gpu.windows::<[f32; 4]>(n, 1).unwrap();
    assert!(windows.len() > 20, "{} windows", windows.len());
    assert_eq!(windows.iter().map(|w| w.len).sum::<usize>(), n);
    for v in CopyVariant::CANDIDATES {
        let dst = gpu.alloc_filled(n, [f32::NAN; 4]).unwrap();
        let launches = gpu.copy_launches(&src, &dst, v).unwrap();
        assert_eq!(launches.len(), windows.len());
        gpu.run(&launches.iter().collect::<Vec<_>>()).unwrap();
        assert!(
            gpu.read(&dst).unwrap() == data,
            "copy variant {} lost data",
            v.name()
        );
    }
    // Binding the whole buffer at once is refused with the limit named.
    let k = Kernel::new(
        "noop",
        "@group(0) @binding(0) var<storage, read_write> x: array<f32>;
        @compute @workgroup_size(1) fn main() { x[0] = 1.0; }",
    );
    match gpu.prepare(&k, &[src.arg()], Grid::d1(1)) {
        Err(GpuError::LimitExceeded { asked, max, .. }) => {
            assert_eq!(max, 64 << 10);
            assert!(asked > max);
        }
        other => panic!("expected a limit error, got {other:?}"),
    }
}

const GRID_ID: &str = "
@group(0) @binding(0) var<storage, read_write> out: array<u32>;
@compute @workgroup_size(4)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let w = bespoke_workgroup_linear(wid);
    let i = w * 4u + lid;
    if i < arrayLength(&out) { out[i] = i * 3u + 1u; }
}";

#[test]
fn grids_past_65535_workgroups_are_split() {
    let Some(gpu) = test_gpu() else { return };
    let k = Kernel::new("grid_id", format!("{}{GRID_ID}", bespoke_gpu::GRID_WGSL));
    let max = gpu.limits().max_compute_workgroups_per_dimension;
    for grid in [
        Grid::d1(max + 1000),
        Grid::d2(max + 7, 2),
        Grid::d3(3, 2, 2),
    ] {
        let n = grid.total() as usize * 4;
        let out = gpu.alloc_filled(n, u32::MAX).unwrap();
        let l = gpu.prepare(&k, &[out.arg()], grid).unwrap();
        gpu.run(&[&l]).unwrap();
        let got = gpu.read(&out).unwrap();
        let bad = got
            .iter()
            .enumerate()
            .find(|&(i, v)| *v != i as u32 * 3 + 1);
        assert!(
            bad.is_none(),
            "grid {grid:?} ({} dispatches): first bad element {bad:?}",
            l.dispatch_count()
        );
    }
    // A kernel without the prelude cannot be split: a clear limit error, not a wrong result.
    let plain = Kernel::new(
        "plain",
        "@group(0) @binding(0) var<storage, read_write> x: array<u32>;
        @compute @workgroup_size(1) fn main() { x[0] = 1u; }",
    );
    let b = gpu.alloc::<u32>(1).unwrap();
    assert!(matches!(
        gpu.prepare(&plain, &[b.arg()], Grid::d1(max + 1)),
        Err(GpuError::LimitExceeded { .. })
    ));
}

#[test]
fn wrong_bindings_are_errors_not_panics() {
    let Some(gpu) = test_gpu() else { return };
    let b = gpu.alloc::<f32>(16).unwrap();
    // AXPY wants four bindings; giving one is a wgpu validation error surfaced as Err.
    let r = gpu.prepare(&Kernel::new("axpy", AXPY), &[b.arg()], Grid::d1(1));
    assert!(matches!(r, Err(GpuError::Wgpu { .. })), "{r:?}");
}

#[test]
fn run_alternating_keeps_the_order_and_reports_the_next_kernel() {
    let Some(gpu) = test_gpu() else { return };
    let src = |op: &str| {
        format!(
            "@group(0) @binding(0) var<storage, read_write> x: array<u32>;
             @compute @workgroup_size(1) fn main() {{ x[0] = {op}; }}"
        )
    };
    let x = gpu.upload(&[1u32]).unwrap();
    let (a, b) = (
        Kernel::new("double-plus-one", src("x[0] * 2u + 1u")),
        Kernel::new("triple", src("x[0] * 3u")),
    );
    let la = gpu.prepare(&a, &[x.arg()], Grid::d1(1)).unwrap();
    let lb = gpu.prepare(&b, &[x.arg()], Grid::d1(1)).unwrap();
    // a, b, a: 1 → 3 → 9 → 19; b runs next.
    assert_eq!(gpu.run_alternating([&la, &lb], 0, 3).unwrap(), 1);
    assert_eq!(gpu.read(&x).unwrap(), [19]);
    // b, a: 19 → 57 → 115; b runs next again.
    assert_eq!(gpu.run_alternating([&la, &lb], 1, 2).unwrap(), 1);
    assert_eq!(gpu.read(&x).unwrap(), [115]);
    assert_eq!(gpu.run_alternating([&la, &lb], 1, 0).unwrap(), 1);
    assert_eq!(gpu.read(&x).unwrap(), [115]);
}

/// A grid past the per-dimension limit in rows (`Grid::rows`) is one dispatch where the 1-D grid is split into
/// several, and it visits every workgroup of the logical range once (the tail of the last row returns early).
#[test]
fn rows_are_one_dispatch_and_visit_every_workgroup_once() {
    let Some(gpu) = test_gpu() else { return };
    let max = gpu.max_workgroups_per_dimension();
    let n = u64::from(max) + 4464;
    let k = Kernel::new(
        "visit-once",
        format!(
            "{}
@group(0) @binding(0) var<storage, read_write> seen: array<u32>;
@compute @workgroup_size(1) fn main(@builtin(workgroup_id) wid: vec3<u32>) {{
    let i = bespoke_workgroup_linear(wid);
    if i < arrayLength(&seen) {{ seen[i] = seen[i] + 1u; }}
}}",
            bespoke_gpu::GRID_WGSL
        ),
    );
    for (layout, dispatches) in [
        (bespoke_gpu::GridLayout::Rows, 1),
        (bespoke_gpu::GridLayout::Split, 2),
    ] {
        let seen = gpu.alloc_filled::<u32>(n as usize, 0).unwrap();
        let grid = gpu.grid_for(n, 1, layout).unwrap();
        let launch = gpu.prepare(&k, &[seen.arg()], grid).unwrap();
        assert_eq!(launch.dispatch_count(), dispatches, "{layout:?} {grid:?}");
        gpu.run(&[&launch]).unwrap();
        let got = gpu.read(&seen).unwrap();
        let wrong = got.iter().filter(|&&c| c != 1).count();
        assert_eq!(
            wrong, 0,
            "{layout:?}: {wrong} of {n} workgroups not visited exactly once"
        );
    }
}
