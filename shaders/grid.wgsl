// bespoke grid prelude: prepended to kernels whose grid may exceed the per-dimension workgroup limit.
// The device layer splits such a grid into several dispatches and tells each one its origin here.
struct BespokeGrid {
    origin: vec3<u32>,
    size: vec3<u32>,
}
@group(1) @binding(0) var<uniform> bespoke_grid: BespokeGrid;

// This workgroup's id in the logical (unsplit) grid.
fn bespoke_workgroup(wid: vec3<u32>) -> vec3<u32> {
    return wid + bespoke_grid.origin;
}

// The logical grid's size in workgroups.
fn bespoke_num_workgroups() -> vec3<u32> {
    return bespoke_grid.size;
}

// Linear index of this workgroup in the logical grid (x fastest).
fn bespoke_workgroup_linear(wid: vec3<u32>) -> u32 {
    let w = bespoke_workgroup(wid);
    let n = bespoke_grid.size;
    return w.x + n.x * (w.y + n.y * w.z);
}
