//! Checkpoints: configuration, flags, step count, layout parity and the raw population words, so a restarted run
//! continues bit for bit like one that never stopped.
//!
//! Layout (little-endian): magic (`BSPKLBM7`, `MAGIC` below); u64 length + UTF-8 caller metadata; u64 nx, ny; u8 storage,
//! streaming, collision; f64 ω, Λ, F_x, F_y, C_s (Smagorinsky; not in version 3, which still reads); u64 steps done; u8 parity; the cells, each
//! coded kind | value index << 3, as u8 0, u64 cell count and a u32 code a cell (row-major), or as u8 1 and per row
//! a u32 run count and per run u32 length, u32 code (whichever is smaller; versions before 7: the first without
//! its u8); u64 value count and the f64 pairs; u64 wall-distance count and per link u64 x, y, d
//! and f64 q; 9 × (u64 word count, words); u64 stash count and per in-place interpolated link u64 cell
//! (y·nx + x), u8 direction, u32 the stashed f32's bits (0 links for two-lattice streaming or no wall
//! distances); a CRC-32 (IEEE) of everything before it, u32.
//!
//! Files are written to a temporary file in the same folder, flushed and synced, then renamed over the old one:
//! a crash or a full disk during a write leaves the previous checkpoint as it was.

mod read;
mod write;

use std::path::Path;

use bespoke_gpu::Gpu;

use crate::config::{Collision, Storage, Streaming};
use crate::error::{LbmError, Result};
use crate::lattice::Lattice;
use crate::state::first_non_finite_word;
pub(crate) use read::Saved;
use write::{Sink, put_bytes, put_cells, put_u64};

// 2: f16 words pair rows y and y + ny/2 (an odd ny, never paired, stores one f16 per cell in order); in-place
// walls keep bounced populations in the solid cell.
// 3: wall distances (interpolated bounce-back).
// 4: the Smagorinsky constant after the force.
// 5: a CRC-32 of the file at its end.
// 6: the stash of in-place interpolated links after the words (rebuilding it from the words assumed the kernel's
// f16 round trip is kept; NVIDIA's driver 580 drops it, and restarts differed).
// 7: the cells as each row's runs where that is smaller (a 32 000² lattice's walls: a few hundred kB, not 4 GB,
// and read without a code a cell in memory).
const MAGIC: &[u8; 8] = b"BSPKLBM7";
/// Version 6 differs only by the cells always stored a code a cell (and no tag saying so), version 5 by the
/// missing stash too (rebuilt from the words), version 4 by the missing checksum too, version 3 by the missing
/// Smagorinsky constant (0) too.
const MAGIC_6: &[u8; 8] = b"BSPKLBM6";
const MAGIC_5: &[u8; 8] = b"BSPKLBM5";
const MAGIC_4: &[u8; 8] = b"BSPKLBM4";
const MAGIC_3: &[u8; 8] = b"BSPKLBM3";

