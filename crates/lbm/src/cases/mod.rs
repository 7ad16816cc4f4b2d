//! Validation and demonstration cases: each builds its lattice, runs it, and measures what the literature
//! gives a reference for.

mod cavity;
mod cylinder;
mod mask;
mod poiseuille;
mod runner;
mod shear_wave;
mod start;
mod taylor_green;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use bespoke_gpu::Gpu;

use crate::config::{Collision, Config, Storage, Streaming};
use crate::error::{LbmError, Result};
use crate::lattice::Lattice;

pub use cavity::{GHIA_CSV, ghia_table};
use runner::Runner;
#[cfg(test)]
use start::parse_meta;
use start::{Start, meta, speed, start};
pub use start::{check, check_across};

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
    /// The case's characteristic lattice velocity when `CaseOptions::u` is not given: the shear wave's and the
    /// Taylor–Green vortex's amplitude, Poiseuille's centreline speed, the cavity's lid, the cylinder's and the
    /// mask channel's mean inflow. Compressibility errors grow as its square; the steps a case needs to reach the
    /// same physical time grow as its inverse.
    pub fn default_speed(&self) -> f64 {
        match self {
            Self::ShearWave => shear_wave::U0,
            Self::TaylorGreen => taylor_green::U0,
            Self::Poiseuille => poiseuille::U_MAX,
            Self::Cavity => cavity::LID,
            Self::Cylinder => cylinder::U_MEAN,
            Self::Mask(_) => mask::U_IN,
        }
    }
    /// The lattice (nx, ny) the case runs on when `CaseOptions::size` is not given (a mask is resampled to it).
    pub fn default_size(&self) -> (usize, usize) {
        match self {
            Self::ShearWave => (16, 64),
            Self::TaylorGreen => (64, 64),
            Self::Poiseuille => (4, 34),
            Self::Cavity => (128, 128),
            Self::Cylinder => cylinder::default_size(),
            Self::Mask(_) => (400, 100),
        }
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
#[derive(Clone, Debug, Default)]
pub struct CaseOptions {
    pub size: Option<(usize, usize)>,
    /// The run's total steps, counted from the case's initial state: a run resumed from a checkpoint at step s
    /// does the steps that remain and ends where the uninterrupted run would (PyFR's `tend`, OpenFOAM's
    /// `endTime`); a checkpoint at or past it is refused. `None`: the case's default total.
    pub steps: Option<u64>,
    pub omega: Option<f64>,
    pub re: Option<f64>,
    /// The characteristic lattice velocity (`Case::default_speed`); `re` then sets ω through it.
    pub u: Option<f64>,
    pub collision: Option<CollisionKind>,
    /// Population storage (None: f32, or a resumed checkpoint's).
    pub storage: Option<Storage>,
    /// Streaming pattern (None: two lattices, or a resumed checkpoint's).
    pub streaming: Option<Streaming>,
    /// Continue from this checkpoint instead of the case's initial state.
    pub resume: Option<PathBuf>,
    /// Write a PNG frame of this quantity into this folder every so many steps (`frame_<step>.png`).
    pub frames: Option<Frames>,
    /// Write the fields every so many steps as a VTK time series beside this path, in its extension's kind, with
    /// ParaView's collection (`output::write_series_collection`).
    pub vtk_series: Option<VtkSeries>,
    /// Mask case: walls at the 50 % contour of the image's interpolated lightness, with interpolated bounce-back
    /// (`Flags::add_png_mask_interpolated`), instead of a staircase of its dark pixels.
    pub interpolated_mask: bool,
    /// Smagorinsky constant of the subgrid model (`Config::smagorinsky`); None: none, or the checkpoint's.
    pub smagorinsky: Option<f64>,
    /// Run across ranks (every rank calls `run_case` with its communicator; results are the whole domain's on
    /// every rank, files are written by rank 0). None: one domain.
    pub ranks: Option<crate::distributed::Ranks>,
    /// Where the run keeps its state: every `checkpoint_every` steps (of the domain's count, so a resumed run
    /// keeps the cadence), and when `stop` is raised. The caller writes the final state itself.
    pub checkpoint: Option<PathBuf>,
    pub checkpoint_every: Option<u64>,
    /// Raised (by a signal handler) to stop after the step batch in flight: the state is saved to `checkpoint`
    /// if there is one and the run ends with `LbmError::Interrupted`. Ranks agree on it before they stop.
    pub stop: Option<Arc<AtomicBool>>,
}

/// Periodic PNG frames during a run.
#[derive(Clone, Debug)]
pub struct Frames {
    pub dir: PathBuf,
    pub every: u64,
    pub quantity: crate::output::Quantity,
}

/// A VTK time series during a run: a frame every `every` steps beside `path` (`flow.pvti` → `flow_00000200.pvti`,
/// listed in `flow.pvd`).
#[derive(Clone, Debug)]
pub struct VtkSeries {
    pub path: PathBuf,
    pub every: u64,
}

/// What a case measured.
#[derive(Debug)]
pub struct CaseRun<'g> {
    pub case: &'static str,
    /// The characteristic lattice velocity the case ran with (`Case::default_speed`).
    pub u: f64,
    pub lattice: Lattice<'g>,
    /// Steps run in this invocation (a resumed run: those that remained; the total is `lattice.steps_done()`).
    pub steps: u64,
    /// Seconds spent stepping (readbacks for measurements excluded).
    pub seconds: f64,
    pub metrics: BTreeMap<String, f64>,
    /// What the metrics mean, criteria used, warnings.
    pub notes: Vec<String>,
}

