//! Gmsh `.msh` reader: formats 2.2 and 4.1, ASCII and binary. Tetrahedra (element type 4) are kept with their
//! physical tag; every other element is skipped. Errors name the file and the line (ASCII) or byte offset.

use std::collections::HashMap;
use std::path::Path;

use crate::error::{FvError, Result};
use crate::mesh::TetMesh;

mod cursor;
mod sections;

use cursor::Cursor;
use sections::{read_elements_v2, read_elements_v4, read_entities, read_nodes_v2, read_nodes_v4};

/// Reads a mesh file.
pub fn read_msh(path: &Path) -> Result<TetMesh> {
    let bytes = std::fs::read(path).map_err(|e| FvError::io(path, e))?;
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

pub(super) struct Raw {
    /// Node tag → coordinates.
    pub(super) nodes: HashMap<u64, [f64; 3]>,
    /// (element tag, node tags, physical tag).
    pub(super) tets: Vec<(u64, [u64; 4], i32)>,
    pub(super) names: Vec<(i32, i32, String)>,
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
