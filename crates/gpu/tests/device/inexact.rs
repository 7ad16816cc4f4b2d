//! The inexact-division quirk (`Quirks::divides_inexactly`, `BESPOKE_QUIRKS=inexact-division`): every f32
//! quotient is `a · (1/b)` and every square root `1/inverseSqrt(x)`, rounded more than once, as Vulkan allows and
//! NVIDIA's drivers compute; lavapipe rounds both correctly.

use super::*;
use bespoke_gpu::Quirks;

const QUOTIENTS: &str = "
@group(0) @binding(0) var<storage, read> a: array<f32>;
@group(0) @binding(1) var<storage, read> b: array<f32>;
@group(0) @binding(2) var<storage, read_write> q: array<f32>;
@group(0) @binding(3) var<storage, read_write> r: array<f32>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) g: vec3<u32>) {
    let i = g.x;
    if i < arrayLength(&q) {
        q[i] = a[i] / b[i];
        r[i] = sqrt(b[i]);
    }
}";

fn run(gpu: &Gpu, a: &[f32], b: &[f32]) -> (Vec<f32>, Vec<f32>) {
    let (ab, bb) = (gpu.upload(a).unwrap(), gpu.upload(b).unwrap());
    let q = gpu.alloc_filled(a.len(), f32::NAN).unwrap();
    let r = gpu.alloc_filled(a.len(), f32::NAN).unwrap();
    let l = gpu
        .prepare(
            &Kernel::new("quotients", QUOTIENTS),
            &[ab.arg(), bb.arg(), q.arg(), r.arg()],
            Grid::d1(a.len().div_ceil(64) as u32),
        )
        .unwrap();
    gpu.run(&[&l]).unwrap();
    (gpu.read(&q).unwrap(), gpu.read(&r).unwrap())
}

#[test]
fn quotients_and_roots_are_rounded_more_than_once_under_the_quirk() {
    let Some(shared) = test_gpu() else { return };
    let gpu = emulating(
        shared,
        GpuOptions {
            quirks: Quirks {
                divides_inexactly: true,
                ..Default::default()
            },
            ..Default::default()
        },
    );
    assert!(gpu.adapter_key().contains("-div"), "{}", gpu.adapter_key());
    let mut r = rng();
    let n = 4096;
    let a: Vec<f32> = (0..n).map(|_| r.random_range(-100.0..100.0)).collect();
    let b: Vec<f32> = (0..n).map(|_| r.random_range(0.01..100.0)).collect();
    let bits = |v: &[f32]| v.iter().map(|f| f.to_bits()).collect::<Vec<_>>();
    let exact_q: Vec<f32> = a.iter().zip(&b).map(|(x, y)| x / y).collect();
    let exact_r: Vec<f32> = b.iter().map(|y| y.sqrt()).collect();
    let (q, root) = run(&gpu, &a, &b);
    // Each within a few ULP of the correctly rounded value, and not all of them on it.
    let ulps = |x: f32, y: f32| (x.to_bits() as i64 - y.to_bits() as i64).unsigned_abs();
    let worst = |got: &[f32], exact: &[f32]| {
        got.iter()
            .zip(exact)
            .map(|(&g, &e)| ulps(g, e))
            .max()
            .unwrap()
    };
    assert!(worst(&q, &exact_q) <= 2, "{}", worst(&q, &exact_q));
    assert!(worst(&root, &exact_r) <= 3, "{}", worst(&root, &exact_r));
    let off = q.iter().zip(&exact_q).filter(|(g, e)| g != e).count();
    assert!(
        off > n / 20,
        "only {off} of {n} quotients differ from the correctly rounded ones"
    );
    // The quotient is a · (1/b): bit for bit where the device rounds the reciprocal correctly (lavapipe); a GPU
    // may take the reciprocal itself to within an ULP or two (the H200's differed from the CPU's a · (1/b) on
    // 2026-12-04), so there within two ULP.
    let emulated: Vec<f32> = a.iter().zip(&b).map(|(x, y)| x * (1.0 / y)).collect();
    let (plain_q, plain_r) = run(shared, &a, &b);
    let plain_off = plain_q.iter().zip(&exact_q).filter(|(g, e)| g != e).count();
    let off_emulated = q.iter().zip(&emulated).filter(|(g, e)| g != e).count();
    eprintln!(
        "plain device: {plain_off} of {n} quotients and {} roots not correctly rounded (under the quirk: {off}, \
         {off_emulated} other than the CPU's a · (1/b))",
        plain_r.iter().zip(&exact_r).filter(|(g, e)| g != e).count()
    );
    if shared.is_cpu() {
        assert_eq!(bits(&q), bits(&emulated));
    } else {
        assert!(worst(&q, &emulated) <= 2, "{}", worst(&q, &emulated));
    }
    // lavapipe rounds both correctly (measured 2026-12-03); a GPU may not, so only there is it known.
    if shared.is_cpu() && !shared.quirks().divides_inexactly {
        assert_eq!(bits(&plain_q), bits(&exact_q));
        assert_eq!(bits(&plain_r), bits(&exact_r));
    }
}
