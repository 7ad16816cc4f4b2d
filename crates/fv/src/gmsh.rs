//! Gmsh `.msh` reader: formats 2.2 and 4.1, ASCII and binary. Tetrahedra (element type 4) are kept with their
//! physical tag; every other element is skipped. Errors name the file and the line (ASCII) or byte offset.

use std::collections::HashMap;
use std::path::Path;

use crate::error::{FvError, Result};
use crate::mesh::TetMesh;

/// Reads a mesh file.
pub fn read_msh(path: &Path) -> Result<TetMesh> {
    let bytes = std::fs::read(path).map_err(|e| FvError::Io {
        path: path.display().to_string(),
        err: e,
    })?;
    parse_msh(&path.display().to_string(), &bytes)
}

/// Nodes per element of the types Gmsh writes (needed to skip elements in binary files).
fn nodes_per_element(kind: i32) -> Option<usize> {
    Some(match kind {
        1 => 2,
        2 => 3,
        3 => 4,
        4 => 4,
        5 => 8,
        6 => 6,
        7 => 5,
        8 => 3,
        9 => 6,
        10 => 9,
        11 => 10,
        12 => 27,
        13 => 18,
        14 => 14,
        15 => 1,
        16 => 8,
        17 => 20,
        18 => 15,
        19 => 13,
        _ => return None,
    })
}

struct Cursor<'a> {
    b: &'a [u8],
    pos: usize,
    name: &'a str,
    binary: bool,
}

