//! Channel flow past obstacles read from a PNG: uniform inflow on the left, density outlet on the right, walls
//! top and bottom. Reports the force on the obstacles (momentum exchange, averaged over the last fifth of the run).

use std::collections::BTreeMap;
use std::path::Path;

use bespoke_gpu::Gpu;

use super::{
    Case, CaseOptions, CaseRun, CollisionKind, Progress, Runner, Start, base_config, omega_from,
    size_fits, size_of, speed, start,
};
use crate::error::{LbmError, Result};
use crate::flags::{Cell, Flags};

/// Mean inflow speed in lattice units (default).
pub(super) const U_IN: f64 = 0.05;

/// Whether fluid can flow from the inlet column to the outlet column: a path of fluid cells along the D2Q9
/// links (the eight neighbours; a diagonal link passes between two solid cells as its populations do) from a
/// fluid neighbour of an inlet cell to a fluid neighbour of an outlet cell. Edges are not crossed (the lattice
/// wraps, but no population streams from the outlet into the inlet's equilibrium).
fn inlet_reaches_outlet(flags: &Flags) -> bool {
    let (nx, ny) = (flags.nx(), flags.ny());
    let neighbours = move |x: usize, y: usize| {
        (-1i64..=1)
            .flat_map(move |dy| (-1i64..=1).map(move |dx| (x as i64 + dx, y as i64 + dy)))
            .filter(move |&(a, b)| (a, b) != (x as i64, y as i64))
            .filter(move |&(a, b)| a >= 0 && b >= 0 && (a as usize) < nx && (b as usize) < ny)
            .map(|(a, b)| (a as usize, b as usize))
    };
    let mut seen = vec![false; nx * ny];
    let mut stack = Vec::new();
    for y in 0..ny {
        for x in 0..nx {
            if matches!(flags.get(x, y), Cell::Inlet(_)) {
                for (a, b) in neighbours(x, y) {
                    if flags.get(a, b) == Cell::Fluid && !seen[b * nx + a] {
                        seen[b * nx + a] = true;
                        stack.push((a, b));
                    }
                }
            }
        }
    }
    while let Some((x, y)) = stack.pop() {
        for (a, b) in neighbours(x, y) {
            match flags.get(a, b) {
                Cell::Outlet(_) => return true,
                Cell::Fluid if !seen[b * nx + a] => {
                    seen[b * nx + a] = true;
                    stack.push((a, b));
                }
                _ => {}
            }
        }
    }
    false
}

