//! The step kernel's launch shape, chosen on the device: each workgroup size is timed on a tuning operator the
//! first time an adapter meets a kernel × layout × precision, and the choice is kept in the user's cache
//! (`bespoke_gpu::DiskCache`, namespace `fv-shape`). Every size does the same arithmetic per tet, so the results
//! are bit-identical whatever is chosen (tested for every candidate on lavapipe).

use bespoke_gpu::rng::{Rng, seeded};
use bespoke_gpu::{
    DiskCache, Gpu, fastest_unless_close, median, remembered_json, tune_per_invocation,
};
use serde::{Deserialize, Serialize};

use super::{Diffusion, Real};
use crate::error::{FvError, Result};
use crate::kernel::{KernelKind, Layout, Shape, WG};
use crate::operator::ideal_operator;

/// Workgroup sizes the step kernel is timed at (those past the adapter's limits, and for the block-cached kernel
/// those that do not divide its block, are left out).
pub const WORKGROUPS: [u32; 5] = bespoke_gpu::WORKGROUP_SIZES;

/// The tuning operator's tets on a GPU (x and the operator ~130 MB in f32: past any last-level cache) and on a
/// CPU adapter (the choice there costs about a second, once per machine); neighbours within blocks of 2048 but
/// for the far links.
const GPU_TETS: usize = 4 << 20;
const CPU_TETS: usize = 1 << 16;
const BLOCK: usize = 2048;

/// One link in this many goes anywhere in the tuning operator: a METIS-ordered mesh (the bench's boxes, blocks of
/// 2048) has 97.3 % of its links within ±32 767 of their tet and 90.4 % of its tets with all four there
/// (docs/fv.md); one link in 40 anywhere gives 1 − (39/40)⁴ ≈ 9.6 % of tets a far one, so the layouts with 16-bit
/// offsets pay for their far tets here as on a mesh (until 2026-11-30 every link stayed in its block, and the
/// tuner preferred them for a cost it never timed).
const FAR_LINK_ONE_IN: u32 = 40;

/// `op` with about one link in [`FAR_LINK_ONE_IN`] moved to a random tet anywhere (not the tet itself, not one
/// its row already holds); the coefficients stay.
fn with_far_links(mut op: crate::Operator, seed: u64) -> crate::Operator {
    let n = op.n();
    let mut rng = seeded(seed);
    for (i, row) in op.indices.iter_mut().enumerate() {
        for k in 0..4 {
            if row[k] as usize == i || rng.random_range(0..FAR_LINK_ONE_IN) != 0 {
                continue;
            }
            let j = rng.random_range(0..n) as u32;
            if j as usize != i && !row.contains(&j) {
                row[k] = j;
            }
        }
    }
    op
}

/// What the FV tuners time on: an operator with four random neighbours per tet within blocks of [`BLOCK`] but about
/// one link in [`FAR_LINK_ONE_IN`] anywhere (the shape of a METIS-ordered mesh), its Δt, a random x and the step
/// pairs timed per candidate.
pub(super) struct Tuning {
    pub op: crate::Operator,
    pub dt: f64,
    pub x: Vec<f64>,
    pub reps: usize,
}

impl Tuning {
    /// [`GPU_TETS`] (or [`CPU_TETS`] on a CPU adapter) tets, halved (whole blocks) while `too_large(n)` says some
    /// layout to be timed binds more than the adapter takes; x from `seed`.
    pub(super) fn new(gpu: &Gpu, too_large: impl Fn(usize) -> bool, seed: u64) -> Result<Self> {
        let mut n = if gpu.is_cpu() { CPU_TETS } else { GPU_TETS };
        while n > BLOCK && too_large(n) {
            n /= 2;
        }
        let op = with_far_links(ideal_operator(n, BLOCK, 11)?, 12);
        let dt = op.default_dt();
        let mut rng = seeded(seed);
        let x = (0..n).map(|_| rng.random::<f64>()).collect();
        let reps = if gpu.is_cpu() { 3 } else { 20 };
        Ok(Self { op, dt, x, reps })
    }
}

const CACHE_VERSION: u32 = 4;

/// The shape chosen and what it was based on.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ShapeChoice {
    pub shape: Shape,
    /// Seconds per pair of steps of the tuning operator per candidate (workgroup, seconds).
    pub timed: Vec<(u32, f64)>,
    /// The same at the chosen workgroup for each number of tets per invocation timed (tets, seconds); empty
    /// where the kernel takes one (block-cached, the four-tet layout).
    #[serde(default)]
    pub timed_tets: Vec<(u32, f64)>,
    /// `tuned` or `cached`.
    pub source: String,
    /// Candidates the driver refused (their shape and its words), left out of the timings.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub failed: Vec<String>,
    /// Seconds per pair of steps at the chosen shape with every other step walking backwards
    /// ([`Shape::alternate`]), against the chosen shape's time without.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timed_alternate: Option<f64>,
}

