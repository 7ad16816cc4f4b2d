//! The step kernel's launch shape, chosen on the device: the workgroup size is timed on a tuning lattice the
//! first time an adapter meets a storage × streaming × flags combination, and the choice is kept in the user's
//! cache (`bespoke_gpu::DiskCache`, namespace `lbm-shape`), as bespoke-mm's tuner keeps its decisions. Every
//! candidate does the same arithmetic per cell, so the results are bit-identical whatever is chosen (tested for
//! every candidate on lavapipe).

use bespoke_gpu::{
    DiskCache, Gpu, GridLayout, TUNE_MARGIN, fastest_unless_close, median, remembered_json,
    tune_per_invocation,
};
use serde::{Deserialize, Serialize};

use super::Lattice;
use crate::config::{Config, Layout};
use crate::error::{LbmError, Result};
use crate::flags::Flags;
use crate::kernel::{Ablation, WG};

/// Workgroup sizes the step kernel is timed at (those past the adapter's limits are left out).
pub const STEP_WORKGROUPS: [u32; 5] = bespoke_gpu::WORKGROUP_SIZES;

/// The tuning lattice's side on a GPU (2048²: 151 MB of f32 populations per copy, past any last-level cache)
/// and on a CPU adapter (128²: the choice there costs about a second, once per machine).
const GPU_SIDE: usize = 2048;
const CPU_SIDE: usize = 128;

/// The version of the cached decisions: raise it when the candidates or the kernel change what they mean.
const CACHE_VERSION: u32 = 5;

/// What the choice was based on.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StepShape {
    /// Invocations per workgroup of the step kernel (one cell, or one paired word, each).
    pub workgroup: u32,
    /// Cells (or paired words) per invocation ([`crate::kernel::KernelSpec::cells`]).
    #[serde(default = "one_cell")]
    pub cells: u32,
    /// Seconds per pair of steps of the tuning lattice for each candidate timed (workgroup, seconds); empty
    /// when the shape was not timed (the default, or a given one).
    pub timed: Vec<(u32, f64)>,
    /// The same at the chosen workgroup for each number of cells per invocation timed (cells, seconds).
    #[serde(default)]
    pub timed_cells: Vec<(u32, f64)>,
    /// Where the choice came from: `tuned`, `cached`, `given` or `default`.
    pub source: String,
    /// How the step's workgroups are laid out: rows of the per-dimension limit, one dispatch at any size (the
    /// default), or the split 1-D grid of before (the lab's comparison).
    #[serde(default)]
    pub grid: GridLayout,
    /// A part of the step left out to measure its cost (`Lattice::with_step_shape`, the lab only: not the physics).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ablation: Option<Ablation>,
    /// The nine directions in one buffer, bound once by the step kernel (false: a buffer and a binding each).
    /// Only where nine directions fit one buffer and binding of the adapter.
    #[serde(default)]
    pub one_buffer: bool,
    /// Seconds per pair of steps at the chosen workgroup and cells with one buffer for all directions, when
    /// that was timed (against the nine buffers' time in `timed_cells`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timed_one_buffer: Option<f64>,
    /// Candidates the driver refused (their shape and its words), left out of the timings.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub failed: Vec<String>,
    /// Round every stored f16 value to its nearest f16 in the step kernel even where the device's own pack does
    /// (`KernelSpec::exact_f16`; the same bits there): the lab's measure of what a device whose pack rounds
    /// otherwise pays. Never tuned; false: rounded only where the device needs it.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub exact_f16: bool,
    /// Every other step walks the lattice backwards (its workgroups take the blocks in descending order,
    /// `KernelSpec::descending`), so that a step begins on the cells the step before it ended on, which a GPU's
    /// L2 cache still holds: a two-lattice step's second launch of the pair, an in-place lattice's even step.
    /// The same bits either way.
    #[serde(default)]
    pub alternate: bool,
    /// Seconds per pair of steps at the chosen shape with alternate steps walking backwards, when that was timed
    /// (against the chosen shape's time without).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timed_alternate: Option<f64>,
}

fn one_cell() -> u32 {
    1
}

/// The most cells per invocation a shape may ask.
pub const MAX_CELLS: u32 = 8;

/// Cells per invocation the tuner tries at its chosen workgroup size.
pub const CELL_CANDIDATES: [u32; 3] = bespoke_gpu::PER_INVOCATION;

impl StepShape {
    /// The default shape, untimed.
    pub fn default_shape() -> Self {
        Self {
            workgroup: WG,
            cells: 1,
            timed: Vec::new(),
            timed_cells: Vec::new(),
            source: "default".into(),
            grid: GridLayout::Rows,
            ablation: None,
            one_buffer: false,
            timed_one_buffer: None,
            failed: Vec::new(),
            exact_f16: false,
            alternate: false,
            timed_alternate: None,
        }
    }

    /// The default shape marked as given (to be changed field by field).
    pub fn given() -> Self {
        Self {
            source: "given".into(),
            ..Self::default_shape()
        }
    }

