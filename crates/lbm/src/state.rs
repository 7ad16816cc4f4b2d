//! A lattice's state on the host side: initial states, populations in and out, and the raw words checkpoints
//! save and restore (for a block of a distributed lattice, the whole domain's, gathered or sliced).

use std::ops::Range;

use crate::config::{Layout, Streaming, check_mach};
use crate::d2q9::{OPP, W, equilibrium_component};
use crate::error::{LbmError, Result};
use crate::flags::Flags;
use crate::kernel::stash_index;
use crate::lattice::Lattice;
use crate::storage::{cells_of_words, decode, stored_value, stored_word, stored_words};

/// Words of each direction the initial state is made and uploaded in at a time: 16 MB of words, and ρ and u in
/// f64 of the 4 M cells they hold (100 MB; 8 M cells and 200 MB for paired f16).
const INIT_CHUNK_WORDS: usize = 1 << 22;

impl Lattice<'_> {
    /// Sets every non-solid cell to equilibrium at the density and velocity `init(x, y)` gives. Every cell's ρ
    /// and u are checked first (on all cores; the first refused cell is reported and nothing is written), then
    /// the populations are made and uploaded `INIT_CHUNK_WORDS` words of each direction at a time, ρ and u taken
    /// once per cell of the chunk: the host holds a chunk, not the lattice (until 2026-11-29 it held 3 f64 a
    /// cell, then 1 f64 and a word a cell per direction: 36 bytes a cell, 37 GB for a 32 000² lattice that a
    /// 139 GB H200 holds). `init` is called twice per cell, so it must be a function of (x, y).
    pub fn init_equilibrium(
        &mut self,
        init: impl Fn(usize, usize) -> (f64, [f64; 2]) + Sync,
    ) -> Result<()> {
        self.init_equilibrium_in_chunks(INIT_CHUNK_WORDS, init)
    }

    /// [`init_equilibrium`](Self::init_equilibrium) made and uploaded `chunk_words` words of each direction at a
    /// time (at least 1): the same state whatever the chunk (tested), less host memory for a smaller one.
    pub fn init_equilibrium_in_chunks(
        &mut self,
        chunk_words: usize,
        init: impl Fn(usize, usize) -> (f64, [f64; 2]) + Sync,
    ) -> Result<()> {
        if chunk_words == 0 {
            return Err(LbmError::param(
                "chunk_words",
                0,
                "the initial state is made at least one word at a time",
            ));
        }
        let (nx, ny) = (self.cfg.nx, self.cfg.ny);
        let n = nx * ny;
        let block = self.dist.as_ref().map(|d| d.block);
        let flags: &Flags = &self.flags;
        let fields = |c: usize| -> [f64; 3] {
            let (lx, ly) = (c % nx, c / nx);
            if flags.get(lx, ly).is_solid() {
                return [1.0, 0.0, 0.0];
            }
            // The domain's coordinates (a block's cells, halo included, are the domain's cells).
            let (x, y) = block.map_or((lx, ly), |b| b.global(lx, ly));
            let (rho, u) = init(x, y);
            [rho, u[0], u[1]]
        };
        let refused = |[rho, ux, uy]: [f64; 3]| {
            !(rho > 0.0 && rho.is_finite()) || check_mach("initial velocity", [ux, uy]).is_err()
        };
        if let Some(c) = bespoke_gpu::par_first(n, |c| refused(fields(c))) {
            let [rho, ux, uy] = fields(c);
            if !(rho > 0.0 && rho.is_finite()) {
                let (x, y) = self.global_xy(c % nx, c / nx);
                return Err(LbmError::param(
                    "initial density",
                    rho,
                    format!("at cell ({x}, {y}) it must be positive and finite"),
                ));
            }
            check_mach("initial velocity", [ux, uy])?;
        }
        let layout = self.cfg.layout();
        let words = layout.words(n);
        // The words of every slot are kept only where the stash is rebuilt from them.
        let keep = self.stash_buffer().is_some();
        let mut slots = vec![Vec::new(); 9];
        let mut out = Vec::new();
        for w0 in (0..words).step_by(chunk_words) {
            let chunk = w0..words.min(w0.saturating_add(chunk_words));
            // ρ and u of the chunk's cells (one range, or two for paired f16), then each direction's words.
            let ranges = cells_of_words(layout, n, chunk.clone());
            let made = ranges.clone().map(|r| {
                let mut f = vec![[0.0; 3]; r.len()];
                bespoke_gpu::par_fill(&mut f, |k, v| *v = fields(r.start + k));
                f
            });
            let at = |c: usize| match ranges[0].contains(&c) {
                true => made[0][c - ranges[0].start],
                false => made[1][c - ranges[1].start],
            };
            out.resize(chunk.len(), 0);
            for (i, &w) in W.iter().enumerate() {
                bespoke_gpu::par_fill(&mut out, |j, o| {
                    *o = stored_word(
                        layout,
                        n,
                        chunk.start + j,
                        |c| {
                            let [rho, ux, uy] = at(c);
                            equilibrium_component(i, rho, [ux, uy])
                        },
                        w,
                    );
                });
                let slot = self.slot_of(i);
                self.a.write_at(self.gpu, slot, chunk.start, &out)?;
                if keep {
                    slots[slot].extend_from_slice(&out);
                }
            }
        }
        self.populations_set(&slots)
    }

    /// Sets every non-solid cell to equilibrium from arrays of ρ, u_x, u_y (row-major, nx·ny each).
    pub fn init_from_fields(&mut self, rho: &[f64], ux: &[f64], uy: &[f64]) -> Result<()> {
        let n = self.config().cells();
        if rho.len() != n || ux.len() != n || uy.len() != n {
            return Err(LbmError::Shape(format!(
                "fields of {}, {}, {} values for {n} cells",
                rho.len(),
                ux.len(),
                uy.len()
            )));
        }
        let nx = self.config().nx;
        self.init_equilibrium(|x, y| {
            let i = y * nx + x;
            (rho[i], [ux[i], uy[i]])
        })
    }

    /// Sets the post-collision populations S_i(x), direction-major (`s[i * nx * ny + y * nx + x]`).
    pub fn set_populations(&mut self, s: &[f64]) -> Result<()> {
        let n = self.config().cells();
        if s.len() != 9 * n {
            return Err(LbmError::Shape(format!(
                "{} populations given for {n} cells (need 9 per cell)",
                s.len()
            )));
        }
        if let Some(p) = s.iter().position(|v| !v.is_finite()) {
            return Err(LbmError::param(
                "population",
                s[p],
                format!("direction {}, cell {} is not finite", p / n, p % n),
            ));
        }
        match self.dist.is_some() {
            true => {
                let local = self.block_slice(s, 9);
                self.set_local_populations(&local)
            }
            false => self.set_local_populations(s),
        }
    }

    /// `set_populations` on this lattice's own cells (a block's, halo included).
    fn set_local_populations(&mut self, s: &[f64]) -> Result<()> {
        let n = self.cfg.cells();
        self.set_local_populations_by(|i, out| out.copy_from_slice(&s[i * n..(i + 1) * n]))
    }

    /// `set_local_populations` with direction i's values written by `direction(i, out)`, one at a time.
    fn set_local_populations_by(
        &mut self,
        mut direction: impl FnMut(usize, &mut [f64]),
    ) -> Result<()> {
        let n = self.cfg.cells();
        // The words of every slot are kept only where the stash is rebuilt from them.
        let keep = self.stash_buffer().is_some();
        let mut slots = vec![Vec::new(); 9];
        let mut values = vec![0.0; n];
        for (i, &w) in W.iter().enumerate() {
            let slot = self.slot_of(i);
            direction(i, &mut values);
            let words = stored_words(self.cfg.layout(), &values, w);
            self.a.write(self.gpu, slot, &words)?;
            if keep {
                slots[slot] = words;
            }
        }
        drop(values);
        self.populations_set(&slots)
    }

    /// The slot that holds post-collision direction `i` at parity 0: the in-place layout keeps S_i(x) in slot ī
    /// of x between an even and an odd step.
    fn slot_of(&self, i: usize) -> usize {
        match self.cfg.streaming {
            Streaming::Ab => i,
            Streaming::InPlace => OPP[i],
        }
    }

    /// After every slot's words were written (`slots`: each slot's words where the stash is rebuilt from them):
    /// the state is at parity 0, a block's halo is current, the stash matches.
    fn populations_set(&mut self, slots: &[Vec<u32>]) -> Result<()> {
        self.parity = 0;
        if let Some(d) = &self.dist {
            // The halo came from the whole domain's state: the next step needs no exchange.
            d.fresh.set(true);
        }
        self.fill_stash(slots)
    }

    /// Sets the stash of in-place interpolated links (`KernelSpec::stashed`) from the in-place state `slots` (the
    /// words of `a`) at the current parity: f_i*(x) sits in slot ī of x before an odd step and in slot i of
    /// x + c_i before an even one, until that step overwrites it.
    fn fill_stash(&self, slots: &[Vec<u32>]) -> Result<()> {
        match (self.stash_buffer(), self.stash_from_words(slots)) {
            (Some(b), Some(values)) => b.write_stash(self.gpu, &values),
            _ => Ok(()),
        }
    }

    /// The flag field's buffers, where this lattice keeps a stash (in a buffer of its own or after the table).
    fn stash_buffer(&self) -> Option<&crate::lattice::Boundary> {
        self.flag_bufs.as_ref().filter(|b| b.stash.is_some())
    }

    /// [`Self::fill_stash`]'s values (None where the lattice keeps no stash).
    fn stash_from_words(&self, slots: &[Vec<u32>]) -> Option<Vec<f32>> {
        self.stash_buffer()?;
        let e = self.encoded.as_ref()?;
        let (nx, n, layout) = (self.cfg.nx, self.cfg.cells(), self.cfg.layout());
        let mut values = vec![0.0f32; 2 * e.table.len()];
        for (cell, i, k) in e.interpolated_links() {
            let (slot, at) = if self.parity == 0 {
                (OPP[i], cell)
            } else {
                let (x, y) = self.flags.neighbour(cell % nx, cell / nx, i);
                (i, y * nx + x)
            };
            values[stash_index(k, i)] = stored_value(layout, &slots[slot], n, at);
        }
        Some(values)
    }

    /// The stash of in-place interpolated links as the kernels left it, one entry per link of the whole domain:
    /// (cell `y * nx + x` of the domain, direction i, the f32's bits), sorted. Empty where the lattice keeps no
    /// stash. Checkpoints save it because it cannot always be rebuilt from the stored populations: a driver
    /// may drop the kernel's round trip through f16 (`bespoke_gpu::Quirks`), so the stash holds values the
    /// words do not.
    pub(crate) fn stash_links(&self) -> Result<Vec<StashLink>> {
        let (Some(b), Some(e)) = (self.stash_buffer(), &self.encoded) else {
            return Ok(Vec::new());
        };
        let values = b.read_stash(self.gpu)?;
        let nx = self.cfg.nx;
        let mine: Vec<StashLink> = e
            .interpolated_links()
            .filter(|&(cell, _, _)| self.owns(cell % nx, cell / nx))
            .map(|(cell, i, k)| {
                let (x, y) = self.global_xy(cell % nx, cell / nx);
                let global = (y * self.global_nx() + x) as u64;
                StashLink::new(global, i, values[stash_index(k, i)].to_bits())
            })
            .collect();
        let mut all = match self.dist.is_some() {
            true => {
                let words: Vec<u32> = mine.iter().flat_map(StashLink::words).collect();
                self.all_gather_words(&words)?
                    .chunks_exact(4)
                    .map(StashLink::from_words)
                    .collect()
            }
            false => mine,
        };
        all.sort_unstable_by_key(StashLink::key);
        Ok(all)
    }

    /// Sets the stash from a checkpoint's `links` (`stash_links`); every link of this lattice's own cells must
    /// be among them. Halo cells of a block, which this rank does not update, keep what the words give.
    fn restore_stash(&self, words: &[Vec<u32>], links: &[StashLink]) -> Result<()> {
        let (Some(b), Some(mut values), Some(e)) = (
            self.stash_buffer(),
            self.stash_from_words(words),
            self.encoded.as_ref(),
        ) else {
            return Ok(());
        };
        let saved: std::collections::HashMap<(u64, u32), u32> =
            links.iter().map(|l| (l.key(), l.bits)).collect();
        let nx = self.cfg.nx;
        for (cell, i, k) in e.interpolated_links() {
            let (x, y) = self.global_xy(cell % nx, cell / nx);
            let global = (y * self.global_nx() + x) as u64;
            match saved.get(&(global, i as u32)) {
                Some(&bits) => values[stash_index(k, i)] = f32::from_bits(bits),
                None if self.owns(cell % nx, cell / nx) => {
                    return Err(LbmError::State(format!(
                        "the checkpoint's stash has no value for the interpolated link of cell ({x}, {y}) in \
                         direction {i}"
                    )));
                }
                None => {}
            }
        }
        b.write_stash(self.gpu, &values)
    }

    /// Whether `populations` can be read now (false for in-place streaming after an odd number of steps).
    pub fn populations_readable(&self) -> bool {
        self.parity == 0 || self.cfg.streaming == Streaming::Ab
    }

    /// The post-collision populations S_i(x) (direction-major). For in-place streaming they exist only after an
    /// even number of steps since the state was set.
    pub fn populations(&self) -> Result<Vec<f64>> {
        if !self.populations_readable() {
            return Err(LbmError::State(
                "the in-place lattice holds pre-collision populations after an odd number of steps; \
                 step once more to read the post-collision state"
                    .into(),
            ));
        }
        let n = self.cfg.cells();
        let src = self.pops_of(self.parity);
        let mut s = vec![0.0; 9 * n];
        for i in 0..9 {
            let slot = match self.cfg.streaming {
                Streaming::Ab => i,
                Streaming::InPlace => OPP[i],
            };
            let words = src.read(self.gpu, slot)?;
            decode(self.cfg.layout(), &words, W[i], &mut s[i * n..(i + 1) * n]);
        }
        match self.dist.is_some() {
            // A block's own cells of every rank, as the whole domain's populations.
            true => self.gather(&s, 9),
            false => Ok(s),
        }
    }

    /// The raw words of the buffers holding the current state (the whole domain's), for checkpoints, one
    /// direction at a time: `each(i, words)` for i = 0..9 in order, each direction's words dropped before
    /// the next is read. A distributed lattice gathers each onto rank 0; the other ranks get None.
    pub(crate) fn raw_state_each(
        &self,
        mut each: impl FnMut(usize, Option<Vec<u32>>),
    ) -> Result<()> {
        if self.dist.is_some() {
            self.settle()?;
        }
        for i in 0..9 {
            let local = self.local_raw_direction(i)?;
            each(
                i,
                match self.dist.is_some() {
                    true => self.gather_raw_direction(&local)?,
                    false => Some(local),
                },
            );
        }
        Ok(())
    }

    /// Slot `i`'s words of this lattice's own buffers, as `raw_state` holds them.
    pub(crate) fn local_raw_direction(&self, i: usize) -> Result<Vec<u32>> {
        let src = match self.cfg.streaming {
            Streaming::InPlace => &self.a,
            Streaming::Ab => self.pops_of(self.parity),
        };
        src.read(self.gpu, i)
    }

    /// In-place: which kernel runs next (0 odd, 1 even); two-lattice: always 0 after a restore.
    pub(crate) fn layout_parity(&self) -> usize {
        match self.cfg.streaming {
            Streaming::Ab => 0,
            Streaming::InPlace => self.parity,
        }
    }

    /// Restores the raw state a checkpoint saved; `stash`: its stash of in-place interpolated links (None for
    /// formats before 6, which saved none: it is rebuilt from the words then).
    pub(crate) fn restore_raw(
        &mut self,
        mut load: impl FnMut(usize, &[Range<usize>]) -> Result<Vec<u32>>,
        parity: usize,
        steps_done: u64,
        stash: Option<&[StashLink]>,
    ) -> Result<()> {
        // A block reads only the words its cells need (a few ranges a row), not the whole domain's.
        let needed = self.needed_words();
        let expect = needed.total();
        let layout = self.cfg.layout();
        let mut direction = |i: usize| -> Result<Vec<u32>> {
            let w = load(i, needed.ranges())?;
            if w.len() != expect {
                return Err(LbmError::Shape(format!(
                    "checkpoint direction {i} gave {} words, expected {expect}",
                    w.len()
                )));
            }
            if let Some(k) = first_non_finite_word(layout, &w) {
                return Err(LbmError::Shape(format!(
                    "checkpoint direction {i} holds a non-finite population (word {k} of those read): the state \
                     it saved had diverged, or the file is damaged"
                )));
            }
            Ok(match self.dist.is_some() {
                true => self.block_direction(&w, &needed),
                false => w,
            })
        };
        // One direction at a time, each dropped once uploaded; only a stash rebuilt from the words (in place,
        // with interpolated links) needs all nine at once.
        let keep = self.stash_buffer().is_some();
        let mut words = Vec::new();
        for i in 0..9 {
            let w = direction(i)?;
            self.a.write(self.gpu, i, &w)?;
            if keep {
                words.push(w);
            }
        }
        if let Some(d) = &self.dist {
            d.fresh.set(true);
        }
        self.parity = parity;
        self.steps_done = steps_done;
        if !keep {
            return Ok(());
        }
        let words = &words;
        match (self.cfg.streaming, stash) {
            (Streaming::InPlace, Some(links)) => self.restore_stash(words, links),
            (Streaming::InPlace, None) => self.fill_stash(words),
            (Streaming::Ab, _) => Ok(()),
        }
    }
}

