//! Throughput of every ordering × kernel on one operator: seconds per step, GB/s at the layout's minimum byte
//! count (values, indices, x read once, y written: 40 B/tet f32, 64 B/tet f64 with u32 indices; 32 and 56 plus
//! the far rows with 16-bit offsets), in-block fraction, ordering time.

use crate::diffusion::{Diffusion, Real, check_kernel_block};
use crate::error::Result;
use crate::kernel::{KernelKind, Layout, Shape};
use crate::operator::Operator;
use crate::ordering::{OrderingKind, in_block_fraction, order};
use bespoke_gpu::phase;
use bespoke_gpu::rng::{Rng, seeded};

/// One timed configuration.
#[derive(Clone, Debug, serde::Serialize)]
pub struct FvRun {
    pub ordering: &'static str,
    pub kernel: &'static str,
    pub layout: &'static str,
    pub seconds_per_step: f64,
    /// The least bytes a step moves per tet in this layout (`Layout::min_bytes_per_tet`), which `gbps` counts.
    pub bytes_per_tet: f64,
    pub gbps: f64,
    pub in_block_fraction: f64,
    /// The share of tets with a neighbour past ±32 767 in this ordering (the 16-bit offset layouts read a row of
    /// full indices for each; `kernel::d16_far_tets`).
    pub far_fraction: f64,
    pub ordering_seconds: f64,
    pub timing: &'static str,
    /// Why this configuration was not timed (its operator does not fit the adapter's largest binding); the
    /// times are NaN then.
    pub skipped: Option<String>,
}

/// Minimum bytes a step moves per tet for element size `s`: 4 values, 4 u32 indices, x read, y written.
pub fn min_bytes_per_tet(s: usize) -> usize {
    Layout::SlotMajor.min_bytes_per_tet(s, 0.0) as usize
}

/// The kernels and layouts the bench times.
/// (The texture layout is f32 only; f64 benches skip it.)
pub const CONFIGS: [(&str, Layout); 8] = [
    ("gather", Layout::SlotMajor),
    ("gather", Layout::TetMajor),
    ("gather", Layout::TetMajorD16),
    ("gather", Layout::SlotMajorX4),
    ("gather", Layout::SlotMajorX4D16),
    ("gather", Layout::Texture),
    ("block-cached", Layout::SlotMajor),
    ("block-cached", Layout::Texture),
];

/// Times every ordering × kernel configuration (`reps` step pairs after two warm-up pairs each).
pub fn bench_operator<T: Real>(
    gpu: &bespoke_gpu::Gpu,
    op: &Operator,
    orderings: &[OrderingKind],
    block: u32,
    reps: usize,
    mut progress: impl FnMut(&str),
) -> Result<Vec<FvRun>> {
    // Every ordering runs the block-cached kernel: a bad block is an error before any ordering is computed.
    check_kernel_block::<T>(gpu, block)?;
    let n = op.n();
    let dt = op.default_dt();
    let mut rng = seeded(7);
    let x: Vec<f64> = (0..n).map(|_| rng.random::<f64>()).collect();
    let mut runs = Vec::new();
    for &kind in orderings {
        progress(kind.name());
        let (perm, ordering_seconds) =
            phase(format!("fv order {}", kind.name()), || order(op, kind))?;
        let (permuted, in_block, xp) = phase(format!("fv permute {}", kind.name()), || {
            let permuted = perm.apply_operator(op);
            let in_block = in_block_fraction(&permuted, block as usize);
            let far = crate::kernel::d16_far_tets(&permuted.indices) as f64 / n as f64;
            let xp = perm.apply(&x);
            (permuted, (in_block, far), xp)
        });
        let (in_block, far_fraction) = in_block;
        for (name, layout) in CONFIGS {
            if layout == Layout::Texture && T::DTYPE != crate::kernel::DType::F32 {
                continue;
            }
            let kernel = if name == "gather" {
                KernelKind::Gather
            } else {
                KernelKind::BlockCached { block }
            };
            let bytes_per_tet = layout.min_bytes_per_tet(T::DTYPE.size(), far_fraction);
            if let Some(why) = layout.misfit_on(gpu, n, T::DTYPE.size()) {
                runs.push(FvRun {
                    ordering: kind.name(),
                    kernel: kernel.name(),
                    layout: layout.name(),
                    seconds_per_step: f64::NAN,
                    bytes_per_tet,
                    gbps: f64::NAN,
                    in_block_fraction: in_block,
                    far_fraction,
                    ordering_seconds,
                    timing: "",
                    skipped: Some(why),
                });
                continue;
            }
            let what = format!("fv {} {} {}", kind.name(), kernel.name(), layout.name());
            let mut d = phase(format!("{what} set-up"), || {
                let mut d = Diffusion::<T>::new(gpu, &permuted, kernel, layout, dt)?;
                d.set_x(&xp)?;
                Ok::<_, crate::error::FvError>(d)
            })?;
            let t = phase(format!("{what} timed"), || d.time_pairs(2, reps))?;
            let seconds_per_step = t.median() / 2.0;
            runs.push(FvRun {
                ordering: kind.name(),
                kernel: kernel.name(),
                layout: layout.name(),
                seconds_per_step,
                bytes_per_tet,
                gbps: bytes_per_tet * n as f64 / seconds_per_step / 1e9,
                in_block_fraction: in_block,
                far_fraction,
                ordering_seconds,
                timing: t.source.as_str(),
                skipped: None,
            });
        }
    }
    Ok(runs)
}

/// Seconds per step of `op` (already ordered) with `kind` in `layout`, from `x`, launched in each of `shapes` in
/// turn (the lab's launch-shape and ablation rows; `reps` step pairs after two warm-up pairs each), on one upload
/// of `op` reshaped for each
/// ([`Diffusion::reshape`]; x carries on, which a timing does not notice): on an H200 the lab's 16.5 M-tet rows
/// each uploaded the operator again. Each shape's seconds per step, in the order of `shapes`; an operator that
/// cannot be uploaded is the error of all.
pub fn time_shapes<T: Real>(
    gpu: &bespoke_gpu::Gpu,
    op: &Operator,
    kind: KernelKind,
    layout: Layout,
    shapes: &[Shape],
    x: &[f64],
    reps: usize,
) -> Result<Vec<Result<f64>>> {
    let Some(&first) = shapes.first() else {
        return Ok(Vec::new());
    };
    let dt = op.default_dt();
    let mut d = Diffusion::<T>::with_shape(gpu, op, kind, layout, dt, first)?;
    d.set_x(x)?;
    Ok(shapes
        .iter()
        .map(|&shape| {
            d.reshape(shape)?;
            Ok(d.time_pairs(2, reps)?.median() / 2.0)
        })
        .collect())
}
