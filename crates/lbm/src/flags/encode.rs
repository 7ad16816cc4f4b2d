//! Flags packed for the kernels: one u32 per cell and the table of boundary values (the layout in `flags`'s
//! documentation), checked as they are packed.

use std::collections::HashMap;

use super::{Cell, Flags, INDEX_SHIFT, MASK_SHIFT, MAX_TABLE, TYPE_FLUID, TYPE_MASK};
use crate::config::check_mach;
use crate::d2q9::C;
use crate::error::{LbmError, Result};

/// Flags as the kernels read them.
#[derive(Clone, Debug, PartialEq)]
pub struct EncodedFlags {
    pub codes: Vec<u32>,
    /// Boundary values; entry 0 is (0, 0).
    pub table: Vec<[f32; 2]>,
}

impl EncodedFlags {
    /// (cell, pull direction i, table index k) of every solid pull source of a fluid cell whose table index
    /// points at wall distances: the links the interpolated kernels treat, as they decode them.
    pub(crate) fn interpolated_links(&self) -> impl Iterator<Item = (usize, usize, usize)> + '_ {
        self.codes.iter().enumerate().flat_map(|(cell, &code)| {
            let k = (code >> INDEX_SHIFT) as usize;
            let fluid = code & TYPE_MASK == TYPE_FLUID && k != 0;
            (1..9)
                .filter(move |&i| fluid && code & (1 << (MASK_SHIFT as usize + i)) != 0)
                .map(move |i| (cell, i, k))
        })
    }
}

impl Flags {
    /// Checks the cells and packs them for the kernels.
    pub fn encode(&self) -> Result<EncodedFlags> {
        self.encode_window([0, 0], [self.nx, self.ny])
    }

    /// Checks the cells of a window (as [`Flags::window`] cuts it) and packs them for a block's kernels: each
    /// cell's mask and open-edge check come from its neighbours in the whole domain, its table entries are the
    /// window's own. The kernels' arithmetic on a block is then the whole domain's, cell for cell.
    pub fn encode_window(&self, origin: [usize; 2], size: [usize; 2]) -> Result<EncodedFlags> {
        let (nx, ny) = (self.nx, self.ny);
        let mut table: Vec<[f32; 2]> = vec![[0.0, 0.0]];
        let mut index: HashMap<[u32; 2], u32> = HashMap::from([([0, 0], 0)]);
        let mut codes = Vec::with_capacity(size[0] * size[1]);
        let solid = self.solid_palette();
        // Each palette entry's table slot once it has one (the table is filled in the order cells are met).
        let mut slot_of: Vec<Option<u32>> = vec![None; self.palette.len()];
        // The window's rows y − 1, y and y + 1, one cell wider on each side: a cell's neighbours without a
        // lookup each.
        let mut rows: [Vec<u32>; 3] = Default::default();
        let (x_before, span) = ((origin[0] % nx + nx - 1) % nx, size[0] + 2);
        for ly in 0..size[1] {
            let y = (origin[1] + ly) % ny;
            self.rows_around(y, x_before, span, &mut rows);
            // Whether the row has any wall distance: most rows have none, and skip the search per cell.
            let row_links = self
                .distances
                .range((y * nx, 0)..((y + 1) * nx, 0))
                .next()
                .is_some();
            for lx in 0..size[0] {
                let x = (origin[0] + lx) % nx;
                let at = rows[1][lx + 1] as usize;
                let cell = self.palette[at];
                match cell {
                    Cell::MovingWall(u) => check_mach("moving wall velocity", u)?,
                    Cell::Inlet(u) => {
                        check_mach("inlet velocity", u)?;
                    }
                    Cell::Outlet(rho) if !(rho > 0.0 && rho.is_finite()) => {
                        return Err(LbmError::Flag {
                            x,
                            y,
                            why: format!("outlet density {rho} must be positive and finite"),
                        });
                    }
                    _ => {}
                }
                if matches!(cell, Cell::Inlet(_) | Cell::Outlet(_))
                    && Self::edge_normal(nx, ny, x, y).is_none()
                {
                    return Err(LbmError::Flag {
                        x,
                        y,
                        why: "inlets and outlets must lie on the domain's edge (their normal comes from it)".into(),
                    });
                }
                let mut slot = *slot_of[at].get_or_insert_with(|| {
                    let v = cell.value().map(|c| c as f32);
                    let next = table.len() as u32;
                    *index.entry(v.map(f32::to_bits)).or_insert_with(|| {
                        table.push(v);
                        next
                    })
                });
                let cell_index = y * nx + x;
                let links: Vec<(usize, f64)> = if !row_links {
                    Vec::new()
                } else {
                    self.distances
                        .range((cell_index, 0)..(cell_index + 1, 0))
                        .map(|(&(_, d), &q)| (d, q))
                        .collect()
                };
                if !links.is_empty() {
                    // Four entries: the q of pull directions (1, 2), (3, 4), (5, 6), (7, 8); pull direction i
                    // comes back from the link in direction ī.
                    let mut q = [0.5f32; 9];
                    for &(d, v) in &links {
                        let wall = self.neighbour(x, y, d);
                        if cell != Cell::Fluid || !self.get(wall.0, wall.1).is_solid() {
                            return Err(LbmError::Flag {
                                x,
                                y,
                                why: format!(
                                    "a wall distance on direction {d} needs a fluid cell whose neighbour \
                                     that way is a wall (here {cell:?} → {:?})",
                                    self.get(wall.0, wall.1)
                                ),
                            });
                        }
                        q[crate::d2q9::OPP[d]] = v as f32;
                    }
                    slot = table.len() as u32;
                    table.extend([[q[1], q[2]], [q[3], q[4]], [q[5], q[6]], [q[7], q[8]]]);
                }
                if table.len() > MAX_TABLE {
                    return Err(LbmError::Flag {
                        x,
                        y,
                        why: format!(
                            "more than {MAX_TABLE} boundary-table entries (distinct boundary values, and four per \
                             cell with wall distances)"
                        ),
                    });
                }
                let mut mask = 0u32;
                for (i, &[dx, dy]) in C.iter().enumerate().skip(1) {
                    // The pull source x − c_i.
                    let source = rows[(1 - dy) as usize][(lx as i32 + 1 - dx) as usize];
                    if solid[source as usize] {
                        mask |= 1 << i;
                    }
                }
                codes.push(cell.code() | (mask << MASK_SHIFT) | (slot << INDEX_SHIFT));
            }
        }
        Ok(EncodedFlags { codes, table })
    }
}

