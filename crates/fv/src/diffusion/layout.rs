//! The operator's layout, chosen on the device (`fv run --layout auto`): each layout the kernel and precision
//! take is timed, in its own tuned launch shape (`step_shape_in`'s, tuned on the same upload where none is cached),
//! on the shape tuner's operator (four
//! neighbours a tet within blocks of 2048, the shape of a METIS-ordered mesh) the first time an adapter meets a
//! kernel × precision, and the choice is kept in the same cache as the shapes. The prior is
//! [`Layout::default_for`] (what was measured fastest on lavapipe and on an H200); another layout replaces it
//! only where it is faster by the tuners' margin (`bespoke_gpu::TUNE_MARGIN`). Every layout gives the same bits
//! (tested), so the choice moves only the time.

use bespoke_gpu::{DiskCache, Gpu, fastest_unless_close, median, remembered_json};
use serde::{Deserialize, Serialize};

use super::shape::{Tuning, step_shape_on, user_cache};
use super::{Diffusion, Real};
use crate::error::{FvError, Result};
use crate::kernel::{DType, KernelKind, Layout, Shape};

/// The layout chosen and what it was based on.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LayoutChoice {
    pub layout: Layout,
    /// Seconds per pair of steps of the tuning operator in each layout timed, at that layout's tuned shape.
    pub timed: Vec<(Layout, f64)>,
    /// `tuned`, `cached`, or `prior (…)` where no layout could be timed on the adapter.
    pub source: String,
    /// Layouts the driver refused at every shape (the layout and its words), left out of the timings.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub failed: Vec<String>,
}

impl LayoutChoice {
    /// The layout for an operator of `n` tets with `size`-byte values on an adapter binding at most `limit` bytes:
    /// the choice where its bindings fit, else the fastest timed layout that fits, else slot-major (a quarter of
    /// tet-major's largest binding). The tuning operator is smaller than most meshes: on lavapipe (128 MiB
    /// bindings) 16.5 M tets fit slot-major, texture and the four-tet layout, not tet-major. The second value says
    /// whether it fell back.
    /// A layout binding more storage buffers than `max_buffers` never fits.
    pub fn for_tets(&self, n: usize, size: usize, limit: u64, max_buffers: u32) -> (Layout, bool) {
        self.fitting(|l| l.misfit(n, size, limit, max_buffers).is_none())
    }

    /// The choice where `fits` takes it, else the fastest timed layout `fits` takes, else slot-major; and whether
    /// it fell back.
    pub fn fitting(&self, fits: impl Fn(Layout) -> bool) -> (Layout, bool) {
        let order = self.order();
        match order.iter().position(|&l| fits(l)) {
            Some(k) => (order[k], k > 0),
            None => (Layout::SlotMajor, true),
        }
    }

    /// The order of preference: the choice, the other timed layouts fastest first, then slot-major (the smallest
    /// bindings), each once.
    pub fn order(&self) -> Vec<Layout> {
        let mut timed = self.timed.clone();
        timed.sort_by(|a, b| a.1.total_cmp(&b.1));
        let mut order = vec![self.layout];
        for l in timed.into_iter().map(|t| t.0).chain([Layout::SlotMajor]) {
            if !order.contains(&l) {
                order.push(l);
            }
        }
        order
    }
}

/// The layouts `kind` takes in precision `dtype`: textures hold f32 only, four tets per invocation is built for
/// the gather kernel only.
pub fn layouts(kind: KernelKind, dtype: DType) -> Vec<Layout> {
    Layout::ALL
        .into_iter()
        .filter(|&l| l != Layout::Texture || dtype == DType::F32)
        .filter(|&l| !l.four_tets() || kind == KernelKind::Gather)
        .collect()
}

fn key<T: Real>(gpu: &Gpu, kind: KernelKind) -> String {
    let kind = match kind {
        KernelKind::Gather => "gather".to_owned(),
        KernelKind::BlockCached { block } => format!("block-cached-{block}"),
    };
    format!("layout-{}-{kind}-{}", gpu.adapter_key(), T::DTYPE.wgsl())
}

