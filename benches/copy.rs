//! Criterion bench of the copy kernel that defines `copy_gbps`, timed on the device (timestamps where the
//! adapter has them). Throughput counts bytes read plus written.

use std::time::Duration;

use bespoke::bench::device_time;
use bespoke::gpu::{CopyVariant, Gpu, Launch};
use criterion::{Criterion, Throughput, criterion_group, criterion_main};

fn copy(c: &mut Criterion) {
    let gpu = match Gpu::new() {
        Ok(g) => g,
        Err(e) => {
            eprintln!("copy bench skipped: {e}");
            return;
        }
    };
    let mut group = c.benchmark_group("copy");
    group
        .sample_size(10)
        .measurement_time(Duration::from_secs(5));
    for mib in [4usize, 64] {
        let n = (mib << 20) / 16;
        let (src, dst) = match (
            gpu.alloc_filled::<[f32; 4]>(n, [1.0; 4]),
            gpu.alloc::<[f32; 4]>(n),
        ) {
            (Ok(s), Ok(d)) => (s, d),
            _ => continue,
        };
        group.throughput(Throughput::Bytes(2 * (n * 16) as u64));
        for v in CopyVariant::CANDIDATES {
            let Ok(launches) = gpu.copy_launches(&src, &dst, v) else {
                continue;
            };
            let refs: Vec<&Launch> = launches.iter().collect();
            group.bench_function(format!("{}MiB/{}", mib, v.name()), |b| {
                b.iter_custom(|iters| device_time(&gpu, &refs, iters))
            });
        }
    }
    group.finish();
}

criterion_group!(benches, copy);
criterion_main!(benches);
