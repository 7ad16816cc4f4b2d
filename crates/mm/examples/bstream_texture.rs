#![allow(clippy::unwrap_used)]
//! Diagnostic: one specialised kernel (the whole operator in one launch) with B read from a storage buffer, as
//! bespoke runs it, and the same kernel with B read through a texture (`textureLoad` from an r/rg/rgba32float
//! texture of 4096-texel rows), timed interleaved on the same adapter beside the buffer and texture copy probes:
//! `bstream_texture FILE.mtx [VARIANT] [N] [ROUNDS]` (default bstream-v2, N = 32800, 3 rounds; at N = 32768
//! B's rows sit 128 KiB apart and alias in the caches). Both outputs must agree bit for bit (the arithmetic is
//! the same). It isolates what the adapter's storage-buffer loads cost the kernel: on llvmpipe every
//! invocation's buffer load is a per-lane gather. docs/perf.md records what it measured.
use bespoke_gpu::rng::{Rng, seeded};
use bespoke_gpu::wgpu::TextureFormat;
use bespoke_gpu::{Gpu, Grid, Kernel, ProbeOptions};
use bespoke_mm::DType;
use bespoke_mm::specialise::{Beta, Layout, Variant, generate, read_mtx};

const W: u32 = 4096;

/// The same source with every `b0[EXPR]` read as `bload(EXPR)` from a texture bound where b0 was.
fn through_texture(src: &str, vec: u32) -> String {
    let (vt, swz) = match vec {
        1 => ("f32", ".x"),
        2 => ("vec2<f32>", ".xy"),
        _ => ("vec4<f32>", ""),
    };
    let decl = format!("@group(0) @binding(0) var<storage, read> b0: array<{vt}>;");
    assert!(src.contains(&decl), "no `{decl}` in the kernel");
    let mut out = src.replace(
        &decl,
        &format!(
            "@group(0) @binding(0) var bt: texture_2d<f32>;\n\
             fn bload(i: u32) -> {vt} {{\n    return textureLoad(bt, vec2<u32>(i % {W}u, i / {W}u), 0){swz};\n}}"
        ),
    );
    while let Some(at) = out.find("b0[") {
        let end = at + out[at..].find(']').unwrap();
        let inner = out[at + 3..end].to_owned();
        out.replace_range(at..=end, &format!("bload({inner})"));
    }
    out
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let op = read_mtx(std::path::Path::new(&args[1])).unwrap();
    let v = Variant::parse(args.get(2).map_or("bstream-v2", String::as_str)).unwrap();
    let n: usize = args.get(3).map_or(32800, |s| s.parse().unwrap());
    let rounds: usize = args.get(4).map_or(3, |s| s.parse().unwrap());
    let beta = op.beta_hint.unwrap_or(0.0);
    let rows = op.rows();
    let layout = Layout::single(&rows, op.k, Beta::of(beta), n, n, n).unwrap();
    let src = generate(&rows, &layout, v, DType::F32).unwrap();
    let tsrc = through_texture(&src, v.vec);
    let gpu = Gpu::new().unwrap();
    let format = match v.vec {
        1 => TextureFormat::R32Float,
        2 => TextureFormat::Rg32Float,
        _ => TextureFormat::Rgba32Float,
    };
    let mut rng = seeded(0x9e37_79b9);
    let mut rnd = || rng.random::<f32>() * 2.0 - 1.0;
    let b: Vec<f32> = (0..op.k * n).map(|_| rnd()).collect();
    let c0: Vec<f32> = (0..op.m * n).map(|_| rnd()).collect();
    let bb = gpu.upload(&b).unwrap();
    let bt = gpu.upload_texture(format, W, &b).unwrap();
    let cb = gpu.upload(&c0).unwrap();
    let grid = Grid::cover((n / v.vec as usize) as u64, 64).unwrap();
    let kb = unsafe { Kernel::new("buffer", src).without_bounds_checks() };
    let kt = unsafe { Kernel::new("texture", tsrc).without_bounds_checks() };
    let lb = gpu.prepare(&kb, &[bb.arg(), cb.arg()], grid).unwrap();
    let lt = gpu.prepare(&kt, &[bt.arg(), cb.arg()], grid).unwrap();
    let mut outs = Vec::new();
    for l in [&lb, &lt] {
        gpu.write(&cb, 0, &c0).unwrap();
        gpu.run(&[l]).unwrap();
        outs.push(gpu.read(&cb).unwrap());
    }
    let differ = outs[0]
        .iter()
        .zip(&outs[1])
        .filter(|(a, b)| a.to_bits() != b.to_bits())
        .count();
    assert_eq!(differ, 0, "buffer and texture kernels disagree");
    let c_passes = if beta == 0.0 { 1.0 } else { 2.0 };
    let bytes = 4.0 * n as f64 * (op.k as f64 + c_passes * op.m as f64);
    let probe = ProbeOptions::default();
    let copy = gpu.copy_bandwidth(&probe).unwrap().gbps;
    let tcopy = gpu.texture_copy_bandwidth(&probe).unwrap().gbps;
    println!(
        "{} {} β={beta} N = {n}: {}; copy probe {copy:.2} GB/s, texture copy {tcopy:.2} GB/s",
        op.name,
        v.name(),
        gpu.adapter_name()
    );
    let (mut tb, mut tt) = (Vec::new(), Vec::new());
    for _ in 0..rounds {
        tb.push(gpu.time(&[&lb], 1, 5).unwrap().median());
        tt.push(gpu.time(&[&lt], 1, 5).unwrap().median());
    }
    let med = |v: &mut Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    let (sb, st) = (med(&mut tb), med(&mut tt));
    for (what, s) in [("B from a buffer ", sb), ("B from a texture", st)] {
        println!(
            "  {what}: {:8.3} ms {:6.2} GB/s ({:.3} of copy)",
            s * 1e3,
            bytes / s / 1e9,
            bytes / s / 1e9 / copy
        );
    }
    println!("  texture / buffer time ×{:.2}", st / sb);
}
