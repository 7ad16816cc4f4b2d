//! Validation and demonstration cases: each builds its lattice, runs it, and measures what the literature
//! gives a reference for.

mod cavity;
mod cylinder;
mod mask;
mod poiseuille;
mod shear_wave;
mod taylor_green;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Instant;

use bespoke_gpu::Gpu;

use crate::config::{Collision, Config, Storage, Streaming};
use crate::error::{LbmError, Result};
use crate::fields::Fields;
use crate::flags::Flags;
use crate::lattice::Lattice;

pub use cavity::{GHIA_CSV, ghia_table};

/// The cases `bespoke lbm` runs.
#[derive(Clone, Debug, PartialEq)]
pub enum Case {
    ShearWave,
    TaylorGreen,
    Poiseuille,
    Cavity,
    Cylinder,
    /// Channel flow past the obstacles in a PNG mask.
    Mask(PathBuf),
}

impl Case {
    pub fn name(&self) -> &'static str {
        match self {
            Self::ShearWave => "shear-wave",
            Self::TaylorGreen => "taylor-green",
            Self::Poiseuille => "poiseuille",
            Self::Cavity => "cavity",
            Self::Cylinder => "cylinder",
            Self::Mask(_) => "mask",
        }
    }
    /// Parses a case name; `mask` needs the PNG path.
    pub fn parse(name: &str, mask: Option<&Path>) -> Result<Self> {
        Ok(match name {
            "shear-wave" => Self::ShearWave,
            "taylor-green" => Self::TaylorGreen,
            "poiseuille" => Self::Poiseuille,
            "cavity" => Self::Cavity,
            "cylinder" => Self::Cylinder,
            "mask" => Self::Mask(
                mask.ok_or_else(|| {
                    LbmError::param("case", "mask", "needs a PNG file (--mask FILE)")
                })?
                .to_path_buf(),
            ),
            _ => {
                return Err(LbmError::param(
                    "case",
                    name,
                    "expected shear-wave, taylor-green, poiseuille, cavity, cylinder or mask",
                ));
            }
        })
    }
}

/// Which collision operator a case uses (its rate comes from `omega` or `re`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CollisionKind {
    Bgk,
    Trt,
}

impl CollisionKind {
    pub fn parse(s: &str) -> Result<Self> {
        match s {
            "bgk" => Ok(Self::Bgk),
            "trt" => Ok(Self::Trt),
            _ => Err(LbmError::param("collision", s, "expected bgk or trt")),
        }
    }
    fn with(self, omega: f64) -> Collision {
        match self {
            Self::Bgk => Collision::Bgk { omega },
            Self::Trt => Collision::trt(omega),
        }
    }
}

/// Options common to every case; `None` takes the case's default.
#[derive(Clone, Debug)]
pub struct CaseOptions {
    pub size: Option<(usize, usize)>,
    pub steps: Option<u64>,
    pub omega: Option<f64>,
    pub re: Option<f64>,
    pub collision: Option<CollisionKind>,
    pub storage: Storage,
    pub streaming: Streaming,
    /// Continue from this checkpoint instead of the case's initial state.
    pub resume: Option<PathBuf>,
    /// Write a PNG frame of this quantity into this folder every so many steps (`frame_<step>.png`).
    pub frames: Option<Frames>,
}

/// Periodic PNG frames during a run.
#[derive(Clone, Debug)]
pub struct Frames {
    pub dir: PathBuf,
    pub every: u64,
    pub quantity: crate::output::Quantity,
}

impl Default for CaseOptions {
    fn default() -> Self {
        Self {
            size: None,
            steps: None,
            omega: None,
            re: None,
            collision: None,
            storage: Storage::F32,
            streaming: Streaming::Ab,
            resume: None,
            frames: None,
        }
    }
}

/// What a case measured.
#[derive(Debug)]
pub struct CaseRun<'g> {
    pub case: &'static str,
    pub lattice: Lattice<'g>,
    /// Steps run in this invocation.
    pub steps: u64,
    /// Seconds spent stepping (readbacks for measurements excluded).
    pub seconds: f64,
    pub metrics: BTreeMap<String, f64>,
    /// What the metrics mean, criteria used, warnings.
    pub notes: Vec<String>,
    /// Fields at the end.
    pub fields: Fields,
}

impl CaseRun<'_> {
    /// Million lattice-cell updates per second while stepping.
    pub fn mlups(&self) -> f64 {
        let cells = self.lattice.config().cells() as f64;
        if self.seconds > 0.0 {
            cells * self.steps as f64 / self.seconds / 1e6
        } else {
            0.0
        }
    }
}

/// Progress callback: (steps done, steps planned).
pub type Progress<'a> = &'a mut dyn FnMut(u64, u64);

/// Steps a lattice in chunks, timing only the stepping and reporting progress.
struct Runner<'a, 'g> {
    lat: Lattice<'g>,
    seconds: f64,
    done: u64,
    planned: u64,
    progress: Progress<'a>,
    frames: Option<Frames>,
}