/// One entry of a stash as checkpoints save it: the domain's cell index, the direction, the stashed f32's bits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct StashLink {
    pub cell: u64,
    pub dir: u32,
    pub bits: u32,
}

impl StashLink {
    pub fn new(cell: u64, dir: usize, bits: u32) -> Self {
        Self {
            cell,
            dir: dir as u32,
            bits,
        }
    }
    pub fn key(&self) -> (u64, u32) {
        (self.cell, self.dir)
    }
    /// As four words (cell low, cell high, direction, bits), for gathering across ranks.
    fn words(&self) -> [u32; 4] {
        [
            self.cell as u32,
            (self.cell >> 32) as u32,
            self.dir,
            self.bits,
        ]
    }
    fn from_words(w: &[u32]) -> Self {
        Self {
            cell: u64::from(w[0]) | (u64::from(w[1]) << 32),
            dir: w[2],
            bits: w[3],
        }
    }
}

/// The first of `words` (a direction's stored words in `layout`) that holds an infinity or a NaN: an f32 word, or
/// either f16 half of a word (padding halves are zero).
pub(crate) fn first_non_finite_word(layout: Layout, words: &[u32]) -> Option<usize> {
    let f16_bad = |h: u32| h & 0x7c00 == 0x7c00;
    words.iter().position(|&w| match layout {
        Layout::F32 => w & 0x7f80_0000 == 0x7f80_0000,
        Layout::F16Paired | Layout::F16Single => f16_bad(w & 0xffff) || f16_bad(w >> 16),
    })
}

