//! Diagnostic, not a supported path: where a periodic two-lattice step's time goes on this adapter. Times the
//! generated kernel as it is, then with parts of its work taken out of the source (results meaningless, timing
//! only): the collision (each population stored as it was pulled), the f16 conversions (`unpack2x16float` /
//! `pack2x16float` replaced by bit casts), and both, which leaves the memory traffic alone; also the pulls
//! (every population from the cell's own slot) and pulls and collision both (a nine-stream copy with the step's
//! index arithmetic). Each on three lattice states: Taylor–Green, uniform, random (`common::State`), each in 18
//! buffers of its own; then Taylor–Green and random again, each written into the other's buffers (a time that
//! follows the state is the data, one that follows the buffers the allocations). docs/perf.md records what it
//! measured. Beside them (f32) a step written by hand the way `crates/gpu/examples/streams/` writes its
//! "a step" row (the same pulls, an equilibrium collision), on the same buffers: on an H200 on 2026-11-27 that
//! row streamed at 0.93–0.97 of copy on a 4096-wide lattice where the generated step ran at 0.36 on an 8192-wide
//! one, so this row and the width (NX NY) tell the code from the lattice.
//!
//! `cargo run --release -p bespoke-lbm --example step_cost [NX NY] [f32|f16]`

#[allow(dead_code)] // the helpers the other examples share
mod common;

use bespoke_gpu::{GRID_WGSL, Gpu, Kernel, ProbeOptions};
use bespoke_lbm::Storage;
use common::{Res, State, ab_pair, grid, periodic_ab_spec, size_args, state_buffers, write_state};

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

/// A periodic D2Q9 f32 step written by hand, as the streams example writes its "a step" row: pull each direction
/// from the cell minus its velocity, an equilibrium collision, store at the cell; the generated kernel's bindings
/// (`a0..a8` read, `b0..b8` written) and grid, so it times on the same buffers and launches.
fn hand_written_step(nx: usize, ny: usize) -> String {
    let c = bespoke_lbm::d2q9::C.map(|[cx, cy]| (cx, cy));
    let mut s = format!("{GRID_WGSL}\n");
    for k in 0..9 {
        s += &format!("@group(0) @binding({k}) var<storage, read> a{k}: array<f32>;\n");
    }
    for k in 0..9 {
        s += &format!(
            "@group(0) @binding({}) var<storage, read_write> b{k}: array<f32>;\n",
            9 + k
        );
    }
    s += &format!(
        "@compute @workgroup_size({wg})\nfn main(@builtin(workgroup_id) wid: vec3<u32>, \
         @builtin(local_invocation_index) lid: u32) {{\n    let idx = bespoke_workgroup_linear(wid) * {wg}u + lid;\n    \
         if idx >= {n}u {{ return; }}\n    let x = idx % {nx}u;\n    let y = idx / {nx}u;\n    \
         let x0 = select(x - 1u, {xl}u, x == 0u);\n    let x1 = x;\n    let x2 = select(x + 1u, 0u, x == {xl}u);\n    \
         let y0 = select(y - 1u, {yl}u, y == 0u) * {nx}u;\n    let y1 = y * {nx}u;\n    \
         let y2 = select(y + 1u, 0u, y == {yl}u) * {nx}u;\n",
        wg = bespoke_lbm::kernel::WG,
        n = nx * ny,
        xl = nx - 1,
        yl = ny - 1
    );
    // The lattice stores each population less its weight (`bespoke_lbm`'s shifted storage): added back on the
    // load and taken off on the store, so this step keeps the buffers' state a lattice state, as the generated
    // step does (unshifted, ρ would read ≈ 0 and the state turn to infinities within a step).
    let w = bespoke_lbm::d2q9::W.map(|w| w as f32);
    for (k, (cx, cy)) in c.iter().enumerate() {
        s += &format!(
            "    let v{k} = a{k}[y{} + x{}] + {:?};\n",
            1 - cy,
            1 - cx,
            w[k]
        );
    }
    let sum = |f: &dyn Fn(i32, i32) -> i32| {
        c.iter()
            .enumerate()
            .filter(|(_, c)| f(c.0, c.1) != 0)
            .fold("0.0".to_owned(), |acc, (k, c)| {
                format!("{acc} {} v{k}", if f(c.0, c.1) < 0 { "-" } else { "+" })
            })
    };
    s += &format!(
        "    let rho = {};\n    let ux = ({}) / rho;\n    let uy = ({}) / rho;\n    \
         let uu = 1.5 * (ux * ux + uy * uy);\n",
        sum(&|_, _| 1),
        sum(&|cx, _| cx),
        sum(&|_, cy| cy)
    );
    for (k, (cx, cy)) in c.iter().enumerate() {
        s += &format!(
            "    let cu{k} = 3.0 * ({cx}.0 * ux + {cy}.0 * uy);\n    \
             b{k}[idx] = {w:?} * rho * (1.0 + cu{k} + 0.5 * cu{k} * cu{k} - uu) - {w:?};\n",
            w = w[k]
        );
    }
    s + "}\n"
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

/// The variants of one storage, timed on given buffers.
struct Rows<'a> {
    gpu: &'a Gpu,
    variants: &'a [(&'static str, String)],
    grid: bespoke_gpu::Grid,
    /// Bytes a step moves.
    bytes: f64,
    /// Invocations per step.
    words: usize,
    /// Cells of the lattice.
    cells: usize,
    /// The copy probe's GB/s.
    copy: f64,
    storage: Storage,
}

