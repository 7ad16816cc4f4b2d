//! Lid-driven square cavity, compared with Ghia, Ghia & Shin (1982) along the centrelines.

use std::collections::{BTreeMap, HashMap};

use bespoke_gpu::Gpu;

use super::{
    Case, CaseOptions, CaseRun, CollisionKind, Progress, Runner, Start, base_config, omega_from,
    size_fits, size_of, speed, start,
};
use crate::config::Storage;
use crate::error::{LbmError, Result};
use crate::fields::Fields;
use crate::flags::{Cell, Flags};

/// The reference table (copied from the paper's Tables I and II).
pub const GHIA_CSV: &str = include_str!("../../data/ghia1982.csv");
/// Lid speed in lattice units (default).
pub(super) const LID: f64 = 0.1;
/// Steady when 1000 steps change u by less than this fraction of the lid speed.
const STEADY: f64 = 1e-6;
/// The same for f16 storage, whose rounding keeps u moving by about 4e-4·U per 1000 steps at steady state
/// (measured at Re 100, 128²), so 1e-6 is never reached.
const STEADY_F16: f64 = 1e-3;
const INTERVAL: u64 = 1000;

/// (coordinate, value) pairs along a centreline.
pub type Profile = Vec<(f64, f64)>;

/// Ghia's points for `re` (100, 400 or 1000): (u along x = ½ at y, v along y = ½ at x).
pub fn ghia_table(re: f64) -> Option<(Profile, Profile)> {
    let col = [100.0, 400.0, 1000.0].iter().position(|&r| r == re)? + 2;
    let (mut u, mut v) = (Vec::new(), Vec::new());
    for line in GHIA_CSV
        .lines()
        .filter(|l| l.starts_with("u,") || l.starts_with("v,"))
    {
        let parts: Vec<&str> = line.split(',').collect();
        let (Some(c), Some(val)) = (
            parts.get(1).and_then(|s| s.parse::<f64>().ok()),
            parts.get(col).and_then(|s| s.parse::<f64>().ok()),
        ) else {
            continue;
        };
        if parts[0] == "u" {
            u.push((c, val))
        } else {
            v.push((c, val))
        }
    }
    Some((u, v))
}

/// RMS of (sampled − reference) at the interior reference points (wall values are imposed, not computed), and
/// the largest deviation with its coordinate.
fn rms(points: &[(f64, f64)], sample: impl Fn(f64) -> f64) -> (f64, f64, f64) {
    let dev: Vec<(f64, f64)> = points
        .iter()
        .filter(|(c, _)| *c > 0.0 && *c < 1.0)
        .map(|(c, want)| (*c, sample(*c) - want))
        .collect();
    let rms = (dev.iter().map(|(_, d)| d * d).sum::<f64>() / dev.len() as f64).sqrt();
    let (at, worst) = dev.iter().fold(
        (0.0, 0.0),
        |m, &(c, d)| if d.abs() > m.1 { (c, d.abs()) } else { m },
    );
    (rms, worst, at)
}

