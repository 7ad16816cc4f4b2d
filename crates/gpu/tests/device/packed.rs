//! The pack-toward-zero quirk (`Quirks::packs_toward_zero`, `BESPOKE_QUIRKS=packed-toward-zero`): every
//! `pack2x16float` rounds toward zero, as AMD's packing instruction does (WGSL allows either neighbour), and
//! `Gpu::rounds_f16_to_nearest_even` says which a device does.

use super::*;
use bespoke_gpu::Quirks;

const PACK: &str = "
@group(0) @binding(0) var<storage, read> xs: array<vec2<f32>>;
@group(0) @binding(1) var<storage, read_write> words: array<u32>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) g: vec3<u32>) {
    if g.x < arrayLength(&words) { words[g.x] = pack2x16float(xs[g.x]); }
}";

fn pack(gpu: &Gpu, xs: &[f32]) -> Vec<u32> {
    let src = gpu.upload(xs).unwrap();
    let dst = gpu.alloc_filled::<u32>(xs.len() / 2, 0xdead_beef).unwrap();
    let l = gpu
        .prepare(
            &Kernel::new("pack", PACK),
            &[src.arg(), dst.arg()],
            Grid::d1((xs.len() / 2).div_ceil(64) as u32),
        )
        .unwrap();
    gpu.run(&[&l]).unwrap();
    gpu.read(&dst).unwrap()
}

/// `x` rounded toward zero to an f16, as bits (within f16's finite range).
fn toward_zero(x: f32) -> u16 {
    let n = half::f16::from_f32(x);
    if n.to_f32().abs() > x.abs() {
        n.to_bits() - 1
    } else {
        n.to_bits()
    }
}

#[test]
fn packs_round_toward_zero_under_the_quirk_and_the_device_says_how_it_packs() {
    let Some(shared) = test_gpu() else { return };
    let gpu = emulating(
        shared,
        GpuOptions {
            quirks: Quirks {
                packs_toward_zero: true,
                ..Default::default()
            },
            ..Default::default()
        },
    );
    assert!(gpu.adapter_key().contains("-rtz"), "{}", gpu.adapter_key());
    let mut r = rng();
    // Random values across f16's range, both signs, the f16 values themselves, ties, past 65504, NaN and ∞.
    let mut xs: Vec<f32> = (0..4096)
        .map(|_| r.random_range(-1.0f32..1.0) * 2f32.powi(r.random_range(-26..16)))
        .collect();
    for h in [0x0001u16, 0x03ff, 0x0400, 0x3c00, 0x7bff] {
        let (a, b) = (
            half::f16::from_bits(h).to_f32(),
            half::f16::from_bits(h + 1).to_f32(),
        );
        xs.extend([a, -a, 0.5 * (a + b), -0.5 * (a + b)]);
    }
    xs.extend([65519.0, 70000.0, -1e9, f32::INFINITY, f32::NAN, 0.0]);
    let words = pack(&gpu, &xs);
    for (i, w) in words.iter().enumerate() {
        for (x, bits) in [(xs[2 * i], *w as u16), (xs[2 * i + 1], (*w >> 16) as u16)] {
            let want = if x.is_nan() {
                assert!(half::f16::from_bits(bits).is_nan(), "{x} → {bits:#06x}");
                continue;
            } else if x.is_infinite() {
                half::f16::from_f32(x).to_bits()
            } else if x.abs() > 65504.0 {
                // Past the range: the largest finite f16 (WGSL leaves it indeterminate; the quirk gives this).
                0x7bff | if x < 0.0 { 0x8000 } else { 0 }
            } else {
                toward_zero(x)
            };
            assert_eq!(
                bits, want,
                "{x:e} packed to {bits:#06x}, toward zero {want:#06x}"
            );
        }
    }
    assert!(!gpu.rounds_f16_to_nearest_even().unwrap());
    // lavapipe packs to nearest even (WGSL allows either; a GPU's answer is the `step` log's, bespoke-lbm).
    if shared.is_cpu() && !shared.quirks().packs_toward_zero {
        assert!(shared.rounds_f16_to_nearest_even().unwrap());
    } else {
        eprintln!(
            "{} packs f16 to nearest even: {}",
            shared.adapter_name(),
            shared.rounds_f16_to_nearest_even().unwrap()
        );
    }
}
