//! The model's validation: time every configuration of a shape's space and compare the model's pick with the
//! best found (E = pick GFLOP/s ÷ best GFLOP/s, as in Low et al. 2016).

use bespoke_gpu::Gpu;

use super::bench::DenseTimer;
use super::model::{Machine, Prediction};
use super::params::{DenseParams, TileLimits};
use super::run::GemmShape;
use crate::dtype::DType;
use crate::error::{MmError, Result};

/// One timed configuration.
#[derive(Clone, Debug)]
pub struct SweepPoint {
    pub params: DenseParams,
    pub predicted: Prediction,
    /// Measured GFLOP/s, or why it could not run.
    pub measured: std::result::Result<f64, String>,
}

/// Every point, the model's pick and the best measured.
#[derive(Clone, Debug)]
pub struct Sweep {
    pub shape: GemmShape,
    pub dtype: DType,
    pub points: Vec<SweepPoint>,
    pub pick: usize,
    pub best: usize,
}

impl Sweep {
    pub fn pick_gflops(&self) -> f64 {
        self.points[self.pick].measured.clone().unwrap_or(0.0)
    }
    pub fn best_gflops(&self) -> f64 {
        self.points[self.best].measured.clone().unwrap_or(0.0)
    }
    /// E = pick ÷ best.
    pub fn efficiency(&self) -> f64 {
        self.pick_gflops() / self.best_gflops()
    }
    /// Configurations that ran.
    pub fn timed(&self) -> usize {
        self.points.iter().filter(|p| p.measured.is_ok()).count()
    }
    /// Rank of the model's pick among the measured points (0 = fastest).
    pub fn pick_rank(&self) -> usize {
        let g = self.pick_gflops();
        self.points
            .iter()
            .filter(|p| p.measured.as_ref().is_ok_and(|m| *m > g))
            .count()
    }
}

/// Times every configuration the model considers for `shape` (β = 0), `reps` runs each after a warm-up.
/// `progress(done, total)` is called after each.
pub fn sweep(
    gpu: &Gpu,
    machine: &Machine,
    dtype: DType,
    shape: GemmShape,
    reps: usize,
    progress: impl FnMut(usize, usize),
) -> Result<Sweep> {
    let limits = TileLimits::of(gpu);
    let space = machine.shape_space(dtype, &limits, &shape);
    sweep_space(gpu, machine, dtype, shape, &space, reps, progress)
}

/// [`sweep`] over a given space (the model picks within it).
pub fn sweep_space(
    gpu: &Gpu,
    machine: &Machine,
    dtype: DType,
    shape: GemmShape,
    space: &[DenseParams],
    reps: usize,
    mut progress: impl FnMut(usize, usize),
) -> Result<Sweep> {
    let (pick_params, _) = machine.pick_in(space, dtype.size(), &shape, false)?;
    let timer = DenseTimer::new(gpu, dtype, shape)?;
    let mut points = Vec::with_capacity(space.len());
    for (i, params) in space.iter().enumerate() {
        let measured = match timer.time(gpu, *params, reps) {
            Ok(t) => Ok(t.gflops),
            // A device error ends the sweep; a configuration the device refuses is recorded and skipped.
            Err(MmError::Gpu(e @ bespoke_gpu::GpuError::DeviceLost(_))) => return Err(e.into()),
            Err(e) => Err(e.to_string()),
        };
        points.push(SweepPoint {
            params: *params,
            predicted: machine.predict(params, dtype.size(), &shape, false),
            measured,
        });
        progress(i + 1, space.len());
    }
    let pick = points
        .iter()
        .position(|p| p.params == pick_params)
        .ok_or_else(|| MmError::Shape("the model's pick is not in the space".into()))?;
    let best = (0..points.len())
        .max_by(|&a, &b| {
            let g = |i: usize| points[i].measured.clone().unwrap_or(0.0);
            g(a).total_cmp(&g(b))
        })
        .unwrap_or(pick);
    if points[best].measured.is_err() {
        return Err(MmError::Shape(format!(
            "no configuration of {shape:?} ran: {}",
            points[best].measured.clone().err().unwrap_or_default()
        )));
    }
    Ok(Sweep {
        shape,
        dtype,
        points,
        pick,
        best,
    })
}
