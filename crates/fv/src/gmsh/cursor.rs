//! A cursor over a `.msh` file's bytes: ASCII tokens and binary words, with errors that name the file and the
//! line (ASCII) or byte offset (binary).

use crate::error::{FvError, Result};

pub(super) struct Cursor<'a> {
    pub(super) b: &'a [u8],
    pub(super) pos: usize,
    pub(super) name: &'a str,
    pub(super) binary: bool,
}

impl<'a> Cursor<'a> {
    pub(super) fn err(&self, why: impl Into<String>) -> FvError {
        let at = if self.binary {
            format!("byte {}", self.pos)
        } else {
            let line = self.b[..self.pos.min(self.b.len())]
                .iter()
                .filter(|&&c| c == b'\n')
                .count()
                + 1;
            format!("line {line}")
        };
        FvError::Mesh {
            path: self.name.into(),
            at: Some(at),
            why: why.into(),
        }
    }
    pub(super) fn skip_ws(&mut self) {
        while self.pos < self.b.len() && self.b[self.pos].is_ascii_whitespace() {
            self.pos += 1;
        }
    }
    /// The next whitespace-separated token.
    pub(super) fn tok(&mut self) -> Result<&'a str> {
        self.skip_ws();
        let start = self.pos;
        while self.pos < self.b.len() && !self.b[self.pos].is_ascii_whitespace() {
            self.pos += 1;
        }
        if start == self.pos {
            return Err(self.err("unexpected end of file"));
        }
        std::str::from_utf8(&self.b[start..self.pos]).map_err(|_| self.err("text is not UTF-8"))
    }
    /// The rest of the current line (after skipping leading whitespace on it).
    pub(super) fn rest_of_line(&mut self) -> &'a str {
        while self.pos < self.b.len() && (self.b[self.pos] == b' ' || self.b[self.pos] == b'\t') {
            self.pos += 1;
        }
        let start = self.pos;
        while self.pos < self.b.len() && self.b[self.pos] != b'\n' {
            self.pos += 1;
        }
        std::str::from_utf8(&self.b[start..self.pos])
            .unwrap_or("")
            .trim_end()
    }
    pub(super) fn parse<T: std::str::FromStr>(&mut self, what: &str) -> Result<T> {
        let t = self.tok()?;
        t.parse()
            .map_err(|_| self.err(format!("expected {what}, found `{t}`")))
    }
    pub(super) fn expect(&mut self, marker: &str) -> Result<()> {
        let t = self.tok()?;
        if t != marker {
            return Err(self.err(format!("expected {marker}, found `{t}`")));
        }
        Ok(())
    }
    pub(super) fn take(&mut self, n: usize) -> Result<&'a [u8]> {
        let end = self.pos.checked_add(n).filter(|&e| e <= self.b.len());
        let Some(end) = end else {
            return Err(self.err("truncated binary data"));
        };
        let s = &self.b[self.pos..end];
        self.pos = end;
        Ok(s)
    }
    pub(super) fn bin_i32(&mut self) -> Result<i32> {
        let b = self.take(4)?;
        Ok(i32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }
    pub(super) fn bin_u64(&mut self) -> Result<u64> {
        let b = self.take(8)?;
        Ok(u64::from_le_bytes(
            b.try_into().map_err(|_| self.err("truncated"))?,
        ))
    }
    pub(super) fn bin_f64(&mut self) -> Result<f64> {
        Ok(f64::from_bits(self.bin_u64()?))
    }
    // Values that are text in ASCII files and binary in binary ones.
    pub(super) fn int(&mut self, what: &str) -> Result<i32> {
        if self.binary {
            self.bin_i32()
        } else {
            self.parse(what)
        }
    }
    pub(super) fn size(&mut self, what: &str) -> Result<usize> {
        let v = if self.binary {
            self.bin_u64()?
        } else {
            self.parse::<u64>(what)?
        };
        usize::try_from(v).map_err(|_| self.err(format!("{what} {v} too large")))
    }
    pub(super) fn real(&mut self, what: &str) -> Result<f64> {
        if self.binary {
            self.bin_f64()
        } else {
            self.parse(what)
        }
    }
    /// Skips to the section's end marker.
    pub(super) fn skip_section(&mut self, name: &str) -> Result<()> {
        let end = format!("$End{name}");
        let hay = &self.b[self.pos..];
        let Some(i) = hay.windows(end.len()).position(|w| w == end.as_bytes()) else {
            return Err(self.err(format!("section ${name} has no {end}")));
        };
        self.pos += i + end.len();
        Ok(())
    }
    /// A count that must fit in memory alongside the file: at most one item per byte left.
    pub(super) fn check_count(&self, n: usize, what: &str) -> Result<()> {
        if n > self.b.len() {
            return Err(self.err(format!("{what} count {n} is larger than the file")));
        }
        Ok(())
    }
}
