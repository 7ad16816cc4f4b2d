//! Criterion bench of the D2Q9 stepper (periodic, no flags) for each storage and streaming pattern; throughput
//! counts the bytes a step moves (18 populations per cell).

use std::time::Duration;

use bespoke::bench::device_time_by;
use bespoke::gpu::Gpu;
use bespoke::lbm::bench::bench_lattice;
use bespoke::lbm::{Storage, Streaming};
use criterion::{Criterion, Throughput, criterion_group, criterion_main};

fn lbm(c: &mut Criterion) {
    let gpu = match Gpu::new() {
        Ok(g) => g,
        Err(e) => {
            eprintln!("lbm bench skipped: {e}");
            return;
        }
    };
    let side = if gpu.is_cpu() { 1024 } else { 4096 };
    let mut group = c.benchmark_group("lbm");
    group
        .sample_size(10)
        .measurement_time(Duration::from_secs(5));
    for storage in [Storage::F32, Storage::F16] {
        for streaming in [Streaming::Ab, Streaming::InPlace] {
            let Ok(mut lat) = bench_lattice(&gpu, side, side, storage, streaming) else {
                continue;
            };
            // Two steps per iteration (one even/odd pair).
            group.throughput(Throughput::Bytes(
                (2 * side * side * lat.bytes_per_cell()) as u64,
            ));
            group.bench_function(
                format!("{side}/{}/{}", storage.name(), streaming.name()),
                |b| b.iter_custom(|iters| device_time_by(iters, |reps| lat.time_pairs(0, reps))),
            );
        }
    }
    group.finish();
}

criterion_group!(benches, lbm);
criterion_main!(benches);
