#![allow(clippy::unwrap_used)]
//! Times the driver's compile (first run minus a warm run) of dense GEMM tilings, on a small M×N×K with β given:
//! `dense_compile BETA KEY...` (keys as `mm dense-bench --params` takes them). Diagnostic; docs/perf.md records
//! what it measured.
use bespoke_gpu::Gpu;
use bespoke_mm::DType;
use bespoke_mm::dense::{DenseGemm, DenseParams, GemmShape};
fn main() {
    let gpu = Gpu::new().unwrap();
    let args: Vec<String> = std::env::args().collect();
    let beta: f64 = args[1].parse().unwrap();
    let (m, n, k) = (64, 1024, 96);
    let shape = GemmShape {
        m,
        n,
        k,
        lda: k,
        ldb: n,
        ldc: n,
    };
    for key in &args[2..] {
        let p = DenseParams::parse(key).unwrap();
        let g = DenseGemm::new(shape, DType::F32, p, 1.0, beta).unwrap();
        let a = gpu.alloc_filled::<f32>(m * k, 1.0).unwrap();
        let b = gpu.alloc_filled::<f32>(k * n, 1.0).unwrap();
        let c = gpu.alloc_filled::<f32>(m * n, 1.0).unwrap();
        let t = std::time::Instant::now();
        let plan = g.plan(&gpu, &a, &b, &c).unwrap();
        gpu.run(&plan.launches()).unwrap();
        let first = t.elapsed().as_secs_f64();
        let t = std::time::Instant::now();
        gpu.run(&plan.launches()).unwrap();
        let warm = t.elapsed().as_secs_f64();
        println!(
            "{key} beta {beta}: compile {:.2} s (first {first:.2}, warm {warm:.3})",
            first - warm
        );
    }
}