pub(super) fn run<'g>(
    gpu: &'g Gpu,
    case: &Case,
    opts: &CaseOptions,
    progress: Progress<'_>,
) -> Result<CaseRun<'g>> {
    let (nx, ny) = size_of(case, opts);
    size_fits(case, (nx, ny))?;
    if nx != ny {
        return Err(LbmError::param(
            "size",
            format!("{nx}x{ny}"),
            "the cavity case needs a square box",
        ));
    }
    let l = nx as f64 - 2.0;
    let lid = speed(case, opts)?;
    let omega = omega_from(opts, lid, l, Some(100.0), 1.0)?;
    let Start {
        lat,
        resumed,
        u: lid,
    } = start(
        gpu,
        case,
        opts,
        lid,
        omega,
        || {
            let c = opts.collision.unwrap_or(CollisionKind::Trt).with(omega);
            let mut flags = Flags::fluid(nx, ny);
            flags.box_walls();
            for x in 1..nx - 1 {
                flags.set(x, ny - 1, Cell::MovingWall([lid, 0.0]));
            }
            Ok((base_config(opts, nx, ny, c), flags))
        },
        |_, _| (1.0, [0.0, 0.0]),
    )?;
    let cfg = lat.config().clone();
    let l = cfg.nx as f64 - 2.0;
    let nu = cfg.collision.viscosity();
    let re = lid * l / nu;
    let max_steps = opts.steps.unwrap_or((200_000.0 * LID / lid).round() as u64);
    let mut r = Runner::new("cavity", lat, lid, max_steps, progress, opts)?;
    let steady = match cfg.storage {
        Storage::F32 => STEADY,
        Storage::F16 => STEADY_F16,
    };
    let (converged, change) = r.run_to_steady(max_steps, INTERVAL, lid, steady)?;
    let mut m = BTreeMap::new();
    m.insert("re".into(), re);
    m.insert("converged".into(), f64::from(u8::from(converged)));
    m.insert("steady_change".into(), change);
    let mut notes = vec![format!(
        "steady when {INTERVAL} steps change u by < {steady:e}·U ({}){}",
        if converged {
            "reached"
        } else {
            "NOT reached within the step limit"
        },
        if resumed {
            "; resumed from a checkpoint"
        } else {
            ""
        }
    )];
    // Unit-square coordinate c ↦ cell coordinate: walls half-way at 0.5 and l + 0.5.
    let cell = |c: f64| 0.5 + c * l;
    let near = |a: f64, b: f64| (a - b).abs() < 1e-9 * b.max(1.0);
    match [100.0, 400.0, 1000.0]
        .into_iter()
        .find(|&g| near(re, g))
        .and_then(ghia_table)
    {
        Some((u_ref, v_ref)) => {
            // The cells of the centreline points' bilinear interpolation, probed on the ranks that own them
            // (the probe's ρ and u are the macroscopic pass's bits).
            let (nx, ny) = (cfg.nx, cfg.ny);
            let on_u = |y: f64| Fields::bilinear(nx, ny, cell(0.5), cell(y));
            let on_v = |x: f64| Fields::bilinear(nx, ny, cell(x), cell(0.5));
            let cells: Vec<(usize, usize)> = (u_ref.iter().map(|p| on_u(p.0)))
                .chain(v_ref.iter().map(|p| on_v(p.0)))
                .flat_map(|w| w.map(|(c, _)| c))
                .collect();
            let probe = r.lat.probe(&cells, &[])?;
            let points = r.lat.read_probe(&probe)?.points;
            let u: HashMap<_, _> = cells
                .into_iter()
                .zip(points.into_iter().map(|p| p.1))
                .collect();
            // What `Fields::sample` gives on the whole field: component 0 is u_x, 1 u_y.
            let sample = |w: [((usize, usize), f64); 4], c: usize| -> f64 {
                w.iter().map(|&(p, w)| w * u[&p][c]).sum()
            };
            let (ru, wu, au) = rms(&u_ref, |y| sample(on_u(y), 0) / lid);
            let (rv, wv, av) = rms(&v_ref, |x| sample(on_v(x), 1) / lid);
            m.insert("ghia_rms_u".into(), ru);
            m.insert("ghia_rms_v".into(), rv);
            m.insert("ghia_max_dev_u".into(), wu);
            m.insert("ghia_max_dev_u_at_y".into(), au);
            m.insert("ghia_max_dev_v".into(), wv);
            m.insert("ghia_max_dev_v_at_x".into(), av);
            notes.push(
                "RMS of u/U and v/U against Ghia et al. at their interior centreline points".into(),
            );
        }
        None => notes.push(format!(
            "Re = {re} has no Ghia table (100, 400, 1000): no comparison"
        )),
    }
    r.finish("cavity", m, notes)
}
