//! Buffers and textures: uploads, read-backs, limits.

use super::*;

#[test]
fn upload_readback_round_trip() {
    let Some(gpu) = test_gpu() else { return };
    let mut r = rng();
    let f: Vec<f32> = (0..100_003).map(|_| r.random_range(-1e3..1e3)).collect();
    assert_eq!(gpu.read(&gpu.upload(&f).unwrap()).unwrap(), f);
    // Odd byte lengths (u16) exercise the 4-byte copy padding.
    let h: Vec<u16> = (0..1001).map(|_| r.random()).collect();
    let hb = gpu.upload(&h).unwrap();
    assert_eq!(gpu.read(&hb).unwrap(), h);
    assert_eq!(gpu.read_range(&hb, 3..998).unwrap(), h[3..998]);
    // A poisoned buffer reads back as poison.
    let p = gpu.alloc_filled(777, f32::NAN).unwrap();
    assert!(gpu.read(&p).unwrap().iter().all(|v| v.is_nan()));
}

#[test]
fn over_limit_requests_return_the_limit_error() {
    let Some(gpu) = test_gpu() else { return };
    let max = gpu.limits().max_buffer_size;
    match gpu.alloc::<u32>((max / 4 + 1) as usize) {
        Err(GpuError::LimitExceeded {
            asked,
            max: m,
            what,
        }) => {
            assert_eq!(m, max);
            assert!(asked > max);
            assert!(what.contains("buffer"), "{what}");
        }
        other => panic!("expected LimitExceeded, got {other:?}"),
    }
    // Out-of-range reads and writes are errors too.
    let b = gpu.alloc::<f32>(10).unwrap();
    assert!(matches!(
        gpu.read_range(&b, 5..11),
        Err(GpuError::InvalidArgument(_))
    ));
    assert!(matches!(
        gpu.write(&b, 8, &[1.0, 2.0, 3.0]),
        Err(GpuError::InvalidArgument(_))
    ));
}

const TEXEL_COPY: &str = "
@group(0) @binding(0) var t: texture_2d<u32>;
@group(0) @binding(1) var<storage, read_write> out: array<vec4<u32>>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) g: vec3<u32>) {
    let w = textureDimensions(t).x;
    if g.x < arrayLength(&out) { out[g.x] = textureLoad(t, vec2<u32>(g.x % w, g.x / w), 0); }
}";

#[test]
fn textures_hold_what_was_uploaded() {
    let Some(gpu) = test_gpu() else { return };
    let mut r = rng();
    // 1000 texels in rows of 64: 15 full rows and a partial one; more rows than one write call's 256 below.
    for (texels, width) in [(1000usize, 64u32), (70_001, 128)] {
        let data: Vec<[u32; 4]> = (0..texels).map(|_| r.random()).collect();
        let t = gpu
            .upload_texture(bespoke_gpu::wgpu::TextureFormat::Rgba32Uint, width, &data)
            .unwrap();
        assert_eq!((t.width(), t.texels()), (width, texels));
        let out = gpu.alloc_filled(texels * 4, u32::MAX).unwrap();
        let k = Kernel::new("texel-copy", TEXEL_COPY);
        let l = gpu
            .prepare(
                &k,
                &[t.arg(), out.arg()],
                Grid::cover(texels as u64, 64).unwrap(),
            )
            .unwrap();
        gpu.run(&[&l]).unwrap();
        let got = gpu.read(&out).unwrap();
        assert_eq!(got, data.concat(), "{texels} texels in rows of {width}");
    }
    // Misuse is an error naming the problem.
    let max = gpu.limits().max_texture_dimension_2d;
    let e = gpu
        .upload_texture(
            bespoke_gpu::wgpu::TextureFormat::Rgba32Float,
            max * 2,
            &[[0f32; 4]; 3],
        )
        .unwrap_err();
    assert!(matches!(e, GpuError::LimitExceeded { .. }), "{e}");
    let e = gpu
        .upload_texture(
            bespoke_gpu::wgpu::TextureFormat::Rgba32Float,
            64,
            &[0f32; 3],
        )
        .unwrap_err();
    assert!(e.to_string().contains("texels"), "{e}");
    let e = gpu
        .alloc_storage_texture(bespoke_gpu::wgpu::TextureFormat::R32Float, 16, max + 1, 1)
        .unwrap_err();
    assert!(matches!(e, GpuError::LimitExceeded { .. }), "{e}");
}
