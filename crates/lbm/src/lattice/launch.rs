//! What a lattice's launches are made of: the checks a configuration passes before anything is allocated (flags
//! covering it, a direction within one binding, the bindings per kernel), the kernel spec of a lattice, its flag
//! field on the device, and a prepared launch with its arguments in binding order.

use bespoke_gpu::{Arg, Gpu, GpuBuffer, Grid, Kernel, Launch};

use super::{Pops, StepShape};
use crate::config::{Config, Storage, Streaming};
use crate::error::{LbmError, Result};
use crate::flags::Flags;
use crate::kernel::{Edges, KernelSpec, Mode, Phase, Region, WG};

/// Flags must cover the lattice.
pub(crate) fn check_shape(cfg: &Config, flags: &Flags) -> Result<()> {
    if flags.nx() != cfg.nx || flags.ny() != cfg.ny {
        return Err(LbmError::Shape(format!(
            "flags are {}x{} but the lattice is {}x{}",
            flags.nx(),
            flags.ny(),
            cfg.nx,
            cfg.ny
        )));
    }
    Ok(())
}

/// Whether the step and macroscopic kernels of a lattice like `cfg` (with a flag field or without) bind within
/// the adapter's storage buffers per kernel with a binding per direction. Where not (a two-lattice step needs 18
/// and more; wgpu's GL backend on llvmpipe allows 16, WebGPU's default 8) the lattice binds one buffer per side.
pub fn nine_bindings_fit(gpu: &Gpu, cfg: &Config, flags: bool) -> bool {
    let phase = match cfg.streaming {
        Streaming::Ab => Phase::Ab,
        Streaming::InPlace => Phase::AaOdd,
    };
    let max = gpu.limits().max_storage_buffers_per_shader_stage as usize;
    [Mode::Step, Mode::Macro].into_iter().all(|mode| {
        lattice_spec(cfg, flags, false, phase, mode, &StepShape::given()).storage_bindings() <= max
    })
}

/// Whether `gpu` can store a lattice like `cfg`: one f16 per cell (f16 with an odd ny) needs SHADER_F16. Tests
/// that build such lattices ask this to skip by its reason on an adapter without it.
pub fn check_storage(gpu: &Gpu, cfg: &Config) -> Result<()> {
    if cfg.layout() == crate::config::Layout::F16Single && !gpu.has_f16() {
        return Err(LbmError::Unsupported(format!(
            "f16 storage with an odd ny ({}x{}) stores one f16 per cell, which needs SHADER_F16; adapter `{}` \
             lacks it. An even ny pairs rows into 32-bit words and needs no feature",
            cfg.nx,
            cfg.ny,
            gpu.adapter_name()
        )));
    }
    Ok(())
}

/// Whether one direction of a lattice with `cfg` fits one binding of `gpu`: callers that build large host-side
/// state (flags, initial fields) check this first, so an impossible size is an error before it is allocated.
pub fn check_fits(gpu: &Gpu, cfg: &Config) -> Result<()> {
    check_fits_within(gpu.binding_limit(), cfg)
}

/// [`check_fits`] against a binding limit of `binding_limit` bytes (an adapter's, without the adapter: the
/// bench's GPU sizes are checked against an H200's limits on a machine without one).
pub fn check_fits_within(binding_limit: u64, cfg: &Config) -> Result<()> {
    let dir_bytes = cfg.layout().words(cfg.cells()) as u64 * 4;
    if dir_bytes > binding_limit {
        return Err(LbmError::Unsupported(format!(
            "a {}x{} lattice needs {dir_bytes} bytes per direction, past the adapter's binding limit of \
             {binding_limit} bytes; use f16 storage, a smaller domain, or blocks on several ranks (`--ranks N`; \
             thread ranks may share one GPU, each block within the limit)",
            cfg.nx, cfg.ny,
        )));
    }
    Ok(())
}

/// Where the macroscopic kernel writes its three outputs into one buffer (the adapter allows too few storage
/// buffers per kernel for three), whether three f32 a cell of `cfg` fit one binding of `gpu`: checked when the
/// lattice is made, so that a run does not reach its end to fail reading its fields back.
pub(super) fn check_packed_macros(gpu: &Gpu, cfg: &Config) -> Result<()> {
    let bytes = 3 * 4 * cfg.cells() as u64;
    let limit = gpu.binding_limit();
    if bytes > limit {
        return Err(LbmError::Unsupported(format!(
            "a {}x{} lattice: adapter `{}` allows {} storage buffers per kernel, too few for the macroscopic \
             kernel's three outputs, which then share one buffer of {bytes} bytes, past its binding limit of \
             {limit} bytes; use a smaller domain or blocks on several ranks (`--ranks N`)",
            cfg.nx,
            cfg.ny,
            gpu.adapter_name(),
            gpu.limits().max_storage_buffers_per_shader_stage
        )));
    }
    Ok(())
}

