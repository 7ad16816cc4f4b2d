//! The sections of a `.msh` file: entities (4.1), nodes and elements in formats 2.2 and 4.1.

use std::collections::HashMap;

use super::cursor::Cursor;
use super::{Raw, nodes_per_element};
use crate::error::Result;

pub(super) fn read_entities(c: &mut Cursor<'_>, volume_phys: &mut HashMap<i32, i32>) -> Result<()> {
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

pub(super) fn read_nodes_v2(c: &mut Cursor<'_>, raw: &mut Raw) -> Result<()> {
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

pub(super) fn read_elements_v2(c: &mut Cursor<'_>, raw: &mut Raw) -> Result<()> {
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

pub(super) fn read_nodes_v4(c: &mut Cursor<'_>, raw: &mut Raw) -> Result<()> {
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

pub(super) fn read_elements_v4(
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
