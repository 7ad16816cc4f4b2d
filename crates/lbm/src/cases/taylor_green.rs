//! Taylor–Green vortex: kinetic energy decays as exp(−4νk²t), k = 2π/L on a periodic L × L box.

use std::collections::BTreeMap;
use std::f64::consts::PI;

use bespoke_gpu::Gpu;

use super::{
    Case, CaseOptions, CaseRun, CollisionKind, Progress, Runner, Start, base_config, fit_steps,
    size_fits, size_of, speed, start,
};
use crate::error::{LbmError, Result};
use crate::fields::OwnFields;
use crate::flags::Flags;

/// Peak velocity in lattice units (default).
pub(super) const U0: f64 = 0.03;

/// Kinetic energy of the domain, summed exactly over every rank's own cells.
fn energy(r: &Runner<'_, '_>, f: &OwnFields) -> Result<f64> {
    r.sum_cells(f, |i| {
        0.5 * f64::from(f.rho[i]) * f64::from(f.ux[i] * f.ux[i] + f.uy[i] * f.uy[i])
    })
}

pub(super) fn run<'g>(
    gpu: &'g Gpu,
    case: &Case,
    opts: &CaseOptions,
    progress: Progress<'_>,
) -> Result<CaseRun<'g>> {
    let (nx, ny) = size_of(case, opts);
    if nx != ny {
        return Err(LbmError::param(
            "size",
            format!("{nx}x{ny}"),
            "the Taylor–Green case needs a square box",
        ));
    }
    size_fits(case, (nx, ny))?;
    let omega = opts.omega.unwrap_or(1.0);
    let k = 2.0 * PI / nx as f64;
    let u0 = speed(case, opts)?;
    let Start { lat, u, .. } = start(
        gpu,
        case,
        opts,
        u0,
        omega,
        || {
            let c = opts.collision.unwrap_or(CollisionKind::Bgk).with(omega);
            Ok((base_config(opts, nx, ny, c), Flags::fluid(nx, ny)))
        },
        |x, y| {
            let (x, y) = (k * x as f64, k * y as f64);
            let rho = 1.0 - 0.75 * u0 * u0 * ((2.0 * x).cos() + (2.0 * y).cos());
            (rho, [-u0 * x.cos() * y.sin(), u0 * x.sin() * y.cos()])
        },
    )?;
    let cfg = lat.config().clone();
    let k = 2.0 * PI / cfg.nx as f64;
    let nu = cfg.collision.viscosity();
    let rate = 4.0 * nu * k * k;
    let steps = fit_steps(case, opts.steps, || {
        ((1.0 / rate).round() as u64).clamp(200, 20_000)
    })?;
    let mut r = Runner::new("taylor-green", lat, u, steps, progress, opts)?;
    // From the first fifth, or from where a resumed run starts.
    let t1 = (steps / 5).max(r.done);
    r.run_to(t1)?;
    let e1 = {
        let f = r.fields()?; // dropped here: a second read must not find it alive
        energy(&r, &f)?
    };
    r.run_to(steps)?;
    let e2 = {
        let f = r.fields()?; // dropped here: a second read must not find it alive
        energy(&r, &f)?
    };
    let measured = (e1 / e2).ln() / (steps - t1) as f64;
    let mut m = BTreeMap::new();
    m.insert("decay_rate_measured".into(), measured);
    m.insert("decay_rate_expected".into(), rate);
    m.insert("decay_rate_rel_err".into(), (measured - rate).abs() / rate);
    let notes = vec![format!(
        "kinetic-energy decay rate fitted between steps {t1} and {steps}; expected 4νk²"
    )];
    r.finish("taylor-green", m, notes)
}
