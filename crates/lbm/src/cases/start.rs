//! How a case starts: its options checked (also without a device, [`check`]), then a fresh lattice built or a
//! checkpoint of the same case resumed; and the metadata a case writes into its checkpoints.

use std::path::Path;

use bespoke_gpu::Gpu;

use super::{Case, CaseOptions};
use crate::config::{Collision, Config, Storage, Streaming, check_mach};
use crate::distributed::Decomposition;
use crate::error::{LbmError, Result};
use crate::flags::Flags;
use crate::lattice::{Lattice, check_fits};

/// A case's starting lattice, whether it came from a checkpoint, and the characteristic velocity it runs at.
pub(super) struct Start<'g> {
    pub(super) lat: Lattice<'g>,
    pub(super) resumed: bool,
    pub(super) u: f64,
}

/// The characteristic velocity a case is built with: `--u` or the case's default, positive and below the Mach
/// limit.
pub(super) fn speed(case: &Case, opts: &CaseOptions) -> Result<f64> {
    let u = opts.u.unwrap_or_else(|| case.default_speed());
    if !(u.is_finite() && u > 0.0) {
        return Err(LbmError::param(
            "u",
            u,
            "the characteristic velocity must be positive",
        ));
    }
    check_mach("characteristic velocity (--u)", [u, 0.0])?;
    Ok(u)
}

/// A checkpoint's metadata against the case and options resuming it: the same case, and --u and --smagorinsky
/// absent or equal to what it ran with. Returns the velocity it ran at.
fn check_resume(
    case: &Case,
    opts: &CaseOptions,
    path: &Path,
    text: &str,
    saved_cfg: &Config,
    omega: Option<f64>,
) -> Result<f64> {
    same_config(opts, path, saved_cfg, omega)?;
    let smagorinsky = saved_cfg.smagorinsky;
    let (name, saved) = parse_meta(text).map_err(|why| LbmError::file(path, why))?;
    if name != Some(case.name()) {
        return Err(LbmError::file(
            path,
            format!("checkpoint is of `{text}`, not of case `{}`", case.name()),
        ));
    }
    // Checkpoints from before `--u` existed ran at the default.
    let saved = saved.unwrap_or_else(|| case.default_speed());
    if let Some(asked) = opts.u
        && asked != saved
    {
        return Err(LbmError::param(
            "u",
            asked,
            format!(
                "the checkpoint {} ran at u = {saved}; resume without --u or with that value",
                path.display()
            ),
        ));
    }
    if let Some(asked) = opts.smagorinsky
        && asked != smagorinsky
    {
        return Err(LbmError::param(
            "smagorinsky",
            asked,
            format!(
                "the checkpoint {} ran with C_s = {}; resume without --smagorinsky or with that value",
                path.display(),
                smagorinsky
            ),
        ));
    }
    Ok(saved)
}

/// Refuses options of a resumed run that differ from the checkpoint's configuration: the state is the
/// checkpoint's, and a run that went on with it while `--size 64x64`, `--storage f16` or `--omega 1.5` asked for
/// another would report figures of a configuration nobody asked for. Options left out take the checkpoint's;
/// the same command line again (the documented way to go on after a stop) passes. `omega`: the relaxation rate
/// the options ask for, where `--omega` or `--re` gave one.
fn same_config(opts: &CaseOptions, path: &Path, saved: &Config, omega: Option<f64>) -> Result<()> {
    let differ = |what: &'static str, asked: String, held: String| {
        Err(LbmError::param(
            what,
            asked,
            format!(
                "the checkpoint {} holds {what} {held}; resume without --{what} or with that value",
                path.display()
            ),
        ))
    };
    if let Some((nx, ny)) = opts.size
        && (nx, ny) != (saved.nx, saved.ny)
    {
        return differ(
            "size",
            format!("{nx}x{ny}"),
            format!("{}x{}", saved.nx, saved.ny),
        );
    }
    if let Some(s) = opts.storage
        && s != saved.storage
    {
        return differ("storage", s.name().into(), saved.storage.name().into());
    }
    if let Some(s) = opts.streaming
        && s != saved.streaming
    {
        return differ("streaming", s.name().into(), saved.streaming.name().into());
    }
    if let Some(c) = opts.collision
        && c.with(saved.collision.omega()).name() != saved.collision.name()
    {
        return differ(
            "collision",
            c.with(1.0).name().into(),
            saved.collision.name().into(),
        );
    }
    let held = saved.collision.omega();
    if let Some(w) = omega
        && (w - held).abs() > 1e-12 * held.abs()
    {
        return Err(LbmError::param(
            "omega",
            w,
            format!(
                "the checkpoint {} ran at ω = {held} (--omega, or --re with this run's size and velocity, \
                 gives the ω asked for); resume without --omega and --re or with the checkpoint's",
                path.display()
            ),
        ));
    }
    Ok(())
}

/// The checkpoint the run will write can be written: not a folder, in a folder that exists and can be written
/// (checked without touching the file), so a long run is refused before its first step, not at its end.
fn check_checkpoint_path(opts: &CaseOptions) -> Result<()> {
    match &opts.checkpoint {
        Some(path) => bespoke_gpu::check_writable(path).map_err(|e| {
            LbmError::file(path, format!("the checkpoint cannot be written there: {e}"))
        }),
        None => Ok(()),
    }
}

