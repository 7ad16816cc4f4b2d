//! The stale-workgroup-memory quirk (`Quirks::stale_workgroup_memory`, `BESPOKE_QUIRKS=stale-workgroup-memory`):
//! workgroup memory starts as poison, so a kernel that reads what it did not write fails on any adapter, and one
//! that writes before it reads gives the same bits as without the quirk.

use super::*;
use bespoke_gpu::Quirks;

fn stale(shared: &Gpu) -> Gpu {
    emulating(
        shared,
        GpuOptions {
            quirks: Quirks {
                stale_workgroup_memory: true,
                ..Default::default()
            },
            ..Default::default()
        },
    )
}

/// Each workgroup of 64 stages its x into workgroup memory, and each invocation writes its mirror's value plus its
/// own and counts itself on a workgroup atomic. `sloppy`: every invocation also adds `s[64]`, which nobody writes,
/// and the counter is not set to zero first.
fn mirror(sloppy: bool) -> String {
    format!(
        "
var<workgroup> s: array<f32, 65>;
var<workgroup> count: atomic<u32>;
@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read_write> y: array<f32>;
@group(0) @binding(2) var<storage, read_write> counts: array<u32>;
@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) w: vec3<u32>, @builtin(local_invocation_id) l: vec3<u32>) {{
    let i = w.x * 64u + l.x;
    s[l.x] = x[i];
    {zero}
    workgroupBarrier();
    atomicAdd(&count, 1u);
    y[i] = s[63u - l.x] + s[l.x]{extra};
    workgroupBarrier();
    if l.x == 0u {{ counts[w.x] = atomicLoad(&count); }}
}}",
        // A kernel that counts from zero must set the counter: workgroup memory does not start at zero.
        zero = if sloppy {
            ""
        } else {
            "if l.x == 0u { atomicStore(&count, 0u); }"
        },
        extra = if sloppy { " + s[64]" } else { "" },
    )
}

fn run_mirror(gpu: &Gpu, sloppy: bool, x: &[f32]) -> (Vec<f32>, Vec<u32>) {
    let groups = x.len() / 64;
    let xb = gpu.upload(x).unwrap();
    let yb = gpu.alloc_filled(x.len(), f32::NAN).unwrap();
    let cb = gpu.alloc_filled(groups, 7u32).unwrap();
    let name = if sloppy { "mirror-sloppy" } else { "mirror" };
    let k = Kernel::new(name, mirror(sloppy));
    let l = gpu
        .prepare(&k, &[xb.arg(), yb.arg(), cb.arg()], Grid::d1(groups as u32))
        .unwrap();
    gpu.run(&[&l]).unwrap();
    (gpu.read(&yb).unwrap(), gpu.read(&cb).unwrap())
}

#[test]
fn workgroup_memory_starts_as_poison_under_the_quirk() {
    let Some(shared) = test_gpu() else { return };
    let gpu = stale(shared);
    assert!(gpu.quirks().stale_workgroup_memory);
    assert!(
        gpu.adapter_key().contains("-stalewg"),
        "{}",
        gpu.adapter_key()
    );
    let mut r = rng();
    let x: Vec<f32> = (0..64 * 37).map(|_| r.random_range(-1.0..1.0)).collect();
    let want: Vec<f32> = (0..x.len())
        .map(|i| {
            let (g, l) = (i / 64, i % 64);
            x[g * 64 + 63 - l] + x[i]
        })
        .collect();
    // Writing before reading: the same bits as the CPU's sums, with or without the quirk.
    for (what, dev) in [("plain", shared), ("stale", &gpu)] {
        let (y, counts) = run_mirror(dev, false, &x);
        assert_eq!(bespoke_gpu::testing::differing_bits(&y, &want), 0, "{what}");
        assert!(counts.iter().all(|&c| c == 64), "{what}: {counts:?}");
    }
    // Reading a slot nobody wrote, and counting from a counter nobody zeroed: poison in every output.
    let (y, counts) = run_mirror(&gpu, true, &x);
    assert!(y.iter().all(|v| v.is_nan()), "{:?}", &y[..4]);
    assert!(
        counts
            .iter()
            .all(|&c| c == 0xdead_beef_u32.wrapping_add(64)),
        "{:x?}",
        &counts[..4]
    );
}
