//! Device tests of the one dispatch path. They run on any adapter (lavapipe in CI) and fail, not skip, when
//! `BESPOKE_REQUIRE_GPU=1` and no adapter exists.

#![allow(clippy::unwrap_used)] // a failed unwrap is a failed test

use bespoke_gpu::testing::{fresh_seed, test_gpu};
use bespoke_gpu::{
    Arg, CopyVariant, Gpu, GpuError, GpuOptions, Grid, Kernel, ProbeOptions, TimingSource,
};
use rand::{Rng, SeedableRng, rngs::StdRng};

fn rng() -> StdRng {
    StdRng::seed_from_u64(fresh_seed())
}

#[test]
fn upload_readback_round_trip() {
    let Some(gpu) = test_gpu() else { return };
    let mut r = rng();
    let f: Vec<f32> = (0..100_003).map(|_| r.random_range(-1e3..1e3)).collect();
    assert_eq!(gpu.read(&gpu.upload(&f).unwrap()).unwrap(), f);
    // Odd byte lengths (u16) exercise the 4-byte copy padding.
    let h: Vec<u16> = (0..1001).map(|_| r.random()).collect();
    let hb = gpu.upload(&h).unwrap();
    assert_eq!(gpu.read(&hb).unwrap(), h);
    assert_eq!(gpu.read_range(&hb, 3..998).unwrap(), h[3..998]);
    // A poisoned buffer reads back as poison.
    let p = gpu.alloc_filled(777, f32::NAN).unwrap();
    assert!(gpu.read(&p).unwrap().iter().all(|v| v.is_nan()));
}

const AXPY: &str = "
struct P { a: f32, n: u32 }
@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read> y: array<f32>;
@group(0) @binding(2) var<storage, read_write> z: array<f32>;
@group(0) @binding(3) var<uniform> p: P;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) g: vec3<u32>) {
    if g.x < p.n { z[g.x] = fma(p.a, x[g.x], y[g.x]); }
}";

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

