//! Criterion bench of the dense GEMM at the analytical model's pick (one square, one PyFR-like shape) and of the
//! popcount GEMM, timed on the device. Throughput counts flops (dense) or word operations (popcount) as elements.

use std::time::Duration;

use bespoke::bench::device_time;
use bespoke::gpu::{Gpu, Launch};
use bespoke::mm::DType;
use bespoke::mm::dense::microbench::Op;
use bespoke::mm::dense::{DenseGemm, GemmShape, Machine, TileLimits};
use bespoke::mm::popcount::{PopShape, popcount_pick, popcount_plan};
use criterion::{
    BenchmarkGroup, Criterion, Throughput, criterion_group, criterion_main, measurement::WallTime,
};

fn bench_launches(
    group: &mut BenchmarkGroup<'_, WallTime>,
    gpu: &Gpu,
    name: &str,
    launches: &[&Launch],
) {
    group.bench_function(name, |b| {
        b.iter_custom(|iters| device_time(gpu, launches, iters))
    });
}

fn dense(c: &mut Criterion) {
    let gpu = match Gpu::new() {
        Ok(g) => g,
        Err(e) => {
            eprintln!("dense bench skipped: {e}");
            return;
        }
    };
    let limits = TileLimits::of(&gpu);
    let mut group = c.benchmark_group("dense");
    group
        .sample_size(10)
        .measurement_time(Duration::from_secs(5));
    if let Ok((machine, _)) = Machine::load_or_measure(&gpu, Op::Fma(DType::F32), false) {
        for (label, shape) in [
            ("square-512", GemmShape::packed(512, 512, 512)),
            ("pyfr-96x64-n32768", GemmShape::packed(96, 32768, 64)),
        ] {
            let Ok((p, _)) = machine.pick(DType::F32, &limits, &shape, false) else {
                continue;
            };
            let fill = |n: usize| (0..n).map(|i| (i % 7) as f32 - 3.0).collect::<Vec<f32>>();
            let (Ok(a), Ok(b), Ok(cc)) = (
                gpu.upload(&fill(shape.m * shape.k)),
                gpu.upload(&fill(shape.k * shape.n)),
                gpu.alloc::<f32>(shape.m * shape.n),
            ) else {
                continue;
            };
            let Ok(plan) = DenseGemm::new(shape, DType::F32, p, 1.0, 0.0)
                .and_then(|g| g.plan(&gpu, &a, &b, &cc))
            else {
                continue;
            };
            group.throughput(Throughput::Elements(shape.flops() as u64));
            bench_launches(
                &mut group,
                &gpu,
                &format!("{label}/{}", p.key()),
                &plan.launches(),
            );
        }
    }
    if let Ok((machine, _)) = Machine::load_or_measure(&gpu, Op::Popcount, false) {
        let shape = PopShape::packed(1024, 1024, 128);
        if let (Ok((p, _)), Ok(a), Ok(cc)) = (
            popcount_pick(&machine, &limits, &shape),
            gpu.upload(
                &(0..1024 * 128)
                    .map(|i: u32| i.wrapping_mul(0x9e37_79b9))
                    .collect::<Vec<u32>>(),
            ),
            gpu.alloc::<u32>(1024 * 1024),
        ) && let Ok(plan) = popcount_plan(&gpu, &shape, &p, &a, &a, &cc)
        {
            group.throughput(Throughput::Elements(shape.word_ops() as u64));
            bench_launches(
                &mut group,
                &gpu,
                &format!("popcount-1024x1024x128w/{}", p.key()),
                &plan.launches(),
            );
        }
    }
    group.finish();
}

criterion_group!(benches, dense);
criterion_main!(benches);