/// The kernel spec of a lattice with `cfg`, with or without a flag field and wall distances; step kernels take
/// the launch shape `step` (workgroup, ablation), the others run in workgroups of [`WG`].
pub(super) fn lattice_spec(
    cfg: &Config,
    flags: bool,
    curved: bool,
    phase: Phase,
    mode: Mode,
    step: &StepShape,
) -> KernelSpec {
    KernelSpec {
        nx: cfg.nx,
        ny: cfg.ny,
        storage: cfg.storage,
        collision: cfg.collision,
        force: cfg.force,
        smagorinsky: cfg.smagorinsky,
        flags,
        curved,
        phase,
        mode,
        edges: Edges::whole(cfg.nx, cfg.ny),
        region: Region::All,
        folded_f16: false,
        // The lab's forced rounding; `prepare_launch` adds the device's need.
        exact_f16: mode == Mode::Step && step.exact_f16,
        wg: if mode == Mode::Step {
            step.workgroup
        } else {
            WG
        },
        cells: if mode == Mode::Step { step.cells } else { 1 },
        ablation: if mode == Mode::Step {
            step.ablation
        } else {
            None
        },
        one_buffer: 0,
        packed_macros: false,
        packed_stash: false,
        descending: false,
    }
}

/// The flag field on the device: codes, the boundary table, and the stash of in-place interpolated links.
#[derive(Debug)]
pub(crate) struct Boundary {
    pub(super) codes: GpuBuffer<u32>,
    /// The table's E entries; with [`Stash::AfterTable`], E more that hold the stash.
    pub(super) table: GpuBuffer<[f32; 2]>,
    pub(crate) stash: Option<Stash>,
}

/// Where the in-place stash of interpolated links lies (`KernelSpec::packed_stash`): 2·E f32, E the table's
/// entries.
#[derive(Debug)]
pub(crate) enum Stash {
    Own(GpuBuffer<f32>),
    /// After the table's E entries in its buffer, as E more.
    AfterTable {
        entries: usize,
    },
}

impl Boundary {
    /// The stash's 2·E values as the kernels left them.
    pub(crate) fn read_stash(&self, gpu: &Gpu) -> Result<Vec<f32>> {
        Ok(match &self.stash {
            Some(Stash::Own(b)) => gpu.read(b)?,
            Some(Stash::AfterTable { entries }) => {
                let pairs = gpu.read_range(&self.table, *entries..2 * entries)?;
                bespoke_gpu::bytemuck::cast_slice(&pairs).to_vec()
            }
            None => Vec::new(),
        })
    }

    /// Sets the stash's 2·E `values`.
    pub(crate) fn write_stash(&self, gpu: &Gpu, values: &[f32]) -> Result<()> {
        match &self.stash {
            Some(Stash::Own(b)) => gpu.write(b, 0, values)?,
            Some(Stash::AfterTable { entries }) => {
                let pairs: Vec<[f32; 2]> = bespoke_gpu::bytemuck::pod_collect_to_vec(values);
                gpu.write(&self.table, *entries, &pairs)?
            }
            None => {}
        }
        Ok(())
    }
}

/// A launch of a lattice kernel: the population buffers, then the flag field, its table and the stash when there
/// are, then `extra`, in binding order.
pub(crate) fn prepare_launch<'a>(
    gpu: &Gpu,
    spec: &KernelSpec,
    pops: Vec<Arg<'a>>,
    flag_bufs: Option<&'a Boundary>,
    extra: &[Arg<'a>],
    grid: Grid,
) -> Result<Launch> {
    let mut args: Vec<Arg<'a>> = pops;
    if let Some(b) = flag_bufs {
        args.push(b.codes.arg());
        args.push(b.table.arg());
        if spec.stashed()
            && let Some(Stash::Own(stash)) = &b.stash
        {
            args.push(stash.arg());
        }
    }
    args.extend_from_slice(extra);
    // SAFETY: every index the kernel forms is a cell index below N (neighbours wrap; probe entries are cell
    // indices `Lattice::probe` checked against N), every population buffer holds at least N elements of its type,
    // the macroscopic outputs N each (3·N packed), the probe buffer 7 words an entry (the kernel's entry count is
    // its length ÷ 7), and boundary-table indices come from `encode`, which only emits indices of entries it
    // stored.
    let spec = KernelSpec {
        folded_f16: gpu.quirks().folds_f16_round_trip,
        exact_f16: rounds_f16_explicitly(gpu, spec.storage, spec.exact_f16)?,
        ..*spec
    };
    let kernel = unsafe { Kernel::new(spec.name(), spec.generate()).without_bounds_checks() };
    Ok(gpu.prepare(&kernel, &args, grid)?)
}

/// A step kernel's population arguments in binding order: the lattice it reads, then the one it writes.
pub(crate) fn pops<'a>(first: &'a Pops, second: Option<&'a Pops>) -> Vec<Arg<'a>> {
    let mut args = first.kernel_args();
    args.extend(second.map(Pops::kernel_args).into_iter().flatten());
    args
}

/// Whether an f16 lattice's kernels round each stored value to its nearest f16 themselves
/// (`KernelSpec::exact_f16`): where `forced` (the lab's `StepShape::exact_f16`) or where the device's own
/// conversion does not round to nearest even (`Gpu::rounds_f16_to_nearest_even`, asked only of f16 lattices:
/// one small kernel, once a device). A probe the backend cannot run (no f16 packing on a downlevel GL adapter)
/// leaves it to the lattice's own kernels, which meet the same limit and say so by name.
pub(crate) fn rounds_f16_explicitly(gpu: &Gpu, storage: Storage, forced: bool) -> Result<bool> {
    if storage != Storage::F16 || forced {
        return Ok(storage == Storage::F16);
    }
    match gpu.rounds_f16_to_nearest_even() {
        Ok(nearest) => Ok(!nearest),
        Err(e) if e.is_kernels_own() => Ok(false),
        Err(e) => Err(e.into()),
    }
}