    /// `wg 256, 2 cells per invocation (tuned)` and the like, for the CLI.
    pub fn describe(&self) -> String {
        format!(
            "workgroup {}, {} cell{} per invocation, {}{} ({})",
            self.workgroup,
            self.cells,
            if self.cells == 1 { "" } else { "s" },
            if self.one_buffer {
                "one binding for all directions"
            } else {
                "a binding per direction"
            },
            if self.alternate {
                ", every other step backwards"
            } else {
                ""
            },
            self.source
        )
    }
}

/// Whether the nine directions of a lattice like `cfg` fit one buffer and binding of `gpu`.
pub fn one_buffer_fits(gpu: &Gpu, cfg: &Config) -> bool {
    super::pops::one_buffer_misfit(gpu, cfg.layout().words(cfg.cells())).is_none()
}

/// The workgroup sizes of [`STEP_WORKGROUPS`] this adapter can launch.
pub fn candidates(gpu: &Gpu) -> Vec<u32> {
    gpu.workgroup_sizes().into_iter().collect()
}

/// The cache entry's key of a lattice like `cfg`'s shape: the adapter, layout, streaming and flags, not the size.
pub fn cache_key(gpu: &Gpu, cfg: &Config, flags: bool) -> String {
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
/// cache, else timed now and cached. Without a cache folder it is timed and not kept; with `BESPOKE_NO_TUNING`
/// it is the default ([`bespoke_gpu::tuning_off`]).
pub fn step_shape(gpu: &Gpu, cfg: &Config, flags: bool) -> Result<StepShape> {
    if bespoke_gpu::tuning_off() {
        return Ok(StepShape {
            one_buffer: binds_one_buffer(gpu, cfg, flags, false),
            source: bespoke_gpu::UNTUNED.into(),
            ..StepShape::given()
        });
    }
    step_shape_in(gpu, cfg, flags, user_cache().as_ref())
}

/// The user's cache of launch shapes (None where there is no cache folder).
pub fn user_cache() -> Option<DiskCache> {
    DiskCache::user("lbm-shape", CACHE_VERSION)
}

/// Whether a lattice like `cfg` (with a flag field or without) binds its nine directions as one buffer a side:
/// where `chosen` (the adapter's tuned choice) or a binding per direction would pass the adapter's storage
/// buffers per kernel, and the lattice fits one buffer. The rule of every shape that names no buffer layout.
pub(crate) fn binds_one_buffer(gpu: &Gpu, cfg: &Config, flags: bool, chosen: bool) -> bool {
    (chosen || !super::nine_bindings_fit(gpu, cfg, flags)) && one_buffer_fits(gpu, cfg)
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
        &cache_key(gpu, cfg, flags),
        "the lattice's launch shape",
        |s: &StepShape| {
            candidates(gpu).contains(&s.workgroup) && (1..=MAX_CELLS).contains(&s.cells)
        },
        || tune(gpu, cfg, flags),
    )?;
    let one_buffer = binds_one_buffer(gpu, cfg, flags, shape.one_buffer);
    Ok(StepShape {
        one_buffer,
        source: if cached {
            "cached".into()
        } else {
            shape.source.clone()
        },
        ..shape
    })
}

/// The tuning lattice's size for a lattice like `cfg`: the adapter's tuning side whatever `cfg`'s size, since the
/// choice is kept for the adapter (its cache key has no size) and used for every lattice after it; until
/// 2026-11-27 it was `cfg`'s size where smaller, so the first small case on a machine (a 34×34 cavity: 18
/// workgroups, launch-bound) chose the shape of every later 8192² run. ny keeps `cfg.ny`'s parity: an even ny
/// keeps the paired f16 layout, an odd one f16-single. On a device whose buffers cannot hold that side the side
/// is halved until they can (down to 8): one direction a binding, and where nine bindings a side pass the
/// adapter's storage buffers a kernel (with a flag field: the tuner's channel-walls case), all nine in one. On the
/// H200 held to WebGPU's limits (8 buffers, 128 MiB a binding) the 2048² side's one buffer needed 151 MB
/// (2026-12-04): the tuning lattice failed where the lattice asked for fitted.
pub fn tuning_size(gpu: &Gpu, cfg: &Config) -> (usize, usize) {
    let mut side = if gpu.is_cpu() { CPU_SIDE } else { GPU_SIDE };
    let size = |side: usize| {
        (
            side,
            if cfg.ny % 2 == side % 2 {
                side
            } else {
                side - 1
            },
        )
    };
    while side > 8 {
        let (nx, ny) = size(side);
        let tcfg = Config {
            storage: cfg.storage,
            streaming: cfg.streaming,
            smagorinsky: cfg.smagorinsky,
            ..Config::new(nx, ny, cfg.collision)
        };
        if super::check_fits(gpu, &tcfg).is_ok()
            && (super::nine_bindings_fit(gpu, &tcfg, true) || one_buffer_fits(gpu, &tcfg))
        {
            break;
        }
        side /= 2;
    }
    size(side)
}