/// The layout for `kind` with values of type `T` on `gpu`: from the user's cache, else timed now and cached;
/// with `BESPOKE_NO_TUNING` ([`bespoke_gpu::tuning_off`]) the prior ([`Layout::default_for`]) where the adapter
/// binds its storage buffers, else the first layout `kind` takes that it does, timing nothing.
pub fn step_layout<T: Real>(gpu: &Gpu, kind: KernelKind) -> Result<LayoutChoice> {
    if bespoke_gpu::tuning_off() {
        let max_buffers = gpu.limits().max_storage_buffers_per_shader_stage;
        let allowed = layouts(kind, T::DTYPE);
        let prior = Layout::default_for(T::DTYPE, gpu.is_cpu(), kind);
        let layout = std::iter::once(prior)
            .chain(allowed.iter().copied())
            .find(|l| allowed.contains(l) && l.storage_buffers() <= max_buffers)
            .unwrap_or(prior);
        return Ok(LayoutChoice {
            layout,
            timed: Vec::new(),
            source: bespoke_gpu::UNTUNED.into(),
            failed: Vec::new(),
        });
    }
    step_layout_in::<T>(gpu, kind, user_cache().as_ref())
}

/// The layout an operator of `n` tets runs in on `gpu` when the user names none: [`step_layout`]'s choice, or
/// where the operator is too large for its bindings (or the texture layout for the adapter's textures) the
/// fastest timed layout that fits ([`LayoutChoice::fitting`] by [`Layout::misfit_on`]); and why, for the run's
/// report (`tuned`, `cached`, or why it gave way).
pub fn layout_for<T: Real>(gpu: &Gpu, kind: KernelKind, n: usize) -> Result<(Layout, String)> {
    let c = step_layout::<T>(gpu, kind)?;
    Ok(
        match c.fitting(|l| l.misfit_on(gpu, n, T::DTYPE.size()).is_none()) {
            (l, false) => (l, c.source),
            (l, true) => (
                l,
                format!(
                    "{}: {} binds too much at {n} tets",
                    c.source,
                    c.layout.name()
                ),
            ),
        },
    )
}

/// [`step_layout`] with the decisions (and each layout's shape) kept in `cache` (None: timed every time).
pub fn step_layout_in<T: Real>(
    gpu: &Gpu,
    kind: KernelKind,
    cache: Option<&DiskCache>,
) -> Result<LayoutChoice> {
    let allowed = layouts(kind, T::DTYPE);
    let (choice, cached) = remembered_json(
        cache,
        &key::<T>(gpu, kind),
        "the FV step's layout",
        |c: &LayoutChoice| allowed.contains(&c.layout),
        || tune::<T>(gpu, kind, cache),
    )?;
    Ok(if cached {
        LayoutChoice {
            source: "cached".into(),
            ..choice
        }
    } else {
        choice
    })
}