impl<'a> Cursor<'a> {
    fn err(&self, why: impl Into<String>) -> FvError {
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
    fn skip_ws(&mut self) {
        while self.pos < self.b.len() && self.b[self.pos].is_ascii_whitespace() {
            self.pos += 1;
        }
    }
    /// The next whitespace-separated token.
    fn tok(&mut self) -> Result<&'a str> {
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
    fn rest_of_line(&mut self) -> &'a str {
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
    fn parse<T: std::str::FromStr>(&mut self, what: &str) -> Result<T> {
        let t = self.tok()?;
        t.parse()
            .map_err(|_| self.err(format!("expected {what}, found `{t}`")))
    }
    fn expect(&mut self, marker: &str) -> Result<()> {
        let t = self.tok()?;
        if t != marker {
            return Err(self.err(format!("expected {marker}, found `{t}`")));
        }
        Ok(())
    }
    fn take(&mut self, n: usize) -> Result<&'a [u8]> {
        let end = self.pos.checked_add(n).filter(|&e| e <= self.b.len());
        let Some(end) = end else {
            return Err(self.err("truncated binary data"));
        };
        let s = &self.b[self.pos..end];
        self.pos = end;
        Ok(s)
    }
    fn bin_i32(&mut self) -> Result<i32> {
        let b = self.take(4)?;
        Ok(i32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }
    fn bin_u64(&mut self) -> Result<u64> {
        let b = self.take(8)?;
        Ok(u64::from_le_bytes(
            b.try_into().map_err(|_| self.err("truncated"))?,
        ))
    }
    fn bin_f64(&mut self) -> Result<f64> {
        Ok(f64::from_bits(self.bin_u64()?))
    }
    // Values that are text in ASCII files and binary in binary ones.
    fn int(&mut self, what: &str) -> Result<i32> {
        if self.binary {
            self.bin_i32()
        } else {
            self.parse(what)
        }
    }
    fn size(&mut self, what: &str) -> Result<usize> {
        let v = if self.binary {
            self.bin_u64()?
        } else {
            self.parse::<u64>(what)?
        };
        usize::try_from(v).map_err(|_| self.err(format!("{what} {v} too large")))
    }
    fn real(&mut self, what: &str) -> Result<f64> {
        if self.binary {
            self.bin_f64()
        } else {
            self.parse(what)
        }
    }
    /// Skips to the section's end marker.
    fn skip_section(&mut self, name: &str) -> Result<()> {
        let end = format!("$End{name}");
        let hay = &self.b[self.pos..];
        let Some(i) = hay.windows(end.len()).position(|w| w == end.as_bytes()) else {
            return Err(self.err(format!("section ${name} has no {end}")));
        };
        self.pos += i + end.len();
        Ok(())
    }
    /// A count that must fit in memory alongside the file: at most one item per byte left.
    fn check_count(&self, n: usize, what: &str) -> Result<()> {
        if n > self.b.len() {
            return Err(self.err(format!("{what} count {n} is larger than the file")));
        }
        Ok(())
    }
}

struct Raw {
    /// Node tag → coordinates.
    nodes: HashMap<u64, [f64; 3]>,
    /// (element tag, node tags, physical tag).
    tets: Vec<(u64, [u64; 4], i32)>,
    names: Vec<(i32, i32, String)>,
}

/// Parses `.msh` bytes (`name` appears in errors).
pub fn parse_msh(name: &str, bytes: &[u8]) -> Result<TetMesh> {
    let mut c = Cursor {
        b: bytes,
        pos: 0,
        name,
        binary: false,
    };
    c.expect("$MeshFormat")?;
    let version = c.tok()?.to_owned();
    let file_type: i32 = c.parse("file type (0 ASCII, 1 binary)")?;
    let data_size: i32 = c.parse("data size")?;
    if data_size != 8 {
        return Err(c.err(format!(
            "data size {data_size} (only 8-byte size_t/double files are supported)"
        )));
    }
    let binary = match file_type {
        0 => false,
        1 => true,
        t => return Err(c.err(format!("file type {t} (expected 0 or 1)"))),
    };
    if binary {
        // One int 1 after the newline tells the byte order.
        c.skip_ws();
        c.binary = true;
        if c.bin_i32()? != 1 {
            return Err(c.err("big-endian binary files are not supported"));
        }
        c.binary = false;
    }
    c.expect("$EndMeshFormat")?;
    let v4 = match version.as_str() {
        "2.2" | "2.2.0" | "2" => false,
        "4.1" | "4.1.0" => true,
        v => return Err(c.err(format!("format version {v} (supported: 2.2, 4.1)"))),
    };

    let mut raw = Raw {
        nodes: HashMap::new(),
        tets: Vec::new(),
        names: Vec::new(),
    };
    let mut volume_phys: HashMap<i32, i32> = HashMap::new();
    let mut seen_nodes = false;
    let mut seen_elements = false;
    loop {
        c.skip_ws();
        if c.pos >= bytes.len() {
            break;
        }
        let section = c.tok()?;
        let Some(name) = section.strip_prefix('$') else {
            return Err(c.err(format!("expected a $Section, found `{section}`")));
        };
        if binary && v4 && c.b.get(c.pos) == Some(&b'\n') {
            // Binary 4.1 data starts right after the header line's newline.
            c.pos += 1;
        }
        match name {
            "PhysicalNames" => {
                let n: usize = c.parse("number of physical names")?;
                c.check_count(n, "physical name")?;
                for _ in 0..n {
                    let dim: i32 = c.parse("physical dimension")?;
                    let tag: i32 = c.parse("physical tag")?;
                    let label = c.rest_of_line().trim_matches('"').to_owned();
                    raw.names.push((dim, tag, label));
                }
                c.expect("$EndPhysicalNames")?;
            }
            "Entities" if v4 => {
                c.binary = binary;
                read_entities(&mut c, &mut volume_phys)?;
                c.binary = false;
                c.expect("$EndEntities")?;
            }
            "Nodes" => {
                c.binary = binary;
                if v4 {
                    read_nodes_v4(&mut c, &mut raw)?
                } else {
                    read_nodes_v2(&mut c, &mut raw)?
                }
                c.binary = false;
                c.expect("$EndNodes")?;
                seen_nodes = true;
            }
            "Elements" => {
                c.binary = binary;
                if v4 {
                    read_elements_v4(&mut c, &mut raw, &volume_phys)?
                } else {
                    read_elements_v2(&mut c, &mut raw)?
                }
                c.binary = false;
                c.expect("$EndElements")?;
                seen_elements = true;
            }
            other => c.skip_section(other)?,
        }
    }
    if !seen_nodes || !seen_elements {
        return Err(FvError::Mesh {
            path: name.into(),
            at: None,
            why: format!(
                "missing {} section (file truncated?)",
                if seen_nodes { "$Elements" } else { "$Nodes" }
            ),
        });
    }
    assemble(name, raw)
}

fn read_entities(c: &mut Cursor<'_>, volume_phys: &mut HashMap<i32, i32>) -> Result<()> {
    let counts = [
        c.size("points")?,
        c.size("curves")?,
        c.size("surfaces")?,
        c.size("volumes")?,
    ];
    for (dim, &n) in counts.iter().enumerate() {
        c.check_count(n, "entity")?;
        for _ in 0..n {
            let tag = c.int("entity tag")?;
            let coords = if dim == 0 { 3 } else { 6 };
            for _ in 0..coords {
                c.real("bounding box")?;
            }
            let nphys = c.size("physical tag count")?;
            c.check_count(nphys, "physical tag")?;
            let mut first = 0;
            for k in 0..nphys {
                let p = c.int("physical tag")?;
                if k == 0 {
                    first = p;
                }
            }
            if dim == 3 {
                volume_phys.insert(tag, first);
            }
            if dim > 0 {
                let nb = c.size("bounding entity count")?;
                c.check_count(nb, "bounding entity")?;
                for _ in 0..nb {
                    c.int("bounding entity")?;
                }
            }
        }
    }
    Ok(())
}

fn read_nodes_v2(c: &mut Cursor<'_>, raw: &mut Raw) -> Result<()> {
    let binary = c.binary;
    c.binary = false;
    let n: usize = c.parse("number of nodes")?;
    c.check_count(n, "node")?;
    if binary {
        // The count line ends with a newline; binary records follow.
        c.pos += 1;
        c.binary = true;
    }
    raw.nodes.reserve(n);
    for _ in 0..n {
        let tag = if c.binary {
            c.bin_i32()? as i64
        } else {
            c.parse::<i64>("node tag")?
        };
        let p = [c.real("x")?, c.real("y")?, c.real("z")?];
        if tag <= 0 {
            return Err(c.err(format!("node tag {tag} (tags start at 1)")));
        }
        if raw.nodes.insert(tag as u64, p).is_some() {
            return Err(c.err(format!("node {tag} defined twice")));
        }
    }
    Ok(())
}

fn read_elements_v2(c: &mut Cursor<'_>, raw: &mut Raw) -> Result<()> {
    let binary = c.binary;
    c.binary = false;
    let n: usize = c.parse("number of elements")?;
    c.check_count(n, "element")?;
    if !binary {
        for _ in 0..n {
            let tag: u64 = c.parse("element tag")?;
            let kind: i32 = c.parse("element type")?;
            let ntags: usize = c.parse("tag count")?;
            let mut phys = 0;
            for k in 0..ntags {
                let t: i32 = c.parse("element tag value")?;
                if k == 0 {
                    phys = t;
                }
            }
            let Some(nn) = nodes_per_element(kind) else {
                return Err(c.err(format!("element {tag}: unknown element type {kind}")));
            };
            let mut nodes = [0u64; 4];
            for k in 0..nn {
                let v: u64 = c.parse("node reference")?;
                if let Some(slot) = nodes.get_mut(k) {
                    *slot = v;
                }
            }
            if kind == 4 {
                raw.tets.push((tag, nodes, phys));
            }
        }
        return Ok(());
    }
    c.pos += 1;
    c.binary = true;
    let mut done = 0;
    while done < n {
        let kind = c.bin_i32()?;
        let follow = c.bin_i32()?;
        let ntags = c.bin_i32()?;
        if follow <= 0 || ntags < 0 {
            return Err(c.err(format!(
                "bad element block header ({follow} elements, {ntags} tags)"
            )));
        }
        let Some(nn) = nodes_per_element(kind) else {
            return Err(c.err(format!("unknown element type {kind}")));
        };
        for _ in 0..follow {
            let tag = c.bin_i32()? as u64;
            let mut phys = 0;
            for k in 0..ntags {
                let t = c.bin_i32()?;
                if k == 0 {
                    phys = t;
                }
            }
            let mut nodes = [0u64; 4];
            for k in 0..nn {
                let v = c.bin_i32()?;
                if let Some(slot) = nodes.get_mut(k) {
                    *slot = v as u64;
                }
            }
            if kind == 4 {
                raw.tets.push((tag, nodes, phys));
            }
        }
        done += follow as usize;
    }
    Ok(())
}

fn read_nodes_v4(c: &mut Cursor<'_>, raw: &mut Raw) -> Result<()> {
    let blocks = c.size("node block count")?;
    let total = c.size("node count")?;
    c.size("min node tag")?;
    c.size("max node tag")?;
    c.check_count(blocks, "node block")?;
    c.check_count(total, "node")?;
    raw.nodes.reserve(total);
    for _ in 0..blocks {
        let dim = c.int("entity dimension")?;
        c.int("entity tag")?;
        let parametric = c.int("parametric flag")?;
        let n = c.size("nodes in block")?;
        c.check_count(n, "node")?;
        let mut tags = Vec::with_capacity(n);
        for _ in 0..n {
            tags.push(c.size("node tag")? as u64);
        }
        let extra = if parametric != 0 {
            dim.clamp(0, 3) as usize
        } else {
            0
        };
        for tag in tags {
            let p = [c.real("x")?, c.real("y")?, c.real("z")?];
            for _ in 0..extra {
                c.real("parametric coordinate")?;
            }
            if raw.nodes.insert(tag, p).is_some() {
                return Err(c.err(format!("node {tag} defined twice")));
            }
        }
    }
    if raw.nodes.len() != total {
        return Err(c.err(format!(
            "header says {total} nodes, blocks hold {}",
            raw.nodes.len()
        )));
    }
    Ok(())
}

fn read_elements_v4(
    c: &mut Cursor<'_>,
    raw: &mut Raw,
    volume_phys: &HashMap<i32, i32>,
) -> Result<()> {
    let blocks = c.size("element block count")?;
    let total = c.size("element count")?;
    c.size("min element tag")?;
    c.size("max element tag")?;
    c.check_count(blocks, "element block")?;
    c.check_count(total, "element")?;
    let mut seen = 0;
    for _ in 0..blocks {
        let dim = c.int("entity dimension")?;
        let entity = c.int("entity tag")?;
        let kind = c.int("element type")?;
        let n = c.size("elements in block")?;
        c.check_count(n, "element")?;
        let Some(nn) = nodes_per_element(kind) else {
            return Err(c.err(format!("unknown element type {kind}")));
        };
        let phys = if dim == 3 {
            volume_phys.get(&entity).copied().unwrap_or(0)
        } else {
            0
        };
        for _ in 0..n {
            let tag = c.size("element tag")? as u64;
            let mut nodes = [0u64; 4];
            for k in 0..nn {
                let v = c.size("node reference")? as u64;
                if let Some(slot) = nodes.get_mut(k) {
                    *slot = v;
                }
            }
            if kind == 4 {
                raw.tets.push((tag, nodes, phys));
            }
        }
        seen += n;
    }
    if seen != total {
        return Err(c.err(format!("header says {total} elements, blocks hold {seen}")));
    }
    Ok(())
}

/// Node tags → dense indices (in tag order), tets checked and oriented.
fn assemble(name: &str, raw: Raw) -> Result<TetMesh> {
    let mut tags: Vec<u64> = raw.nodes.keys().copied().collect();
    tags.sort_unstable();
    let index: HashMap<u64, u32> = tags
        .iter()
        .enumerate()
        .map(|(i, &t)| (t, i as u32))
        .collect();
    let nodes: Vec<[f64; 3]> = tags.iter().map(|t| raw.nodes[t]).collect();
    let mut tets = Vec::with_capacity(raw.tets.len());
    let mut physical = Vec::with_capacity(raw.tets.len());
    let mut elem_tags = Vec::with_capacity(raw.tets.len());
    for (tag, nt, phys) in &raw.tets {
        let mut t = [0u32; 4];
        for k in 0..4 {
            t[k] = *index.get(&nt[k]).ok_or_else(|| FvError::Mesh {
                path: name.into(),
                at: Some(format!("element {tag}")),
                why: format!("refers to node {} which the file does not define", nt[k]),
            })?;
        }
        let mut sorted = t;
        sorted.sort_unstable();
        if sorted.windows(2).any(|w| w[0] == w[1]) {
            return Err(FvError::Mesh {
                path: name.into(),
                at: Some(format!("element {tag}")),
                why: "a tetrahedron repeats a node".into(),
            });
        }
        tets.push(t);
        physical.push(*phys);
        elem_tags.push(*tag);
    }
    let mut mesh = TetMesh {
        nodes,
        tets,
        physical,
        physical_names: raw.names,
    };
    mesh.orient_and_check(name, |t| format!("element {}", elem_tags[t]))?;
    Ok(mesh)
}

#[cfg(test)]
mod tests {
    use super::*;

