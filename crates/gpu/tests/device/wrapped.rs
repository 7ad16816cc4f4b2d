//! The wrapped-out-of-bounds quirk (`Quirks::wraps_out_of_bounds`, `BESPOKE_QUIRKS=wrapped-out-of-bounds`): an
//! index past its array's end reads and writes another element of the array, as WGSL and robust buffer access
//! allow, where lavapipe reads zeros and drops the writes.

use super::*;
use bespoke_gpu::Quirks;

// Eight invocations: each reads one element too far and writes one too far; workgroup memory and an i32 index
// below zero as well.
const OFF_BY_ONE: &str = "
@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read_write> y: array<f32>;
@group(0) @binding(2) var<storage, read_write> z: array<f32>;
var<workgroup> w: array<f32, 8>;
@compute @workgroup_size(8)
fn main(@builtin(local_invocation_index) i: u32) {
    w[i] = x[i];
    workgroupBarrier();
    y[i] = x[i + 1u] + 10.0 * w[(i + 1u) % 9u];
    z[i + 1u] = x[i];
    y[i + 8u] = x[i32(i) - 1];
}";

/// Runs the kernel; `checked`: with the runtime bounds checks of a plain module (without them, out of bounds is
/// undefined on a device that does not wrap).
fn run(gpu: &Gpu, x: &[f32], checked: bool) -> (Vec<f32>, Vec<f32>) {
    let xb = gpu.upload(x).unwrap();
    let yb = gpu.alloc_filled(16, f32::NAN).unwrap();
    let zb = gpu.alloc_filled(8, f32::NAN).unwrap();
    let kernel = Kernel::new("off_by_one", OFF_BY_ONE);
    // SAFETY: under the quirk every access is wrapped into its array.
    let kernel = if checked {
        kernel
    } else {
        unsafe { kernel.without_bounds_checks() }
    };
    let l = gpu
        .prepare(&kernel, &[xb.arg(), yb.arg(), zb.arg()], Grid::d1(1))
        .unwrap();
    gpu.run(&[&l]).unwrap();
    (gpu.read(&yb).unwrap(), gpu.read(&zb).unwrap())
}

#[test]
fn accesses_past_the_end_land_on_other_elements_under_the_quirk() {
    let Some(shared) = test_gpu() else { return };
    let gpu = emulating(
        shared,
        GpuOptions {
            quirks: Quirks {
                wraps_out_of_bounds: true,
                ..Default::default()
            },
            ..Default::default()
        },
    );
    assert!(gpu.adapter_key().contains("-oob"), "{}", gpu.adapter_key());
    let x: Vec<f32> = (1..=8).map(|v| v as f32).collect();
    let (y, z) = run(&gpu, &x, false);
    // Invocation 7 reads x[8] (x[0] wrapped) and w[8] (w[0]); invocation 0 reads x[-1] (the last element).
    let mut want_y: Vec<f32> = (0..8)
        .map(|i| x[(i + 1) % 8] + 10.0 * x[(i + 1) % 8])
        .collect();
    want_y.extend((0..8).map(|i| x[(i + 7) % 8]));
    assert_eq!(y, want_y);
    // Invocation 7 writes z[8]: z[0], which nothing else writes.
    let mut want_z = vec![x[7]];
    want_z.extend(&x[..7]);
    assert_eq!(z, want_z);
    // Checked, lavapipe reads zeros past a buffer's end and drops the write (z[0] keeps its NaN): a read one
    // too far passes unseen.
    let (y, z) = run(shared, &x, true);
    eprintln!("plain device: y {y:?}, z {z:?}");
    if shared.is_cpu() && !shared.quirks().wraps_out_of_bounds {
        assert_eq!(y[8], 0.0, "{y:?}");
        assert!(z[0].is_nan(), "{z:?}");
    }
}