impl CaseRun<'_> {
    /// The metadata to checkpoint this run with, so that `--resume` continues the same case at the same speed.
    pub fn checkpoint_meta(&self) -> String {
        meta(self.case, self.u)
    }
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

/// Progress callback: (steps done, steps planned), both of the run's total count; called once before the first
/// step (a resumed run starts at its checkpoint's step), then after each batch.
pub type Progress<'a> = &'a mut dyn FnMut(u64, u64);

fn base_config(opts: &CaseOptions, nx: usize, ny: usize, collision: Collision) -> Config {
    Config {
        storage: opts.storage.unwrap_or(Storage::F32),
        streaming: opts.streaming.unwrap_or(Streaming::Ab),
        smagorinsky: opts.smagorinsky.unwrap_or(0.0),
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
        Some(re) if re > 0.0 && re.is_finite() => {
            let nu = u * l / re;
            let w = crate::d2q9::omega_for(nu);
            if w > 0.0 && w < 2.0 {
                Ok(w)
            } else {
                // Named by Re (and the length it acts on), which the user gave, rather than by an ω they did not.
                Err(LbmError::param(
                    "re",
                    re,
                    format!(
                        "at u = {u} over {l} cells it asks for ν = {nu:.3e}, ω = {w}, outside (0, 2): lower the \
                         Reynolds number or give the lattice more cells"
                    ),
                ))
            }
        }
        Some(re) => Err(LbmError::param(
            "re",
            re,
            "the Reynolds number must be positive",
        )),
        None => Ok(default_omega),
    }
}

/// The lattice a fresh run of `case` steps: `--size` or the case's default.
fn size_of(case: &Case, opts: &CaseOptions) -> (usize, usize) {
    opts.size.unwrap_or_else(|| case.default_size())
}

/// Fewest steps a decay case (shear wave, Taylor–Green) runs: it fits the decay from the first fifth of the run
/// to its end.
pub(crate) const MIN_FIT_STEPS: u64 = 10;

/// Fewest cells along a wavelength of a decay case's sine wave: at 2 the wave samples sin 0 and sin π, no flow at
/// all, and its fit is 0/0.
pub(crate) const MIN_WAVE_CELLS: usize = 4;

/// The steps a decay case runs: the given count (at least [`MIN_FIT_STEPS`]) or `default`.
fn fit_steps(case: &Case, given: Option<u64>, default: impl FnOnce() -> u64) -> Result<u64> {
    let case = case.name();
    match given {
        Some(s) if s < MIN_FIT_STEPS => Err(LbmError::param(
            "steps",
            s,
            format!(
                "the {case} case fits a decay from the first fifth of its run to the end, and needs at least \
                 {MIN_FIT_STEPS} steps"
            ),
        )),
        Some(s) => Ok(s),
        None => Ok(default().max(MIN_FIT_STEPS)),
    }
}

