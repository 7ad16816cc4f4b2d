//! How the device rounds an f32 that lies between two f16 values when it converts it: in `pack2x16float` and in
//! `f16(x)`. WGSL lets a conversion to a narrower float give either neighbour (and SPIR-V's `PackHalf2x16`
//! states no rounding): lavapipe rounds to the nearest, ties to even, as the `half` crate and every host path of
//! bespoke do; AMD's GPUs have an instruction that packs two f32s toward zero (`v_cvt_pkrtz_f16_f32`), and Mesa
//! tells its AMD and NVIDIA compilers (RADV's, NAK) that they may use such a pack (`has_pack_half_2x16_rtz`).
//! Stored that way, every f16 value drifts toward zero: an f16 lattice's cavity at Re 100 ended at an RMS of
//! 0.069 and 0.060 against Ghia's profiles, not 0.0025 and 0.0037, under the emulation of it
//! ([`Quirks::packs_toward_zero`](crate::Quirks)). Kernels that store f16 values ask
//! [`Gpu::rounds_f16_to_nearest_even`] and, where the answer is no, round each value to its nearest f16
//! themselves first, so that the conversion is exact.

use crate::context::Gpu;
use crate::dispatch::Grid;
use crate::error::Result;
use crate::kernel::Kernel;

/// The probe's values: below, between and at the ties of f16 neighbours across f16's normal range, both signs,
/// paired into words. Not its subnormals: a device may flush those (WGSL allows it), which is not a rounding
/// direction, and an f16 lattice's subnormal values are deviations below 2⁻²⁸.
fn probe_values() -> Vec<f32> {
    let mut xs = Vec::new();
    for h in (0x0400u16..0x7bff).step_by(97) {
        let (a, b) = (
            half::f16::from_bits(h).to_f32(),
            half::f16::from_bits(h + 1).to_f32(),
        );
        let tie = 0.5 * (a + b);
        for x in [
            tie,
            f32::from_bits(tie.to_bits() - 1),
            f32::from_bits(tie.to_bits() + 1),
            a + 0.25 * (b - a),
            a + 0.75 * (b - a),
        ] {
            xs.extend([x, -x]);
        }
    }
    xs
}

/// The kernels: word i holds values 2i and 2i + 1 (low half, high half), packed as a lattice's store packs a
/// word's two cells, or converted one by one to f16 (where the device has `SHADER_F16`).
const PACK_WGSL: &str = "
@group(0) @binding(0) var<storage, read> xs: array<vec2<f32>>;
@group(0) @binding(1) var<storage, read_write> words: array<u32>;
@compute @workgroup_size(64) fn main(@builtin(global_invocation_id) g: vec3<u32>) {
    if g.x < arrayLength(&words) {
        words[g.x] = pack2x16float(xs[g.x]);
    }
}";

const CONVERT_WGSL: &str = "enable f16;
@group(0) @binding(0) var<storage, read> xs: array<f32>;
@group(0) @binding(1) var<storage, read_write> hs: array<f16>;
@compute @workgroup_size(64) fn main(@builtin(global_invocation_id) g: vec3<u32>) {
    if g.x < arrayLength(&hs) {
        hs[g.x] = f16(xs[g.x]);
    }
}";

impl Gpu {
    /// Whether this device rounds every f32 between two f16 values to the nearest, ties to even (`half`'s
    /// conversion, the hosts') when it converts to f16: in `pack2x16float` and, where it has `SHADER_F16`, in
    /// `f16(x)`. Measured once per device by converting values at, beside and between the ties of f16
    /// neighbours over its normal range (a flushed subnormal is no rounding direction), both signs (one or two
    /// small kernels), then remembered. A kernel that stores f16 values must round them itself where this is
    /// false.
    pub fn rounds_f16_to_nearest_even(&self) -> Result<bool> {
        if let Some(known) = *self.f16_nearest.lock().unwrap_or_else(|e| e.into_inner()) {
            return Ok(known);
        }
        let xs = probe_values();
        let want = |x: f32| u32::from(half::f16::from_f32(x).to_bits());
        let mut nearest = true;
        // The pack: an invocation a word; the conversion: an invocation an f16 (two a word, low half first).
        let mut kernels = vec![(Kernel::new("bespoke-f16-pack-probe", PACK_WGSL), 2)];
        if self.has_f16() {
            kernels.push((Kernel::new("bespoke-f16-convert-probe", CONVERT_WGSL), 1));
        }
        let src = self.upload(&xs)?;
        for (kernel, per) in &kernels {
            let dst = self.alloc_filled::<u32>(xs.len() / 2, 0xdead_beef)?;
            let launch = self.prepare(
                kernel,
                &[src.arg(), dst.arg()],
                Grid::d1((xs.len() / per).div_ceil(64) as u32),
            )?;
            self.run(&[&launch])?;
            let words = self.read(&dst)?;
            nearest &= words
                .iter()
                .enumerate()
                .all(|(i, &w)| w == want(xs[2 * i]) | (want(xs[2 * i + 1]) << 16));
        }
        *self.f16_nearest.lock().unwrap_or_else(|e| e.into_inner()) = Some(nearest);
        Ok(nearest)
    }
}
