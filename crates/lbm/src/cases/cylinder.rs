//! Schäfer–Turek 2D-2: channel 2.2 × 0.41, cylinder D = 0.1 at (0.2, 0.2), parabolic inflow of mean velocity 1,
//! Re = 100. Reports the Strouhal number from the wake's transverse velocity and the pressure drop across the
//! cylinder.

use std::collections::BTreeMap;

use bespoke_gpu::Gpu;

use super::{
    Case, CaseOptions, CaseRun, CollisionKind, Progress, Runner, base_config, omega_from, start,
};
use crate::error::{LbmError, Result};
use crate::fields::Fields;
use crate::flags::{Cell, Flags};

/// Mean inflow speed in lattice units (peak 1.5× this: Mach 0.13).
const U_MEAN: f64 = 0.05;
const HEIGHT: f64 = 0.41;
const LENGTH: f64 = 2.2;
const DIAMETER: f64 = 0.1;
const CENTRE: [f64; 2] = [0.2, 0.2];

/// Physical length per cell for a lattice of `ny` rows (walls in rows 0 and ny − 1, half-way).
fn dx(ny: usize) -> f64 {
    HEIGHT / (ny as f64 - 2.0)
}

/// Physical position of cell (x, y): inlet cells at x = 0, walls half-way below row 1.
fn position(ny: usize, x: usize, y: usize) -> [f64; 2] {
    let h = dx(ny);
    [x as f64 * h, (y as f64 - 0.5) * h]
}

fn cell_of(ny: usize, p: [f64; 2]) -> [f64; 2] {
    let h = dx(ny);
    [p[0] / h, p[1] / h + 0.5]
}

pub(super) fn run<'g>(
    gpu: &'g Gpu,
    case: &Case,
    opts: &CaseOptions,
    progress: Progress<'_>,
) -> Result<CaseRun<'g>> {
    let (nx, ny) = match opts.size {
        Some(s) => s,
        None => {
            let ny = 84;
            ((LENGTH / dx(ny)).round() as usize + 1, ny)
        }
    };
    if ny < 12 || nx < 3 * ny {
        return Err(LbmError::param(
            "size",
            format!("{nx}x{ny}"),
            "the cylinder channel needs ny ≥ 12 and nx ≈ 5.4·ny (2.2 × 0.41)",
        ));
    }
    let d_cells = DIAMETER / dx(ny);
    let omega = omega_from(opts, U_MEAN, d_cells, Some(100.0), 1.0)?;
    let (lat, _) = start(
        gpu,
        case,
        opts,
        || {
            let c = opts.collision.unwrap_or(CollisionKind::Trt).with(omega);
            let mut flags = Flags::fluid(nx, ny);
            flags.channel_walls();
            let h = ny as f64 - 2.0;
            for y in 1..ny - 1 {
                let s = y as f64 - 0.5;
                let u = 6.0 * U_MEAN * s * (h - s) / (h * h);
                flags.set(0, y, Cell::Inlet([u, 0.0]));
                flags.set(nx - 1, y, Cell::Outlet(1.0));
            }
            let r2 = (DIAMETER / 2.0).powi(2);
            for y in 1..ny - 1 {
                for x in 1..nx - 1 {
                    let p = position(ny, x, y);
                    if (p[0] - CENTRE[0]).powi(2) + (p[1] - CENTRE[1]).powi(2) <= r2 {
                        flags.set(x, y, Cell::Wall);
                    }
                }
            }
            Ok((base_config(opts, nx, ny, c), flags))
        },
        |_, _| (1.0, [U_MEAN, 0.0]),
    )?;
    let cfg = lat.config().clone();
    let ny = cfg.ny;
    let h = dx(ny);
    let d_cells = DIAMETER / h;
    let nu = cfg.collision.viscosity();
    let re = U_MEAN * d_cells / nu;
    // One convective time D/U is d_cells/U_MEAN steps; shedding period ≈ 3.3 of them.
    let t_conv = d_cells / U_MEAN;
    let steps = opts
        .steps
        .unwrap_or((150.0 * t_conv).round() as u64)
        .max(100);
    let sample_every = ((t_conv / 40.0).round() as u64).max(1);
    let mut r = Runner::new(lat, steps, progress, opts);
    // Let the wake develop for the first half, sample the second.
    let settle = steps / 2;
    r.run(settle)?;
    let probe = cell_of(ny, [CENTRE[0] + 2.0 * DIAMETER, CENTRE[1]]);
    let front = cell_of(ny, [CENTRE[0] - DIAMETER / 2.0 - 0.5 * h, CENTRE[1]]);
    let back = cell_of(ny, [CENTRE[0] + DIAMETER / 2.0 + 0.5 * h, CENTRE[1]]);
    let (mut vs, mut dps) = (Vec::new(), Vec::new());
    while r.done < steps {
        r.run(sample_every.min(steps - r.done))?;
        let f: Fields = r.fields()?;
        vs.push((
            r.done as f64,
            Fields::sample(&f.uy, f.nx, f.ny, probe[0], probe[1]),
        ));
        let rf = Fields::sample(&f.rho, f.nx, f.ny, front[0], front[1]);
        let rb = Fields::sample(&f.rho, f.nx, f.ny, back[0], back[1]);
        dps.push((rf - rb) / 3.0);
    }
    // Upward zero crossings of the probe's v give the period.
    let crossings: Vec<f64> = vs
        .windows(2)
        .filter(|w| w[0].1 < 0.0 && w[1].1 >= 0.0)
        .map(|w| w[0].0 + (w[1].0 - w[0].0) * (-w[0].1) / (w[1].1 - w[0].1))
        .collect();
    let mut m = BTreeMap::new();
    m.insert("re".into(), re);
    let mut notes = vec![format!(
        "D = {d_cells:.1} cells, U_mean = {U_MEAN}; St from upward zero crossings of v two diameters behind the \
         cylinder over steps {settle}..{steps}; Δp = mean over the same window of p(front) − p(back), scaled by \
         (U_phys/U_lat)²"
    )];
    if crossings.len() >= 3 {
        let periods = (crossings.len() - 1) as f64;
        let period = (crossings[crossings.len() - 1] - crossings[0]) / periods;
        m.insert("strouhal".into(), d_cells / (period * U_MEAN));
        m.insert("periods".into(), periods);
    } else {
        notes.push(format!(
            "no periodic shedding seen ({} zero crossings): run more steps",
            crossings.len()
        ));
    }
    // Time-average over whole periods when there are any.
    let mean_dp = if crossings.len() >= 3 {
        let (t0, t1) = (crossings[0], crossings[crossings.len() - 1]);
        let sel: Vec<f64> = vs
            .iter()
            .zip(&dps)
            .filter(|((t, _), _)| *t >= t0 && *t <= t1)
            .map(|(_, d)| *d)
            .collect();
        sel.iter().sum::<f64>() / sel.len().max(1) as f64
    } else {
        dps.iter().sum::<f64>() / dps.len().max(1) as f64
    };
    m.insert("delta_p".into(), mean_dp / (U_MEAN * U_MEAN));
    r.finish("cylinder", m, notes)
}
