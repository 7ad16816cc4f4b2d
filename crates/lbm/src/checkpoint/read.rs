//! Reading a checkpoint: the checksum first, then every field but the populations, checked, before any device
//! is involved; each direction's words later, from its offset, when the lattice loads it.

use std::io::Read;
use std::ops::Range;
use std::path::Path;

use super::write::{CELLS_AS_RUNS, CELLS_EACH};
use super::{MAGIC, MAGIC_3, MAGIC_4, MAGIC_5, MAGIC_6};
use crate::config::{Collision, Config, Storage, Streaming};
use crate::error::{LbmError, Result};
use crate::flags::{Cell, Flags, push_run};
use crate::state::StashLink;

/// A checkpoint read from disk and checked (checksum, format, every field but the populations' values), before
/// any device is involved. The nine directions' words stay in the file until the lattice loads them, one at a
/// time, a block's share on a rank ([`Words::read`]): until 2026-11-29 the whole file and then every word were read into memory (72
/// bytes a cell in f32), also by the device-free `check` that only compares the configuration.
pub(crate) struct Saved {
    pub meta: String,
    pub cfg: Config,
    pub flags: Flags,
    pub(super) words: Words,
    /// The stash of in-place interpolated links (None before format 6).
    pub(super) stash: Option<Vec<StashLink>>,
    pub(super) parity: usize,
    pub steps: u64,
    /// The format version of a file that carries no checksum (3 or 4).
    pub(super) unchecked: Option<u32>,
}

/// Where each direction's words lie in a checked checkpoint: (byte offset, word count).
pub(crate) struct Words {
    file: std::io::BufReader<std::fs::File>,
    path: std::path::PathBuf,
    at: [(u64, usize); 9],
}