/// The workgroup sizes of [`WORKGROUPS`] `kind` can launch on this adapter.
pub fn candidates(gpu: &Gpu, kind: KernelKind) -> Vec<u32> {
    gpu.workgroup_sizes()
        .into_iter()
        .filter(|&w| match kind {
            KernelKind::Gather => true,
            KernelKind::BlockCached { block } => block.is_multiple_of(w),
        })
        .collect()
}

/// The user's cache of launch shapes (None where there is no cache folder).
pub fn user_cache() -> Option<DiskCache> {
    DiskCache::user("fv-shape", CACHE_VERSION)
}

fn key<T: Real>(gpu: &Gpu, kind: KernelKind, layout: Layout) -> String {
    let kind = match kind {
        KernelKind::Gather => "gather".to_owned(),
        KernelKind::BlockCached { block } => format!("block-cached-{block}"),
    };
    format!(
        "{}-{kind}-{}-{}",
        gpu.adapter_key(),
        layout.name(),
        T::DTYPE.wgsl()
    )
}

/// The step's shape for `kind` in `layout` with values of type `T` on `gpu`: from the user's cache, else timed
/// now and cached; with `BESPOKE_NO_TUNING` the default ([`bespoke_gpu::tuning_off`]).
pub fn step_shape<T: Real>(gpu: &Gpu, kind: KernelKind, layout: Layout) -> Result<ShapeChoice> {
    if bespoke_gpu::tuning_off() {
        return Ok(ShapeChoice {
            shape: Shape::default(),
            timed: Vec::new(),
            timed_tets: Vec::new(),
            source: bespoke_gpu::UNTUNED.into(),
            failed: Vec::new(),
            timed_alternate: None,
        });
    }
    step_shape_in::<T>(gpu, kind, layout, user_cache().as_ref())
}

/// [`step_shape`] with the decisions kept in `cache` (None: timed every time).
pub fn step_shape_in<T: Real>(
    gpu: &Gpu,
    kind: KernelKind,
    layout: Layout,
    cache: Option<&DiskCache>,
) -> Result<ShapeChoice> {
    remembered_shape::<T>(gpu, kind, layout, cache, || tune::<T>(gpu, kind, layout))
}

/// The shape of `kind` in `layout` from `cache`, else `make` (a tuning) and cached.
fn remembered_shape<T: Real>(
    gpu: &Gpu,
    kind: KernelKind,
    layout: Layout,
    cache: Option<&DiskCache>,
    make: impl FnOnce() -> Result<ShapeChoice>,
) -> Result<ShapeChoice> {
    let (choice, cached) = remembered_json(
        cache,
        &key::<T>(gpu, kind, layout),
        "the FV step's launch shape",
        |c: &ShapeChoice| {
            candidates(gpu, kind).contains(&c.shape.workgroup)
                && !c.shape.no_gather
                && !c.shape.no_index
                && (1..=crate::kernel::MAX_TETS).contains(&c.shape.tets)
        },
        make,
    )?;
    Ok(if cached {
        ShapeChoice {
            source: "cached".into(),
            ..choice
        }
    } else {
        choice
    })
}

/// Times every candidate on an operator with four random neighbours per tet within blocks (the shape of a
/// METIS-ordered mesh), keeping the fastest unless the default is within [`bespoke_gpu::TUNE_MARGIN`].
fn tune<T: Real>(gpu: &Gpu, kind: KernelKind, layout: Layout) -> Result<ShapeChoice> {
    // Halved until the layout's largest binding (and texture) fits the adapter's; past that (or past its storage
    // buffers at any size), Diffusion says so.
    let Tuning { op, dt, x, reps } = Tuning::new(
        gpu,
        |n| layout.misfit_on(gpu, n, T::DTYPE.size()).is_some(),
        12,
    )?;
    // One operator on the device, reshaped for each candidate (`Diffusion::reshape`): x carries on.
    let mut d = Diffusion::<T>::with_shape(gpu, &op, kind, layout, dt, Shape::default())?;
    d.set_x(&x)?;
    tune_on(&mut d, kind, layout, reps)
}

