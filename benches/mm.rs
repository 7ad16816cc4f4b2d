//! Criterion bench of specialised kernels on shipped PyFR operators (hex p3 M0 sparse, tet p3 M460 dense) at
//! N = 32 768, each variant family against the dense GEMM at the model's pick. Throughput counts bytes at the
//! minimum (B read once, C written once, read once more when β ≠ 0).

use std::time::Duration;

use bespoke::bench::device_time;
use bespoke::gpu::Gpu;
use bespoke::mm::dense::Machine;
use bespoke::mm::dense::microbench::Op;
use bespoke::mm::specialise::{Choice, MatMul, Panel, Variant, parse_mtx};
use bespoke::mm::{DType, GemmShape};
use criterion::{Criterion, Throughput, criterion_group, criterion_main};

const MATRICES: &[(&str, &str)] = &[
    (
        "hex-p3-m0",
        include_str!("../tests/data/pyfr/hex-p3-m0-dflt.mtx"),
    ),
    (
        "tet-p3-m460",
        include_str!("../tests/data/pyfr/tet-p3-m460-dflt.mtx"),
    ),
];

fn mm(c: &mut Criterion) {
    let gpu = match Gpu::new() {
        Ok(g) => g,
        Err(e) => {
            eprintln!("mm bench skipped: {e}");
            return;
        }
    };
    let machine = Machine::load_or_measure(&gpu, Op::Fma(DType::F32), false).map(|(m, _)| m);
    let n = 32_768;
    let panel = Panel::packed(n);
    let mut group = c.benchmark_group("mm");
    group
        .sample_size(10)
        .measurement_time(Duration::from_secs(5));
    for (name, text) in MATRICES {
        let Ok(op) = parse_mtx(text, name) else {
            continue;
        };
        let beta = op.beta_hint.unwrap_or(0.0);
        let c_passes = if beta == 0.0 { 1 } else { 2 };
        group.throughput(Throughput::Bytes((4 * n * (op.k + c_passes * op.m)) as u64));
        let fill = |len: usize| (0..len).map(|i| (i % 7) as f32 - 3.0).collect::<Vec<f32>>();
        let (Ok(b), Ok(cc)) = (gpu.upload(&fill(op.k * n)), gpu.upload(&fill(op.m * n))) else {
            continue;
        };
        let mut choices: Vec<Choice> = ["cstream-v4", "cstream-v4-fold", "bstream-v4"]
            .iter()
            .filter_map(|v| Variant::parse(v).map(Choice::Spec))
            .collect();
        let shape = GemmShape {
            m: op.m,
            n,
            k: op.k,
            lda: op.k,
            ldb: n,
            ldc: n,
        };
        if let Ok(g) = machine.as_ref().map_err(|e| e.to_string()).and_then(|m| {
            m.gemm(&gpu, shape, DType::F32, 1.0, beta)
                .map_err(|e| e.to_string())
        }) {
            choices.push(Choice::Dense(g.params));
        }
        for choice in choices {
            let Ok(mm) = MatMul::<f32>::with_choice(&gpu, &op, beta, panel, choice) else {
                continue;
            };
            let Ok(plan) = mm.plan(&gpu, &b, &cc) else {
                continue;
            };
            let launches = plan.launches();
            group.bench_function(format!("{name}/{}", choice.name()), |bch| {
                bch.iter_custom(|iters| device_time(&gpu, &launches, iters))
            });
        }
    }
    group.finish();
}

criterion_group!(benches, mm);
criterion_main!(benches);