/// Refuses a lattice too short for a decay case's wave ([`MIN_WAVE_CELLS`] along y for the shear wave, along x
/// (= y) for Taylor–Green) or with no fluid cell between a wall-bounded case's walls (3 cells across them:
/// Poiseuille along y, the cavity and the mask channel along x and y). The cylinder checks its own channel.
fn size_fits(case: &Case, (nx, ny): (usize, usize)) -> Result<()> {
    // The wall-bounded cases: a fluid cell between their walls (rows 0 and ny − 1; the cavity's side walls and
    // the channels' inlet and outlet columns along x). With none there is no flow to measure: a 4×2 channel gave
    // a NaN error and said it had converged.
    let walled = match case {
        Case::Poiseuille => Some(("y", ny)),
        Case::Cavity | Case::Mask(_) => Some(("x and y", nx.min(ny))),
        _ => None,
    };
    if let Some((axis, n)) = walled
        && n < 3
    {
        return Err(LbmError::param(
            "size",
            format!("{nx}x{ny}"),
            format!(
                "the {} case's walls take the first and last cells along {axis}: it needs at least 3 there, \
                 for a fluid cell between them",
                case.name()
            ),
        ));
    }
    let (axis, n) = match case {
        Case::ShearWave => ("y", ny),
        Case::TaylorGreen => ("x and y", nx.min(ny)),
        _ => return Ok(()),
    };
    let case = case.name();
    if n < MIN_WAVE_CELLS {
        return Err(LbmError::param(
            "size",
            format!("{nx}x{ny}"),
            format!(
                "the {case} case's wave spans the lattice along {axis} and needs at least {MIN_WAVE_CELLS} cells \
                 there to be resolved (at 2 it is sin 0 and sin π: no flow)"
            ),
        ));
    }
    Ok(())
}

/// Units in the last place (of f32, the type u is computed and read in) by which a steady field may still move
/// between two checks. A driver may round `1 / ρ` differently or contract other FMAs than lavapipe does, and the
/// field then settles a few ulps off and moves between neighbours for ever: on an H200 the BGK channel at H = 24
/// moved by 2 ulps of 0.02 (3.7e-9) every interval, past a tolerance of 2e-9 that held on lavapipe.
pub(crate) const STEADY_ULPS: f32 = 4.0;

/// Whether every cell changed by less than `abs_tol`, or by at most [`STEADY_ULPS`] units in the last place of
/// its value: a criterion finer than the type resolves cannot be met on every driver.
pub(crate) fn is_steady(a: &[f32], b: &[f32], abs_tol: f64) -> bool {
    a.iter().zip(b).all(|(x, y)| {
        let d = (x - y).abs();
        f64::from(d) < abs_tol || d <= STEADY_ULPS * ulp(x.abs().max(y.abs()))
    })
}

/// The distance from |v| to the next larger f32.
fn ulp(v: f32) -> f32 {
    let v = v.abs();
    if !v.is_finite() {
        return f32::INFINITY;
    }
    f32::from_bits(v.to_bits() + 1) - v
}

/// Largest |a − b| over steps of a steady-state check, relative to `scale`.
fn max_change(a: &[f32], b: &[f32], scale: f64) -> f64 {
    a.iter()
        .zip(b)
        .map(|(x, y)| f64::from((x - y).abs()))
        .fold(0.0, f64::max)
        / scale
}

