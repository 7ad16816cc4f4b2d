//! The model's validation: time the configurations of a shape's space and compare the model's pick with the
//! best found (E = pick GFLOP/s ÷ best GFLOP/s, as in Low et al. 2016).
//!
//! Two methods. `Exhaustive` times every configuration on the full shape. `Screened` is for shapes where that
//! takes hours on a slow adapter (4096³ runs ~100 s per configuration on lavapipe): every configuration is
//! timed once on a sample of C — a block of whole workgroup tiles with the full K and the full shape's strides,
//! so each workgroup does exactly the work it does in the full run — and the fastest few plus the model's pick
//! are then timed on the full shape. E is computed from full-shape timings only.

use bespoke_gpu::Gpu;

use super::bench::DenseTimer;
use super::choose::{CheckedPick, time_shortlist};
use super::model::{Machine, Prediction};
use super::params::{DenseParams, TileLimits};
use super::run::GemmShape;
pub use super::sample::{SAMPLE_FILLS, sample_shape};
use crate::dtype::DType;
use crate::error::{MmError, Result};

/// How a sweep times the space.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Method {
    /// Every configuration on the full shape, `reps` runs each.
    Exhaustive,
    /// Every configuration once on a sample of C (see [`sample_shape`]), then the `confirm` fastest and the
    /// model's pick on the full shape.
    Screened { sample_gflop: f64, confirm: usize },
}

/// A timing, or why the configuration could not run.
pub type Measured = std::result::Result<f64, String>;

/// One configuration of the sweep.
#[derive(Clone, Debug)]
pub struct SweepPoint {
    pub params: DenseParams,
    pub predicted: Prediction,
    /// Screened sweeps: the sampled sub-shape and its GFLOP/s.
    pub sample: Option<(GemmShape, Measured)>,
    /// GFLOP/s on the full shape; `None` when a screened sweep did not confirm the point.
    pub measured: Option<Measured>,
}

impl SweepPoint {
    /// Full-shape GFLOP/s when measured.
    pub fn gflops(&self) -> Option<f64> {
        self.measured
            .as_ref()
            .and_then(|m| m.as_ref().ok().copied())
    }
    /// Sampled GFLOP/s when screened.
    pub fn sample_gflops(&self) -> Option<f64> {
        self.sample
            .as_ref()
            .and_then(|(_, m)| m.as_ref().ok().copied())
    }
}

/// Every point, the model's pick and the best measured on the full shape.
#[derive(Clone, Debug)]
pub struct Sweep {
    pub shape: GemmShape,
    pub dtype: DType,
    pub method: Method,
    pub points: Vec<SweepPoint>,
    pub pick: usize,
    pub best: usize,
    /// The checked pick (`dense::choose`): of the check's list (the model's shortlist, one configuration per
    /// register-tile shape, with their twins), the check's own choice, made as `dense::choose` makes it (screened),
    /// or the fastest on the full shape (exhaustive).
    pub checked: usize,
    /// What the check timed (screened sweeps).
    pub check: Option<CheckedPick>,
}

impl Sweep {
    pub fn pick_gflops(&self) -> f64 {
        self.points[self.pick].gflops().unwrap_or(0.0)
    }
    pub fn best_gflops(&self) -> f64 {
        self.points[self.best].gflops().unwrap_or(0.0)
    }
    /// E = pick ÷ best.
    pub fn efficiency(&self) -> f64 {
        self.pick_gflops() / self.best_gflops()
    }
    pub fn checked_gflops(&self) -> f64 {
        self.points[self.checked].gflops().unwrap_or(0.0)
    }
    /// E of the checked pick: checked ÷ best.
    pub fn checked_efficiency(&self) -> f64 {
        self.checked_gflops() / self.best_gflops()
    }
    /// Configurations that ran on the full shape.
    pub fn timed(&self) -> usize {
        self.points.iter().filter(|p| p.gflops().is_some()).count()
    }
    /// Configurations that ran on their sample (0 for exhaustive sweeps).
    pub fn screened(&self) -> usize {
        self.points
            .iter()
            .filter(|p| p.sample_gflops().is_some())
            .count()
    }
    /// Rank of the model's pick among the points measured on the full shape (0 = fastest).
    pub fn pick_rank(&self) -> usize {
        let g = self.pick_gflops();
        self.points
            .iter()
            .filter(|p| p.gflops().is_some_and(|m| m > g))
            .count()
    }
    /// Rank of the model's pick in the screening (0 = fastest); `None` for exhaustive sweeps.
    pub fn pick_sample_rank(&self) -> Option<usize> {
        let g = self.points[self.pick].sample_gflops()?;
        Some(
            self.points
                .iter()
                .filter(|p| p.sample_gflops().is_some_and(|m| m > g))
                .count(),
        )
    }
}

/// Times the configurations the model considers for `shape` (β = 0), their kernels compiled first on every
/// core, and with `unrolled` each one's twin with its K steps spelled out ([`DenseParams::unrolled`]).
/// `progress(done, total)` is called after each timing.
#[allow(clippy::too_many_arguments)]
pub fn sweep(
    gpu: &Gpu,
    machine: &Machine,
    dtype: DType,
    shape: GemmShape,
    method: Method,
    reps: usize,
    unrolled: bool,
    progress: impl FnMut(usize, usize),
) -> Result<Sweep> {
    let limits = TileLimits::of(gpu);
    let mut space = machine.shape_space(dtype, &limits, &shape);
    if unrolled {
        space = space.into_iter().flat_map(|p| [p, p.unrolled()]).collect();
    }
    sweep_space(gpu, machine, dtype, shape, &space, method, reps, progress)
}

