#![allow(clippy::unwrap_used)]
//! Prints each operator's launches (terms, loads+stores) for the named variants: `launch_sizes N VARIANT.. -- MTX..`.
use bespoke_gpu::Gpu;
use bespoke_mm::DType;
use bespoke_mm::specialise::{Panel, SpecKernel, Variant, read_mtx};
fn main() {
    let gpu = Gpu::new().unwrap();
    let args: Vec<String> = std::env::args().collect();
    let n: usize = args[1].parse().unwrap();
    let sep = args.iter().position(|a| a == "--").unwrap();
    for path in &args[sep + 1..] {
        let op = read_mtx(std::path::Path::new(path)).unwrap();
        for name in &args[2..sep] {
            let v = Variant::parse(name).unwrap();
            for beta in [0.0, 1.0] {
                if let Ok(k) = SpecKernel::new(&gpu, &op, v, DType::F32, beta, Panel::packed(n)) {
                    println!(
                        "{}\t{name}\t{beta}\t{:?}\t{:?}",
                        op.name,
                        k.launch_terms(),
                        k.launch_accesses()
                    );
                }
            }
        }
    }
}
