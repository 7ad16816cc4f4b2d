//! The WGSL of each step kernel family (gather per layout, block-cached), pinned as insta snapshots
//! (`tests/snapshots/`): a change to the generator shows up as a reviewable diff. Accept an intended change with
//! `cargo insta review` (or `INSTA_UPDATE=always cargo test -p bespoke-fv --test snapshots`).

use bespoke_fv::kernel::{DType, KernelKind, Layout, step_wgsl};

#[test]
fn one_step_kernel_per_family_and_layout() {
    for layout in Layout::ALL {
        let src = step_wgsl(KernelKind::Gather, layout, DType::F32, 1000, 0.125);
        insta::assert_snapshot!(format!("gather-{}-f32", layout.name()), src);
    }
    let src = step_wgsl(
        KernelKind::BlockCached { block: 256 },
        Layout::SlotMajor,
        DType::F64,
        1000,
        0.125,
    );
    insta::assert_snapshot!("block-cached-256-slot-major-f64", src);
}
