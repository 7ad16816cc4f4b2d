//! Criterion bench of the ELLPACK diffusion step on a shuffled box mesh, as read and METIS-ordered, for each
//! kernel and layout; throughput counts the minimum bytes a step moves (40 B/tet in f32).

use std::time::Duration;

use bespoke::bench::device_time_by;
use bespoke::fv::bench::{CONFIGS, min_bytes_per_tet};
use bespoke::fv::generate::BoxMesh;
use bespoke::fv::kernel::KernelKind;
use bespoke::fv::operator::adjacency;
use bespoke::fv::ordering::{OrderingKind, order};
use bespoke::fv::{Boundary, Diffusion, Operator};
use bespoke::gpu::Gpu;
use criterion::{Criterion, Throughput, criterion_group, criterion_main};

fn fv(c: &mut Criterion) {
    let gpu = match Gpu::new() {
        Ok(g) => g,
        Err(e) => {
            eprintln!("fv bench skipped: {e}");
            return;
        }
    };
    let side = if gpu.is_cpu() { 40 } else { 100 };
    let Ok(op) = BoxMesh {
        shuffle: Some(1),
        jitter: 0.1,
        ..BoxMesh::cube(side)
    }
    .build()
    .and_then(|m| adjacency(&m).and_then(|a| Operator::diffusion(&m, &a, 1.0, Boundary::ZeroFlux))) else {
        return;
    };
    let n = op.n();
    let dt = 0.5 / op.max_row_sum();
    let mut group = c.benchmark_group("fv");
    group
        .sample_size(10)
        .measurement_time(Duration::from_secs(5));
    group.throughput(Throughput::Bytes((2 * n * min_bytes_per_tet(4)) as u64));
    for kind in [OrderingKind::AsRead, OrderingKind::Metis { block: 2048 }] {
        let Ok((perm, _)) = order(&op, kind) else {
            continue;
        };
        let permuted = perm.apply_operator(&op);
        for (name, layout) in CONFIGS {
            let kernel = if name == "gather" {
                KernelKind::Gather
            } else {
                KernelKind::BlockCached { block: 2048 }
            };
            let Ok(mut d) = Diffusion::<f32>::new(&gpu, &permuted, kernel, layout, dt) else {
                continue;
            };
            // Two steps per iteration (one ping-pong pair).
            group.bench_function(
                format!("{n}/{}/{name}/{}", kind.name(), layout.name()),
                |b| b.iter_custom(|iters| device_time_by(iters, |reps| d.time_pairs(0, reps))),
            );
        }
    }
    group.finish();
}

criterion_group!(benches, fv);
criterion_main!(benches);
