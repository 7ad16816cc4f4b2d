//! Cell types and their encoding for the kernels.
//!
//! One u32 per cell: bits 0–3 the type, bits 4–12 a mask with bit 4+i set when the cell's pull source x − c_i
//! is solid (so a fluid cell reads one flag, not nine), bits 13–31 an index into a table of boundary values
//! (wall or inlet velocity, outlet density). Domain edges are periodic unless cells there say otherwise.
//!
//! Links from fluid cells into walls (resting or moving) may carry a wall distance q (interpolated bounce-back,
//! Bouzidi, Firdaouss & Lallemand 2001); a fluid cell with any such link points its index at four table entries
//! holding the q of each pull direction (1/2, plain half-way bounce-back, where none is set).

use std::collections::{BTreeMap, HashMap};

use kinds::Kinds;

use crate::d2q9::C;
use crate::error::{LbmError, Result};

mod encode;
mod kinds;
mod mask;

pub use encode::EncodedFlags;
pub(crate) use mask::check_mask;

/// What a cell is.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Cell {
    Fluid,
    /// Half-way bounce-back wall (velocity zero).
    Wall,
    /// Half-way bounce-back wall moving tangentially with this velocity (Ladd's correction, wall density 1).
    MovingWall([f64; 2]),
    /// Velocity inlet on a domain edge: density from Zou/He's moment balance, populations set to equilibrium.
    Inlet([f64; 2]),
    /// Density (pressure) outlet on a domain edge: normal velocity from Zou/He's balance, populations set to
    /// equilibrium.
    Outlet(f64),
}

impl Cell {
    /// The cell's kind code (0 fluid, 1 wall, 2 moving wall, 3 inlet, 4 outlet) and its exact values (zeros
    /// where it has none): what checkpoints store and what ranks compare before they build a lattice.
    pub(crate) fn saved(&self) -> (u8, [f64; 2]) {
        match *self {
            Cell::Fluid => (0, [0.0, 0.0]),
            Cell::Wall => (1, [0.0, 0.0]),
            Cell::MovingWall(u) => (2, u),
            Cell::Inlet(u) => (3, u),
            Cell::Outlet(rho) => (4, [rho, 0.0]),
        }
    }
    /// The cell [`Cell::saved`] gave (None for an unknown kind).
    pub(crate) fn from_saved(kind: u8, v: [f64; 2]) -> Option<Self> {
        Some(match kind {
            0 => Cell::Fluid,
            1 => Cell::Wall,
            2 => Cell::MovingWall(v),
            3 => Cell::Inlet(v),
            4 => Cell::Outlet(v[0]),
            _ => return None,
        })
    }

    pub fn is_solid(self) -> bool {
        matches!(self, Self::Wall | Self::MovingWall(_))
    }
    fn code(self) -> u32 {
        match self {
            Self::Fluid => TYPE_FLUID,
            Self::Wall | Self::MovingWall(_) => TYPE_SOLID,
            Self::Inlet(_) => TYPE_INLET,
            Self::Outlet(_) => TYPE_OUTLET,
        }
    }
    /// The boundary value stored in the table (velocity, or density in `.0`).
    fn value(self) -> [f64; 2] {
        match self {
            Self::Fluid | Self::Wall => [0.0, 0.0],
            Self::MovingWall(u) | Self::Inlet(u) => u,
            Self::Outlet(rho) => [rho, 0.0],
        }
    }
}

/// Bits 0–3 of a code: the cell type.
/// Appends one cell of value `v` to a row kept as runs of equal values, (length, value): the form rows take in
/// checkpoints and in [`Flags::row_runs`].
pub(crate) fn push_run<T: PartialEq>(row: &mut Vec<(usize, T)>, v: T) {
    match row.last_mut() {
        Some((len, last)) if *last == v => *len += 1,
        _ => row.push((1, v)),
    }
}

pub(crate) const TYPE_MASK: u32 = 15;
pub(crate) const TYPE_FLUID: u32 = 0;
pub(crate) const TYPE_SOLID: u32 = 1;
pub(crate) const TYPE_INLET: u32 = 2;
pub(crate) const TYPE_OUTLET: u32 = 3;
pub(crate) const MASK_SHIFT: u32 = 4;
pub(crate) const INDEX_SHIFT: u32 = 13;
const MAX_TABLE: usize = 1 << (32 - INDEX_SHIFT);