#[test]
fn f64_kernels_run_where_the_adapter_has_them() {
    let Some(gpu) = test_gpu() else { return };
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
fn timing_gives_positive_times() {
    let Some(gpu) = test_gpu() else { return };
    let n = 1 << 18;
    let src = gpu.alloc_filled(n, [1.0f32; 4]).unwrap();
    let dst = gpu.alloc(n).unwrap();
    let launches = gpu
        .copy_launches(&src, &dst, CopyVariant::CANDIDATES[0])
        .unwrap();
    let t = gpu
        .time(&launches.iter().collect::<Vec<_>>(), 1, 5)
        .unwrap();
    assert_eq!(t.samples.len(), 5);
    assert!(
        t.samples.iter().all(|s| *s > 0.0 && s.is_finite()),
        "{:?}",
        t.samples
    );
    if gpu.has_timestamps() {
        assert_eq!(t.source, TimingSource::GpuTimestamps);
    }
    let p = gpu
        .copy_bandwidth(&ProbeOptions {
            bytes: 8 << 20,
            warmup: 1,
            reps: 3,
        })
        .unwrap();
    assert!(p.gbps > 0.0 && p.gbps.is_finite(), "{p:?}");
    assert_eq!(p.bytes, 8 << 20);
}

#[test]
fn broken_shader_is_rejected_with_a_readable_message() {
    let Some(gpu) = test_gpu() else { return };
    let k = Kernel::new(
        "broken",
        "@compute @workgroup_size(1)\nfn main() {\n    let a: f32 = vec2<u32>(1u);\n}",
    );
    match gpu.pipeline(&k) {
        Err(e @ GpuError::InvalidShader { .. }) => {
            let msg = e.to_string();
            assert!(
                msg.contains("broken") && msg.contains("let a: f32 = vec2<u32>(1u);"),
                "{msg}"
            );
        }
        other => panic!("expected InvalidShader, got {other:?}"),
    }
}

#[test]
fn over_limit_requests_return_the_limit_error() {
    let Some(gpu) = test_gpu() else { return };
    let max = gpu.limits().max_buffer_size;
    match gpu.alloc::<u32>((max / 4 + 1) as usize) {
        Err(GpuError::LimitExceeded {
            asked,
            max: m,
            what,
        }) => {
            assert_eq!(m, max);
            assert!(asked > max);
            assert!(what.contains("buffer"), "{what}");
        }
        other => panic!("expected LimitExceeded, got {other:?}"),
    }
    // Out-of-range reads and writes are errors too.
    let b = gpu.alloc::<f32>(10).unwrap();
    assert!(matches!(
        gpu.read_range(&b, 5..11),
        Err(GpuError::InvalidArgument(_))
    ));
    assert!(matches!(
        gpu.write(&b, 8, &[1.0, 2.0, 3.0]),
        Err(GpuError::InvalidArgument(_))
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

const TEXEL_COPY: &str = "
@group(0) @binding(0) var t: texture_2d<u32>;
@group(0) @binding(1) var<storage, read_write> out: array<vec4<u32>>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) g: vec3<u32>) {
    let w = textureDimensions(t).x;
    if g.x < arrayLength(&out) { out[g.x] = textureLoad(t, vec2<u32>(g.x % w, g.x / w), 0); }
}";

#[test]
fn textures_hold_what_was_uploaded() {
    let Some(gpu) = test_gpu() else { return };
    let mut r = rng();
    // 1000 texels in rows of 64: 15 full rows and a partial one; more rows than one write call's 256 below.
    for (texels, width) in [(1000usize, 64u32), (70_001, 128)] {
        let data: Vec<[u32; 4]> = (0..texels).map(|_| r.random()).collect();
        let t = gpu
            .upload_texture(bespoke_gpu::wgpu::TextureFormat::Rgba32Uint, width, &data)
            .unwrap();
        assert_eq!((t.width(), t.texels()), (width, texels));
        let out = gpu.alloc_filled(texels * 4, u32::MAX).unwrap();
        let k = Kernel::new("texel-copy", TEXEL_COPY);
        let l = gpu
            .prepare(
                &k,
                &[t.arg(), out.arg()],
                Grid::cover(texels as u64, 64).unwrap(),
            )
            .unwrap();
        gpu.run(&[&l]).unwrap();
        let got = gpu.read(&out).unwrap();
        assert_eq!(got, data.concat(), "{texels} texels in rows of {width}");
    }
    // Misuse is an error naming the problem.
    let max = gpu.limits().max_texture_dimension_2d;
    let e = gpu
        .upload_texture(
            bespoke_gpu::wgpu::TextureFormat::Rgba32Float,
            max * 2,
            &[[0f32; 4]; 3],
        )
        .unwrap_err();
    assert!(matches!(e, GpuError::LimitExceeded { .. }), "{e}");
    let e = gpu
        .upload_texture(
            bespoke_gpu::wgpu::TextureFormat::Rgba32Float,
            64,
            &[0f32; 3],
        )
        .unwrap_err();
    assert!(e.to_string().contains("texels"), "{e}");
    let e = gpu
        .alloc_storage_texture(bespoke_gpu::wgpu::TextureFormat::R32Float, 16, max + 1, 1)
        .unwrap_err();
    assert!(matches!(e, GpuError::LimitExceeded { .. }), "{e}");
}

/// A GPU is kept busy for `WARM_SECONDS` before a timing unless a timing just ended (its clocks drop when idle);
/// a CPU adapter never is. The GPU's class is emulated on lavapipe.
#[test]
fn a_gpu_is_warmed_before_a_timing_unless_one_just_ended() {
    use bespoke_gpu::{AdapterClass, STILL_WARM, WARM_SECONDS};
    let Some(shared) = test_gpu() else { return };
    let n = 1 << 12;
    let time_a_copy = |gpu: &Gpu| {
        let (src, dst) = (
            gpu.alloc_filled::<[f32; 4]>(n, [1.0; 4]).unwrap(),
            gpu.alloc::<[f32; 4]>(n).unwrap(),
        );
        let launches = gpu
            .copy_launches(&src, &dst, CopyVariant::CANDIDATES[0])
            .unwrap();
        let refs: Vec<_> = launches.iter().collect();
        gpu.time(&refs, 0, 3).unwrap()
    };
    let gpu = bespoke_gpu::testing::emulating(
        shared,
        GpuOptions {
            adapter_class: Some(AdapterClass::Gpu),
            ..GpuOptions::default()
        },
    );
    let first = time_a_copy(&gpu);
    assert!(
        first.warmed_seconds >= WARM_SECONDS,
        "a first timing warmed for {} s",
        first.warmed_seconds
    );
    let ended = std::time::Instant::now();
    let next = time_a_copy(&gpu);
    if ended.elapsed() < STILL_WARM {
        assert_eq!(
            next.warmed_seconds, 0.0,
            "warmed again right after a timing"
        );
    }
    std::thread::sleep(STILL_WARM + std::time::Duration::from_millis(20));
    let later = time_a_copy(&gpu);
    assert!(
        later.warmed_seconds >= WARM_SECONDS,
        "after an idle spell it warmed for {} s",
        later.warmed_seconds
    );
    if shared.is_cpu() {
        assert_eq!(
            time_a_copy(shared).warmed_seconds,
            0.0,
            "a CPU adapter was warmed"
        );
    }
}

/// The probe chooses its walk at its full default size on a GPU (a 64 MiB trial picked the slower walk on an
/// H200 twice) and at 64 MiB on a CPU adapter, where the full size costs seconds.
#[test]
fn the_copy_walk_is_chosen_at_full_size_on_a_gpu() {
    use bespoke_gpu::{AdapterClass, DEFAULT_PROBE_BYTES};
    let Some(shared) = test_gpu() else { return };
    for (class, want) in [
        (AdapterClass::Gpu, DEFAULT_PROBE_BYTES),
        (AdapterClass::Cpu, 64 << 20),
    ] {
        let gpu = bespoke_gpu::testing::emulating(
            shared,
            GpuOptions {
                adapter_class: Some(class),
                ..GpuOptions::default()
            },
        );
        assert_eq!(gpu.copy_walk_trial_bytes(), want, "{class:?}");
    }
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

#[test]
fn kernels_compile_on_every_core_once_and_a_broken_one_waits_for_its_use() {
    if test_gpu().is_none() {
        return;
    }
    // A device of its own: the shared one's pipeline count moves with the tests beside this one.
    let gpu = Gpu::new().unwrap();
    // Distinct sources (ids), each a valid kernel; one broken among them.
    let seed = fresh_seed();
    let mut kernels: Vec<Kernel> = (0..12u32)
        .map(|i| {
            Kernel::new(
                format!("compile_all_{i}"),
                format!(
                    "@group(0) @binding(0) var<storage, read_write> x: array<u32>;\n\
                     @compute @workgroup_size(64)\nfn main(@builtin(global_invocation_id) g: vec3<u32>) {{\n\
                     if g.x < arrayLength(&x) {{ x[g.x] = x[g.x] * {}u + {i}u; }}\n}}\n",
                    seed % 1000 + 2
                ),
            )
        })
        .collect();
    kernels.push(Kernel::new(
        "compile_all_broken",
        "@compute @workgroup_size(1)\nfn main() {\n    let a: f32 = vec2<u32>(1u);\n}",
    ));
    let before = gpu.cached_pipelines();
    assert_eq!(gpu.compile_all(&kernels), 12);
    assert_eq!(gpu.cached_pipelines(), before + 12);
    // Compiled once: a second call finds them all, and using one compiles nothing more.
    assert_eq!(gpu.compile_all(&kernels), 0);
    let (_, compiled_now) = gpu.compile(&kernels[3]).unwrap();
    assert!(!compiled_now);
    // The broken kernel reports its error where it is used.
    assert!(matches!(
        gpu.pipeline(&kernels[12]),
        Err(GpuError::InvalidShader { .. })
    ));
}

/// Devices of one process close one at a time (four closing at once hung an H200's driver): four devices used
/// and dropped on four threads at once all close, in turn, without waiting on each other forever; a device
/// opened after them works.
#[test]
fn devices_closed_on_many_threads_at_once_all_close() {
    use std::sync::{Arc, Barrier};
    if test_gpu().is_none() {
        return;
    }
    let ready = Arc::new(Barrier::new(4));
    let (done, closed) = std::sync::mpsc::channel();
    for t in 0..4u32 {
        let (ready, done) = (ready.clone(), done.clone());
        std::thread::spawn(move || {
            let gpu = bespoke_gpu::Gpu::new().unwrap();
            let buf = gpu.upload(&[t; 64]).unwrap();
            assert_eq!(gpu.read(&buf).unwrap(), vec![t; 64]);
            drop(buf);
            ready.wait();
            drop(gpu);
            done.send(t).unwrap();
        });
    }
    let mut got: Vec<u32> = (0..4)
        .map(|_| {
            closed
                .recv_timeout(std::time::Duration::from_secs(120))
                .expect("every device closes")
        })
        .collect();
    got.sort_unstable();
    assert_eq!(got, [0, 1, 2, 3]);
    let gpu = bespoke_gpu::Gpu::new().unwrap();
    assert_eq!(gpu.read(&gpu.upload(&[7u32; 4]).unwrap()).unwrap(), [7; 4]);
}
