//! The irregularity study: synthetic "ideal" operators whose every neighbour lies inside its block of b
//! consecutive tets (block-diagonal, nothing outside), timed for b = 32 … 2²⁰, against which real meshes under
//! each ordering are placed by their in-block fraction.

use crate::bench::min_bytes_per_tet;
use crate::diffusion::{Diffusion, Real};
use crate::error::Result;
use crate::kernel::{KernelKind, Layout, WG};
pub use crate::operator::ideal_operator;

/// One point of the sweep.
#[derive(Clone, Debug, serde::Serialize)]
pub struct SweepPoint {
    pub block: usize,
    pub kernel: &'static str,
    pub layout: &'static str,
    /// The workgroup block of the block-cached kernel (≤ what workgroup memory holds).
    pub kernel_block: u32,
    pub seconds_per_step: f64,
    pub gbps: f64,
}

/// Largest block-cached workgroup block for element size `size` on this adapter (a multiple of the workgroup
/// size, at most 8192).
pub fn max_kernel_block(gpu: &bespoke_gpu::Gpu, size: usize) -> u32 {
    let fit = gpu.limits().max_compute_workgroup_storage_size / size as u32;
    (fit / WG * WG).clamp(WG, 8192)
}

/// The buffer layout the sweep times both kernels in on `gpu`: slot-major, or tet-major where the adapter binds
/// fewer than slot-major's 10 storage buffers a kernel (WebGPU's default 8).
pub fn buffer_layout(gpu: &bespoke_gpu::Gpu) -> Layout {
    if Layout::SlotMajor.storage_buffers() <= gpu.limits().max_storage_buffers_per_shader_stage {
        Layout::SlotMajor
    } else {
        Layout::TetMajor
    }
}

/// Times the gather and block-cached kernels (slot-major; tet-major on an adapter that binds fewer than its 10
/// storage buffers a kernel) and, in f32, gather with the operator in textures, on ideal operators of `n` tets
/// for each block size.
pub fn sweep<T: Real>(
    gpu: &bespoke_gpu::Gpu,
    n: usize,
    blocks: &[usize],
    reps: usize,
    mut progress: impl FnMut(usize),
) -> Result<Vec<SweepPoint>> {
    // The largest buffer is the operator's 4 values per tet: past the device, say so before building it.
    gpu.check_len::<T>(n.saturating_mul(4), "ideal operator values (4 per tet)")?;
    let bytes = (min_bytes_per_tet(T::DTYPE.size()) * n) as f64;
    let cap = max_kernel_block(gpu, T::DTYPE.size());
    let slots = buffer_layout(gpu);
    let mut out = Vec::new();
    for &b in blocks {
        progress(b);
        let op = ideal_operator(n, b, b as u64)?;
        let dt = op.default_dt();
        // The kernel's block: the operator's when it is a legal workgroup block, else the largest that fits.
        let kb = if (b as u32).is_multiple_of(WG) && b as u32 <= cap {
            b as u32
        } else {
            cap
        };
        let mut configs = vec![
            (KernelKind::Gather, slots),
            (KernelKind::BlockCached { block: kb }, slots),
        ];
        if T::DTYPE == crate::kernel::DType::F32 {
            configs.push((KernelKind::Gather, Layout::Texture));
        }
        for (kernel, layout) in configs {
            let mut d = Diffusion::<T>::new(gpu, &op, kernel, layout, dt)?;
            d.set_x(&vec![1.0; n])?;
            let t = d.time_pairs(1, reps)?;
            let s = t.median() / 2.0;
            out.push(SweepPoint {
                block: b,
                kernel: kernel.name(),
                layout: layout.name(),
                kernel_block: kb,
                seconds_per_step: s,
                gbps: bytes / s / 1e9,
            });
        }
    }
    Ok(out)
}

/// Powers of two from 32 to min(2²⁰, n).
pub fn default_blocks(n: usize) -> Vec<usize> {
    (5..=20)
        .map(|p| 1usize << p)
        .filter(|&b| b <= n.max(32))
        .collect()
}

/// The ideal block size at which a real ordering sits on the sweep's plot: for an ideal operator with blocks of
/// b, a window of w consecutive tets catches a fraction min(1, w/b) of the references (blocks larger than the
/// window spill); inverted at the measured in-block fraction f: b = w / f (clamped to [w, n]).
pub fn equivalent_block(f: f64, window: f64, n: f64) -> f64 {
    (window / f.max(1e-9)).clamp(window, n.max(window))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ordering::in_block_fraction;

    #[test]
    fn equivalent_block_inverts_the_in_block_fraction() {
        assert_eq!(super::equivalent_block(1.0, 2048.0, 1e6), 2048.0);
        assert_eq!(super::equivalent_block(0.25, 2048.0, 1e6), 8192.0);
        assert_eq!(
            super::equivalent_block(0.0, 2048.0, 1e4),
            1e4,
            "clamped to the mesh"
        );
    }

    #[test]
    fn ideal_operators_past_32_bit_indices_are_errors() {
        let e = ideal_operator(1 << 33, 32, 1).expect_err("2^33 tets accepted");
        assert!(e.to_string().contains("32-bit"), "{e}");
    }

    #[test]
    fn ideal_operators_stay_in_their_blocks() {
        for b in [1, 3, 32, 1000] {
            let op = ideal_operator(5000, b, 9).expect("ideal");
            assert_eq!(in_block_fraction(&op, b), 1.0, "block {b}");
            if b >= 5 {
                assert!(
                    op.indices
                        .iter()
                        .enumerate()
                        .all(|(i, r)| r.iter().all(|&j| j as usize != i))
                );
            }
        }
    }
}
