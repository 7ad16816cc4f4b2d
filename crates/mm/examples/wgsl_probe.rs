#![allow(clippy::unwrap_used)]
//! Times driver compilation (first dispatch) of WGSL files with bindings b0 (read) and c0 (read_write).
use bespoke_gpu::{Gpu, Grid, Kernel};
fn main() {
    let gpu = Gpu::new().unwrap();
    for path in std::env::args().skip(1) {
        let src = std::fs::read_to_string(&path).unwrap();
        let k = unsafe { Kernel::new(path.clone(), src).without_bounds_checks() };
        let b = gpu.alloc_filled::<f32>(1 << 22, 1.0).unwrap();
        let c = gpu.alloc::<f32>(1 << 22).unwrap();
        let t = std::time::Instant::now();
        let l = gpu.prepare(&k, &[b.arg(), c.arg()], Grid::d1(1)).unwrap();
        gpu.run(&[&l]).unwrap();
        println!("{path}: {:.3}s", t.elapsed().as_secs_f64());
    }
}
