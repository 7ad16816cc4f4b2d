//! Each cell's palette index: none while every cell is fluid; runs along each row while they are few (walls, a
//! lid, an inlet, a body: a few runs a row, whatever the row's length); past that, an array in the narrowest
//! integer the palette needs (one byte a cell for up to 256 distinct cells, two for up to 65 536, four beyond).
//! Every rank of a distributed lattice holds the whole domain's (docs/scale.md), so the runs are what keep a
//! rank's host memory to its own block's as the domain grows.

/// Bytes of one run (its first x and its index).
const RUN_BYTES: usize = 8;

/// Palette indices of an `nx`-wide lattice, row-major.
#[derive(Clone, Debug, PartialEq)]
pub(super) enum Kinds {
    /// Every cell is index 0 (fluid).
    Fluid,
    /// Each row as its runs: (first x, index), ascending, the first at x = 0, neighbouring runs of different
    /// indices; `runs` counts them all.
    Runs {
        nx: usize,
        rows: Vec<Vec<(u32, u32)>>,
        runs: usize,
    },
    U8(Vec<u8>),
    U16(Vec<u16>),
    U32(Vec<u32>),
}

/// The run of `row` that holds x.
fn run_at(row: &[(u32, u32)], x: usize) -> usize {
    row.partition_point(|&(s, _)| s as usize <= x) - 1
}

/// Where run i of a row of `nx` cells ends (exclusive): the next run's start, or the row's end.
fn run_end(row: &[(u32, u32)], i: usize, nx: usize) -> usize {
    row.get(i + 1).map_or(nx, |r| r.0 as usize)
}

impl Kinds {
    /// The indices of rows of `nx` cells given as runs, (length, index) each, lengths ≥ 1 summing to `nx` (the
    /// caller checked), neighbours of equal indices joined here: runs while they cost less than an array (the
    /// rule [`Kinds::set`] keeps), else the array; none while every cell is fluid.
    pub(super) fn from_rows(nx: usize, rows: Vec<Vec<(usize, u32)>>) -> Self {
        let n = nx * rows.len();
        if rows.iter().all(|r| r.iter().all(|&(_, i)| i == 0)) {
            return Self::Fluid;
        }
        let rows: Vec<Vec<(u32, u32)>> = rows
            .into_iter()
            .map(|row| {
                let mut out: Vec<(u32, u32)> = Vec::with_capacity(row.len());
                let mut x = 0;
                for (len, index) in row {
                    if out.last().is_none_or(|r| r.1 != index) {
                        out.push((x as u32, index));
                    }
                    x += len;
                }
                out.shrink_to_fit();
                out
            })
            .collect();
        let runs = rows.iter().map(Vec::len).sum::<usize>();
        let costly = runs * RUN_BYTES + rows.len() * std::mem::size_of::<Vec<(u32, u32)>>() > n;
        let mut kinds = Self::Runs { nx, rows, runs };
        if costly {
            kinds.make_array();
        }
        kinds
    }

    /// Cell k's index.
    pub(super) fn get(&self, k: usize) -> u32 {
        match self {
            Self::Fluid => 0,
            Self::Runs { nx, rows, .. } => {
                let row = &rows[k / nx];
                row[run_at(row, k % nx)].1
            }
            Self::U8(v) => u32::from(v[k]),
            Self::U16(v) => u32::from(v[k]),
            Self::U32(v) => v[k],
        }
    }

    /// Sets cell k of `n` cells in rows of `nx` to `index`: runs first, an array once the runs would take more
    /// bytes than one (widened as the palette grows).
    pub(super) fn set(&mut self, k: usize, index: u32, nx: usize, n: usize) {
        if self.is_fluid() {
            if index == 0 {
                return;
            }
            *self = Self::Runs {
                nx,
                rows: vec![vec![(0, 0)]; n / nx],
                runs: n / nx,
            };
        }
        if let Self::Runs { nx, rows, runs } = self {
            let row = &mut rows[k / *nx];
            let before = row.len();
            set_in_row(row, k % *nx, index, *nx);
            *runs = *runs + row.len() - before;
            // A row's vector costs its header beside its runs.
            if *runs * RUN_BYTES + rows.len() * std::mem::size_of::<Vec<(u32, u32)>>() > n {
                self.make_array();
            }
            return;
        }
        if index > self.max() {
            self.widen_to(index);
        }
        match self {
            Self::Fluid | Self::Runs { .. } => unreachable!("an array above"),
            Self::U8(v) => v[k] = index as u8,
            Self::U16(v) => v[k] = index as u16,
            Self::U32(v) => v[k] = index,
        }
    }

