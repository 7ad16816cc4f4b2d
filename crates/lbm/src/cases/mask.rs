//! Channel flow past obstacles read from a PNG: uniform inflow on the left, density outlet on the right, walls
//! top and bottom.

use std::collections::BTreeMap;
use std::path::Path;

use bespoke_gpu::Gpu;

use super::{
    Case, CaseOptions, CaseRun, CollisionKind, Progress, Runner, Start, base_config, omega_from,
    size_or, speed, start,
};
use crate::error::Result;
use crate::flags::{Cell, Flags};

/// Mean inflow speed in lattice units (default).
pub(super) const U_IN: f64 = 0.05;

pub(super) fn run<'g>(
    gpu: &'g Gpu,
    case: &Case,
    png: &Path,
    opts: &CaseOptions,
    progress: Progress<'_>,
) -> Result<CaseRun<'g>> {
    let (nx, ny) = size_or(opts, (400, 100));
    // Re on the channel height.
    let u = speed(case, opts)?;
    let omega = omega_from(opts, u, ny as f64 - 2.0, Some(100.0), 1.0)?;
    let mut walls = 0;
    let Start { lat, u, .. } = start(
        gpu,
        case,
        opts,
        u,
        || {
            let c = opts.collision.unwrap_or(CollisionKind::Trt).with(omega);
            let mut flags = Flags::fluid(nx, ny);
            walls = flags.add_png_mask(png)?;
            flags.channel_walls();
            for y in 1..ny - 1 {
                flags.set(0, y, Cell::Inlet([u, 0.0]));
                flags.set(nx - 1, y, Cell::Outlet(1.0));
            }
            Ok((base_config(opts, nx, ny, c), flags))
        },
        |_, _| (1.0, [u, 0.0]),
    )?;
    // One flow-through time.
    let steps = opts
        .steps
        .unwrap_or((lat.config().nx as f64 / u).round() as u64);
    let mut r = Runner::new(lat, u, steps, progress, opts);
    r.run(steps)?;
    let f = r.fields()?;
    let flags = r.lat.flags();
    let speed = f.speed();
    let max_speed = (0..f.nx * f.ny)
        .filter(|&k| !flags.cells()[k].is_solid())
        .map(|k| f64::from(speed[k]))
        .fold(0.0, f64::max); // finite: `fields()` rejected NaN
    let mut m = BTreeMap::new();
    m.insert("max_speed".into(), max_speed);
    m.insert("mask_wall_cells".into(), walls as f64);
    m.insert(
        "re".into(),
        u * (f.ny as f64 - 2.0) / r.lat.config().collision.viscosity(),
    );
    let notes = vec!["Re on the channel height; obstacles from the mask's dark pixels".into()];
    r.finish("mask", m, notes)
}
