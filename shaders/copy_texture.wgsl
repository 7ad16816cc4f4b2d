// Texture-read copy: dst[i] = texel i of a rgba32float texture with rows of W texels. A second reference beside
// the buffer copy: some adapters (llvmpipe) read textures through a much faster path than storage buffers.
// Needs the grid prelude (shaders/grid.wgsl) prepended.
override WG: u32 = 256u;
override W: u32 = 4096u;

@group(0) @binding(0) var src: texture_2d<f32>;
@group(0) @binding(1) var<storage, read_write> dst: array<vec4<f32>>;

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let i = bespoke_workgroup_linear(wid) * WG + lid;
    if i < arrayLength(&dst) {
        dst[i] = textureLoad(src, vec2<u32>(i % W, i / W), 0);
    }
}