/// The cell types of an nx × ny lattice (row-major, y up).
///
/// Stored as each cell's index into a palette of the distinct cells (a domain has a few kinds and boundary
/// values: walls, a lid, an inlet profile): nothing while every cell is fluid, runs along each row while they
/// cost less than a byte a cell (walls, lids, inlets and bodies make a few a row), else an array of one byte a
/// cell for up to 256 palette entries, two up to 65 536, four beyond: where a `Cell` takes 24 bytes. Every rank
/// of a distributed lattice holds the whole domain's flags (docs/scale.md), so this is what a rank's host memory
/// grows with beyond its own block.
#[derive(Clone, Debug)]
pub struct Flags {
    nx: usize,
    ny: usize,
    /// Each cell's index into `palette`, row-major: none while every cell is fluid, runs a row, or an array as
    /// narrow as the palette allows.
    kinds: Kinds,
    /// The distinct cells; entry 0 is `Cell::Fluid`.
    palette: Vec<Cell>,
    /// A palette entry's index by its exact bits ([`Cell::saved`]).
    index: HashMap<(u8, [u64; 2]), u32>,
    /// Wall distance of link (cell, d): the wall lies q·|c_d| from the cell's centre towards x + c_d.
    distances: BTreeMap<(usize, usize), f64>,
}

/// Equal when every cell and every wall distance is (however the palettes were filled).
impl PartialEq for Flags {
    fn eq(&self, other: &Self) -> bool {
        self.nx == other.nx
            && self.ny == other.ny
            && self.distances == other.distances
            && self.cells().eq(other.cells())
    }
}

/// The palette key of a cell: its kind and the exact bits of its values.
fn key(cell: Cell) -> (u8, [u64; 2]) {
    let (kind, v) = cell.saved();
    (kind, v.map(f64::to_bits))
}