/// Times every candidate on a tuning lattice of `cfg`'s storage, streaming and collision (channel walls when
/// `flags`, so the flag field is read), keeping the fastest unless the default is within [`bespoke_gpu::TUNE_MARGIN`].
pub fn tune(gpu: &Gpu, cfg: &Config, flags: bool) -> Result<StepShape> {
    let (nx, ny) = tuning_size(gpu, cfg);
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
    // One tuning lattice per buffer layout, set up once and reshaped for each candidate (`Lattice::reshape`).
    let mut lattices: Vec<Lattice<'_>> = Vec::new();
    let mut time = |shape: StepShape| -> Result<f64> {
        let lat = match lattices
            .iter()
            .position(|l| l.step_shape().one_buffer == shape.one_buffer)
        {
            Some(i) => {
                lattices[i].reshape(shape)?;
                &mut lattices[i]
            }
            None => {
                let mut lat = Lattice::with_given_shape(gpu, tcfg.clone(), tflags.clone(), shape)?;
                // A varied state, as a run's is (a GPU's memory system may move a uniform one faster).
                let (kx, ky) = (
                    std::f64::consts::TAU / nx as f64,
                    std::f64::consts::TAU / ny as f64,
                );
                lat.init_equilibrium(|x, y| {
                    (
                        1.0,
                        [0.02 * (kx * x as f64).sin(), 0.02 * (ky * y as f64).cos()],
                    )
                })?;
                lattices.push(lat);
                lattices.last_mut().expect("just pushed")
            }
        };
        Ok(median(&lat.time_pairs(1, reps)?.samples))
    };
    let mut time = |shape: StepShape| {
        let what = format!(
            "tuning the step: workgroup {}, {} cells per invocation{}{} on {nx}×{ny}",
            shape.workgroup,
            shape.cells,
            if shape.one_buffer { ", one buffer" } else { "" },
            if shape.alternate {
                ", alternate steps backwards"
            } else {
                ""
            }
        );
        bespoke_gpu::phase(what, || time(shape))
    };
    // Where a binding per direction passes the adapter's storage buffers per kernel, every candidate binds one
    // buffer per side (and that is not a choice).
    let nine_fit = super::nine_bindings_fit(gpu, &tcfg, flags);
    let base = StepShape {
        one_buffer: !nine_fit,
        ..StepShape::given()
    };
    // A candidate whose kernels the driver refuses (a workgroup past what a pipeline may have on Metal, a
    // compiler's own limit) is left out and named in `failed`; the others are timed.
    let mut failed = Vec::new();
    let mut time = |shape: StepShape| -> Result<Option<f64>> {
        let what = format!(
            "workgroup {}, {} cells{}{}",
            shape.workgroup,
            shape.cells,
            if shape.one_buffer { ", one buffer" } else { "" },
            if shape.alternate {
                ", alternate steps backwards"
            } else {
                ""
            }
        );
        match time(shape) {
            Ok(t) => Ok(Some(t)),
            Err(LbmError::Gpu(g)) if g.is_kernels_own() => {
                failed.push(format!("{what}: {g}"));
                Ok(None)
            }
            Err(e) => Err(e),
        }
    };
    let mut timed = Vec::new();
    for workgroup in candidates(gpu) {
        if let Some(t) = time(StepShape {
            workgroup,
            ..base.clone()
        })? {
            timed.push((workgroup, t));
        }
    }
    let workgroup = fastest_unless_close(&timed, WG);
    // Then cells per invocation at that workgroup size (one is the time just measured).
    let one = timed
        .iter()
        .find(|(w, _)| *w == workgroup)
        .map_or(f64::INFINITY, |t| t.1);
    let (cells, mut timed_cells) = tune_per_invocation(one, |cells| {
        Ok::<_, LbmError>(
            time(StepShape {
                workgroup,
                cells,
                ..base.clone()
            })?
            .unwrap_or(f64::INFINITY),
        )
    })?;
    timed_cells.retain(|(_, t)| t.is_finite());
    // Then one buffer for all directions at that shape, where the lattice asked for fits one.
    let nine = timed_cells
        .iter()
        .find(|(c, _)| *c == cells)
        .map_or(f64::INFINITY, |t| t.1);
    let timed_one_buffer = if nine_fit && one_buffer_fits(gpu, &tcfg) {
        time(StepShape {
            workgroup,
            cells,
            one_buffer: true,
            ..StepShape::given()
        })?
    } else {
        None
    };
    let one_buffer = !nine_fit || timed_one_buffer.is_some_and(|t| t < TUNE_MARGIN * nine);
    let chosen = if one_buffer && nine_fit {
        timed_one_buffer.unwrap_or(f64::INFINITY)
    } else {
        nine
    };
    // Last, every other step walking the lattice backwards at the chosen shape.
    let timed_alternate = time(StepShape {
        workgroup,
        cells,
        one_buffer,
        alternate: true,
        ..StepShape::given()
    })?;
    let alternate = timed_alternate.is_some_and(|t| t < TUNE_MARGIN * chosen);
    Ok(StepShape {
        workgroup,
        cells,
        timed,
        timed_cells,
        source: "tuned".into(),
        grid: GridLayout::Rows,
        ablation: None,
        one_buffer,
        timed_one_buffer,
        failed,
        exact_f16: false,
        alternate,
        timed_alternate,
    })
}
