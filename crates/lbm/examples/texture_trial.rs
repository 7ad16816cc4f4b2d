//! Trial, not a supported path: the generated two-lattice periodic kernels with populations in 2-D array
//! textures (read with `textureLoad`, written with `textureStore`) instead of storage buffers, timed beside the
//! buffer kernels. It rewrites the generated source's population accesses, so it covers only the flag-free
//! two-lattice step. docs/perf.md records what it measured and why it was tried (llvmpipe loads storage buffers
//! one lane at a time but gathers texels with vector instructions).
//!
//! `cargo run --release -p bespoke-lbm --example texture_trial [NX NY]`

use bespoke_gpu::{Arg, Gpu, GpuBuffer, Grid, Kernel, ProbeOptions, wgpu};
use bespoke_lbm::kernel::{KernelSpec, Mode, Phase};
use bespoke_lbm::{Collision, Storage};

type Res<T> = Result<T, Box<dyn std::error::Error>>;

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

/// Words of small varied populations: f32 in ±0.01, or two f16 halves of magnitude 2⁻⁵ … 2⁵ (stored scaled).
/// f32 → f16 bits, rounding to nearest (ties away; enough for a timing trial).
fn f16_bits(v: f32) -> u32 {
    let sign = u32::from(v.is_sign_negative()) << 15;
    let a = v.abs();
    if a < 6.103_515_6e-5 {
        return sign | (a / 5.960_464_5e-8).round() as u32;
    }
    let e = a.log2().floor() as i32;
    let m = ((a / 2f32.powi(e) - 1.0) * 1024.0).round() as u32;
    let (e, m) = if m == 1024 { (e + 1, 0) } else { (e, m) };
    sign | (((e + 15).clamp(1, 30) as u32) << 10) | m
}

/// Words of a decaying Taylor–Green state (ρ = 1, |u| ≤ 0.05), populations shifted by their weights as the
/// library stores them: slot `i`'s words.
fn taylor_green(storage: Storage, nx: usize, ny: usize, i: usize) -> Vec<u32> {
    use bespoke_lbm::d2q9::{C, W};
    use std::f64::consts::PI;
    let f = |x: usize, y: usize| {
        let (kx, ky) = (
            2.0 * PI * x as f64 / nx as f64,
            2.0 * PI * y as f64 / ny as f64,
        );
        let (ux, uy) = (-0.05 * kx.cos() * ky.sin(), 0.05 * kx.sin() * ky.cos());
        let cu = f64::from(C[i][0]) * ux + f64::from(C[i][1]) * uy;
        W[i] * (3.0 * cu + 4.5 * cu * cu - 1.5 * (ux * ux + uy * uy))
    };
    match storage {
        Storage::F32 => (0..nx * ny)
            .map(|c| (f(c % nx, c / nx) as f32).to_bits())
            .collect(),
        Storage::F16 => (0..nx * ny / 2)
            .map(|w| {
                let s = bespoke_lbm::kernel::F16_SCALE;
                let lo = f(w % nx, w / nx) * s;
                let hi = f(w % nx, w / nx + ny / 2) * s;
                f16_bits(lo as f32) | f16_bits(hi as f32) << 16
            })
            .collect(),
    }
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
    let args: Vec<usize> = std::env::args()
        .skip(1)
        .map(|a| a.parse())
        .collect::<Result<_, _>>()?;
    let (nx, ny) = match args[..] {
        [nx, ny] => (nx, ny),
        _ => (2048, 2048),
    };
    let gpu = Gpu::new()?;
    let copy = gpu.copy_bandwidth(&ProbeOptions::default())?.gbps;
    let tcopy = gpu.texture_copy_bandwidth(&ProbeOptions::default())?.gbps;
    println!(
        "{}: {nx}×{ny}, buffer copy {copy:.2} GB/s, texture→buffer copy {tcopy:.2} GB/s",
        gpu.adapter_name()
    );
    for storage in [Storage::F32, Storage::F16] {
        let spec = KernelSpec {
            nx,
            ny,
            storage,
            collision: Collision::Bgk { omega: 1.0 },
            force: [0.0, 0.0],
            flags: false,
            curved: false,
            phase: Phase::Ab,
            mode: Mode::Step,
        };
        let src = spec.generate();
        let words = spec.invocations();
        let bytes = match storage {
            Storage::F32 => 72.0,
            Storage::F16 => 36.0,
        } * (nx * ny) as f64;
        let grid = Grid::cover(words as u64, bespoke_lbm::kernel::WG)?;
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
        // Storage buffers, as the library runs them, holding the bench's Taylor–Green state: the state matters
        // (f16 steps ran twice as fast on all-zero words).
        let bufs: Vec<GpuBuffer<u32>> = (0..18)
            .map(|k| gpu.upload(&taylor_green(storage, nx, ny, k % 9)))
            .collect::<Result<_, _>>()?;
        // SAFETY: the generated kernel indexes below `words` in every binding, which holds `words` elements.
        let k = unsafe { Kernel::new("trial-buffers", src.clone()).without_bounds_checks() };
        let a: Vec<Arg<'_>> = bufs.iter().map(|b| b.arg()).collect();
        let b: Vec<Arg<'_>> = bufs[9..]
            .iter()
            .chain(&bufs[..9])
            .map(|b| b.arg())
            .collect();
        let (l1, l2) = (gpu.prepare(&k, &a, grid)?, gpu.prepare(&k, &b, grid)?);
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