    const TWO_TETS: &str = "$MeshFormat\n2.2 0 8\n$EndMeshFormat\n$PhysicalNames\n1\n3 7 \"domain\"\n$EndPhysicalNames\n\
        $Nodes\n5\n1 0 0 0\n2 1 0 0\n3 0 1 0\n4 0 0 1\n5 1 1 1\n$EndNodes\n$Elements\n3\n\
        1 2 2 9 1 1 2 3\n2 4 2 7 1 1 2 3 4\n3 4 2 7 1 2 3 4 5\n$EndElements\n";

    #[test]
    fn reads_ascii_2_2() {
        let m = parse_msh("two.msh", TWO_TETS.as_bytes()).expect("parses");
        assert_eq!(m.tets.len(), 2);
        assert_eq!(m.physical, vec![7, 7]);
        assert_eq!(m.physical_names, vec![(3, 7, "domain".into())]);
        assert_eq!(m.nodes.len(), 5);
    }

    #[test]
    fn errors_name_file_and_line() {
        let bad = TWO_TETS.replace("3 4 2 7 1 2 3 4 5", "3 4 2 7 1 2 3 4 9");
        let e = parse_msh("two.msh", bad.as_bytes())
            .expect_err("bad node")
            .to_string();
        assert!(
            e.contains("two.msh") && e.contains("element 3") && e.contains("node 9"),
            "{e}"
        );
        let cut = &TWO_TETS[..TWO_TETS.len() - 40];
        let e = parse_msh("two.msh", cut.as_bytes())
            .expect_err("truncated")
            .to_string();
        assert!(e.contains("two.msh"), "{e}");
        let bad = TWO_TETS.replace("2 1 0 0\n", "2 1 0 zero\n");
        let e = parse_msh("two.msh", bad.as_bytes())
            .expect_err("bad number")
            .to_string();
        assert!(e.contains("line 11") && e.contains("zero"), "{e}");
        let flat = TWO_TETS
            .replace("5 1 1 1", "5 1 1 0")
            .replace("3 4 2 7 1 2 3 4 5", "3 4 2 7 1 1 2 3 5");
        let e = parse_msh("two.msh", flat.as_bytes())
            .expect_err("flat")
            .to_string();
        assert!(e.contains("degenerate") && e.contains("element 3"), "{e}");
        let e = parse_msh("x.msh", b"$MeshFormat\n3.0 0 8\n$EndMeshFormat\n")
            .expect_err("v3")
            .to_string();
        assert!(e.contains("3.0"), "{e}");
    }
}