/// [`step_shape_in`] on an operator already on the device in `layout` (the layout tuner's, each layout uploaded
/// once for both tunings): the cached shape, else the shapes timed on `d` (`reps` step pairs each) and cached.
pub(super) fn step_shape_on<T: Real>(
    d: &mut Diffusion<'_, T>,
    kind: KernelKind,
    layout: Layout,
    reps: usize,
    cache: Option<&DiskCache>,
) -> Result<ShapeChoice> {
    let gpu = d.gpu;
    remembered_shape::<T>(gpu, kind, layout, cache, || tune_on(d, kind, layout, reps))
}

/// Times every candidate shape on `d` (reshaped for each; x carries on): the workgroup sizes, then tets per
/// invocation at the chosen one where the kernel takes several.
fn tune_on<T: Real>(
    d: &mut Diffusion<'_, T>,
    kind: KernelKind,
    layout: Layout,
    reps: usize,
) -> Result<ShapeChoice> {
    let gpu = d.gpu;
    let mut time = |shape: Shape| -> Result<f64> {
        d.reshape(shape)?;
        Ok(median(&d.time_pairs(1, reps)?.samples))
    };
    // A candidate whose kernel the driver refuses is left out and named in `failed`; the others are timed.
    let mut failed = Vec::new();
    let mut time = |shape: Shape| -> Result<Option<f64>> {
        match time(shape) {
            Ok(t) => Ok(Some(t)),
            Err(FvError::Gpu(g)) if g.is_kernels_own() => {
                failed.push(format!(
                    "workgroup {}, {} tets{}: {g}",
                    shape.workgroup,
                    shape.tets,
                    if shape.alternate {
                        ", alternate steps backwards"
                    } else {
                        ""
                    }
                ));
                Ok(None)
            }
            Err(e) => Err(e),
        }
    };
    let mut timed = Vec::new();
    for workgroup in candidates(gpu, kind) {
        if let Some(t) = time(Shape {
            workgroup,
            ..Default::default()
        })? {
            timed.push((workgroup, t));
        }
    }
    let workgroup = fastest_unless_close(&timed, WG);
    // Then tets per invocation at that workgroup size, where the kernel takes several.
    let (tets, timed_tets) = if kind == KernelKind::Gather && !layout.four_tets() {
        let one = timed
            .iter()
            .find(|(w, _)| *w == workgroup)
            .map_or(f64::INFINITY, |t| t.1);
        let (tets, mut timed_tets) = tune_per_invocation(one, |tets| {
            Ok::<_, FvError>(
                time(Shape {
                    workgroup,
                    tets,
                    ..Default::default()
                })?
                .unwrap_or(f64::INFINITY),
            )
        })?;
        timed_tets.retain(|(_, t)| t.is_finite());
        (tets, timed_tets)
    } else {
        (1, Vec::new())
    };
    // Last, every other step walking the tets backwards at that shape.
    let chosen = if timed_tets.is_empty() {
        timed.iter().find(|(w, _)| *w == workgroup)
    } else {
        timed_tets.iter().find(|(t, _)| *t == tets)
    }
    .map_or(f64::INFINITY, |t| t.1);
    let timed_alternate = time(Shape {
        workgroup,
        tets,
        alternate: true,
        ..Default::default()
    })?;
    let alternate = timed_alternate.is_some_and(|t| t < bespoke_gpu::TUNE_MARGIN * chosen);
    Ok(ShapeChoice {
        shape: Shape {
            workgroup,
            tets,
            alternate,
            ..Default::default()
        },
        timed,
        timed_tets,
        source: "tuned".into(),
        failed,
        timed_alternate,
    })
}

/// Tets per invocation the tuner tries at its chosen workgroup size (the gather kernel).
pub const TET_CANDIDATES: [u32; 3] = bespoke_gpu::PER_INVOCATION;

#[cfg(test)]
mod tests {
    use super::*;

    /// About a tenth of the tuning operator's tets have a link past ±32 767 (the 16-bit offsets' far tets), as a
    /// METIS-ordered mesh has; every row stays four distinct neighbours, none the tet itself, all in range.
    #[test]
    fn the_tuning_operator_has_a_meshs_far_tets() {
        let n = GPU_TETS;
        let op = with_far_links(ideal_operator(n, BLOCK, 11).unwrap(), 12);
        let (near, _) = crate::kernel::d16_indices(&op.indices);
        let far = near
            .iter()
            .filter(|d| d[0] == crate::kernel::D16_FAR)
            .count() as f64
            / n as f64;
        assert!((0.08..0.11).contains(&far), "{far} of tets far");
        for (i, row) in op.indices.iter().enumerate() {
            assert!(
                row.iter().all(|&j| (j as usize) < n && j as usize != i),
                "{i}: {row:?}"
            );
            assert!(
                (0..4).all(|a| (0..a).all(|b| row[a] != row[b])),
                "{i}: {row:?}"
            );
        }
    }
}