    /// The largest index the current width holds.
    fn max(&self) -> u32 {
        match self {
            Self::Fluid => 0,
            Self::U8(_) => u32::from(u8::MAX),
            Self::U16(_) => u32::from(u16::MAX),
            Self::U32(_) | Self::Runs { .. } => u32::MAX,
        }
    }

    /// Runs to an array as narrow as their largest index allows.
    fn make_array(&mut self) {
        let Self::Runs { rows, .. } = self else {
            return;
        };
        let top = rows.iter().flatten().map(|r| r.1).max().unwrap_or(0);
        let indices = self.iter();
        let array = if top <= u32::from(u8::MAX) {
            Self::U8(indices.map(|i| i as u8).collect())
        } else if top <= u32::from(u16::MAX) {
            Self::U16(indices.map(|i| i as u16).collect())
        } else {
            Self::U32(indices.collect())
        };
        *self = array;
    }

    /// Converts the array to the width `index` needs (the old and the new array alive at once, nothing more).
    fn widen_to(&mut self, index: u32) {
        let to16 = index <= u32::from(u16::MAX);
        *self = match std::mem::replace(self, Self::Fluid) {
            Self::U8(v) if to16 => Self::U16(v.into_iter().map(u16::from).collect()),
            Self::U8(v) => Self::U32(v.into_iter().map(u32::from).collect()),
            Self::U16(v) => Self::U32(v.into_iter().map(u32::from).collect()),
            other => other,
        };
    }

    /// Every index in order (nothing while all fluid: the caller knows n).
    pub(super) fn iter(&self) -> Box<dyn Iterator<Item = u32> + '_> {
        match self {
            Self::Fluid => Box::new(std::iter::empty()),
            Self::Runs { nx, rows, .. } => Box::new(rows.iter().flat_map(move |row| {
                row.iter().enumerate().flat_map(move |(i, &(s, index))| {
                    let end = run_end(row, i, *nx);
                    std::iter::repeat_n(index, end - s as usize)
                })
            })),
            Self::U8(v) => Box::new(v.iter().map(|&i| u32::from(i))),
            Self::U16(v) => Box::new(v.iter().map(|&i| u32::from(i))),
            Self::U32(v) => Box::new(v.iter().copied()),
        }
    }

    /// The indices of `len` cells of row y from x0 on, wrapping around the row's `nx` cells, into `out`
    /// (replaced): one search a row, not one a cell.
    pub(super) fn row_into(&self, y: usize, x0: usize, len: usize, nx: usize, out: &mut Vec<u32>) {
        out.clear();
        match self {
            Self::Fluid => out.resize(len, 0),
            Self::Runs { rows, .. } => {
                let row = &rows[y];
                let (mut x, mut i) = (x0 % nx, run_at(row, x0 % nx));
                while out.len() < len {
                    let end = run_end(row, i, nx);
                    let take = (end - x).min(len - out.len());
                    out.extend(std::iter::repeat_n(row[i].1, take));
                    x += take;
                    i += 1;
                    if x == nx {
                        (x, i) = (0, 0);
                    }
                }
            }
            _ => out.extend((0..len).map(|i| self.get(y * nx + (x0 + i) % nx))),
        }
    }

    /// Row y of `nx` cells as runs of equal indices, (length, index) in order, into `out` (replaced): the runs
    /// kept, or an array's cells joined; the same runs whatever holds them.
    pub(super) fn row_runs(&self, y: usize, nx: usize, out: &mut Vec<(usize, u32)>) {
        out.clear();
        match self {
            Self::Fluid => out.push((nx, 0)),
            Self::Runs { rows, .. } => {
                let row = &rows[y];
                out.extend(
                    row.iter()
                        .enumerate()
                        .map(|(i, &(s, index))| (run_end(row, i, nx) - s as usize, index)),
                );
            }
            _ => {
                for x in 0..nx {
                    super::push_run(out, self.get(y * nx + x));
                }
            }
        }
    }

    /// How many of `n` cells have an index for which `pred` holds (per run, not per cell, where there are runs).
    pub(super) fn count(&self, n: usize, pred: impl Fn(u32) -> bool) -> usize {
        match self {
            Self::Fluid => {
                if pred(0) {
                    n
                } else {
                    0
                }
            }
            Self::Runs { nx, rows, .. } => rows
                .iter()
                .map(|row| {
                    row.iter()
                        .enumerate()
                        .filter(|(_, r)| pred(r.1))
                        .map(|(i, r)| run_end(row, i, *nx) - r.0 as usize)
                        .sum::<usize>()
                })
                .sum(),
            _ => self.iter().filter(|&i| pred(i)).count(),
        }
    }

    /// No array: every cell fluid.
    pub(super) fn is_fluid(&self) -> bool {
        matches!(self, Self::Fluid)
    }

    /// Bytes held for the indices.
    pub(super) fn bytes(&self) -> usize {
        match self {
            Self::Fluid => 0,
            Self::Runs { rows, .. } => rows
                .iter()
                .map(|r| std::mem::size_of::<Vec<(u32, u32)>>() + r.capacity() * RUN_BYTES)
                .sum(),
            Self::U8(v) => v.len(),
            Self::U16(v) => 2 * v.len(),
            Self::U32(v) => 4 * v.len(),
        }
    }
}

