//! Checkpoints: configuration, flags, step count, layout parity and the raw population words, so a restarted run
//! continues bit for bit like one that never stopped.
//!
//! Layout (little-endian): magic (`BSPKLBM6`, `MAGIC` below); u64 length + UTF-8 caller metadata; u64 nx, ny; u8 storage,
//! streaming, collision; f64 ω, Λ, F_x, F_y, C_s (Smagorinsky; not in version 3, which still reads); u64 steps done; u8 parity; u64 cell count and per cell
//! kind | value index << 3; u64 value count and the f64 pairs; u64 wall-distance count and per link u64 x, y, d
//! and f64 q; 9 × (u64 word count, words); u64 stash count and per in-place interpolated link u64 cell
//! (y·nx + x), u8 direction, u32 the stashed f32's bits (0 links for two-lattice streaming or no wall
//! distances); a CRC-32 (IEEE) of everything before it, u32.
//!
//! Files are written to a temporary file in the same folder, flushed and synced, then renamed over the old one:
//! a crash or a full disk during a write leaves the previous checkpoint as it was.

use std::io::{Read, Write};
use std::path::Path;

use bespoke_gpu::{AtomicFile, Gpu};

use crate::config::{Collision, Config, Storage, Streaming};
use crate::error::{LbmError, Result};
use crate::flags::{Cell, Flags};
use crate::lattice::Lattice;
use crate::state::StashLink;

// 2: f16 words pair rows y and y + ny/2 (an odd ny, never paired, stores one f16 per cell in order); in-place
// walls keep bounced populations in the solid cell.
// 3: wall distances (interpolated bounce-back).
// 4: the Smagorinsky constant after the force.
// 5: a CRC-32 of the file at its end.
// 6: the stash of in-place interpolated links after the words (rebuilding it from the words assumed the kernel's
// f16 round trip is kept; NVIDIA's driver 580 drops it, and restarts differed).
const MAGIC: &[u8; 8] = b"BSPKLBM6";
/// Version 5 differs only by the missing stash (rebuilt from the words), version 4 by the missing checksum
/// too, version 3 by the missing Smagorinsky constant (0) too.
const MAGIC_5: &[u8; 8] = b"BSPKLBM5";
const MAGIC_4: &[u8; 8] = b"BSPKLBM4";
const MAGIC_3: &[u8; 8] = b"BSPKLBM3";