/// Checks a case's options and input files without a device, as `run_case` would before its first step: the
/// velocity, ω, Re, Smagorinsky constant, size and, for the decay cases, steps and wave resolution; the mask
/// image decodes; a checkpoint to resume is whole (checksum), of this case, and of the configuration the options
/// give (an ω from Re is the run's to check); the checkpoint to write can be written there. A CLI calls it before
/// opening a device, so bad input gets its own error on a machine without a driver.
pub fn check(case: &Case, opts: &CaseOptions) -> Result<()> {
    check_across(case, opts, None)
}

/// [`check`], and for a run across `ranks` (a count, and the blocks along x and y if given; slabs across the
/// longer axis otherwise) that the lattice it steps (`--size`, the case's default, or the checkpoint's) can be
/// cut into that many blocks, as each rank would cut it: a CLI refuses too many ranks before any rank opens a
/// device.
pub fn check_across(
    case: &Case,
    opts: &CaseOptions,
    ranks: Option<(usize, Option<[usize; 2]>)>,
) -> Result<()> {
    let cut = |nx: usize, ny: usize, storage: Storage| match ranks {
        Some((_, Some(grid))) => Decomposition::new(nx, ny, grid, storage).map(|_| ()),
        Some((count, None)) => Decomposition::slabs(nx, ny, count, storage).map(|_| ()),
        None => Ok(()),
    };
    check_checkpoint_path(opts)?;
    if matches!(case, Case::ShearWave | Case::TaylorGreen) {
        super::fit_steps(case, opts.steps, || super::MIN_FIT_STEPS)?;
    }
    if let Some(path) = &opts.resume {
        let saved = crate::checkpoint::Saved::read(path)?;
        check_resume(case, opts, path, &saved.meta, &saved.cfg, opts.omega)?;
        return cut(saved.cfg.nx, saved.cfg.ny, saved.cfg.storage);
    }
    speed(case, opts)?;
    if let Some(re) = opts.re
        && !(re > 0.0 && re.is_finite())
    {
        return Err(LbmError::param(
            "re",
            re,
            "the Reynolds number must be positive",
        ));
    }
    if let Some(size) = opts.size {
        super::size_fits(case, size)?;
    }
    let (nx, ny) = super::size_of(case, opts);
    let omega = opts.omega.unwrap_or(1.0);
    let cfg = Config {
        storage: opts.storage.unwrap_or(Storage::F32),
        streaming: opts.streaming.unwrap_or(Streaming::Ab),
        smagorinsky: opts.smagorinsky.unwrap_or(0.0),
        ..Config::new(nx, ny, Collision::Bgk { omega })
    };
    cfg.check()?;
    if let Case::Mask(png) = case {
        crate::flags::check_mask(png)?;
    }
    cut(nx, ny, cfg.storage)
}

/// The lattice a case starts from: its own (built by `build` for velocity `u` at relaxation rate `omega`) or a
/// checkpoint of the same case, which carries the velocity it was run at (and must hold the configuration the
/// options ask for).
pub(super) fn start<'g>(
    gpu: &'g Gpu,
    case: &Case,
    opts: &CaseOptions,
    u: f64,
    omega: f64,
    build: impl FnOnce() -> Result<(Config, Flags)>,
    init: impl Fn(usize, usize) -> (f64, [f64; 2]) + Sync,
) -> Result<Start<'g>> {
    check_checkpoint_path(opts)?;
    if let Some(path) = &opts.resume {
        let (lat, text) = match &opts.ranks {
            Some(r) => Lattice::resume_distributed(gpu, path, r)?,
            None => Lattice::resume(gpu, path)?,
        };
        let asked = (opts.omega.is_some() || opts.re.is_some()).then_some(omega);
        let saved = check_resume(case, opts, path, &text, lat.config(), asked)?;
        return Ok(Start {
            lat,
            resumed: true,
            u: saved,
        });
    }
    if let (Some((nx, ny)), None) = (opts.size, &opts.ranks) {
        // Before the flags and the initial state take host memory in proportion to the cells. (A distributed
        // lattice checks each block against its rank's device.)
        let cfg = Config {
            storage: opts.storage.unwrap_or(Storage::F32),
            ..Config::new(nx, ny, Collision::Bgk { omega: 1.0 })
        };
        check_fits(gpu, &cfg)?;
    }
    let (cfg, flags) = build()?;
    let mut lat = match &opts.ranks {
        Some(r) => Lattice::new_distributed(gpu, cfg, flags, r)?,
        None => Lattice::new(gpu, cfg, flags)?,
    };
    lat.init_equilibrium(init)?;
    Ok(Start {
        lat,
        resumed: false,
        u,
    })
}

/// Checkpoint metadata: `case=NAME u=U` (U round-trips exactly).
pub(super) fn meta(case: &str, u: f64) -> String {
    format!("case={case} u={u:?}")
}

/// The case name and velocity in checkpoint metadata; older checkpoints carry only the name.
pub(super) fn parse_meta(text: &str) -> std::result::Result<(Option<&str>, Option<f64>), String> {
    let mut name = None;
    let mut u = None;
    for tok in text.split_whitespace() {
        if let Some(v) = tok.strip_prefix("case=") {
            name = Some(v);
        } else if let Some(v) = tok.strip_prefix("u=") {
            u = Some(v.parse().map_err(|_| {
                format!("checkpoint metadata `{text}` has an unreadable velocity `{v}`")
            })?);
        }
    }
    Ok((name, u))
}
