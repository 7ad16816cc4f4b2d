// Copy-bandwidth probe: dst = src over vec4<f32>, ITEMS vec4 per invocation.
// BLOCKED = true gives each invocation a contiguous run (fast on CPU adapters, which run a SIMD group through the
// whole shader); BLOCKED = false strides by the workgroup size so neighbouring lanes touch neighbouring words
// (coalesced on GPUs). The probe times both and reports the faster.
// Needs the grid prelude (shaders/grid.wgsl) prepended.
override WG: u32 = 256u;
override ITEMS: u32 = 4u;
override BLOCKED: bool = false;

@group(0) @binding(0) var<storage, read> src: array<vec4<f32>>;
@group(0) @binding(1) var<storage, read_write> dst: array<vec4<f32>>;

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let n = arrayLength(&dst);
    let base = bespoke_workgroup_linear(wid) * WG * ITEMS;
    for (var j = 0u; j < ITEMS; j++) {
        var i = base + j * WG + lid;
        if BLOCKED {
            i = base + lid * ITEMS + j;
        }
        if i < n {
            dst[i] = src[i];
        }
    }
}
