//! Trial, not a supported path: the generated two-lattice periodic kernels with populations in 2-D array
//! textures (read with `textureLoad`, written with `textureStore`) instead of storage buffers, timed beside the
//! buffer kernels. It rewrites the generated source's population accesses, so it covers only the flag-free
//! two-lattice step. docs/perf.md records what it measured and why it was tried (llvmpipe loads storage buffers
//! one lane at a time but gathers texels with vector instructions).
//!
//! `cargo run --release -p bespoke-lbm --example texture_trial [NX NY]`

#[allow(dead_code)] // the helpers the other examples share
mod common;

use bespoke_gpu::{Gpu, Kernel, ProbeOptions, wgpu};
use bespoke_lbm::Storage;
use common::{Res, ab_pair, grid, periodic_ab_spec, size_args, taylor_green_buffers};

/// The texture form of a generated AB step: `a{i}[E]` → `la(i, E)`, `b{i}[idx] = V;` → `sb(i, idx, V);`.
fn texture_source(src: &str, word: &str, format: &str) -> Res<String> {
    let mut s = src.to_owned();
    for i in 0..9 {
        s = s.replace(
            &format!("@group(0) @binding({i}) var<storage, read> a{i}: array<{word}>;\n"),
            "",
        );
        s = s.replace(
            &format!(
                "@group(0) @binding({}) var<storage, read_write> b{i}: array<{word}>;\n",
                i + 9
            ),
            "",
        );
        let store = format!("b{i}[idx] = ");
        while let Some(at) = s.find(&store) {
            let end = at + s[at..].find(";\n").ok_or("unterminated store")?;
            let v = s[at + store.len()..end].to_owned();
            s.replace_range(at..end, &format!("sb({i}u, idx, {v})"));
        }
        let load = format!("a{i}[");
        while let Some(at) = s.find(&load) {
            let end = at + s[at..].find(']').ok_or("unterminated load")?;
            let e = s[at + load.len()..end].to_owned();
            s.replace_range(at..=end, &format!("la({i}u, {e})"));
        }
    }
    let decl = format!(
        "@group(0) @binding(0) var ta: texture_2d_array<{word}>;
@group(0) @binding(1) var tb: texture_storage_2d_array<{format}, write>;
fn la(i: u32, c: u32) -> {word} {{ return textureLoad(ta, vec2<u32>(c % NX, c / NX), i, 0).x; }}
fn sb(i: u32, c: u32, v: {word}) {{ textureStore(tb, vec2<u32>(c % NX, c / NX), i, vec4<{word}>(v, 0, 0, 0)); }}
"
    );
    let at = s.find("@compute").ok_or("no entry point")?;
    s.insert_str(at, &decl);
    Ok(s)
}

/// Seconds per step by the wall clock (two warm-up pairs, then `pairs` pairs). Not GPU timestamps: on llvmpipe
/// (Mesa 22.3) they stop meaning anything once a kernel has written a storage texture (docs/perf.md).
fn wall_seconds(gpu: &Gpu, pair: [&bespoke_gpu::Launch; 2], pairs: usize) -> Res<f64> {
    gpu.run_n(&pair, 2)?;
    let t = std::time::Instant::now();
    gpu.run_n(&pair, pairs)?;
    Ok(t.elapsed().as_secs_f64() / (2 * pairs) as f64)
}

fn main() -> Res<()> {
    let (nx, ny) = size_args()?;
    let gpu = Gpu::new()?;
    let copy = gpu.copy_bandwidth(&ProbeOptions::default())?.gbps;
    let tcopy = gpu.texture_copy_bandwidth(&ProbeOptions::default())?.gbps;
    println!(
        "{}: {nx}×{ny}, buffer copy {copy:.2} GB/s, texture→buffer copy {tcopy:.2} GB/s",
        gpu.adapter_name()
    );
    for storage in [Storage::F32, Storage::F16] {
        let spec = periodic_ab_spec(nx, ny, storage);
        let src = spec.generate();
        let words = spec.invocations();
        let bytes = (nx * ny * 18 * storage.bytes()) as f64;
        let grid = grid(&spec)?;
        let report = |what: &str, seconds: f64| {
            let gbps = bytes / seconds / 1e9;
            println!(
                "  {} AB {what:<8}: {:6.1} MLUPS, {gbps:.2} GB/s, {:.2} of buffer copy, {:.2} of texture copy",
                storage.name(),
                (nx * ny) as f64 / seconds / 1e6,
                gbps / copy,
                gbps / tcopy
            );
        };
        // Storage buffers, as the library runs them.
        let bufs = taylor_green_buffers(&gpu, storage, nx, ny)?;
        // SAFETY: the generated kernel indexes below `words` in every binding, which holds `words` elements.
        let k = unsafe { Kernel::new("trial-buffers", src.clone()).without_bounds_checks() };
        let [l1, l2] = ab_pair(&gpu, &k, &bufs, grid)?;
        report("buffers", wall_seconds(&gpu, [&l1, &l2], 5)?);
        drop(bufs);
        // Textures: one 9-layer array per lattice, one texel per word.
        let (word, format, tf) = match storage {
            Storage::F32 => ("f32", "r32float", wgpu::TextureFormat::R32Float),
            Storage::F16 => ("u32", "r32uint", wgpu::TextureFormat::R32Uint),
        };
        let tsrc = texture_source(&src, word, format)?;
        let mk = || gpu.alloc_storage_texture(tf, nx as u32, (words / nx) as u32, 9);
        let (ta, tb) = (mk()?, mk()?);
        let k = Kernel::new("trial-textures", tsrc);
        let l1 = gpu.prepare(&k, &[ta.arg(), tb.arg()], grid)?;
        let l2 = gpu.prepare(&k, &[tb.arg(), ta.arg()], grid)?;
        report("textures", wall_seconds(&gpu, [&l1, &l2], 5)?);
    }
    Ok(())
}
