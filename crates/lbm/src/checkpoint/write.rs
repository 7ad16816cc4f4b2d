//! Writing a checkpoint as it is made: the cells and their value table, and the sink that keeps rank 0's file
//! (whole or not at all) and the running CRC-32.

use std::io::Write;
use std::path::Path;

use bespoke_gpu::AtomicFile;

use crate::error::{LbmError, Result};
use crate::flags::{Cell, Flags};

/// Writes the cells, each as its code kind | (index of its exact f64 value) << 3, and returns the value table the
/// indices point into. In whichever form is smaller: row after row as runs of equal codes (a tag of 1, then per
/// row a u32 run count and (u32 length, u32 code) per run: a few runs a row for walls, lids, inlets and bodies),
/// or a code a cell in row-major order (a tag of 0, a u64 cell count and a u32 a cell: a porous mask), which is
/// all that formats before 7 knew; `each`: a code a cell whatever the runs.
pub(super) fn put_cells(out: &mut Sink<'_>, flags: &Flags, each: bool) -> Vec<[f64; 2]> {
    let mut table: Vec<[f64; 2]> = Vec::new();
    let mut index = std::collections::HashMap::new();
    let mut code = |c: Cell| {
        let (kind, v) = c.saved();
        let slot = *index.entry(v.map(f64::to_bits)).or_insert_with(|| {
            table.push(v);
            table.len() - 1
        });
        u32::from(kind) | ((slot as u32) << 3)
    };
    let (nx, ny) = (flags.nx(), flags.ny());
    let runs: usize = (0..ny).map(|y| flags.row_runs(y).count()).sum();
    let as_runs = !each && 4 * ny as u64 + 8 * runs as u64 <= 8 + 4 * (nx as u64 * ny as u64);
    let mut bytes = Vec::with_capacity(WORDS_AT_ONCE * 4);
    let flush = |bytes: &mut Vec<u8>, out: &mut Sink<'_>| {
        if bytes.len() >= WORDS_AT_ONCE * 4 {
            out.put(bytes);
            bytes.clear();
        }
    };
    if as_runs {
        bytes.push(CELLS_AS_RUNS);
        for y in 0..ny {
            let row: Vec<_> = flags.row_runs(y).collect();
            bytes.extend_from_slice(&(row.len() as u32).to_le_bytes());
            for (len, c) in row {
                bytes.extend_from_slice(&(len as u32).to_le_bytes());
                bytes.extend_from_slice(&code(c).to_le_bytes());
            }
            flush(&mut bytes, out);
        }
    } else {
        bytes.push(CELLS_EACH);
        bytes.extend_from_slice(&(nx as u64 * ny as u64).to_le_bytes());
        // A row's runs of equal cells: one table lookup a run, then its words.
        for y in 0..ny {
            for (len, c) in flags.row_runs(y) {
                let word = code(c).to_le_bytes();
                for _ in 0..len {
                    bytes.extend_from_slice(&word);
                    flush(&mut bytes, out);
                }
            }
        }
    }
    out.put(&bytes);
    table
}

/// The cells' form in a checkpoint (format 7): a code a cell, or each row's runs of equal codes.
pub(super) const CELLS_EACH: u8 = 0;
pub(super) const CELLS_AS_RUNS: u8 = 1;

/// Words converted to bytes at a time while a checkpoint is written.
pub(super) const WORDS_AT_ONCE: usize = 1 << 16;

/// Where a checkpoint goes as it is made: rank 0's file ([`AtomicFile`]: whole or not at all) and the running
/// CRC-32 of what was written; nothing on other ranks. The first error is kept and later writes skipped, so
/// the caller carries on through its gathers and learns of it from [`finish`](Self::finish).
pub(super) struct Sink<'p> {
    path: &'p Path,
    root: bool,
    file: Option<AtomicFile>,
    crc: crc32fast::Hasher,
    err: Option<std::io::Error>,
}

impl<'p> Sink<'p> {
    pub(super) fn new(root: bool, path: &'p Path, fail_after: Option<usize>) -> Self {
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
    pub(super) fn writes(&self) -> bool {
        self.file.is_some() && self.err.is_none()
    }
    pub(super) fn put(&mut self, bytes: &[u8]) {
        if !self.writes() {
            return;
        }
        self.crc.update(bytes);
        if let Some(Err(e)) = self.file.as_mut().map(|f| f.write_all(bytes)) {
            self.err = Some(e);
        }
    }
    /// u64 count, then the words (little-endian).
    pub(super) fn put_words(&mut self, words: &[u32]) {
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
    pub(super) fn finish(mut self) -> Result<()> {
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

pub(super) fn put_u64(out: &mut Vec<u8>, v: u64) {
    out.extend_from_slice(&v.to_le_bytes());
}
pub(super) fn put_bytes(out: &mut Vec<u8>, b: &[u8]) {
    put_u64(out, b.len() as u64);
    out.extend_from_slice(b);
}
#[cfg(test)]
mod tests {
    use super::Sink;

    /// A checkpoint written in pieces: whole or not at all. A write that fails half-way (as a full disk would)
    /// is reported with the path and leaves the previous file as it was, and no temporary file.
    #[test]
    pub(super) fn a_write_that_fails_half_way_leaves_the_previous_file() {
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
