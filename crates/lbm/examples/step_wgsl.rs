//! Prints the WGSL of the periodic two-lattice BGK step that `bespoke bench --section lbm` times (f32 unless
//! `f16` is given; the in-place step's odd or even kernel with `odd` or `even`), for comparing what naga hands
//! the driver with a peer's SPIR-V (issue 21: `naga step.wgsl step.spv`, then `benches/tools/spirv_stats.py`).
//!
//! `cargo run --release -p bespoke-lbm --example step_wgsl [NX NY] [f16] [odd|even] > step.wgsl`

#[allow(dead_code)] // the helpers the other examples share
mod common;

use bespoke_lbm::Storage;
use bespoke_lbm::kernel::Phase;
use common::{Res, periodic_ab_spec};

fn main() -> Res<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let f16 = args.iter().any(|a| a == "f16");
    let dims: Vec<usize> = args.iter().filter_map(|a| a.parse().ok()).collect();
    let (nx, ny) = match dims.as_slice() {
        [] => (2048, 2048),
        [nx, ny] => (*nx, *ny),
        _ => return Err("give NX and NY, or neither".into()),
    };
    let storage = if f16 { Storage::F16 } else { Storage::F32 };
    let mut spec = periodic_ab_spec(nx, ny, storage);
    for (word, phase) in [("odd", Phase::AaOdd), ("even", Phase::AaEven)] {
        if args.iter().any(|a| a == word) {
            spec.phase = phase;
        }
    }
    print!("{}", spec.generate());
    Ok(())
}