/// The point of `among` with the highest `rate` (None where none has one).
fn fastest(
    points: &[SweepPoint],
    among: &[usize],
    rate: impl Fn(&SweepPoint) -> Option<f64>,
) -> Option<usize> {
    among
        .iter()
        .copied()
        .filter_map(|i| rate(&points[i]).map(|g| (i, g)))
        .max_by(|a, b| a.1.total_cmp(&b.1))
        .map(|(i, _)| i)
}

/// [`sweep`] over a given space (the model picks within its configurations with K steps in a loop; where the
/// space holds unrolled twins, the check's replay times them as the check does on GPUs).
#[allow(clippy::too_many_arguments)]
pub fn sweep_space(
    gpu: &Gpu,
    machine: &Machine,
    dtype: DType,
    shape: GemmShape,
    space: &[DenseParams],
    method: Method,
    reps: usize,
    mut progress: impl FnMut(usize, usize),
) -> Result<Sweep> {
    let rolled: Vec<DenseParams> = space.iter().filter(|p| !p.unroll).copied().collect();
    let (pick_params, _) = machine.pick_in(&rolled, dtype.size(), &shape, false)?;
    let pick = space
        .iter()
        .position(|p| *p == pick_params)
        .ok_or_else(|| MmError::Shape("the model's pick is not in the space".into()))?;
    let twins = rolled.len() < space.len();
    let shortlisted: Vec<usize> =
        super::choose::check_list(machine, &rolled, dtype.size(), &shape, false, twins)
            .iter()
            .filter_map(|p| space.iter().position(|q| q == p))
            .collect();
    let timer = DenseTimer::new(gpu, dtype, shape)?;
    // Every configuration's kernels compiled first, on every core: on a GPU the driver's compiler, not the
    // device, is what thousands of candidates wait for; the timings below then find them compiled.
    bespoke_gpu::phase(
        format!("dense-sweep: {} configurations compiled", space.len()),
        || timer.compile(gpu, dtype, space),
    );
    // A device error ends the sweep; a configuration the device refuses is recorded and skipped.
    let run = |params: DenseParams, sub: GemmShape, reps: usize| -> Result<Measured> {
        timer.try_time_sub(gpu, params, sub, reps)
    };
    let mut points: Vec<SweepPoint> = space
        .iter()
        .map(|p| SweepPoint {
            params: *p,
            predicted: machine.predict(p, dtype.size(), &shape, false),
            sample: None,
            measured: None,
        })
        .collect();
    let mut check = None;
    let full: Vec<usize> = match method {
        Method::Exhaustive => (0..points.len()).collect(),
        Method::Screened {
            sample_gflop,
            confirm,
        } => {
            let total = points.len() + confirm + 1;
            let started = std::time::Instant::now();
            for (i, pt) in points.iter_mut().enumerate() {
                let sub = sample_shape(machine, &pt.params, &shape, sample_gflop);
                pt.sample = Some((sub, run(pt.params, sub, 1)?));
                progress(i + 1, total);
            }
            bespoke_gpu::phase_since(
                format!("dense-sweep: {} samples timed", points.len()),
                started,
            );
            let mut order: Vec<usize> = (0..points.len())
                .filter(|&i| points[i].sample_gflops().is_some())
                .collect();
            order.sort_by(|&a, &b| {
                let g = |i: usize| points[i].sample_gflops().unwrap_or(0.0);
                g(b).total_cmp(&g(a))
            });
            order.truncate(confirm.max(1));
            if !order.contains(&pick) {
                order.push(pick);
            }
            // The checked pick as `dense::choose` makes it: the list's samples in turn, the two fastest again.
            let list: Vec<DenseParams> = shortlisted.iter().map(|&i| points[i].params).collect();
            let c = time_shortlist(gpu, machine, &timer, &list)?;
            let checked = space.iter().position(|p| *p == c.params).unwrap_or(pick);
            check = Some(c);
            if !order.contains(&checked) {
                order.push(checked);
            }
            order
        }
    };
    let (offset, total) = match method {
        Method::Exhaustive => (0, points.len()),
        Method::Screened { .. } => (points.len(), points.len() + full.len()),
    };
    for (j, &i) in full.iter().enumerate() {
        points[i].measured = Some(run(points[i].params, shape, reps)?);
        progress(offset + j + 1, total);
    }
    let best = (0..points.len())
        .max_by(|&a, &b| {
            let g = |i: usize| points[i].gflops().unwrap_or(0.0);
            g(a).total_cmp(&g(b))
        })
        .unwrap_or(pick);
    if points[best].gflops().is_none() {
        let why = points
            .iter()
            .find_map(|p| p.measured.clone().and_then(|m| m.err()))
            .unwrap_or_default();
        return Err(MmError::Shape(format!(
            "no configuration of {shape} ran: {why}"
        )));
    }
    // Exhaustive: the list's fastest on the full shape; screened: the check's own choice, above.
    let checked = match &check {
        Some(c) => space.iter().position(|p| *p == c.params),
        None => fastest(&points, &shortlisted, SweepPoint::gflops),
    }
    .unwrap_or(pick);
    Ok(Sweep {
        shape,
        dtype,
        method,
        points,
        pick,
        best,
        checked,
        check,
    })
}