impl<'a, 'g> Runner<'a, 'g> {
    fn new(lat: Lattice<'g>, planned: u64, progress: Progress<'a>, opts: &CaseOptions) -> Self {
        Self {
            lat,
            seconds: 0.0,
            done: 0,
            planned,
            progress,
            frames: opts.frames.clone().filter(|f| f.every > 0),
        }
    }
    fn run(&mut self, n: u64) -> Result<()> {
        let chunk = 2000;
        let mut left = n;
        while left > 0 {
            let mut k = left.min(chunk);
            if let Some(f) = &self.frames {
                // Stop at the next frame boundary.
                k = k.min(f.every - self.done % f.every);
            }
            let t = Instant::now();
            self.lat.step(k)?;
            self.seconds += t.elapsed().as_secs_f64();
            self.done += k;
            left -= k;
            if let Some(f) = self.frames.clone()
                && self.done.is_multiple_of(f.every)
            {
                let fields = self.fields()?;
                let path = f
                    .dir
                    .join(format!("frame_{:08}.png", self.lat.steps_done()));
                crate::output::write_png(&path, &fields, self.lat.flags(), f.quantity)?;
            }
            (self.progress)(self.done, self.planned.max(self.done));
        }
        Ok(())
    }
    /// Steps in chunks of `interval` until one chunk changes u_x by less than `tol`·`scale` everywhere, or until
    /// `max_steps` in all. Returns whether it became steady and the last chunk's largest change / `scale`.
    fn run_to_steady(
        &mut self,
        max_steps: u64,
        interval: u64,
        scale: f64,
        tol: f64,
    ) -> Result<(bool, f64)> {
        let mut prev = self.fields()?.ux;
        let mut change = f64::INFINITY;
        while self.done < max_steps {
            self.run(interval.min(max_steps - self.done))?;
            let now = self.fields()?.ux;
            change = max_change(&now, &prev, scale);
            if change < tol {
                return Ok((true, change));
            }
            prev = now;
        }
        Ok((false, change))
    }

    /// Reads ρ and u back, failing if the run has diverged.
    fn fields(&mut self) -> Result<Fields> {
        let f = self.lat.macroscopic()?;
        if let Some((what, x, y)) = f.first_non_finite() {
            return Err(LbmError::Diverged {
                step: self.lat.steps_done(),
                what,
                x,
                y,
            });
        }
        Ok(f)
    }

    fn finish(
        mut self,
        case: &'static str,
        metrics: BTreeMap<String, f64>,
        notes: Vec<String>,
    ) -> Result<CaseRun<'g>> {
        let fields = self.fields()?;
        let mut notes = notes;
        notes.extend(self.lat.warnings().iter().cloned());
        Ok(CaseRun {
            case,
            steps: self.done,
            seconds: self.seconds,
            lattice: self.lat,
            metrics,
            notes,
            fields,
        })
    }
}

/// The lattice a case starts from: its own (built by `build`) or a checkpoint of the same case.
fn start<'g>(
    gpu: &'g Gpu,
    case: &Case,
    opts: &CaseOptions,
    build: impl FnOnce() -> Result<(Config, Flags)>,
    init: impl Fn(usize, usize) -> (f64, [f64; 2]),
) -> Result<(Lattice<'g>, bool)> {
    if let Some(path) = &opts.resume {
        let (lat, meta) = Lattice::resume(gpu, path)?;
        let want = checkpoint_meta(case);
        if meta != want {
            return Err(LbmError::file(
                path,
                format!("checkpoint is of `{meta}`, not `{want}`"),
            ));
        }
        return Ok((lat, true));
    }
    let (cfg, flags) = build()?;
    let mut lat = Lattice::new(gpu, cfg, flags)?;
    lat.init_equilibrium(init)?;
    Ok((lat, false))
}

/// The metadata a case's checkpoints carry.
pub fn checkpoint_meta(case: &Case) -> String {
    format!("case={}", case.name())
}

fn base_config(opts: &CaseOptions, nx: usize, ny: usize, collision: Collision) -> Config {
    Config {
        storage: opts.storage,
        streaming: opts.streaming,
        ..Config::new(nx, ny, collision)
    }
}

/// Runs `case` on `gpu`.
pub fn run_case<'g>(
    gpu: &'g Gpu,
    case: &Case,
    opts: &CaseOptions,
    progress: Progress<'_>,
) -> Result<CaseRun<'g>> {
    match case {
        Case::ShearWave => shear_wave::run(gpu, case, opts, progress),
        Case::TaylorGreen => taylor_green::run(gpu, case, opts, progress),
        Case::Poiseuille => poiseuille::run(gpu, case, opts, progress),
        Case::Cavity => cavity::run(gpu, case, opts, progress),
        Case::Cylinder => cylinder::run(gpu, case, opts, progress),
        Case::Mask(path) => mask::run(gpu, case, path, opts, progress),
    }
}

/// ω from `--omega`, or from `--re` with velocity `u` over length `l`, or the default.
fn omega_from(
    opts: &CaseOptions,
    u: f64,
    l: f64,
    default_re: Option<f64>,
    default_omega: f64,
) -> Result<f64> {
    if let Some(w) = opts.omega {
        return Ok(w);
    }
    match opts.re.or(default_re) {
        Some(re) if re > 0.0 && re.is_finite() => Ok(crate::d2q9::omega_for(u * l / re)),
        Some(re) => Err(LbmError::param(
            "re",
            re,
            "the Reynolds number must be positive",
        )),
        None => Ok(default_omega),
    }
}

fn size_or(opts: &CaseOptions, default: (usize, usize)) -> (usize, usize) {
    opts.size.unwrap_or(default)
}

/// Largest |a − b| over steps of a steady-state check, relative to `scale`.
fn max_change(a: &[f32], b: &[f32], scale: f64) -> f64 {
    a.iter()
        .zip(b)
        .map(|(x, y)| f64::from((x - y).abs()))
        .fold(0.0, f64::max)
        / scale
}