impl std::str::FromStr for CollisionKind {
    type Err = LbmError;
    fn from_str(s: &str) -> Result<Self> {
        Self::parse(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn steady_allows_a_few_ulps_and_no_more() {
        let u = 0.02f32;
        let up = |v: f32, n: u32| f32::from_bits(v.to_bits() + n);
        // The H200's BGK channel: 2 ulps of 0.02 between checks, against 1e-7 · 0.02 (about one ulp).
        let (a, b) = (vec![u, 0.0, -u], vec![up(u, 2), 0.0, -up(u, 1)]);
        assert!(max_change(&a, &b, 0.02) > 1e-7);
        assert!(is_steady(&a, &b, 1e-7 * 0.02));
        // Past the resolution's allowance, and past the tolerance: still moving.
        let c = vec![up(u, 5), 0.0, -u];
        assert!(!is_steady(&a, &c, 1e-7 * 0.02));
        // A coarse tolerance still decides alone.
        assert!(is_steady(&a, &c, 1e-6));
        // Near zero the ulp is tiny: the tolerance decides there.
        assert!(!is_steady(&[0.0], &[1e-8], 1e-9));
        assert!(is_steady(&[0.0], &[1e-10], 1e-9));
        assert!(!is_steady(&[f32::NAN], &[0.0], 1.0));
    }

    #[test]
    fn an_re_that_asks_for_no_viscosity_is_named() {
        let with_re = |re| CaseOptions {
            re: Some(re),
            ..CaseOptions::default()
        };
        let w = omega_from(&with_re(100.0), 0.1, 62.0, None, 1.0).expect("ω");
        assert!((w - crate::d2q9::omega_for(0.1 * 62.0 / 100.0)).abs() < 1e-15);
        // A 2×2 cavity's length is 0 cells; a huge Re rounds ν to nothing: both ask for ω = 2.
        for (re, l) in [(100.0, 0.0), (1e30, 62.0)] {
            let e = omega_from(&with_re(re), 0.1, l, None, 1.0)
                .unwrap_err()
                .to_string();
            assert!(
                e.starts_with("re = ") && e.contains("outside (0, 2)"),
                "{e}"
            );
        }
        // A given ω is the run's own to check (Config::check).
        let opts = CaseOptions {
            omega: Some(1.2),
            ..with_re(1e30)
        };
        assert_eq!(omega_from(&opts, 0.1, 62.0, None, 1.0).ok(), Some(1.2));
    }

    #[test]
    fn decay_cases_refuse_too_few_steps_and_unresolved_waves() {
        for case in [Case::ShearWave, Case::TaylorGreen] {
            assert_eq!(fit_steps(&case, None, || 3).ok(), Some(MIN_FIT_STEPS));
            assert_eq!(fit_steps(&case, Some(10), || 500).ok(), Some(10));
            let e = fit_steps(&case, Some(9), || 500).unwrap_err().to_string();
            assert!(e.starts_with("steps = 9") && e.contains(case.name()), "{e}");
            let opts = CaseOptions {
                steps: Some(1),
                ..CaseOptions::default()
            };
            let e = check(&case, &opts).unwrap_err().to_string();
            assert!(e.starts_with("steps = 1"), "{e}");
            assert!(size_fits(&case, (4, 4)).is_ok());
            let e = size_fits(&case, (2, 2)).unwrap_err().to_string();
            assert!(
                e.starts_with("size = 2x2") && e.contains("at least 4"),
                "{e}"
            );
            let opts = CaseOptions {
                size: Some((3, 3)),
                ..CaseOptions::default()
            };
            let e = check(&case, &opts).unwrap_err().to_string();
            assert!(e.starts_with("size = 3x3"), "{e}");
        }
        // The shear wave runs along y only: a lattice 2 wide is fine.
        assert!(size_fits(&Case::ShearWave, (2, 64)).is_ok());
        assert!(size_fits(&Case::ShearWave, (64, 3)).is_err());
        // The wall-bounded cases need a fluid cell between their walls; Poiseuille's channel is periodic along x.
        assert!(size_fits(&Case::Poiseuille, (2, 3)).is_ok());
        assert!(size_fits(&Case::Cavity, (3, 3)).is_ok());
        let mask = Case::Mask("m.png".into());
        for (case, size) in [
            (&Case::Poiseuille, (4, 2)),
            (&Case::Cavity, (2, 9)),
            (&Case::Cavity, (9, 2)),
            (&mask, (2, 9)),
        ] {
            let e = size_fits(case, size).unwrap_err().to_string();
            assert!(
                e.contains("needs at least 3") && e.contains(case.name()),
                "{e}"
            );
        }
        let opts = CaseOptions {
            steps: Some(1),
            ..CaseOptions::default()
        };
        assert!(check(&Case::Cavity, &opts).is_ok());
    }

    #[test]
    fn checkpoint_meta_round_trips_the_velocity() {
        for u in [0.05, 0.1, 0.012_345_678_901_234_5, 1e-3] {
            let text = meta("cylinder", u);
            assert_eq!(parse_meta(&text), Ok((Some("cylinder"), Some(u))), "{text}");
        }
        // Checkpoints written before the velocity was recorded.
        assert_eq!(parse_meta("case=cavity"), Ok((Some("cavity"), None)));
        let e = parse_meta("case=cavity u=fast").expect_err("unreadable u accepted");
        assert!(e.contains("fast"), "{e}");
    }

    #[test]
    fn speed_defaults_per_case_and_rejects_bad_values() {
        let opts = CaseOptions::default();
        assert_eq!(speed(&Case::Cavity, &opts).ok(), Some(0.1));
        assert_eq!(speed(&Case::Cylinder, &opts).ok(), Some(0.05));
        for (u, needle) in [(0.0, "positive"), (f64::NAN, "positive"), (0.2, "Mach")] {
            let opts = CaseOptions {
                u: Some(u),
                ..CaseOptions::default()
            };
            let e = speed(&Case::ShearWave, &opts)
                .expect_err("bad velocity accepted")
                .to_string();
            assert!(e.contains(needle), "{u}: {e}");
        }
    }
}