pub(super) fn run<'g>(
    gpu: &'g Gpu,
    case: &Case,
    png: &Path,
    opts: &CaseOptions,
    progress: Progress<'_>,
) -> Result<CaseRun<'g>> {
    let (nx, ny) = size_of(case, opts);
    size_fits(case, (nx, ny))?;
    // Re on the channel height.
    let u = speed(case, opts)?;
    let omega = omega_from(opts, u, ny as f64 - 2.0, Some(100.0), 1.0)?;
    let mut walls = 0;
    let Start { lat, u, resumed } = start(
        gpu,
        case,
        opts,
        u,
        omega,
        || {
            let c = opts.collision.unwrap_or(CollisionKind::Trt).with(omega);
            let mut flags = Flags::fluid(nx, ny);
            walls = if opts.interpolated_mask {
                flags.add_png_mask_interpolated(png)?
            } else {
                flags.add_png_mask(png)?
            };
            flags.channel_walls();
            for y in 1..ny - 1 {
                flags.set(0, y, Cell::Inlet([u, 0.0]));
                flags.set(nx - 1, y, Cell::Outlet(1.0));
            }
            // Where the image reaches the domain's edge, the edge's cells win.
            flags.prune_wall_distances();
            if !inlet_reaches_outlet(&flags) {
                return Err(LbmError::param(
                    "mask",
                    png.display(),
                    format!(
                        "its walls close the {nx}x{ny} channel: no path of fluid cells joins the inlet (x = 0) to \
                         the outlet (x = {}), so nothing could flow; lighten the image or make the lattice finer",
                        nx - 1
                    ),
                ));
            }
            Ok((base_config(opts, nx, ny, c), flags))
        },
        |_, _| (1.0, [u, 0.0]),
    )?;
    // One flow-through time.
    let steps = opts
        .steps
        .unwrap_or((lat.config().nx as f64 / u).round() as u64);
    let mut r = Runner::new("mask", lat, u, steps, progress, opts)?;
    // The obstacles: solid cells off the channel walls (rows 0 and ny − 1), and the links into them.
    let flags = r.lat.flags();
    let fny = flags.ny();
    let off_walls = |y: usize| y > 0 && y < fny - 1;
    let links = flags.links_into(|_, y| off_walls(y));
    let height = (1..fny - 1)
        .filter(|&y| (0..flags.nx()).any(|x| flags.get(x, y).is_solid()))
        .count() as f64;
    if resumed {
        // The PNG was not read: count the obstacle cells the checkpoint holds.
        walls = (0..flags.nx() * fny)
            .filter(|&k| off_walls(k / flags.nx()) && flags.cell(k).is_solid())
            .count();
    }
    // The force is averaged over the last fifth (a resumed run: from where it starts).
    let settle = (steps - steps / 5).max(r.done);
    r.run_to(settle)?;
    let mut force = None;
    if !links.is_empty() {
        let probe = r.lat.probe(&[], &links)?;
        let every = ((steps - settle) / 100).max(1);
        let (mut sum, mut k) = ([0.0; 2], 0);
        while r.done < steps {
            r.run(every.min(steps - r.done))?;
            let p = r.lat.read_probe(&probe)?;
            sum = [sum[0] + p.force[0], sum[1] + p.force[1]];
            k += 1;
        }
        force = (k > 0).then(|| [sum[0] / f64::from(k), sum[1] / f64::from(k)]);
    } else {
        r.run_to(steps)?;
    }
    let f = r.fields()?;
    let flags = r.lat.flags();
    let max_speed = f
        .cells()
        .filter(|&(x, y, _)| !flags.get(x, y).is_solid())
        .map(|(_, _, k)| f64::from(f.ux[k].hypot(f.uy[k])))
        .fold(0.0, f64::max); // finite: `fields()` rejected NaN
    let max_speed = r.lat.max_over_ranks(max_speed)?;
    let mut m = BTreeMap::new();
    m.insert("max_speed".into(), max_speed);
    m.insert("mask_wall_cells".into(), walls as f64);
    m.insert(
        "re".into(),
        u * (f.domain[1] as f64 - 2.0) / r.lat.config().collision.viscosity(),
    );
    let mut notes = vec![format!(
        "Re on the channel height; obstacles from the mask's {}",
        if flags.has_wall_distances() {
            "50 % lightness contour, interpolated bounce-back"
        } else {
            "dark pixels, staircase"
        }
    )];
    if resumed {
        notes.push(
            "resumed from a checkpoint: mask_wall_cells counts its solid cells off the channel walls".into(),
        );
    }
    match force {
        Some(fv) => {
            // Per unit depth, on the obstacles' frontal height (rows they occupy).
            let coef = 2.0 / (u * u * height);
            m.insert("force_x".into(), fv[0]);
            m.insert("force_y".into(), fv[1]);
            m.insert("drag_coefficient".into(), coef * fv[0]);
            m.insert("lift_coefficient".into(), coef * fv[1]);
            notes.push(format!(
                "force on the obstacles by momentum exchange on their {} links, mean over the last fifth of the \
                 run; coefficients 2F/(ρ u² h) with h = {height} rows of obstacle",
                links.len()
            ));
        }
        None if links.is_empty() => {
            notes.push("no obstacle off the channel walls: no force".into())
        }
        None => notes.push("too few steps to average the force (fewer than 5)".into()),
    }
    drop(f); // before `finish` reads the fields again
    r.finish("mask", m, notes)
}

#[cfg(test)]
mod tests {
    use super::inlet_reaches_outlet;
    use crate::flags::{Cell, Flags};

    /// A channel 12 × 8 with its inlet and outlet, walls top and bottom, and `wall` cells set solid.
    fn channel(walls: &[(usize, usize)]) -> Flags {
        let (nx, ny) = (12, 8);
        let mut f = Flags::fluid(nx, ny);
        for &(x, y) in walls {
            f.set(x, y, Cell::Wall);
        }
        f.channel_walls();
        for y in 1..ny - 1 {
            f.set(0, y, Cell::Inlet([0.05, 0.0]));
            f.set(nx - 1, y, Cell::Outlet(1.0));
        }
        f
    }

    #[test]
    fn a_closed_channel_is_found_and_a_gap_or_a_diagonal_opens_it() {
        assert!(inlet_reaches_outlet(&channel(&[])));
        // A full column of wall at x = 5 closes it.
        let column: Vec<_> = (1..7).map(|y| (5, y)).collect();
        assert!(!inlet_reaches_outlet(&channel(&column)));
        // One cell open again: flow passes.
        assert!(inlet_reaches_outlet(&channel(&column[1..])));
        // A staircase whose cells touch at corners only: D2Q9's diagonal links pass between them.
        let stair: Vec<_> = (1..7).map(|y| (2 + y, y)).collect();
        assert!(inlet_reaches_outlet(&channel(&stair)));
        // Two full columns side by side: closed.
        let mut thick = column.clone();
        thick.extend((1..7).map(|y| (6, y)));
        assert!(!inlet_reaches_outlet(&channel(&thick)));
        // Everything solid between the inlet and the outlet columns.
        let all: Vec<_> = (1..11).flat_map(|x| (1..7).map(move |y| (x, y))).collect();
        assert!(!inlet_reaches_outlet(&channel(&all)));
    }
}
