//! Compiling and closing: broken shaders, compiles on every core, devices closed from many threads.

use super::*;

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

/// A barrier some invocations of a workgroup skip (undefined in Vulkan: a GPU may hang there) is refused before
/// the driver sees it, naming the kernel, the entry point and the line, on any adapter; hoisted out of the branch,
/// the same kernel compiles. `validate_wgsl` (no device) refuses it alike.
#[test]
fn a_barrier_in_divergent_flow_is_refused_naming_its_line() {
    let src = |hoisted: bool| {
        format!(
            "var<workgroup> s: array<f32, 64>;
@group(0) @binding(0) var<storage, read_write> y: array<f32>;
@compute @workgroup_size(64)
fn main(@builtin(local_invocation_index) l: u32) {{
    s[l] = f32(l);
    if l < 32u {{
        y[l] = s[l];{}
    }}{}
    y[l] += s[63u - l];
}}",
            if hoisted {
                ""
            } else {
                "\n        workgroupBarrier();"
            },
            if hoisted {
                "\n    workgroupBarrier();"
            } else {
                ""
            },
        )
    };
    let e = bespoke_gpu::validate_wgsl(&src(false), bespoke_gpu::Capabilities::empty())
        .unwrap_err()
        .to_string();
    assert!(e.contains("`main`") && e.contains("(line 8)"), "{e}");
    assert!(bespoke_gpu::validate_wgsl(&src(true), bespoke_gpu::Capabilities::empty()).is_ok());
    let Some(gpu) = test_gpu() else { return };
    match gpu.pipeline(&Kernel::new("divergent-barrier", src(false))) {
        Err(e @ GpuError::InvalidShader { .. }) => {
            let msg = e.to_string();
            assert!(
                msg.contains("divergent-barrier") && msg.contains("barrier (line 8)"),
                "{msg}"
            );
        }
        other => panic!("expected InvalidShader, got {other:?}"),
    }
    gpu.pipeline(&Kernel::new("hoisted-barrier", src(true)))
        .unwrap();
}

/// A device held to WebGPU's limits refuses, before the driver sees it, a kernel binding 9 storage buffers or
/// launching 512 invocations a workgroup, with an error naming the limit, the kernel and both counts; the same
/// kernels compile on the shared device (lavapipe allows both), and a kernel within the limits runs.
#[test]
fn a_kernel_past_the_devices_limits_is_refused_naming_the_limit() {
    let Some(shared) = test_gpu() else { return };
    let held = emulating(
        shared,
        GpuOptions {
            limits: Some(bespoke_gpu::LimitsProfile::WebGpu),
            ..GpuOptions::default()
        },
    );
    assert!(
        held.adapter_key().contains("-limitswebgpu"),
        "{}",
        held.adapter_key()
    );
    let nine: String = (0..9)
        .map(|i| format!("@group(0) @binding({i}) var<storage, read_write> b{i}: array<f32>;\n"))
        .chain(std::iter::once(
            "@compute @workgroup_size(64)\nfn main(@builtin(global_invocation_id) g: vec3<u32>) {\n    \
             b0[g.x] = b1[g.x] + b2[g.x] + b3[g.x] + b4[g.x] + b5[g.x] + b6[g.x] + b7[g.x] + b8[g.x];\n}"
                .to_owned(),
        ))
        .collect();
    let wide = AXPY.replace("@workgroup_size(64)", "@workgroup_size(512)");
    for (name, src, what, asked, max) in [
        ("nine-buffers", nine.as_str(), "storage buffers", 9, 8),
        ("wide", wide.as_str(), "invocations per workgroup", 512, 256),
    ] {
        let k = Kernel::new(name, src);
        match held.pipeline(&k) {
            Err(GpuError::LimitExceeded {
                what: w,
                asked: a,
                max: m,
            }) => {
                assert!(w.contains(what) && w.contains(name), "{w}");
                assert_eq!((a, m), (asked, max), "{w}");
            }
            other => panic!("{name}: expected LimitExceeded, got {other:?}"),
        }
        if shared.limits().max_storage_buffers_per_shader_stage >= 9
            && shared.limits().max_compute_invocations_per_workgroup >= 512
        {
            shared
                .pipeline(&k)
                .unwrap_or_else(|e| panic!("{name} on the shared device: {e}"));
        }
    }
    held.pipeline(&Kernel::new("axpy", AXPY))
        .expect("a kernel within the limits");
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

    // `compile_each` says, kernel by kernel in the order given, what each cost on its worker, that it was
    // compiled before, or its error: three new kernels on two workers, one listed twice, one known, the broken one.
    let fresh: Vec<Kernel> = (0..3u32)
        .map(|i| {
            Kernel::new(
                format!("compile_each_{i}"),
                format!(
                    "@group(0) @binding(0) var<storage, read_write> x: array<u32>;\n\
                     @compute @workgroup_size(64)\nfn main(@builtin(global_invocation_id) g: vec3<u32>) {{\n\
                     if g.x < arrayLength(&x) {{ x[g.x] = x[g.x] + {}u; }}\n}}\n",
                    seed % 1000 + 10 + u64::from(i)
                ),
            )
        })
        .collect();
    let list = [
        fresh[0].clone(),
        kernels[5].clone(),
        fresh[1].clone(),
        kernels[12].clone(),
        fresh[2].clone(),
        fresh[2].clone(),
    ];
    let before = gpu.cached_pipelines();
    let each = gpu.compile_each(&list, 2);
    assert_eq!(each.len(), list.len());
    for i in [0, 2] {
        let s = each[i].as_ref().unwrap().expect("compiled by this call");
        assert!(s > 0.0 && s.is_finite(), "{i}: {s}");
    }
    assert!(matches!(each[1], Ok(None)), "{:?}", each[1]);
    assert!(matches!(each[3], Err(GpuError::InvalidShader { .. })));
    // The one listed twice: compiled by one of its two entries (both, where two workers took it at once).
    let twice = [&each[4], &each[5]].map(|r| matches!(r, Ok(Some(_))));
    assert!(twice[0] || twice[1], "{:?} {:?}", each[4], each[5]);
    assert_eq!(gpu.cached_pipelines(), before + 3);
    assert!(
        gpu.compile_each(&list[..3], 8)
            .iter()
            .all(|r| matches!(r, Ok(None)))
    );
    assert!(gpu.compile_each(&[], 4).is_empty());
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