/// Sets cell x of a row (as [`Kinds::Runs`] keeps it, `nx` cells) to `index`, splitting and merging runs.
fn set_in_row(row: &mut Vec<(u32, u32)>, x: usize, index: u32, nx: usize) {
    let i = run_at(row, x);
    if row[i].1 == index {
        return;
    }
    let (start, end) = (row[i].0 as usize, run_end(row, i, nx));
    let joins_left = x == start && i > 0 && row[i - 1].1 == index;
    let joins_right = x + 1 == end && row.get(i + 1).is_some_and(|r| r.1 == index);
    let x32 = x as u32;
    match (x == start, x + 1 == end) {
        // The run is the cell: it takes the index, and merges with a neighbour of that index.
        (true, true) => {
            row[i].1 = index;
            if joins_right {
                row.remove(i + 1);
            }
            if joins_left {
                row.remove(i);
            }
        }
        (true, false) => {
            row[i].0 = x32 + 1;
            if !joins_left {
                row.insert(i, (x32, index));
            }
        }
        (false, true) => {
            if joins_right {
                row[i + 1].0 = x32;
            } else {
                row.insert(i + 1, (x32, index));
            }
        }
        (false, false) => {
            let old = row[i].1;
            row.splice(i + 1..i + 1, [(x32, index), (x32 + 1, old)]);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Kinds;

    /// A deterministic stream of small numbers (no RNG crate needed for a shape test).
    fn lcg(state: &mut u64) -> u64 {
        *state = state
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        *state >> 33
    }

    #[test]
    fn runs_hold_every_cell_as_an_array_would_and_give_way_to_one_when_they_cost_more() {
        let (nx, ny) = (400, 7);
        let n = nx * ny;
        let mut k = Kinds::Fluid;
        k.set(3, 0, nx, n);
        assert!(k.is_fluid());
        let mut want = vec![0u32; n];
        let mut s = 7;
        // Few runs: single cells, joins on either side, splits, a whole row, indices set back to 0.
        for _ in 0..30 {
            let y = (lcg(&mut s) % ny as u64) as usize;
            let x0 = (lcg(&mut s) % nx as u64) as usize;
            let len = (lcg(&mut s) % 12) as usize;
            let index = (lcg(&mut s) % 3) as u32;
            for x in x0..(x0 + len).min(nx) {
                k.set(y * nx + x, index, nx, n);
                want[y * nx + x] = index;
            }
            assert!(matches!(k, Kinds::Runs { .. }), "{k:?}");
            assert_eq!(k.iter().collect::<Vec<_>>(), want);
            for (c, &w) in want.iter().enumerate() {
                assert_eq!(k.get(c), w, "cell {c}");
            }
            let Kinds::Runs { rows, runs, .. } = &k else {
                unreachable!()
            };
            assert_eq!(*runs, rows.iter().map(Vec::len).sum::<usize>());
            for row in rows {
                assert_eq!(row[0].0, 0);
                assert!(
                    row.windows(2).all(|w| w[0].0 < w[1].0 && w[0].1 != w[1].1),
                    "{row:?}"
                );
            }
            assert_eq!(
                k.count(n, |i| i == 1),
                want.iter().filter(|&&i| i == 1).count()
            );
        }
        // A row read from any x, wrapping around.
        let mut out = Vec::new();
        for (y, x0, len) in [(0, 0, nx), (3, 395, 12), (6, 79, 2 * nx + 3)] {
            k.row_into(y, x0, len, nx, &mut out);
            let expect: Vec<u32> = (0..len).map(|i| want[y * nx + (x0 + i) % nx]).collect();
            assert_eq!(out, expect, "row {y} from {x0}");
        }
        // Each row's runs, as the array below would give them.
        let mut runs = Vec::new();
        for y in 0..ny {
            k.row_runs(y, nx, &mut runs);
            let mut joined: Vec<(usize, u32)> = Vec::new();
            for &w in &want[y * nx..(y + 1) * nx] {
                match joined.last_mut() {
                    Some((len, last)) if *last == w => *len += 1,
                    _ => joined.push((1, w)),
                }
            }
            assert_eq!(runs, joined, "row {y}");
        }
        // A checkerboard's runs would outweigh a byte a cell: an array, with every cell kept.
        for (c, w) in want.iter_mut().enumerate() {
            let index = if (c / nx + c % nx) % 2 == 0 { 300 } else { 2 };
            k.set(c, index, nx, n);
            *w = index;
        }
        assert!(
            matches!(k, Kinds::U16(_)),
            "the checkerboard as u16 (index 300)"
        );
        assert_eq!(k.iter().collect::<Vec<_>>(), want);
        k.row_runs(3, nx, &mut runs);
        assert_eq!(runs.len(), nx, "a checkerboard row: a run a cell");
        assert_eq!(runs[..2], [(1, want[3 * nx]), (1, want[3 * nx + 1])]);
        k.row_into(2, 398, 5, nx, &mut out);
        assert_eq!(
            out,
            (0..5)
                .map(|i| want[2 * nx + (398 + i) % nx])
                .collect::<Vec<_>>()
        );
    }

    #[test]
    fn arrays_widen_as_the_palette_grows_and_keep_every_cell() {
        let n = 1000;
        // One row of 1000: every second cell set makes ~1000 runs, past a byte a cell.
        let mut k = Kinds::Fluid;
        let mut want = vec![0u32; n];
        for c in (0..n).step_by(2) {
            k.set(c, 1, n, n);
            want[c] = 1;
        }
        assert_eq!(k.bytes(), n, "an array of bytes");
        for (cell, index) in [
            (5, 1),
            (7, 255),
            (9, 256),
            (11, 65_535),
            (13, 65_536),
            (999, 70_000),
        ] {
            k.set(cell, index, n, n);
            want[cell] = index;
            assert_eq!(k.iter().collect::<Vec<_>>(), want, "after index {index}");
        }
        assert_eq!(k.bytes(), 4 * n);
    }

    #[test]
    fn a_box_with_a_lid_takes_a_few_runs_a_row() {
        let (nx, ny) = (4096, 4096);
        let n = nx * ny;
        let mut k = Kinds::Fluid;
        for x in 0..nx {
            k.set(x, 1, nx, n);
            k.set((ny - 1) * nx + x, 2, nx, n);
        }
        for y in 0..ny {
            k.set(y * nx, 1, nx, n);
            k.set(y * nx + nx - 1, 1, nx, n);
        }
        assert!(matches!(k, Kinds::Runs { .. }));
        // Three runs in the middle rows: 24 B of runs and 24 of a row's vector, against 4096 B a row as bytes.
        assert!(k.bytes() < 64 * ny, "{} B", k.bytes());
        assert_eq!(k.count(n, |i| i == 0), (nx - 2) * (ny - 2));
    }
}
