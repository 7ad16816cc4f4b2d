#![allow(clippy::unwrap_used)]
use bespoke_gpu::Gpu;
use bespoke_mm::DType;
use bespoke_mm::specialise::{Panel, SpecKernel, Variant, read_mtx};
fn main() {
    let gpu = Gpu::new().unwrap();
    let args: Vec<String> = std::env::args().collect();
    let op = read_mtx(std::path::Path::new(&args[1])).unwrap();
    for name in &args[2..] {
        let v = Variant::parse(name).unwrap();
        let t = std::time::Instant::now();
        match SpecKernel::new(&gpu, &op, v, DType::F32, 0.0, Panel::packed(1024)) {
            Ok(mut k) => {
                let c = k.compile(&gpu).unwrap();
                let b = gpu.alloc_filled::<f32>(op.k * 1024, 1.0).unwrap();
                let cc = gpu.alloc::<f32>(op.m * 1024).unwrap();
                let l = k.plan(&gpu, &b, &cc).unwrap();
                let lr: Vec<_> = l.iter().collect();
                let t1 = std::time::Instant::now();
                gpu.run(&lr).unwrap();
                let first = t1.elapsed().as_secs_f64();
                let t2 = std::time::Instant::now();
                gpu.run(&lr).unwrap();
                println!(
                    "{} {name}: {:?} total {:.2}s first run {first:.3}s second {:.3}s",
                    op.name,
                    c,
                    t.elapsed().as_secs_f64(),
                    t2.elapsed().as_secs_f64()
                );
            }
            Err(e) => println!("{name}: {e}"),
        }
    }
}