impl Words {
    /// The words of `ranges` (word indices, sorted) of direction (slot) `i`, read from the file and
    /// concatenated: a block's share of the direction, or all of it. A range past the direction's words is an
    /// error.
    pub(crate) fn read(&mut self, i: usize, ranges: &[Range<usize>]) -> Result<Vec<u32>> {
        use std::io::{Seek, SeekFrom};
        let (at, n) = self.at[i];
        let total: usize = ranges.iter().map(|r| r.len()).sum();
        let mut out = Vec::with_capacity(total);
        let mut bytes = Vec::new();
        for r in ranges {
            if r.end > n {
                // The caller names the file.
                return Err(LbmError::Shape(format!(
                    "direction {i} holds {n} words; words {}..{} were asked for",
                    r.start, r.end
                )));
            }
            bytes.resize(r.len() * 4, 0);
            self.file
                .seek(SeekFrom::Start(at + 4 * r.start as u64))
                .and_then(|_| self.file.read_exact(&mut bytes))
                .map_err(|e| LbmError::io(&self.path, e))?;
            out.extend(
                bytes
                    .chunks_exact(4)
                    .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]])),
            );
        }
        Ok(out)
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
        let version = [MAGIC_3, MAGIC_4, MAGIC_5, MAGIC_6, MAGIC]
            .iter()
            .zip(3u32..)
            .find(|(m, _)| magic == m[..])
            .map(|(_, v)| v);
        let Some(version) = version else {
            return Err(LbmError::file(
                path,
                if magic.starts_with(b"BSPKLBM") {
                    "a bespoke-lbm checkpoint of another format version; restart from an initial state"
                } else {
                    "not a bespoke-lbm checkpoint (bad magic)"
                },
            ));
        };
        if version >= 5 {
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
        let unchecked = (version < 5).then_some(version);
        let r = &mut r;
        let parsed = (|| -> Result<_> {
            let meta = String::from_utf8(r.bytes()?)
                .map_err(|_| LbmError::file(path, "metadata is not UTF-8"))?;
            parse_body(r, path, version).map(|b| (meta, b))
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

/// Reads the body after the metadata of a file of format `version` (3: without the Smagorinsky constant; 6 on:
/// with the stash; 7 on: the cells' form tagged).
pub(super) fn parse_body(r: &mut Reader<'_>, path: &Path, version: u32) -> Result<Body> {
    let (v3, stash) = (version == 3, version >= 6);
    let nx = r.usize()?;
    let ny = r.usize()?;
    if nx == 0 || ny == 0 || nx.checked_mul(ny).is_none() {
        return Err(LbmError::file(path, format!("a {nx}x{ny} lattice")));
    }
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
    let form = if version >= 7 { r.u8()? } else { CELLS_EACH };
    let rows = match form {
        CELLS_EACH => r.code_rows(nx, ny)?,
        CELLS_AS_RUNS => r.run_rows(nx, ny)?,
        v => {
            return Err(LbmError::file(
                path,
                format!("unknown form {v} of the cells"),
            ));
        }
    };
    let table_len = r.usize()?;
    r.room((table_len as u64).saturating_mul(16))?;
    let table: Vec<[f64; 2]> = (0..table_len)
        .map(|_| Ok([r.f64()?, r.f64()?]))
        .collect::<Result<_>>()?;
    let mut flags =
        flags_of(nx, rows, &table).map_err(|why| LbmError::file(path, format!("flags: {why}")))?;
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

/// The flags of `rows` (each row's runs of equal codes, (length, kind | value index << 3)), the values from
/// `table`: a run whose value or kind is missing is an error naming its row and x.
pub(super) fn flags_of(
    nx: usize,
    rows: Vec<Vec<(usize, u32)>>,
    table: &[[f64; 2]],
) -> std::result::Result<Flags, String> {
    let mut cells = std::collections::HashMap::new();
    let mut out = Vec::with_capacity(rows.len());
    for (y, row) in rows.into_iter().enumerate() {
        let mut x = 0usize;
        let mut cells_of_row = Vec::with_capacity(row.len());
        for (len, code) in row {
            let cell = match cells.get(&code) {
                Some(&c) => c,
                None => {
                    let v = *table
                        .get((code >> 3) as usize)
                        .ok_or_else(|| format!("cell ({x}, {y}): value {} missing", code >> 3))?;
                    let kind = (code & 7) as u8;
                    let c = Cell::from_saved(kind, v)
                        .ok_or_else(|| format!("cell ({x}, {y}): unknown kind {kind}"))?;
                    cells.insert(code, c);
                    c
                }
            };
            cells_of_row.push((len, cell));
            x = x.saturating_add(len);
        }
        out.push(cells_of_row);
    }
    Flags::from_row_runs(nx, out)
}

/// The checkpoint's fields in order, from the file, up to `end` (the checksum's start, or the file's end).
pub(super) struct Reader<'a> {
    file: std::io::BufReader<std::fs::File>,
    at: u64,
    end: u64,
    path: &'a Path,
}

impl Reader<'_> {
    /// Room for `n` more bytes before `end`, or "truncated".
    pub(super) fn room(&self, n: u64) -> Result<()> {
        match self.at.checked_add(n) {
            Some(e) if e <= self.end => Ok(()),
            _ => Err(LbmError::file(
                self.path,
                format!("truncated at byte {}", self.at),
            )),
        }
    }
    pub(super) fn take(&mut self, n: usize) -> Result<Vec<u8>> {
        self.room(n as u64)?;
        let mut b = vec![0u8; n];
        self.file
            .read_exact(&mut b)
            .map_err(|e| LbmError::io(self.path, e))?;
        self.at += n as u64;
        Ok(b)
    }
    pub(super) fn array<const N: usize>(&mut self) -> Result<[u8; N]> {
        let b = self.take(N)?;
        Ok(b.try_into().unwrap_or([0; N]))
    }
    pub(super) fn u8(&mut self) -> Result<u8> {
        Ok(self.array::<1>()?[0])
    }
    pub(super) fn u64(&mut self) -> Result<u64> {
        Ok(u64::from_le_bytes(self.array()?))
    }
    pub(super) fn u32(&mut self) -> Result<u32> {
        Ok(u32::from_le_bytes(self.array()?))
    }
    pub(super) fn usize(&mut self) -> Result<usize> {
        let v = self.u64()?;
        usize::try_from(v).map_err(|_| LbmError::file(self.path, format!("size {v} too large")))
    }
    pub(super) fn f64(&mut self) -> Result<f64> {
        Ok(f64::from_bits(self.u64()?))
    }
    pub(super) fn bytes(&mut self) -> Result<Vec<u8>> {
        let n = self.usize()?;
        self.take(n)
    }
    /// A word count and the bytes of that many words, checked against `end`.
    pub(super) fn word_bytes(&mut self) -> Result<(usize, u64)> {
        let n = self.usize()?;
        let bytes = (n as u64)
            .checked_mul(4)
            .ok_or_else(|| LbmError::file(self.path, "word count overflows"))?;
        self.room(bytes)?;
        Ok((n, bytes))
    }
    /// The cells stored a code a cell (a u64 count, then row-major codes), read a row at a time and kept as each
    /// row's runs of equal codes: a few runs a row for walls and bodies, not 4 B a cell (until format 7 the codes
    /// were read whole, 8 B a cell at their peak).
    pub(super) fn code_rows(&mut self, nx: usize, ny: usize) -> Result<Vec<Vec<(usize, u32)>>> {
        let (n, _) = self.word_bytes()?;
        if Some(n) != nx.checked_mul(ny) {
            return Err(LbmError::file(
                self.path,
                format!("flags: {n} cells for a {nx}x{ny} lattice"),
            ));
        }
        let mut rows = Vec::with_capacity(ny);
        for _ in 0..ny {
            let b = self.take(nx * 4)?;
            let mut row: Vec<(usize, u32)> = Vec::new();
            for c in b.chunks_exact(4) {
                push_run(&mut row, u32::from_le_bytes([c[0], c[1], c[2], c[3]]));
            }
            row.shrink_to_fit();
            rows.push(row);
        }
        Ok(rows)
    }
    /// The cells stored as each row's runs (per row a u32 count, then (u32 length, u32 code) a run); the lengths
    /// are checked by the flags built from them.
    pub(super) fn run_rows(&mut self, nx: usize, ny: usize) -> Result<Vec<Vec<(usize, u32)>>> {
        // Each row takes 4 bytes at least: a count past the file is "truncated", not an allocation.
        self.room((ny as u64).saturating_mul(4))?;
        let mut rows = Vec::with_capacity(ny);
        for y in 0..ny {
            let runs = self.u32()? as usize;
            if runs > nx {
                return Err(LbmError::file(
                    self.path,
                    format!("flags: row {y} has {runs} runs, more than its {nx} cells"),
                ));
            }
            self.room(8 * runs as u64)?;
            let b = self.take(8 * runs)?;
            rows.push(
                b.chunks_exact(8)
                    .map(|c| {
                        let len = u32::from_le_bytes([c[0], c[1], c[2], c[3]]);
                        (len as usize, u32::from_le_bytes([c[4], c[5], c[6], c[7]]))
                    })
                    .collect(),
            );
        }
        Ok(rows)
    }
    /// Passes over an array of words: (where its words start, how many).
    pub(super) fn skip_words(&mut self) -> Result<(u64, usize)> {
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