#[cfg(test)]
mod tests {
    use super::{Layout, first_non_finite_word};

    #[test]
    fn non_finite_words_are_found_in_every_layout() {
        let f32s = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        assert_eq!(
            first_non_finite_word(Layout::F32, &f32s(&[1.0, -0.0, f32::MAX, 1e-40])),
            None
        );
        assert_eq!(
            first_non_finite_word(Layout::F32, &f32s(&[1.0, f32::NAN])),
            Some(1)
        );
        assert_eq!(
            first_non_finite_word(Layout::F32, &f32s(&[f32::NEG_INFINITY])),
            Some(0)
        );
        let pair =
            |lo: half::f16, hi: half::f16| u32::from(lo.to_bits()) | u32::from(hi.to_bits()) << 16;
        let (one, max) = (half::f16::ONE, half::f16::MAX);
        for layout in [Layout::F16Paired, Layout::F16Single] {
            assert_eq!(
                first_non_finite_word(layout, &[pair(one, max), pair(max, half::f16::ZERO)]),
                None
            );
            assert_eq!(
                first_non_finite_word(layout, &[pair(one, one), pair(one, half::f16::NAN)]),
                Some(1)
            );
            assert_eq!(
                first_non_finite_word(layout, &[pair(half::f16::INFINITY, one)]),
                Some(0)
            );
        }
    }
}
