//! The flushed-subnormals quirk (`Quirks::flushes_subnormals`, `BESPOKE_QUIRKS=flushed-subnormals`): every
//! subnormal float a kernel loads or computes becomes a zero of its sign, as a GPU that flushes them gives.

use super::*;
use bespoke_gpu::Quirks;

const SUBNORMALS: &str = "
@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read_write> y: array<f32>;
@compute @workgroup_size(1)
fn main() {
    y[0] = x[0] * x[1];     // normal × normal: subnormal
    y[1] = x[2] + 0.0;      // a subnormal in
    y[2] = x[3] * 2.0;      // a negative subnormal in
    y[3] = x[2];            // a subnormal copied
    y[4] = x[0] * 4.0;      // normal: kept
}";

fn run(gpu: &Gpu, x: &[f32]) -> Vec<f32> {
    let xb = gpu.upload(x).unwrap();
    let yb = gpu.alloc_filled(5, f32::NAN).unwrap();
    let l = gpu
        .prepare(
            &Kernel::new("subnormals", SUBNORMALS),
            &[xb.arg(), yb.arg()],
            Grid::d1(1),
        )
        .unwrap();
    gpu.run(&[&l]).unwrap();
    gpu.read(&yb).unwrap()
}

#[test]
fn subnormals_flush_to_a_zero_of_their_sign_under_the_quirk() {
    let Some(shared) = test_gpu() else { return };
    let gpu = emulating(
        shared,
        GpuOptions {
            quirks: Quirks {
                flushes_subnormals: true,
                ..Default::default()
            },
            ..Default::default()
        },
    );
    assert!(gpu.adapter_key().contains("-ftz"), "{}", gpu.adapter_key());
    let x = [1e-20f32, 1e-20, 1e-40, -1e-40];
    let cpu = [x[0] * x[1], x[2] + 0.0, x[3] * 2.0, x[2], x[0] * 4.0];
    assert!(cpu[..4].iter().all(|v| v.is_subnormal()));
    let bits = |v: &[f32]| v.iter().map(|f| f.to_bits()).collect::<Vec<_>>();
    let flushed = run(&gpu, &x);
    // What the device itself does, said before any assertion can stop the test.
    let plain = run(shared, &x);
    eprintln!("plain device: {plain:?} (the CPU: {cpu:?}; under the quirk: {flushed:?})");
    assert_eq!(
        bits(&flushed),
        bits(&[0.0, 0.0, -0.0, 0.0, cpu[4]]),
        "{flushed:?}"
    );
    // lavapipe keeps subnormals (measured 2026-12-02); a GPU may flush them, so only there is it known.
    if shared.is_cpu() && !shared.quirks().flushes_subnormals {
        assert_eq!(bits(&plain), bits(&cpu));
    }
}
