//! Shear-wave decay: u_x = u₀ sin(k y) decays as exp(−ν k² t); the fitted ν is compared with (1/ω − ½)/3.

use std::collections::BTreeMap;
use std::f64::consts::PI;

use bespoke_gpu::Gpu;

use super::{
    Case, CaseOptions, CaseRun, CollisionKind, Progress, Runner, Start, base_config, fit_steps,
    size_fits, size_of, speed, start,
};
use crate::error::Result;
use crate::fields::OwnFields;
use crate::flags::Flags;

/// Initial amplitude in lattice units (default).
pub(super) const U0: f64 = 0.01;

/// Projection of the x-averaged u_x onto sin(k y).
fn amplitude(r: &Runner<'_, '_>, f: &OwnFields, k: f64) -> Result<f64> {
    let (mut num, mut den) = (0.0, 0.0);
    for (y, mean) in r.row_means(f, &f.ux)?.into_iter().enumerate() {
        let s = (k * y as f64).sin();
        num += mean * s;
        den += s * s;
    }
    Ok(num / den)
}

pub(super) fn run<'g>(
    gpu: &'g Gpu,
    case: &Case,
    opts: &CaseOptions,
    progress: Progress<'_>,
) -> Result<CaseRun<'g>> {
    let (nx, ny) = size_of(case, opts);
    size_fits(case, (nx, ny))?;
    let omega = opts.omega.unwrap_or(1.0);
    let k = 2.0 * PI / ny as f64;
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
        |_, y| (1.0, [u0 * (k * y as f64).sin(), 0.0]),
    )?;
    let cfg = lat.config().clone();
    let k = 2.0 * PI / cfg.ny as f64;
    let nu = cfg.collision.viscosity();
    // Default: long enough for the amplitude to fall by e (at most 20 000 steps).
    let steps = fit_steps(case, opts.steps, || {
        ((1.0 / (nu * k * k)).round() as u64).clamp(200, 20_000)
    })?;
    let mut r = Runner::new("shear-wave", lat, u, steps, progress, opts)?;
    // Skip the first fifth: an equilibrium start lacks the non-equilibrium part and rings briefly. (A resumed
    // run fits from where it starts.)
    let t1 = (steps / 5).max(r.done);
    r.run_to(t1)?;
    let a1 = {
        let f = r.fields()?; // dropped here: a second read must not find it alive
        amplitude(&r, &f, k)?
    };
    r.run_to(steps)?;
    let a2 = {
        let f = r.fields()?; // dropped here: a second read must not find it alive
        amplitude(&r, &f, k)?
    };
    let measured = (a1 / a2).ln() / (k * k * (steps - t1) as f64);
    let mut m = BTreeMap::new();
    m.insert("nu_measured".into(), measured);
    m.insert("nu_expected".into(), nu);
    m.insert("nu_rel_err".into(), (measured - nu).abs() / nu);
    let notes = vec![format!(
        "ν fitted from the sin(2πy/ny) amplitude of the x-averaged u_x between steps {t1} and {steps}"
    )];
    r.finish("shear-wave", m, notes)
}