impl Rows<'_> {
    /// Times every variant on `bufs` (both lattices), in turn, `ROUNDS` times, and prints a line each under `label`.
    fn time(&self, bufs: &[bespoke_gpu::GpuBuffer<u32>], label: &str) -> Res<()> {
        let gpu = self.gpu;
        let mut rows = Vec::new();
        for (what, source) in self.variants {
            // SAFETY: the generated kernel indexes below `words` in every binding, which holds `words` elements.
            let k = unsafe {
                Kernel::new(format!("step-cost {what}"), source.clone()).without_bounds_checks()
            };
            rows.push((what, ab_pair(gpu, &k, bufs, self.grid)?, Vec::new()));
        }
        // The variants in turn, ROUNDS times: a row that differs from another in every round is the kernel; one
        // that moves between rounds is the machine (on an H200 on 2026-11-27 the same kernel on the same
        // buffers read 0.37 in one call and 0.84 in another, and the f16 step 0.25 to 0.92 by state).
        for _ in 0..ROUNDS {
            for (_, [l1, l2], times) in rows.iter_mut() {
                times.push(gpu.time(&[&*l1, &*l2], 2, 8)?.median() / 2.0);
            }
        }
        let (bytes, copy) = (self.bytes, self.copy);
        for (what, _, times) in &rows {
            let t = bespoke_gpu::median(times);
            let rounds: Vec<String> = times
                .iter()
                .map(|t| format!("{:.2}", bytes / t / 1e9 / copy))
                .collect();
            println!(
                "  {} {:<28} {what:<14}: {:6.3} ms/step {:6.1} MLUPS {:5.1} ns/invocation {:.2} of copy \
                 (rounds {})",
                self.storage.name(),
                label,
                t * 1e3,
                self.cells as f64 / t / 1e6,
                t / self.words as f64 * 1e9,
                bytes / t / 1e9 / copy,
                rounds.join(" ")
            );
        }
        Ok(())
    }
}

/// Times each variant is timed, in turn with the others.
const ROUNDS: usize = 3;

fn main() -> Res<()> {
    let (nx, ny) = size_args()?;
    let gpu = Gpu::new()?;
    let copy = gpu.copy_bandwidth(&ProbeOptions::default())?.gbps;
    println!("{}: {nx}×{ny}, copy {copy:.2} GB/s", gpu.adapter_name());
    let only: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| a == "f32" || a == "f16")
        .collect();
    for storage in [Storage::F32, Storage::F16] {
        if !only.is_empty() && !only.iter().any(|o| o == storage.name()) {
            continue;
        }
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
        if storage == Storage::F32 {
            variants.push(("hand-written", hand_written_step(nx, ny)));
        }
        if storage == Storage::F16 {
            variants.push(("no conversion", without_conversion(&src)));
            variants.push(("memory only", without_conversion(&without_collision(&src))));
        }
        let rows = Rows {
            gpu: &gpu,
            variants: &variants,
            grid,
            bytes,
            words,
            cells: nx * ny,
            copy,
            storage,
        };
        let mut kept = Vec::new();
        for state in [State::TaylorGreen, State::Uniform, State::Random] {
            let bufs = state_buffers(&gpu, storage, nx, ny, state)?;
            rows.time(&bufs, state.name())?;
            if state != State::Uniform {
                kept.push((state, bufs));
            }
        }
        // Each state is also 18 allocations of its own: a state that runs slower may be its data or its buffers.
        // The Taylor–Green and random states again, each written into the other's buffers: a time that follows the
        // state names the data, one that follows the buffers names the allocations.
        if let [(s1, b1), (s2, b2)] = &kept[..] {
            write_state(&gpu, b1, storage, nx, ny, *s2)?;
            write_state(&gpu, b2, storage, nx, ny, *s1)?;
            rows.time(b1, &format!("{}@{}-bufs", s2.name(), s1.name()))?;
            rows.time(b2, &format!("{}@{}-bufs", s1.name(), s2.name()))?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use bespoke_gpu::{caps_for, validate_everywhere};

    /// Every kernel this example times is valid WGSL (no device needed): the generated step, each edit of it, and
    /// the hand-written step, at a square and a wide lattice.
    #[test]
    fn every_variant_validates_without_a_device() {
        for (nx, ny) in [(64, 64), (128, 32)] {
            for storage in [Storage::F32, Storage::F16] {
                let src = periodic_ab_spec(nx, ny, storage).generate();
                let edits = [
                    src.clone(),
                    without_collision(&src),
                    without_pulls(&src),
                    without_pulls(&without_collision(&src)),
                    without_conversion(&src),
                    without_conversion(&without_collision(&src)),
                ];
                for s in edits {
                    validate_everywhere(&s, caps_for(false, true)).unwrap();
                }
            }
            let hand = hand_written_step(nx, ny);
            validate_everywhere(&hand, caps_for(false, false)).unwrap();
            // Nine stores, one per direction.
            assert_eq!(hand.matches("] = ").count(), 9);
        }
    }
}