/// Times every layout `kind` takes on one tuning operator, each in its own tuned shape, and keeps the fastest
/// unless the prior is within the margin. A layout the adapter cannot bind at the tuning size is left out.
fn tune<T: Real>(gpu: &Gpu, kind: KernelKind, cache: Option<&DiskCache>) -> Result<LayoutChoice> {
    let prior = Layout::default_for(T::DTYPE, gpu.is_cpu(), kind);
    // A layout binding more storage buffers than the adapter allows is not a candidate at any size.
    let max_buffers = gpu.limits().max_storage_buffers_per_shader_stage;
    let candidates: Vec<Layout> = layouts(kind, T::DTYPE)
        .into_iter()
        .filter(|l| l.storage_buffers() <= max_buffers)
        .collect();
    // The shape tuner's operator, halved until every layout's bindings (and textures) fit (as that tuner does for
    // each).
    let size = T::DTYPE.size();
    let too_large = |n| {
        candidates
            .iter()
            .any(|l| l.misfit_on(gpu, n, size).is_some())
    };
    let Tuning { op, dt, x, reps } = Tuning::new(gpu, too_large, 13)?;
    let mut timed = Vec::new();
    let mut failed = Vec::new();
    for &layout in &candidates {
        // Each layout uploaded once: its shape (cached, else tuned on this upload), then timed in it. A layout
        // this adapter cannot hold at all (its bindings past the limit even halved) is left out.
        // So is one whose kernels the driver refuses (at every shape): its failure is the layout's, not the
        // tuning's.
        let timing = (|| -> Result<Option<f64>> {
            let mut d =
                match Diffusion::<T>::with_shape(gpu, &op, kind, layout, dt, Shape::default()) {
                    Ok(d) => d,
                    Err(FvError::Unsupported(_)) => return Ok(None),
                    Err(e) => return Err(e),
                };
            d.set_x(&x)?;
            let shape = step_shape_on(&mut d, kind, layout, reps, cache)?.shape;
            d.reshape(shape)?;
            Ok(Some(median(&d.time_pairs(1, reps)?.samples)))
        })();
        match timing {
            Ok(Some(t)) => timed.push((layout, t)),
            Ok(None) => {}
            Err(FvError::Gpu(g)) if g.is_kernels_own() => {
                failed.push(format!("{}: {g}", layout.name()))
            }
            Err(e) => return Err(e),
        }
    }
    let candidates: Vec<Layout> = timed.iter().map(|t| t.0).collect();
    if candidates.is_empty() {
        return Ok(LayoutChoice {
            layout: prior,
            timed,
            source: "prior (no layout could be timed)".into(),
            failed,
        });
    }
    let by_index: Vec<(u32, f64)> = timed
        .iter()
        .enumerate()
        .map(|(i, &(_, t))| (i as u32, t))
        .collect();
    // (A prior not timed favours none: the fastest is taken.)
    let prior_index = candidates
        .iter()
        .position(|&l| l == prior)
        .map_or(u32::MAX, |i| i as u32);
    let layout = candidates[fastest_unless_close(&by_index, prior_index) as usize];
    Ok(LayoutChoice {
        layout,
        timed,
        source: "tuned".into(),
        failed,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A choice whose bindings a large mesh passes gives way to the fastest timed layout that fits, else to
    /// slot-major; one that fits stays.
    #[test]
    fn a_choice_past_the_binding_limit_gives_way() {
        let choice = LayoutChoice {
            layout: Layout::TetMajor,
            timed: vec![
                (Layout::SlotMajor, 5.0),
                (Layout::TetMajor, 1.0),
                (Layout::TetMajorD16, 2.0),
                (Layout::SlotMajorX4, 3.0),
                (Layout::Texture, 4.0),
            ],
            source: "tuned".into(),
            failed: Vec::new(),
        };
        let limit = 128 << 20; // lavapipe's binding limit
        assert_eq!(
            choice.for_tets(1 << 20, 4, limit, 32),
            (Layout::TetMajor, false)
        );
        // 16.5 M tets: tet-major and d16 bind 264 MB of values; the four-tet layout's 66 MB fit.
        let n = 16_464_000;
        assert!(Layout::TetMajor.largest_binding(n, 4) > limit);
        assert!(Layout::TetMajorD16.largest_binding(n, 4) > limit);
        assert_eq!(
            choice.for_tets(n, 4, limit, 32),
            (Layout::SlotMajorX4, true)
        );
        // An adapter with WebGPU's 8 storage buffers a kernel: the four-tet layout binds 11; the texture layout's
        // x fits.
        assert_eq!(choice.for_tets(n, 4, limit, 8), (Layout::Texture, true));
        assert_eq!(
            choice.for_tets(1 << 20, 4, limit, 3),
            (Layout::Texture, true)
        );
        // Nothing timed fits: slot-major, whose bindings are a quarter of tet-major's.
        let narrow = LayoutChoice {
            timed: vec![(Layout::TetMajor, 1.0)],
            ..choice.clone()
        };
        assert_eq!(narrow.for_tets(n, 4, limit, 32), (Layout::SlotMajor, true));
        // The order both fall back along (and the ranks share): the choice, the timed fastest first, slot-major.
        assert_eq!(
            choice.order(),
            [
                Layout::TetMajor,
                Layout::TetMajorD16,
                Layout::SlotMajorX4,
                Layout::Texture,
                Layout::SlotMajor
            ]
        );
        assert_eq!(narrow.order(), [Layout::TetMajor, Layout::SlotMajor]);
    }
}
