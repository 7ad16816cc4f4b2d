//! Diagnostic, not a supported path: where a periodic two-lattice step's time goes on this adapter. Times the
//! generated kernel as it is, then with parts of its work taken out of the source (results meaningless, timing
//! only): the collision (each population stored as it was pulled), the f16 conversions (`unpack2x16float` /
//! `pack2x16float` replaced by bit casts), and both, which leaves the memory traffic alone; also the pulls
//! (every population from the cell's own slot) and pulls and collision both (a nine-stream copy with the step's
//! index arithmetic). Each on three lattice states: Taylor–Green, uniform, random (`common::State`). docs/perf.md records
//! what it measured.
//!
//! `cargo run --release -p bespoke-lbm --example step_cost [NX NY]`

#[allow(dead_code)] // the helpers the other examples share
mod common;

use bespoke_gpu::{Gpu, Kernel, ProbeOptions};
use bespoke_lbm::Storage;
use common::{Res, State, ab_pair, grid, periodic_ab_spec, size_args, state_buffers};

/// `var oI = <collision>;` → `var oI = fI;` (the dead moments then compile away).
fn without_collision(src: &str) -> String {
    src.lines()
        .map(|l| match l.trim_start().strip_prefix("var o") {
            Some(rest) if rest.get(1..5) == Some(" = f") => {
                format!("var o{0} = f{0};", &rest[..1])
            }
            _ => l.to_owned(),
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// Every population read from the cell's own slot (`aI[sI]` → `aI[idx]`: no neighbour offsets; f16 reads its
/// own word, pairs and fold unchanged).
fn without_pulls(src: &str) -> String {
    (1..9).fold(src.to_owned(), |s, i| {
        s.replace(&format!("a{i}[s{i}]"), &format!("a{i}[idx]"))
    })
}

/// The f16 word helpers with bit casts in place of the conversions.
fn without_conversion(src: &str) -> String {
    src.replace(
        "let v = unpack2x16float(w) * ",
        "let v = vec2<f32>(bitcast<f32>(w), bitcast<f32>(w ^ 1u)) * ",
    )
    .replace(
        "return pack2x16float(select(v, v.yx, swap) * ",
        "return bitcast<u32>(dot(select(v, v.yx, swap), vec2<f32>(1.0, 2.0)) * ",
    )
}

fn main() -> Res<()> {
    let (nx, ny) = size_args()?;
    let gpu = Gpu::new()?;
    let copy = gpu.copy_bandwidth(&ProbeOptions::default())?.gbps;
    println!("{}: {nx}×{ny}, copy {copy:.2} GB/s", gpu.adapter_name());
    for storage in [Storage::F32, Storage::F16] {
        let spec = periodic_ab_spec(nx, ny, storage);
        let src = spec.generate();
        let words = spec.invocations();
        let bytes = (nx * ny * 18 * storage.bytes()) as f64;
        let grid = grid(&spec)?;
        let mut variants = vec![
            ("as generated", src.clone()),
            ("no collision", without_collision(&src)),
        ];
        if without_pulls(&src) != src {
            variants.push(("no pulls", without_pulls(&src)));
            variants.push(("own-slot copy", without_pulls(&without_collision(&src))));
        }
        if storage == Storage::F16 {
            variants.push(("no conversion", without_conversion(&src)));
            variants.push(("memory only", without_conversion(&without_collision(&src))));
        }
        for state in [State::TaylorGreen, State::Uniform, State::Random] {
            let bufs = state_buffers(&gpu, storage, nx, ny, state)?;
            for (what, source) in &variants {
                // SAFETY: the generated kernel indexes below `words` in every binding, which holds `words` elements.
                let k = unsafe {
                    Kernel::new(format!("step-cost {what}"), source.clone()).without_bounds_checks()
                };
                let [l1, l2] = ab_pair(&gpu, &k, &bufs, grid)?;
                let t = gpu.time(&[&l1, &l2], 2, 8)?.median() / 2.0;
                println!(
                    "  {} {:<12} {what:<14}: {:6.3} ms/step {:6.1} MLUPS {:5.1} ns/invocation {:.2} of copy",
                    storage.name(),
                    state.name(),
                    t * 1e3,
                    (nx * ny) as f64 / t / 1e6,
                    t / words as f64 * 1e9,
                    bytes / t / 1e9 / copy
                );
            }
        }
    }
    Ok(())
}