#[cfg(test)]
mod tests {
    use rand::{Rng, SeedableRng, rngs::StdRng};

    use super::*;
    use crate::d2q9::OPP;

    /// The encoding as it read cells before rows were read through the runs: a lookup per cell and neighbour.
    fn cell_by_cell(f: &Flags, origin: [usize; 2], size: [usize; 2]) -> EncodedFlags {
        let (nx, ny) = (f.nx(), f.ny());
        let mut table: Vec<[f32; 2]> = vec![[0.0, 0.0]];
        let mut index: HashMap<[u32; 2], u32> = HashMap::from([([0, 0], 0)]);
        let mut codes = Vec::new();
        for ly in 0..size[1] {
            for lx in 0..size[0] {
                let (x, y) = ((origin[0] + lx) % nx, (origin[1] + ly) % ny);
                let cell = f.get(x, y);
                let v = cell.value().map(|c| c as f32);
                let next = table.len() as u32;
                let mut slot = *index.entry(v.map(f32::to_bits)).or_insert_with(|| {
                    table.push(v);
                    next
                });
                let mut q = [0.5f32; 9];
                let mut any = false;
                for d in 1..9 {
                    if let Some(v) = f.wall_distance(x, y, d) {
                        q[OPP[d]] = v as f32;
                        any = true;
                    }
                }
                if any {
                    slot = table.len() as u32;
                    table.extend([[q[1], q[2]], [q[3], q[4]], [q[5], q[6]], [q[7], q[8]]]);
                }
                let mut mask = 0u32;
                for (i, &o) in OPP.iter().enumerate().skip(1) {
                    let (sx, sy) = f.neighbour(x, y, o);
                    if f.get(sx, sy).is_solid() {
                        mask |= 1 << i;
                    }
                }
                codes.push(cell.code() | (mask << MASK_SHIFT) | (slot << INDEX_SHIFT));
            }
        }
        EncodedFlags { codes, table }
    }

    #[test]
    fn rows_read_through_the_runs_encode_and_find_links_as_a_lookup_a_cell_did() {
        let mut rng = StdRng::seed_from_u64(0x5eed);
        for case in 0..12 {
            let (nx, ny) = (rng.random_range(3..70), rng.random_range(3..50));
            let mut f = Flags::fluid(nx, ny);
            if case % 3 != 2 {
                f.channel_walls();
            }
            // An inlet profile and an outlet on the x edges, a lid, bodies with wall distances, scattered walls.
            for y in 1..ny - 1 {
                f.set(0, y, Cell::Inlet([0.01 * (y % 5) as f64, 0.0]));
                f.set(nx - 1, y, Cell::Outlet(1.0));
            }
            for x in 1..nx - 1 {
                if case % 2 == 0 {
                    f.set(x, ny - 1, Cell::MovingWall([0.05, 0.0]));
                }
            }
            for _ in 0..rng.random_range(0..3) {
                let centre = [
                    rng.random_range(2.0..nx as f64 - 2.0),
                    rng.random_range(2.0..ny as f64 - 2.0),
                ];
                f.add_circle(centre, rng.random_range(0.6..4.0), true);
            }
            for _ in 0..rng.random_range(0..(nx * ny / 4)) {
                let (x, y) = (rng.random_range(1..nx - 1), rng.random_range(1..ny - 1));
                f.set(
                    x,
                    y,
                    if rng.random() {
                        Cell::Wall
                    } else {
                        Cell::Fluid
                    },
                );
            }
            f.prune_wall_distances();
            // Wall distances whose link no longer ends in a wall would be refused by both: leave them out.
            // The links into solid cells (a probe's), read through rows likewise.
            let mut links = Vec::new();
            for y in 0..ny {
                for x in 0..nx {
                    for d in 1..9 {
                        let (xn, yn) = f.neighbour(x, y, d);
                        if !f.get(x, y).is_solid() && f.get(xn, yn).is_solid() && (xn + yn) % 3 != 0
                        {
                            links.push((x, y, d));
                        }
                    }
                }
            }
            assert_eq!(f.links_into(|x, y| (x + y) % 3 != 0), links, "case {case}");
            let whole = f.encode().expect("encodes");
            assert_eq!(
                whole,
                cell_by_cell(&f, [0, 0], [nx, ny]),
                "case {case}, {nx}x{ny}"
            );
            for _ in 0..6 {
                // Windows anywhere, wrapping, up to a cell wider than the domain on each side.
                let origin = [rng.random_range(0..nx), rng.random_range(0..ny)];
                let size = [rng.random_range(1..nx + 3), rng.random_range(1..ny + 3)];
                assert_eq!(
                    f.encode_window(origin, size).expect("encodes"),
                    cell_by_cell(&f, origin, size),
                    "case {case}, {nx}x{ny}, window {origin:?} {size:?}"
                );
            }
        }
    }
}
