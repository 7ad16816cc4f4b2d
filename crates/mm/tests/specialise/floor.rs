//! The access floor against its CPU reference.

use super::*;

/// The access floor against its CPU reference on fresh random B and C (NaN-poisoned at β = 0, NaN padding):
/// f32 and f64, β = 0, 1 and −0.5, vec1/2/4, with and without `-touch`'s read of C, N not a multiple of the workgroup, ldb and ldc past N, in one
/// launch and in several past a 4 KiB binding limit (or the smallest aligned block of rows, where larger).
#[test]
fn access_floor_matches_its_reference() {
    let Some(shared) = test_gpu() else { return };
    // Past the alignment's smallest block of C's rows where that is larger (WebGPU's 256 B: 16 rows of 260 f32, 8
    // of 260 f64). Launches split where B's and C's blocks outnumber the storage buffers a kernel binds: 71 rows of
    // C and 67 of B make 10 blocks of f32 (and 18 of f64) in the 16 640 B that WebGPU's alignment asks for, past its
    // 8 buffers, so the floor splits on such a device even without SHADER_F64.
    let block = shared
        .row_block_bytes::<f32>(&[260], &[1])
        .max(shared.row_block_bytes::<f64>(&[260], &[1]));
    let small = emulating(
        shared,
        GpuOptions {
            max_binding_bytes: Some(block.max(4096)),
            max_storage_buffers_per_stage: Some(FEW_STORAGE_BUFFERS),
            ..Default::default()
        },
    );
    let mut r = rng();
    let p = Panel {
        n: 252,
        ldb: 256,
        ldc: 260,
    };
    let mut split = false;
    for (gpu, op) in [
        (shared, random_operator(&mut r, 13, 11, 0.5)),
        (&small, random_operator(&mut r, 71, 67, 0.5)),
    ] {
        for beta in [0.0, 1.0, -0.5] {
            for (vec, touch) in [(1, false), (2, true), (4, false), (4, true)] {
                for dtype in [DType::F32, DType::F64] {
                    if !dtype.supported(gpu) {
                        continue;
                    }
                    let floor = AccessFloor::new(gpu, &op, dtype, beta, p, vec, touch).unwrap();
                    split |= floor.sources().len() > 1;
                    let (b, c) = random_panels(&mut r, &op, p, beta);
                    let what = format!("floor {dtype} vec{vec} touch {touch} β={beta} {}", op.name);
                    let (got, b, mut want) = match dtype {
                        DType::F32 => {
                            run_on_device::<f32>(gpu, (&b, &c), op.m, p, &what, |bb, cb| {
                                floor.plan(gpu, bb, cb).unwrap()
                            })
                        }
                        DType::F64 => {
                            run_on_device::<f64>(gpu, (&b, &c), op.m, p, &what, |bb, cb| {
                                floor.plan(gpu, bb, cb).unwrap()
                            })
                        }
                    };
                    floor.reference(&b, &mut want);
                    let e = rel_err(&got, &want, Shape::new(op.m, p.n, p.ldc));
                    let tol = if dtype == DType::F32 { 1e-5 } else { 1e-12 };
                    assert!(e <= tol, "{what}: rel err {e:e}");
                }
            }
        }
    }
    assert!(
        split,
        "the lowered binding limit should split the floor into several launches"
    );
    // A vector width the panel does not allow is refused by name.
    let op = random_operator(&mut r, 4, 4, 0.0);
    let err =
        AccessFloor::new(shared, &op, DType::F32, 0.0, Panel::packed(250), 4, false).unwrap_err();
    assert!(err.to_string().contains("vec4"), "{err}");
}
