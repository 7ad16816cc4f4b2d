//! Flags packed for the kernels: one u32 per cell and the table of boundary values (the layout in `flags`'s
//! documentation), checked as they are packed.

use std::collections::HashMap;

use super::{Cell, Flags, INDEX_SHIFT, MASK_SHIFT, MAX_TABLE, TYPE_FLUID, TYPE_MASK};
use crate::config::check_mach;
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
        for ly in 0..size[1] {
            for lx in 0..size[0] {
                let (x, y) = self.wrap(origin, lx, ly);
                let cell = self.get(x, y);
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
                let v = cell.value().map(|c| c as f32);
                let key = v.map(f32::to_bits);
                let next = table.len() as u32;
                let mut slot = *index.entry(key).or_insert_with(|| {
                    table.push(v);
                    next
                });
                let cell_index = y * nx + x;
                let links: Vec<(usize, f64)> = self
                    .distances
                    .range((cell_index, 0)..(cell_index + 1, 0))
                    .map(|(&(_, d), &q)| (d, q))
                    .collect();
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
                for i in 1..9 {
                    let (sx, sy) = self.neighbour(x, y, crate::d2q9::OPP[i]);
                    if self.get(sx, sy).is_solid() {
                        mask |= 1 << i;
                    }
                }
                codes.push(cell.code() | (mask << MASK_SHIFT) | (slot << INDEX_SHIFT));
            }
        }
        Ok(EncodedFlags { codes, table })
    }
}
