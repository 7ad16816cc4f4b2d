//! Force-driven channel between half-way bounce-back walls: u(y) = g·y(H−y)/(2ν), y from the wall.

use std::collections::BTreeMap;

use bespoke_gpu::Gpu;

use super::{
    Case, CaseOptions, CaseRun, CollisionKind, Progress, Runner, STEADY_ULPS, Start, base_config,
    size_fits, size_of, speed, start,
};
use crate::error::Result;
use crate::flags::Flags;

/// Centreline speed in lattice units (default); the body force is set to give it.
pub(super) const U_MAX: f64 = 0.02;
/// Steady when one check interval changes u by less than this fraction of u_max.
const STEADY: f64 = 1e-7;

pub(super) fn run<'g>(
    gpu: &'g Gpu,
    case: &Case,
    opts: &CaseOptions,
    progress: Progress<'_>,
) -> Result<CaseRun<'g>> {
    let (nx, ny) = size_of(case, opts);
    size_fits(case, (nx, ny))?;
    let omega = opts.omega.unwrap_or(1.0);
    let u_max = speed(case, opts)?;
    let Start { mut lat, u, .. } = start(
        gpu,
        case,
        opts,
        u_max,
        omega,
        || {
            let collision = opts.collision.unwrap_or(CollisionKind::Trt).with(omega);
            let h = (ny as f64 - 2.0).max(1.0);
            let nu = collision.viscosity();
            let mut cfg = base_config(opts, nx, ny, collision);
            cfg.force = [8.0 * nu * u_max / (h * h), 0.0];
            let mut flags = Flags::fluid(nx, ny);
            flags.channel_walls();
            Ok((cfg, flags))
        },
        |_, _| (1.0, [0.0, 0.0]),
    )?;
    let cfg = lat.config().clone();
    // The force holds the centreline at u_max, checked against the Mach limit by `speed`: however large the force
    // a narrow channel needs (8νu/H²: 0.027 at H = 1, ω = 1), the walls keep the flow from passing the limit.
    if let Some(w) = cfg.force_warning() {
        lat.withdraw(&w);
    }
    let h = cfg.ny as f64 - 2.0;
    let nu = cfg.collision.viscosity();
    let g = cfg.force[0];
    let exact = |y: usize| {
        let s = y as f64 - 0.5;
        g * s * (h - s) / (2.0 * nu)
    };
    let umax = g * h * h / (8.0 * nu);
    let max_steps = opts.steps.unwrap_or(((40.0 * h * h / nu) as u64).max(2000));
    // The check interval follows the channel's diffusion time H²/ν; where it is cut to 5000 steps the tolerance
    // shrinks with it, so a wide channel still far from its profile (whose change per interval is then small for
    // the interval's shortness) does not read as steady.
    let natural = h * h / (20.0 * nu);
    let interval = (natural as u64).clamp(50, 5000);
    let tol = STEADY * (interval as f64 / natural).min(1.0);
    let mut r = Runner::new("poiseuille", lat, u, max_steps, progress, opts)?;
    let (converged, change) = r.run_to_steady(max_steps, interval, umax, tol)?;
    // x-averaged u_x of each row.
    let f = r.fields()?;
    let p = r.row_means(&f, &f.ux)?;
    let err = (1..cfg.ny - 1)
        .map(|y| (p[y] - exact(y)).abs())
        .fold(0.0, f64::max)
        / umax;
    let mut m = BTreeMap::new();
    m.insert("profile_rel_err".into(), err);
    m.insert("converged".into(), f64::from(u8::from(converged)));
    m.insert("steady_change".into(), change);
    m.insert("u_max".into(), umax);
    let notes = vec![format!(
        "steady when {interval} steps change u by < {tol:.1e}·u_max or ≤ {STEADY_ULPS} f32 ulps ({}); error = max |u − u_exact| / u_max over \
         fluid rows, walls half-way",
        if converged {
            "reached"
        } else {
            "NOT reached within the step limit"
        }
    )];
    drop(f); // before `finish` reads the fields again
    r.finish("poiseuille", m, notes)
}
