use bespoke_gpu::*;
fn main() -> Result<()> {
    let gpu = Gpu::new()?;
    let p = gpu.copy_bandwidth(&ProbeOptions::default())?;
    println!("buffer copy {:.3} GB/s ({})", p.gbps, p.variant);
    let n: usize = 8 << 20; // vec4 texels = 256 MiB
    let data: Vec<[f32; 4]> = (0..n).map(|i| [i as f32; 4]).collect();
    let t = gpu.upload_texture(wgpu::TextureFormat::Rgba32Float, 2048, &data)?;
    let out = gpu.alloc::<[f32; 4]>(n)?;
    let out2 = gpu.upload(&data)?;
    for (name, src) in [
        (
            "tex->buf strided",
            "@group(0) @binding(0) var t: texture_2d<f32>;
@group(0) @binding(1) var<storage, read_write> out: array<vec4<f32>>;
@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let i = bespoke_workgroup_linear(wid) * 256u + lid;
    out[i] = textureLoad(t, vec2<u32>(i & 2047u, i >> 11u), 0);
}",
        ),
        (
            "tex->buf scalar-out",
            "@group(0) @binding(0) var t: texture_2d<f32>;
@group(0) @binding(1) var<storage, read_write> out: array<f32>;
@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let i = bespoke_workgroup_linear(wid) * 256u + lid;
    let v = textureLoad(t, vec2<u32>(i & 2047u, i >> 11u), 0);
    out[i] = v.x + v.y + v.z + v.w;
}",
        ),
        (
            "buf->buf scalar gather",
            "@group(0) @binding(0) var<storage, read> t: array<vec4<f32>>;
@group(0) @binding(1) var<storage, read_write> out: array<f32>;
@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let i = bespoke_workgroup_linear(wid) * 256u + lid;
    let v = t[i];
    out[i] = v.x + v.y + v.z + v.w;
}",
        ),
    ] {
        let k = unsafe { Kernel::new(name, format!("{GRID_WGSL}\n{src}")).without_bounds_checks() };
        let l = if name.starts_with("buf") {
            gpu.prepare(&k, &[out2.arg(), out.arg()], Grid::cover(n as u64, 256)?)?
        } else {
            gpu.prepare(&k, &[t.arg(), out.arg()], Grid::cover(n as u64, 256)?)?
        };
        let tm = gpu.time(&[&l], 2, 5)?.median();
        let bytes = if name.contains("scalar-out") || name.contains("gather") {
            20.0
        } else {
            32.0
        } * n as f64;
        println!(
            "{name}: {:.3} GB/s ({:.2} of buffer copy)",
            bytes / tm / 1e9,
            bytes / tm / 1e9 / p.gbps
        );
    }
    // texture -> storage texture
    let st = gpu.device().create_texture(&wgpu::TextureDescriptor {
        label: None,
        size: wgpu::Extent3d {
            width: 2048,
            height: (n / 2048) as u32,
            depth_or_array_layers: 1,
        },
        mip_level_count: 1,
        sample_count: 1,
        dimension: wgpu::TextureDimension::D2,
        format: wgpu::TextureFormat::Rgba32Float,
        usage: wgpu::TextureUsages::STORAGE_BINDING | wgpu::TextureUsages::TEXTURE_BINDING,
        view_formats: &[],
    });
    let sv = st.create_view(&Default::default());
    let src = "@group(0) @binding(0) var t: texture_2d<f32>;
@group(0) @binding(1) var o: texture_storage_2d<rgba32float, write>;
@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let i = bespoke_workgroup_linear(wid) * 256u + lid;
    let c = vec2<u32>(i & 2047u, i >> 11u);
    textureStore(o, c, textureLoad(t, c, 0));
}";
    let k =
        unsafe { Kernel::new("tex->stex", format!("{GRID_WGSL}\n{src}")).without_bounds_checks() };
    let l = gpu.prepare(
        &k,
        &[t.arg(), Arg::Texture(&sv)],
        Grid::cover(n as u64, 256)?,
    )?;
    let tm = gpu.time(&[&l], 2, 5)?.median();
    let bytes = 32.0 * n as f64;
    println!(
        "tex->storage tex: {:.3} GB/s ({:.2} of buffer copy)",
        bytes / tm / 1e9,
        bytes / tm / 1e9 / p.gbps
    );
    Ok(())
}
