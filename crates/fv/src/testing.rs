//! For tests on any adapter: the layouts a device binds, each one left out reported as skipped
//! ([`bespoke_gpu::testing::skipped`]), so a suite run on a device held to WebGPU's limits (8 storage buffers a
//! kernel: `BESPOKE_LIMITS=webgpu`) checks what that device can run and says what it cannot.

use bespoke_gpu::Gpu;
use bespoke_gpu::testing::skipped;

use crate::kernel::Layout;

/// The ones of `layouts` that `gpu` binds for `n` tets of `size`-byte values, in their order; each one left out is
/// reported as skipped, with its reason and `what` the test was doing.
pub fn layouts_on(
    gpu: &Gpu,
    layouts: impl IntoIterator<Item = Layout>,
    n: usize,
    size: usize,
    what: &str,
) -> Vec<Layout> {
    layouts
        .into_iter()
        .filter(|l| match l.misfit_on(gpu, n, size) {
            None => true,
            Some(why) => {
                skipped(&format!("{what}: the {} layout {why}", l.name()));
                false
            }
        })
        .collect()
}

/// Whether `gpu` binds `layout` for `n` tets of `size`-byte values; where it does not, says so as skipped.
pub fn binds(gpu: &Gpu, layout: Layout, n: usize, size: usize, what: &str) -> bool {
    !layouts_on(gpu, [layout], n, size, what).is_empty()
}

/// The layout a test steps in where the layout is not what it tests: slot-major, or tet-major on a device that
/// binds fewer than slot-major's 10 storage buffers a kernel ([`crate::sweep::buffer_layout`]).
pub fn plain_layout(gpu: &Gpu) -> Layout {
    crate::sweep::buffer_layout(gpu)
}