impl Lattice<'_> {
    /// Writes the lattice's full state to `path`, with `meta` (free text, e.g. the case's parameters). The file
    /// is written as it is made, one direction's words at a time (held whole in memory until 2026-11-29: the
    /// words and the file's bytes, 72 bytes a cell in f32, on every rank of a distributed lattice).
    pub fn checkpoint(&self, path: &Path, meta: &str) -> Result<()> {
        self.checkpoint_to(path, meta, None, false)
    }

    /// [`checkpoint`](Self::checkpoint) with the cells stored a code a cell whatever their runs (tests of that
    /// form, which porous masks take and which files before format 7 hold).
    #[doc(hidden)]
    pub fn checkpoint_cells_each(&self, path: &Path, meta: &str) -> Result<()> {
        self.checkpoint_to(path, meta, None, true)
    }

    /// [`checkpoint`](Self::checkpoint) whose file write fails after `after` bytes, as a full disk would (tests
    /// of what a failed checkpoint leaves: the previous file, whole).
    #[doc(hidden)]
    pub fn checkpoint_failing(&self, path: &Path, meta: &str, after: usize) -> Result<()> {
        self.checkpoint_to(path, meta, Some(after), false)
    }

    fn checkpoint_to(
        &self,
        path: &Path,
        meta: &str,
        fail_after: Option<usize>,
        cells_each: bool,
    ) -> Result<()> {
        let cfg = self.config();
        // Rank 0 writes. Every rank takes part in every gather below whatever happens to the file, and a failed
        // write is reported after them: a rank that returned early would leave the others waiting.
        let mut out = Sink::new(self.is_root(), path, fail_after);
        let mut head = Vec::new();
        head.extend_from_slice(MAGIC);
        put_bytes(&mut head, meta.as_bytes());
        put_u64(&mut head, cfg.nx as u64);
        put_u64(&mut head, cfg.ny as u64);
        head.push(match cfg.storage {
            Storage::F32 => 0,
            Storage::F16 => 1,
        });
        head.push(match cfg.streaming {
            Streaming::Ab => 0,
            Streaming::InPlace => 1,
        });
        let (kind, omega, lambda) = match cfg.collision {
            Collision::Bgk { omega } => (0, omega, 0.0),
            Collision::Trt { omega, lambda } => (1, omega, lambda),
        };
        head.push(kind);
        for v in [omega, lambda, cfg.force[0], cfg.force[1], cfg.smagorinsky] {
            head.extend_from_slice(&v.to_le_bytes());
        }
        put_u64(&mut head, self.steps_done());
        head.push(self.layout_parity() as u8);
        out.put(&head);
        if out.writes() {
            let flags = self.flags();
            let table = put_cells(&mut out, flags, cells_each);
            let mut tail = Vec::new();
            put_u64(&mut tail, table.len() as u64);
            for v in table.iter().flatten() {
                tail.extend_from_slice(&v.to_le_bytes());
            }
            let links: Vec<_> = flags.wall_distances().collect();
            put_u64(&mut tail, links.len() as u64);
            for ((x, y, d), q) in links {
                for v in [x, y, d] {
                    put_u64(&mut tail, v as u64);
                }
                tail.extend_from_slice(&q.to_le_bytes());
            }
            out.put(&tail);
        }
        // Rank 0 gets each direction whole; the others, whose sink writes nothing, hold only their block. A
        // non-finite population (a run that diverged) is not written over the previous checkpoint: it could not
        // be resumed (`restore_raw` refuses it), and the state it would replace could.
        let layout = cfg.layout();
        let mut diverged = None;
        self.raw_state_each(|i, words| {
            if let Some(w) = words {
                if diverged.is_none() {
                    diverged = first_non_finite_word(layout, &w).map(|k| (i, k));
                }
                if diverged.is_none() {
                    out.put_words(&w);
                }
            }
        })?;
        let stash = self.stash_links()?;
        let mut tail = Vec::new();
        put_u64(&mut tail, stash.len() as u64);
        for l in &stash {
            put_u64(&mut tail, l.cell);
            tail.push(l.dir as u8);
            tail.extend_from_slice(&l.bits.to_le_bytes());
        }
        out.put(&tail);
        // Rank 0 alone saw the words; every rank returns its verdict (a collective, called alike on every rank).
        if !self.all_ranks(diverged.is_none())? {
            // Dropped uncommitted: the previous file stays as it was.
            drop(out);
            return Err(LbmError::DivergedCheckpoint {
                path: path.display().to_string(),
                at: diverged.map_or(String::new(), |(slot, word)| {
                    format!(" (slot {slot}, word {word})")
                }),
            });
        }
        out.finish()
    }

    /// Rebuilds a lattice from a checkpoint; returns it with the metadata it was saved with.
    pub fn resume<'g>(gpu: &'g Gpu, path: &Path) -> Result<(Lattice<'g>, String)> {
        Self::resume_with(gpu, path, None)
    }

    /// Rebuilds one rank's block of a distributed lattice from a checkpoint (of a single-domain or a
    /// distributed run: both hold the whole domain's state), on every rank.
    pub fn resume_distributed<'g>(
        gpu: &'g Gpu,
        path: &Path,
        ranks: &crate::distributed::Ranks,
    ) -> Result<(Lattice<'g>, String)> {
        Self::resume_with(gpu, path, Some(ranks))
    }

    fn resume_with<'g>(
        gpu: &'g Gpu,
        path: &Path,
        ranks: Option<&crate::distributed::Ranks>,
    ) -> Result<(Lattice<'g>, String)> {
        let Saved {
            meta,
            cfg,
            flags,
            words,
            stash,
            parity,
            steps,
            unchecked,
        } = Saved::read(path)?;
        let mut lattice = match ranks {
            None => Lattice::new(gpu, cfg, flags),
            Some(r) => Lattice::new_distributed(gpu, cfg, flags, r),
        }
        .map_err(|e| LbmError::file(path, e.to_string()))?;
        let mut words = words;
        lattice
            .restore_raw(|i, r| words.read(i, r), parity, steps, stash.as_deref())
            .map_err(|e| LbmError::file(path, e.to_string()))?;
        if let Some(v) = unchecked {
            lattice.warn(format!(
                "{} is a format-{v} checkpoint, which carries no checksum: corruption in it would go unnoticed \
                 (checkpoints written now carry one)",
                path.display()
            ));
        }
        Ok((lattice, meta))
    }
}
