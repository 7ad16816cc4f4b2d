//! The step kernel's launch shape, chosen on the device: the workgroup size is timed on a tuning lattice the
//! first time an adapter meets a storage × streaming × flags combination, and the choice is kept in the user's
//! cache (`bespoke_gpu::DiskCache`, namespace `lbm-shape`), as bespoke-mm's tuner keeps its decisions. Every
//! candidate does the same arithmetic per cell, so the results are bit-identical whatever is chosen (tested for
//! every candidate on lavapipe).

use bespoke_gpu::{DiskCache, Gpu, GridLayout, fastest_unless_close, median, remembered_json};
use serde::{Deserialize, Serialize};

use super::Lattice;
use crate::config::{Config, Layout};
use crate::error::Result;
use crate::flags::Flags;
use crate::kernel::{Ablation, WG};

/// Workgroup sizes the step kernel is timed at (those past the adapter's limits are left out).
pub const STEP_WORKGROUPS: [u32; 5] = bespoke_gpu::WORKGROUP_SIZES;

/// The tuning lattice's side on a GPU (2048²: 151 MB of f32 populations per copy, past any last-level cache)
/// and on a CPU adapter (128²: the choice there costs about a second, once per machine).
const GPU_SIDE: usize = 2048;
const CPU_SIDE: usize = 128;

/// The version of the cached decisions: raise it when the candidates or the kernel change what they mean.
const CACHE_VERSION: u32 = 1;

/// What the choice was based on.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StepShape {
    /// Invocations per workgroup of the step kernel (one cell, or one paired word, each).
    pub workgroup: u32,
    /// Seconds per pair of steps of the tuning lattice for each candidate timed (workgroup, seconds); empty
    /// when the shape was not timed (the default, or a given one).
    pub timed: Vec<(u32, f64)>,
    /// Where the choice came from: `tuned`, `cached`, `given` or `default`.
    pub source: String,
    /// How the step's workgroups are laid out: rows of the per-dimension limit, one dispatch at any size (the
    /// default), or the split 1-D grid of before (the lab's comparison).
    #[serde(default)]
    pub grid: GridLayout,
    /// A part of the step left out to measure its cost (`Lattice::with_step_shape`, the lab only: not the physics).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ablation: Option<Ablation>,
}

impl StepShape {
    /// The default shape, untimed.
    pub fn default_shape() -> Self {
        Self {
            workgroup: WG,
            timed: Vec::new(),
            source: "default".into(),
            grid: GridLayout::Rows,
            ablation: None,
        }
    }
}

/// The workgroup sizes of [`STEP_WORKGROUPS`] this adapter can launch.
pub fn candidates(gpu: &Gpu) -> Vec<u32> {
    gpu.workgroup_sizes().into_iter().collect()
}

fn key(gpu: &Gpu, cfg: &Config, flags: bool) -> String {
    format!(
        "{}-{}-{}-{}",
        gpu.adapter_key(),
        match cfg.layout() {
            Layout::F32 => "f32",
            Layout::F16Paired => "f16-paired",
            Layout::F16Single => "f16-single",
        },
        cfg.streaming.name(),
        if flags { "flags" } else { "periodic" }
    )
}

/// The step kernel's shape for a lattice like `cfg` (with a flag field or without) on `gpu`: from the user's
/// cache, else timed now and cached. Without a cache folder it is timed and not kept.
pub fn step_shape(gpu: &Gpu, cfg: &Config, flags: bool) -> Result<StepShape> {
    step_shape_in(gpu, cfg, flags, user_cache().as_ref())
}

/// The user's cache of launch shapes (None where there is no cache folder).
pub fn user_cache() -> Option<DiskCache> {
    DiskCache::user("lbm-shape", CACHE_VERSION)
}

/// [`step_shape`] with the decisions kept in `cache` (None: timed every time).
pub fn step_shape_in(
    gpu: &Gpu,
    cfg: &Config,
    flags: bool,
    cache: Option<&DiskCache>,
) -> Result<StepShape> {
    let (shape, cached) = remembered_json(
        cache,
        &key(gpu, cfg, flags),
        "the lattice's launch shape",
        |s: &StepShape| candidates(gpu).contains(&s.workgroup),
        || tune(gpu, cfg, flags),
    )?;
    Ok(if cached {
        StepShape {
            source: "cached".into(),
            ..shape
        }
    } else {
        shape
    })
}

/// Times every candidate on a tuning lattice of `cfg`'s storage, streaming and collision (channel walls when
/// `flags`, so the flag field is read), keeping the fastest unless the default is within [`bespoke_gpu::TUNE_MARGIN`].
pub fn tune(gpu: &Gpu, cfg: &Config, flags: bool) -> Result<StepShape> {
    let side = if gpu.is_cpu() { CPU_SIDE } else { GPU_SIDE };
    let (nx, ny) = (cfg.nx.min(side).max(4), cfg.ny.min(side).max(4));
    // An even ny keeps the paired f16 layout of an even-ny lattice; an odd one keeps f16-single.
    let ny = if cfg.ny % 2 == ny % 2 { ny } else { ny - 1 };
    let tcfg = Config {
        storage: cfg.storage,
        streaming: cfg.streaming,
        smagorinsky: cfg.smagorinsky,
        ..Config::new(nx, ny, cfg.collision)
    };
    let mut tflags = Flags::fluid(nx, ny);
    if flags {
        tflags.channel_walls();
    }
    let tflags = std::rc::Rc::new(tflags);
    let reps = if gpu.is_cpu() { 3 } else { 20 };
    let mut timed = Vec::new();
    for wg in candidates(gpu) {
        let mut lat = Lattice::with_step_workgroup(gpu, tcfg.clone(), tflags.clone(), wg)?;
        lat.init_equilibrium(|_, _| (1.0, [0.01, 0.0]))?;
        let t = lat.time_pairs(1, reps)?;
        timed.push((wg, median(&t.samples)));
    }
    let best = fastest_unless_close(&timed, WG);
    Ok(StepShape {
        workgroup: best,
        timed,
        source: "tuned".into(),
        grid: GridLayout::Rows,
        ablation: None,
    })
}