impl Lattice<'_> {
    /// Writes the lattice's full state to `path`, with `meta` (free text, e.g. the case's parameters). The file
    /// is written as it is made, one direction's words at a time (held whole in memory until 2026-11-29: the
    /// words and the file's bytes, 72 bytes a cell in f32, on every rank of a distributed lattice).
    pub fn checkpoint(&self, path: &Path, meta: &str) -> Result<()> {
        self.checkpoint_to(path, meta, None)
    }

    /// [`checkpoint`](Self::checkpoint) whose file write fails after `after` bytes, as a full disk would (tests
    /// of what a failed checkpoint leaves: the previous file, whole).
    #[doc(hidden)]
    pub fn checkpoint_failing(&self, path: &Path, meta: &str, after: usize) -> Result<()> {
        self.checkpoint_to(path, meta, Some(after))
    }

    fn checkpoint_to(&self, path: &Path, meta: &str, fail_after: Option<usize>) -> Result<()> {
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
            out.put(&(flags.cells().len() as u64).to_le_bytes());
            let table = put_cells(&mut out, flags);
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
        // Rank 0 gets each direction whole; the others, whose sink writes nothing, hold only their block.
        self.raw_state_each(|_, words| {
            if let Some(w) = words {
                out.put_words(&w);
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
            .restore_raw(|i| words.direction(i), parity, steps, stash.as_deref())
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

/// A checkpoint read from disk and checked (checksum, format, every field but the populations' values), before
/// any device is involved. The nine directions' words stay in the file until the lattice loads them, one at a
/// time ([`Words::direction`]): until 2026-11-29 the whole file and then every word were read into memory (72
/// bytes a cell in f32), also by the device-free `check` that only compares the configuration.
pub(crate) struct Saved {
    pub meta: String,
    pub cfg: Config,
    pub flags: Flags,
    words: Words,
    /// The stash of in-place interpolated links (None before format 6).
    stash: Option<Vec<StashLink>>,
    parity: usize,
    pub steps: u64,
    /// The format version of a file that carries no checksum (3 or 4).
    unchecked: Option<u32>,
}

/// Where each direction's words lie in a checked checkpoint: (byte offset, word count).
pub(crate) struct Words {
    file: std::io::BufReader<std::fs::File>,
    path: std::path::PathBuf,
    at: [(u64, usize); 9],
}

impl Words {
    /// Direction (slot) `i`'s words, read from the file.
    pub(crate) fn direction(&mut self, i: usize) -> Result<Vec<u32>> {
        use std::io::{Seek, SeekFrom};
        let (at, n) = self.at[i];
        let mut bytes = vec![0u8; n * 4];
        self.file
            .seek(SeekFrom::Start(at))
            .and_then(|_| self.file.read_exact(&mut bytes))
            .map_err(|e| LbmError::io(&self.path, e))?;
        Ok(bytes
            .chunks_exact(4)
            .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect())
    }
}

impl Saved {
    pub(crate) fn read(path: &Path) -> Result<Self> {
        let open = || {
            std::fs::File::open(path)
                .map(|f| std::io::BufReader::with_capacity(1 << 20, f))
                .map_err(|e| LbmError::io(path, e))
        };
        let mut file = open()?;
        let len = file
            .get_ref()
            .metadata()
            .map_err(|e| LbmError::io(path, e))?
            .len();
        let mut r = Reader {
            file: open()?,
            at: 0,
            end: len,
            path,
        };
        let magic = r.take(8)?;
        let (v3, v4, v5) = (magic == MAGIC_3, magic == MAGIC_4, magic == MAGIC_5);
        if magic != MAGIC && !v3 && !v4 && !v5 {
            return Err(LbmError::file(
                path,
                if magic.starts_with(b"BSPKLBM") {
                    "a bespoke-lbm checkpoint of another format version; restart from an initial state"
                } else {
                    "not a bespoke-lbm checkpoint (bad magic)"
                },
            ));
        }
        if magic == MAGIC || v5 {
            let body = len
                .checked_sub(4)
                .filter(|&b| b >= 8)
                .ok_or_else(|| LbmError::file(path, "truncated: no room for the checksum"))?;
            // The whole body through the checksum first, a buffer at a time, before any field is trusted.
            let mut crc = crc32fast::Hasher::new();
            let mut left = body;
            let mut buf = vec![0u8; 1 << 20];
            while left > 0 {
                let n = (left.min(buf.len() as u64)) as usize;
                file.read_exact(&mut buf[..n])
                    .map_err(|e| LbmError::io(path, e))?;
                crc.update(&buf[..n]);
                left -= n as u64;
            }
            let mut tail = [0u8; 4];
            file.read_exact(&mut tail)
                .map_err(|e| LbmError::io(path, e))?;
            let (stored, computed) = (u32::from_le_bytes(tail), crc.finalize());
            if stored != computed {
                return Err(LbmError::file(
                    path,
                    format!(
                        "checksum mismatch (stored {stored:08x}, computed {computed:08x}): the file is corrupted or \
                         truncated; resume from another checkpoint or restart"
                    ),
                ));
            }
            r.end = body;
        }
        drop(file);
        // Older formats carry no checksum: say so with any error, and warn when they load.
        let unchecked = (v3 || v4).then_some(if v3 { 3 } else { 4 });
        let r = &mut r;
        let parsed = (|| -> Result<_> {
            let meta = String::from_utf8(r.bytes()?)
                .map_err(|_| LbmError::file(path, "metadata is not UTF-8"))?;
            parse_body(r, path, v3, magic == MAGIC).map(|b| (meta, b))
        })();
        let (meta, (cfg, flags, at, stash, parity, steps)) =
            parsed.map_err(|e| match unchecked {
                Some(v) => LbmError::file(path, format!("{e} (format {v} carries no checksum)")),
                None => e,
            })?;
        cfg.check()
            .map_err(|e| LbmError::file(path, format!("its configuration: {e}")))?;
        let expect = cfg.layout().words(cfg.cells());
        if let Some(&(_, n)) = at.iter().find(|(_, n)| *n != expect) {
            return Err(LbmError::file(
                path,
                format!(
                    "a direction of {n} words, where a {}x{} lattice has {expect}",
                    cfg.nx, cfg.ny
                ),
            ));
        }
        Ok(Self {
            meta,
            cfg,
            flags,
            words: Words {
                file: open()?,
                path: path.to_owned(),
                at,
            },
            stash,
            parity,
            steps,
            unchecked,
        })
    }
}

/// What a checkpoint's body holds: configuration, flags, where the raw words lie, the stash, parity, steps done.
type Body = (
    Config,
    Flags,
    [(u64, usize); 9],
    Option<Vec<StashLink>>,
    usize,
    u64,
);

/// Reads the body after the metadata (`v3`: without the Smagorinsky constant; `stash`: with the stash).
fn parse_body(r: &mut Reader<'_>, path: &Path, v3: bool, stash: bool) -> Result<Body> {
    let nx = r.usize()?;
    let ny = r.usize()?;
    let storage = match r.u8()? {
        0 => Storage::F32,
        1 => Storage::F16,
        v => return Err(LbmError::file(path, format!("unknown storage code {v}"))),
    };
    let streaming = match r.u8()? {
        0 => Streaming::Ab,
        1 => Streaming::InPlace,
        v => return Err(LbmError::file(path, format!("unknown streaming code {v}"))),
    };
    let kind = r.u8()?;
    let [omega, lambda, fx, fy] = [r.f64()?, r.f64()?, r.f64()?, r.f64()?];
    let smagorinsky = if v3 { 0.0 } else { r.f64()? };
    let collision = match kind {
        0 => Collision::Bgk { omega },
        1 => Collision::Trt { omega, lambda },
        v => return Err(LbmError::file(path, format!("unknown collision code {v}"))),
    };
    let steps = r.u64()?;
    let parity = usize::from(r.u8()?);
    if parity > 1 {
        return Err(LbmError::file(path, format!("bad parity {parity}")));
    }
    let codes = r.words()?;
    let table_len = r.usize()?;
    let table: Vec<[f64; 2]> = (0..table_len)
        .map(|_| Ok([r.f64()?, r.f64()?]))
        .collect::<Result<_>>()?;
    let mut flags = flags_of(nx, ny, &codes, &table)
        .map_err(|why| LbmError::file(path, format!("flags: {why}")))?;
    drop(codes);
    for _ in 0..r.usize()? {
        let (x, y, d, q) = (r.usize()?, r.usize()?, r.usize()?, r.f64()?);
        flags
            .set_wall_distance(x, y, d, q)
            .map_err(|e| LbmError::file(path, format!("flags: {e}")))?;
    }
    let mut at = [(0, 0); 9];
    for a in &mut at {
        *a = r.skip_words()?;
    }
    let stash = match stash {
        false => None,
        true => {
            let count = r.usize()?;
            let cells = (nx as u64).saturating_mul(ny as u64);
            let room = (r.end - r.at) / 13;
            let mut links =
                Vec::with_capacity(count.min(usize::try_from(room).unwrap_or(usize::MAX)));
            for _ in 0..count {
                let (cell, dir, bits) = (r.u64()?, r.u8()?, r.u32()?);
                if cell >= cells || !(1..9).contains(&dir) {
                    return Err(LbmError::file(
                        path,
                        format!(
                            "stash: link of cell {cell} in direction {dir} outside the {nx}x{ny} lattice"
                        ),
                    ));
                }
                links.push(StashLink::new(cell, usize::from(dir), bits));
            }
            Some(links)
        }
    };
    if r.at != r.end {
        return Err(LbmError::file(path, "trailing bytes after the populations"));
    }
    let cfg = Config {
        nx,
        ny,
        storage,
        streaming,
        collision,
        force: [fx, fy],
        smagorinsky,
    };
    Ok((cfg, flags, at, stash, parity, steps))
}

/// Writes every cell as kind | (index of its exact f64 value) << 3 (u32), in row-major order, and returns the
/// value table the indices point into.
fn put_cells(out: &mut Sink<'_>, flags: &Flags) -> Vec<[f64; 2]> {
    let mut table: Vec<[f64; 2]> = Vec::new();
    let mut index = std::collections::HashMap::new();
    let mut bytes = Vec::with_capacity(WORDS_AT_ONCE * 4);
    for c in flags.cells() {
        let (kind, v) = c.saved();
        let slot = *index.entry(v.map(f64::to_bits)).or_insert_with(|| {
            table.push(v);
            table.len() - 1
        });
        bytes.extend_from_slice(&(u32::from(kind) | ((slot as u32) << 3)).to_le_bytes());
        if bytes.len() >= WORDS_AT_ONCE * 4 {
            out.put(&bytes);
            bytes.clear();
        }
    }
    out.put(&bytes);
    table
}

/// Words converted to bytes at a time while a checkpoint is written.
const WORDS_AT_ONCE: usize = 1 << 16;

/// Where a checkpoint goes as it is made: rank 0's file ([`AtomicFile`]: whole or not at all) and the running
/// CRC-32 of what was written; nothing on other ranks. The first error is kept and later writes skipped, so
/// the caller carries on through its gathers and learns of it from [`finish`](Self::finish).
struct Sink<'p> {
    path: &'p Path,
    root: bool,
    file: Option<AtomicFile>,
    crc: crc32fast::Hasher,
    err: Option<std::io::Error>,
}

impl<'p> Sink<'p> {
    fn new(root: bool, path: &'p Path, fail_after: Option<usize>) -> Self {
        let (file, err) = match root {
            false => (None, None),
            true => match fail_after.map_or_else(
                || AtomicFile::create(path),
                |n| AtomicFile::create_failing(path, n),
            ) {
                Ok(f) => (Some(f), None),
                Err(e) => (None, Some(e)),
            },
        };
        Self {
            path,
            root,
            file,
            crc: crc32fast::Hasher::new(),
            err,
        }
    }
    /// Whether bytes put now are written (rank 0, no error yet): what only the file needs can be skipped.
    fn writes(&self) -> bool {
        self.file.is_some() && self.err.is_none()
    }
    fn put(&mut self, bytes: &[u8]) {
        if !self.writes() {
            return;
        }
        self.crc.update(bytes);
        if let Some(Err(e)) = self.file.as_mut().map(|f| f.write_all(bytes)) {
            self.err = Some(e);
        }
    }
    /// u64 count, then the words (little-endian).
    fn put_words(&mut self, words: &[u32]) {
        self.put(&(words.len() as u64).to_le_bytes());
        let mut bytes = Vec::with_capacity(WORDS_AT_ONCE.min(words.len()) * 4);
        for chunk in words.chunks(WORDS_AT_ONCE) {
            if !self.writes() {
                return;
            }
            bytes.clear();
            bytes.extend(chunk.iter().flat_map(|w| w.to_le_bytes()));
            self.put(&bytes);
        }
    }
    /// The checksum, then the file renamed into place (rank 0); the first error of the write, naming the path.
    fn finish(mut self) -> Result<()> {
        if !self.root {
            return Ok(());
        }
        let crc = self.crc.clone().finalize();
        if let Some(f) = self.file.as_mut()
            && self.err.is_none()
            && let Err(e) = f.write_all(&crc.to_le_bytes())
        {
            self.err = Some(e);
        }
        match (self.err, self.file) {
            (Some(e), _) => Err(LbmError::io(self.path, e)),
            (None, Some(f)) => f.commit().map_err(|e| LbmError::io(self.path, e)),
            (None, None) => Ok(()),
        }
    }
}

fn flags_of(
    nx: usize,
    ny: usize,
    codes: &[u32],
    table: &[[f64; 2]],
) -> std::result::Result<Flags, String> {
    if codes.len() != nx.saturating_mul(ny) {
        return Err(format!("{} cells for a {nx}x{ny} lattice", codes.len()));
    }
    let mut flags = Flags::fluid(nx, ny);
    for (i, &code) in codes.iter().enumerate() {
        let v = *table
            .get((code >> 3) as usize)
            .ok_or_else(|| format!("cell {i}: value {} missing", code >> 3))?;
        let kind = (code & 7) as u8;
        let cell =
            Cell::from_saved(kind, v).ok_or_else(|| format!("cell {i}: unknown kind {kind}"))?;
        flags.set(i % nx, i / nx, cell);
    }
    Ok(flags)
}

fn put_u64(out: &mut Vec<u8>, v: u64) {
    out.extend_from_slice(&v.to_le_bytes());
}
fn put_bytes(out: &mut Vec<u8>, b: &[u8]) {
    put_u64(out, b.len() as u64);
    out.extend_from_slice(b);
}
/// The checkpoint's fields in order, from the file, up to `end` (the checksum's start, or the file's end).
struct Reader<'a> {
    file: std::io::BufReader<std::fs::File>,
    at: u64,
    end: u64,
    path: &'a Path,
}

impl Reader<'_> {
    /// Room for `n` more bytes before `end`, or "truncated".
    fn room(&self, n: u64) -> Result<()> {
        match self.at.checked_add(n) {
            Some(e) if e <= self.end => Ok(()),
            _ => Err(LbmError::file(
                self.path,
                format!("truncated at byte {}", self.at),
            )),
        }
    }
    fn take(&mut self, n: usize) -> Result<Vec<u8>> {
        self.room(n as u64)?;
        let mut b = vec![0u8; n];
        self.file
            .read_exact(&mut b)
            .map_err(|e| LbmError::io(self.path, e))?;
        self.at += n as u64;
        Ok(b)
    }
    fn array<const N: usize>(&mut self) -> Result<[u8; N]> {
        let b = self.take(N)?;
        Ok(b.try_into().unwrap_or([0; N]))
    }
    fn u8(&mut self) -> Result<u8> {
        Ok(self.array::<1>()?[0])
    }
    fn u64(&mut self) -> Result<u64> {
        Ok(u64::from_le_bytes(self.array()?))
    }
    fn u32(&mut self) -> Result<u32> {
        Ok(u32::from_le_bytes(self.array()?))
    }
    fn usize(&mut self) -> Result<usize> {
        let v = self.u64()?;
        usize::try_from(v).map_err(|_| LbmError::file(self.path, format!("size {v} too large")))
    }
    fn f64(&mut self) -> Result<f64> {
        Ok(f64::from_bits(self.u64()?))
    }
    fn bytes(&mut self) -> Result<Vec<u8>> {
        let n = self.usize()?;
        self.take(n)
    }
    /// A word count and the bytes of that many words, checked against `end`.
    fn word_bytes(&mut self) -> Result<(usize, u64)> {
        let n = self.usize()?;
        let bytes = (n as u64)
            .checked_mul(4)
            .ok_or_else(|| LbmError::file(self.path, "word count overflows"))?;
        self.room(bytes)?;
        Ok((n, bytes))
    }
    fn words(&mut self) -> Result<Vec<u32>> {
        let (n, _) = self.word_bytes()?;
        let b = self.take(n * 4)?;
        Ok(b.chunks_exact(4)
            .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect())
    }
    /// Passes over an array of words: (where its words start, how many).
    fn skip_words(&mut self) -> Result<(u64, usize)> {
        let (n, bytes) = self.word_bytes()?;
        let start = self.at;
        let jump =
            i64::try_from(bytes).map_err(|_| LbmError::file(self.path, "word count overflows"))?;
        self.file
            .seek_relative(jump)
            .map_err(|e| LbmError::io(self.path, e))?;
        self.at += bytes;
        Ok((start, n))
    }
}

#[cfg(test)]
mod tests {
    use super::Sink;

    /// A checkpoint written in pieces: whole or not at all. A write that fails half-way (as a full disk would)
    /// is reported with the path and leaves the previous file as it was, and no temporary file.
    #[test]
    fn a_write_that_fails_half_way_leaves_the_previous_file() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("state.ckpt");
        let write = |fail_after: Option<usize>, pieces: &[&[u8]]| {
            let mut out = Sink::new(true, &path, fail_after);
            for p in pieces {
                out.put(p);
            }
            out.finish()
        };
        write(None, &[b"the previous, ", b"good checkpoint"]).expect("first write");
        let good = std::fs::read(&path).expect("read");
        let crc = crc32fast::hash(b"the previous, good checkpoint").to_le_bytes();
        assert_eq!(good, [&b"the previous, good checkpoint"[..], &crc].concat());
        let e = write(Some(1000), &[&[7u8; 600], &[8u8; 600], &[9u8; 600]])
            .expect_err("the simulated failure");
        assert!(e.to_string().contains("simulated failure"), "{e}");
        assert!(e.to_string().contains("state.ckpt"), "{e}");
        assert_eq!(std::fs::read(&path).expect("read"), good);
        let names: Vec<_> = std::fs::read_dir(dir.path())
            .expect("list")
            .map(|e| e.expect("entry").file_name())
            .collect();
        assert_eq!(names.len(), 1, "{names:?}");
        // Another rank writes nothing and reports nothing.
        let mut other = Sink::new(false, &path, Some(0));
        other.put(b"ignored");
        other.finish().expect("not rank 0");
        assert_eq!(std::fs::read(&path).expect("read"), good);
        write(None, &[b"new"]).expect("a later write");
        assert_eq!(&std::fs::read(&path).expect("read")[..3], b"new");
    }
}