impl Flags {
    /// All fluid: periodic in both directions.
    pub fn fluid(nx: usize, ny: usize) -> Self {
        Self {
            nx,
            ny,
            kinds: Kinds::Fluid,
            palette: vec![Cell::Fluid],
            index: HashMap::from([(key(Cell::Fluid), 0)]),
            distances: BTreeMap::new(),
        }
    }
    pub fn nx(&self) -> usize {
        self.nx
    }
    pub fn ny(&self) -> usize {
        self.ny
    }
    /// The cell at row-major index `k` (y·nx + x).
    pub fn cell(&self, k: usize) -> Cell {
        if self.kinds.is_fluid() {
            // No array to bound the index: checked here (an array's own bounds check does it otherwise).
            assert!(
                k < self.nx * self.ny,
                "cell {k} of a {}x{} lattice",
                self.nx,
                self.ny
            );
            return Cell::Fluid;
        }
        self.palette[self.kinds.get(k) as usize]
    }
    pub fn get(&self, x: usize, y: usize) -> Cell {
        self.cell(y * self.nx + x)
    }
    pub fn set(&mut self, x: usize, y: usize, cell: Cell) {
        let (k, n) = (y * self.nx + x, self.nx * self.ny);
        assert!(
            x < self.nx && k < n,
            "cell ({x}, {y}) of a {}x{} lattice",
            self.nx,
            self.ny
        );
        if self.kinds.is_fluid() && cell == Cell::Fluid {
            return;
        }
        let next = self.palette.len() as u32;
        let slot = *self.index.entry(key(cell)).or_insert_with(|| {
            self.palette.push(cell);
            next
        });
        self.kinds.set(k, slot, self.nx, n);
    }
    /// Flags of `rows` (ny rows of nx cells), each as runs of equal cells, (length, cell), as
    /// [`Flags::row_runs`] gives them: a checkpoint's cells without a lookup or an array a cell. A row whose
    /// lengths are not all ≥ 1 and sum to nx is an error naming it.
    pub(crate) fn from_row_runs(
        nx: usize,
        rows: Vec<Vec<(usize, Cell)>>,
    ) -> std::result::Result<Self, String> {
        let mut flags = Self::fluid(nx, rows.len());
        let mut indexed = Vec::with_capacity(rows.len());
        for (y, row) in rows.into_iter().enumerate() {
            let mut width = 0usize;
            let mut out = Vec::with_capacity(row.len());
            for (len, cell) in row {
                if len == 0 {
                    return Err(format!("row {y}: a run of no cells"));
                }
                width = width.saturating_add(len);
                let next = flags.palette.len() as u32;
                let slot = *flags.index.entry(key(cell)).or_insert_with(|| {
                    flags.palette.push(cell);
                    next
                });
                out.push((len, slot));
            }
            if width != nx {
                return Err(format!("row {y}: runs of {width} cells in a row of {nx}"));
            }
            indexed.push(out);
        }
        flags.kinds = Kinds::from_rows(nx, indexed);
        Ok(flags)
    }
    /// Every cell, row-major (in order through the runs or the array, not a lookup a cell).
    pub fn cells(&self) -> impl ExactSizeIterator<Item = Cell> + '_ {
        let n = self.nx * self.ny;
        CellIter {
            indices: if self.kinds.is_fluid() {
                Box::new(std::iter::repeat_n(0, n))
            } else {
                self.kinds.iter()
            },
            palette: &self.palette,
            left: n,
        }
    }
    /// True when no cell is anything but fluid (the kernels then skip the flag field: 4 B per cell less).
    pub fn all_fluid(&self) -> bool {
        self.kinds.count(self.nx * self.ny, |k| k != 0) == 0
    }
    pub fn fluid_cells(&self) -> usize {
        let solid = self.solid_palette();
        self.kinds.count(self.nx * self.ny, |k| !solid[k as usize])
    }
    /// Bytes the cells' palette indices take (none while all fluid; a few runs a row for walls, lids and
    /// bodies; up to 4 a cell for a field of many runs): what a rank holds of the whole domain's flags.
    pub fn index_bytes(&self) -> usize {
        self.kinds.bytes()
    }
    /// The palette indices of `len` cells of row y from x0 on, wrapping around the row, into `out`.
    pub(crate) fn row_indices(&self, y: usize, x0: usize, len: usize, out: &mut Vec<u32>) {
        self.kinds.row_into(y, x0, len, self.nx, out);
    }
    /// The `len` cells of row y from x0 on (wrapping around the row), into `out`: a rectangle's cells row by row
    /// without a lookup each.
    pub(crate) fn row_cells(&self, y: usize, x0: usize, len: usize, out: &mut Vec<Cell>) {
        out.clear();
        if self.kinds.is_fluid() {
            out.resize(len, Cell::Fluid);
            return;
        }
        let mut idx = Vec::with_capacity(len);
        self.row_indices(y, x0, len, &mut idx);
        out.extend(idx.iter().map(|&k| self.palette[k as usize]));
    }
    /// [`Flags::row_indices`] of rows y − 1, y and y + 1 (wrapping), in that order: a cell's neighbours without a
    /// lookup each, for the set-up's per-cell loops.
    fn rows_around(&self, y: usize, x0: usize, len: usize, rows: &mut [Vec<u32>; 3]) {
        for (r, dy) in rows.iter_mut().zip([self.ny - 1, 0, 1]) {
            self.row_indices((y + dy) % self.ny, x0, len, r);
        }
    }
    /// Whether each palette entry is solid, by its index.
    fn solid_palette(&self) -> Vec<bool> {
        self.palette.iter().map(|c| c.is_solid()).collect()
    }
    /// Row y as runs of equal cells, (length, cell) in order, the same whatever holds them: what ranks compare
    /// (a few a row for walls, lids, inlets and bodies, not a hash input a cell).
    pub fn row_runs(&self, y: usize) -> impl Iterator<Item = (usize, Cell)> + '_ {
        let mut runs = Vec::new();
        self.kinds.row_runs(y, self.nx, &mut runs);
        runs.into_iter()
            .map(|(len, index)| (len, self.palette[index as usize]))
    }
    /// Interpolated bounce-back on the link from fluid cell (x, y) in direction `d` (1–8) into the wall at
    /// x + c_d: the wall crosses the link q·|c_d| from the cell's centre, 0 < q ≤ 1 (q = 1/2 is plain half-way
    /// bounce-back). A moving wall's velocity is its cell's: for a wall in rigid motion (translating, rotating)
    /// that gives the link the same c_d·u as the velocity at the crossing, which differs from it by a vector
    /// along c_d. Whether the link really ends in a wall is checked when the flags are encoded.
    pub fn set_wall_distance(&mut self, x: usize, y: usize, d: usize, q: f64) -> Result<()> {
        if x >= self.nx || y >= self.ny || !(1..9).contains(&d) {
            return Err(LbmError::Flag {
                x,
                y,
                why: format!("no link in direction {d} from this cell (directions are 1–8)"),
            });
        }
        if !(q > 0.0 && q <= 1.0) {
            return Err(LbmError::Flag {
                x,
                y,
                why: format!("wall distance {q} in direction {d} must lie in (0, 1]"),
            });
        }
        self.distances.insert((y * self.nx + x, d), q);
        Ok(())
    }
    /// The wall distance set on the link from (x, y) in direction d, if any.
    pub fn wall_distance(&self, x: usize, y: usize, d: usize) -> Option<f64> {
        self.distances.get(&(y * self.nx + x, d)).copied()
    }
    /// Every link with a wall distance: ((x, y, d), q).
    pub fn wall_distances(&self) -> impl Iterator<Item = ((usize, usize, usize), f64)> + '_ {
        self.distances
            .iter()
            .map(|(&(c, d), &q)| ((c % self.nx, c / self.nx, d), q))
    }
    /// Drops the wall distances of links that no longer run from a fluid cell into a wall, because cells were
    /// set after the distances (a shape's edge overwritten by channel walls or an inlet); returns how many.
    pub fn prune_wall_distances(&mut self) -> usize {
        let stale: Vec<(usize, usize)> = self
            .wall_distances()
            .filter(|&((x, y, d), _)| {
                let (xn, yn) = self.neighbour(x, y, d);
                self.get(x, y) != Cell::Fluid || !self.get(xn, yn).is_solid()
            })
            .map(|((x, y, d), _)| (y * self.nx + x, d))
            .collect();
        for key in &stale {
            self.distances.remove(key);
        }
        stale.len()
    }
    /// Whether any link uses interpolated bounce-back.
    pub fn has_wall_distances(&self) -> bool {
        !self.distances.is_empty()
    }

    /// A resting circular obstacle in lattice units (cell centres at integer coordinates): cells whose centre
    /// lies inside become walls; with `interpolated`, each link from a fluid cell into them gets the distance
    /// at which it crosses the circle.
    pub fn add_circle(&mut self, centre: [f64; 2], radius: f64, interpolated: bool) {
        // Squared, so the cells inside are exactly those of |p − c|² ≤ r² (one sign change per link: convex).
        let phi =
            |x: f64, y: f64| (x - centre[0]).powi(2) + (y - centre[1]).powi(2) - radius * radius;
        // Only cells within the circle's bounding box can be inside (every rank builds the whole domain's
        // flags: O(r²) a circle, not O(cells)); a circle reaching past the domain keeps to the domain.
        let span = |c: f64, n: usize| {
            let lo = (c - radius).floor().max(0.0);
            let hi = (c + radius).ceil() + 1.0;
            (lo.min(n as f64) as usize)..(hi.clamp(0.0, n as f64) as usize)
        };
        let region = [span(centre[0], self.nx), span(centre[1], self.ny)];
        self.add_shape_within(region, phi, |_, _| [0.0, 0.0], interpolated);
    }

    /// A wall of any shape: cells whose centre has `phi(x, y) ≤ 0` (lattice units, cell centres at integer
    /// coordinates) become walls, moving with `velocity` at their centre where it is not zero. With
    /// `interpolated`, each link from a fluid cell into them gets the distance at which `phi` changes sign along
    /// it (bisection to double precision; `phi` should change sign once per link, as a signed distance does).
    /// Links across the domain's edge are left alone. `phi = r − |p − c|` makes the outside of a circle solid;
    /// `velocity = Ω × (p − c)` makes a body rotate (the cell-centre velocity is exact for rigid motion, see
    /// `set_wall_distance`). Returns the number of cells inside.
    pub fn add_shape(
        &mut self,
        phi: impl Fn(f64, f64) -> f64,
        velocity: impl Fn(f64, f64) -> [f64; 2],
        interpolated: bool,
    ) -> usize {
        self.add_shape_within([0..self.nx, 0..self.ny], phi, velocity, interpolated)
    }

    /// [`add_shape`](Self::add_shape) for a shape whose cells all lie in `region` (x and y ranges of cells, cut
    /// to the domain): only its cells are tested, and only their neighbours' links into the shape measured. A
    /// body's bounding box makes it O(the box) instead of O(cells), on every rank of a distributed lattice (each
    /// builds the whole domain's flags); a shape reaching past `region` is cut there.
    pub fn add_shape_within(
        &mut self,
        region: [std::ops::Range<usize>; 2],
        phi: impl Fn(f64, f64) -> f64,
        velocity: impl Fn(f64, f64) -> [f64; 2],
        interpolated: bool,
    ) -> usize {
        let cut = |r: std::ops::Range<usize>, n: usize| r.start.min(n)..r.end.min(n);
        let [rx, ry] = region;
        let (rx, ry) = (cut(rx, self.nx), cut(ry, self.ny));
        if rx.is_empty() || ry.is_empty() {
            return 0;
        }
        let inside = |x: usize, y: usize| phi(x as f64, y as f64) <= 0.0;
        let mut count = 0;
        for y in ry.clone() {
            for x in rx.clone() {
                if inside(x, y) {
                    count += 1;
                    let u = velocity(x as f64, y as f64);
                    let cell = if u == [0.0, 0.0] {
                        Cell::Wall
                    } else {
                        Cell::MovingWall(u)
                    };
                    self.set(x, y, cell);
                }
            }
        }
        if !interpolated {
            return count;
        }
        let solid = self.solid_palette();
        // The fluid cells whose links can end in the shape: the region and one cell around it.
        let (y0, y1) = (ry.start.saturating_sub(1), (ry.end + 1).min(self.ny));
        let (x0, x1) = (rx.start.saturating_sub(1), (rx.end + 1).min(self.nx));
        let region_inside = |x: usize, y: usize| rx.contains(&x) && ry.contains(&y) && inside(x, y);
        // Rows y − 1, y and y + 1 as palette indices (index 0 is fluid), from the column left of x0 to the one
        // right of x1 (a neighbour's), within the domain: column x at index x − first.
        let (first, end) = (x0.saturating_sub(1), (x1 + 1).min(self.nx));
        let mut rows: [Vec<u32>; 3] = Default::default();
        for y in y0..y1 {
            self.rows_around(y, first, end - first, &mut rows);
            for x in x0..x1 {
                if rows[1][x - first] != 0 {
                    continue;
                }
                for (d, c) in C.iter().enumerate().skip(1) {
                    let (xn, yn) = (x as i64 + i64::from(c[0]), y as i64 + i64::from(c[1]));
                    if xn < 0 || yn < 0 || xn >= self.nx as i64 || yn >= self.ny as i64 {
                        continue;
                    }
                    // Cheap test first: the shape's cells are walls now, most neighbours are not.
                    let (xn, yn) = (xn as usize, yn as usize);
                    if !solid[rows[(1 + c[1]) as usize][xn - first] as usize]
                        || !region_inside(xn, yn)
                    {
                        continue;
                    }
                    // phi > 0 at t = 0 (fluid), ≤ 0 at t = 1 (wall).
                    let at = |t: f64| {
                        [
                            x as f64 + t * f64::from(c[0]),
                            y as f64 + t * f64::from(c[1]),
                        ]
                    };
                    let (mut lo, mut hi) = (0.0f64, 1.0f64);
                    while hi - lo > 1e-15 {
                        let mid = 0.5 * (lo + hi);
                        let p = at(mid);
                        if phi(p[0], p[1]) > 0.0 {
                            lo = mid;
                        } else {
                            hi = mid;
                        }
                    }
                    let t = 0.5 * (lo + hi);
                    self.distances
                        .insert((y * self.nx + x, d), t.clamp(1e-6, 1.0));
                }
            }
        }
        count
    }

    /// Walls along the bottom and top rows (a channel periodic in x).
    pub fn channel_walls(&mut self) {
        for x in 0..self.nx {
            self.set(x, 0, Cell::Wall);
            self.set(x, self.ny - 1, Cell::Wall);
        }
    }
    /// Walls on all four edges.
    pub fn box_walls(&mut self) {
        self.channel_walls();
        for y in 0..self.ny {
            self.set(0, y, Cell::Wall);
            self.set(self.nx - 1, y, Cell::Wall);
        }
    }

    /// The outward normal of an open-boundary cell, from its position on the domain edge (x edges first).
    pub fn edge_normal(nx: usize, ny: usize, x: usize, y: usize) -> Option<[i32; 2]> {
        if x == 0 {
            Some([-1, 0])
        } else if x == nx - 1 {
            Some([1, 0])
        } else if y == 0 {
            Some([0, -1])
        } else if y == ny - 1 {
            Some([0, 1])
        } else {
            None
        }
    }

    /// The cell at (x, y) + c_d, wrapping around the domain's edges.
    pub fn neighbour(&self, x: usize, y: usize, d: usize) -> (usize, usize) {
        (
            (x as i64 + i64::from(C[d][0])).rem_euclid(self.nx as i64) as usize,
            (y as i64 + i64::from(C[d][1])).rem_euclid(self.ny as i64) as usize,
        )
    }

    /// Links (x, y, d) from non-solid cells along d into the solid cells for which `part(x', y')` holds: the
    /// links `Lattice::probe` sums an obstacle's force over.
    pub fn links_into(&self, part: impl Fn(usize, usize) -> bool) -> Vec<(usize, usize, usize)> {
        let (nx, ny) = (self.nx, self.ny);
        let solid = self.solid_palette();
        // Rows y − 1, y and y + 1 from x = −1 to nx (wrapping), as palette indices.
        let mut rows: [Vec<u32>; 3] = Default::default();
        let mut links = Vec::new();
        for y in 0..ny {
            self.rows_around(y, nx - 1, nx + 2, &mut rows);
            for x in 0..nx {
                if solid[rows[1][x + 1] as usize] {
                    continue;
                }
                for (d, c) in C.iter().enumerate().skip(1) {
                    let end = rows[(1 + c[1]) as usize][(x as i32 + 1 + c[0]) as usize];
                    let (xn, yn) = self.neighbour(x, y, d);
                    if solid[end as usize] && part(xn, yn) {
                        links.push((x, y, d));
                    }
                }
            }
        }
        links
    }

    /// The cells of the `size` window whose corner is `origin` (wrapping around the domain), with the wall
    /// distances of links that start in it: the flags of one block of a distributed lattice, halo included.
    pub fn window(&self, origin: [usize; 2], size: [usize; 2]) -> Flags {
        let mut w = Flags::fluid(size[0], size[1]);
        let n = size[0] * size[1];
        if !self.kinds.is_fluid() {
            // The same palette, so each cell's index carries over as it is.
            w.palette.clone_from(&self.palette);
            w.index.clone_from(&self.index);
            let mut row = Vec::new();
            for ly in 0..size[1] {
                self.row_indices((origin[1] + ly) % self.ny, origin[0], size[0], &mut row);
                for (lx, &i) in row.iter().enumerate() {
                    w.kinds.set(ly * size[0] + lx, i, size[0], n);
                }
            }
        }
        // Each link's offsets in the window: the first, and one a domain further on where the window is wider
        // than the domain (a block as wide as the domain, with its halo).
        let offsets =
            |c: usize, o: usize, n: usize, len: usize| ((c + n - o % n) % n..len).step_by(n);
        for ((x, y, d), q) in self.wall_distances() {
            for ly in offsets(y, origin[1], self.ny, size[1]) {
                for lx in offsets(x, origin[0], self.nx, size[0]) {
                    w.distances.insert((ly * size[0] + lx, d), q);
                }
            }
        }
        w
    }
}

/// [`Flags::cells`]: the cells of a palette's indices, with their count.
struct CellIter<'a> {
    indices: Box<dyn Iterator<Item = u32> + 'a>,
    palette: &'a [Cell],
    left: usize,
}

impl Iterator for CellIter<'_> {
    type Item = Cell;
    fn next(&mut self) -> Option<Cell> {
        let i = self.indices.next()?;
        self.left -= 1;
        Some(self.palette[i as usize])
    }
    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.left, Some(self.left))
    }
}

impl ExactSizeIterator for CellIter<'_> {}

#[cfg(test)]
mod tests;
