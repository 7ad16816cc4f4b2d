//! Images and ParaView files from macroscopic fields.

use std::io::Write;
use std::path::Path;

use bespoke_gpu::vtk;

use crate::error::{LbmError, Result};
use crate::fields::{Fields, OwnFields};
use crate::flags::{Cell, Flags};
use crate::lattice::Lattice;

/// What a PNG frame shows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Quantity {
    /// |u| with a sequential colour map (0 → max).
    Speed,
    /// Vorticity with a diverging map, symmetric about zero.
    Vorticity,
}

impl Quantity {
    pub fn parse(s: &str) -> Result<Self> {
        match s {
            "speed" | "velocity" => Ok(Self::Speed),
            "vorticity" => Ok(Self::Vorticity),
            _ => Err(LbmError::param(
                "quantity",
                s,
                "expected speed or vorticity",
            )),
        }
    }
}

/// Anchor colours of a sequential map (dark blue → green → yellow), interpolated linearly.
const SEQUENTIAL: [[f64; 3]; 5] = [
    [68.0, 1.0, 84.0],
    [59.0, 82.0, 139.0],
    [33.0, 145.0, 140.0],
    [94.0, 201.0, 98.0],
    [253.0, 231.0, 37.0],
];
/// Blue → white → red.
const DIVERGING: [[f64; 3]; 3] = [
    [33.0, 102.0, 172.0],
    [247.0, 247.0, 247.0],
    [178.0, 24.0, 43.0],
];
const WALL: [u8; 3] = [96, 96, 96];

fn ramp(map: &[[f64; 3]], t: f64) -> [u8; 3] {
    let t = if t.is_finite() {
        t.clamp(0.0, 1.0)
    } else {
        0.0
    };
    let pos = t * (map.len() - 1) as f64;
    let i = (pos.floor() as usize).min(map.len() - 2);
    let f = pos - i as f64;
    std::array::from_fn(|c| (map[i][c] * (1.0 - f) + map[i + 1][c] * f).round() as u8)
}

/// Writes `q` of `fields` as an RGB PNG (top row = largest y), walls grey; whole or not at all
/// ([`bespoke_gpu::AtomicFile`]).
pub fn write_png(path: &Path, fields: &Fields, flags: &Flags, q: Quantity) -> Result<()> {
    let (nx, ny) = (fields.nx, fields.ny);
    let values = match q {
        Quantity::Speed => fields.speed(),
        Quantity::Vorticity => fields.vorticity(),
    };
    // In order through the flags (a lookup a cell would search each row's runs).
    let solid: Vec<bool> = flags.cells().map(Cell::is_solid).collect();
    let fluid = |k: usize| !solid[k];
    let scale = (0..nx * ny)
        .filter(|&k| fluid(k))
        .map(|k| f64::from(values[k]).abs())
        .filter(|v| v.is_finite())
        .fold(0.0, f64::max)
        .max(1e-30);
    let mut rgb = Vec::with_capacity(nx * ny * 3);
    for row in 0..ny {
        let y = ny - 1 - row;
        for x in 0..nx {
            let k = y * nx + x;
            let v = f64::from(values[k]) / scale;
            let c = if !fluid(k) {
                WALL
            } else {
                match q {
                    Quantity::Speed => ramp(&SEQUENTIAL, v),
                    Quantity::Vorticity => ramp(&DIVERGING, 0.5 + 0.5 * v),
                }
            };
            rgb.extend_from_slice(&c);
        }
    }
    // Whole or not at all: a frame overwritten by a resumed run, or a run stopped while writing, leaves the
    // earlier file or the new one, never a truncated image.
    let file = bespoke_gpu::AtomicFile::create(path).map_err(|e| LbmError::io(path, e))?;
    let mut file = std::io::BufWriter::new(file);
    let err = |e: png::EncodingError| LbmError::file(path, format!("writing PNG: {e}"));
    let mut enc = png::Encoder::new(&mut file, nx as u32, ny as u32);
    enc.set_color(png::ColorType::Rgb);
    enc.set_depth(png::BitDepth::Eight);
    let mut w = enc.write_header().map_err(err)?;
    w.write_image_data(&rgb).map_err(err)?;
    w.finish().map_err(err)?;
    file.into_inner()
        .map_err(|e| LbmError::io(path, e.into_error()))?
        .commit()
        .map_err(|e| LbmError::io(path, e))
}

/// The cell type the VTK files carry: 0 fluid, 1 solid, 2 inlet, 3 outlet.
fn cell_type(c: Cell) -> i32 {
    match c {
        Cell::Fluid => 0,
        Cell::Wall | Cell::MovingWall(_) => 1,
        Cell::Inlet(_) => 2,
        Cell::Outlet(_) => 3,
    }
}

/// Writes VTK legacy structured points (image data; ParaView reads it): point data ρ, velocity, vorticity and
/// the cell type (0 fluid, 1 solid, 2 inlet, 3 outlet), one point per lattice cell. Streamed into the file
/// (whole or not at all: `bespoke_gpu::AtomicFile`), a field at a time: beside `fields`, the host holds the
/// vorticity and a buffer, not the file.
pub fn write_vtk(path: &Path, fields: &Fields, flags: &Flags) -> Result<()> {
    let (nx, ny) = (fields.nx, fields.ny);
    let n = nx * ny;
    let vorticity = fields.vorticity();
    let io = |e| LbmError::io(path, e);
    let mut out = bespoke_gpu::AtomicFile::create(path).map_err(io)?;
    let go = |out: &mut dyn Write| -> std::io::Result<()> {
        write!(
            out,
            "# vtk DataFile Version 3.0\nbespoke-lbm D2Q9 fields\nBINARY\nDATASET STRUCTURED_POINTS\n\
             DIMENSIONS {nx} {ny} 1\nORIGIN 0 0 0\nSPACING 1 1 1\nPOINT_DATA {n}\n"
        )?;
        let scalars = |out: &mut dyn Write, name: &str, v: &[f32]| {
            write!(out, "SCALARS {name} float 1\nLOOKUP_TABLE default\n")?;
            vtk::write_values(out, v.iter().copied(), f32::to_be_bytes)?;
            writeln!(out)
        };
        scalars(out, "rho", &fields.rho)?;
        writeln!(out, "VECTORS velocity float")?;
        let velocity = (0..n).flat_map(|k| [fields.ux[k], fields.uy[k], 0.0]);
        vtk::write_values(out, velocity, f32::to_be_bytes)?;
        writeln!(out)?;
        scalars(out, "vorticity", &vorticity)?;
        write!(out, "SCALARS cell_type int 1\nLOOKUP_TABLE default\n")?;
        vtk::write_values(out, flags.cells().map(cell_type), i32::to_be_bytes)?;
        writeln!(out)
    };
    go(&mut out).map_err(io)?;
    out.commit().map_err(io)
}

/// Writes one rectangle of the domain, `own` (its vorticity `vorticity`, the cells from the whole domain's
/// `flags`), as a serial VTK XML image (`.vti`): one VTK cell per lattice cell, cell centres at integer
/// coordinates (origin −½), cell data ρ, velocity, vorticity and the cell type (0 fluid, 1 solid, 2 inlet,
/// 3 outlet), raw little-endian values appended. Its extent places it in the whole domain, so the pieces of a
/// parallel image ([`write_pvti`]) fit together; a rectangle that is the whole domain is a file of its own.
pub fn write_vti(path: &Path, own: &OwnFields, vorticity: &[f32], flags: &Flags) -> Result<()> {
    stage_vti(path, own, vorticity, flags)?
        .commit()
        .map_err(|e| LbmError::io(path, e))
}

/// [`write_vti`]'s file staged beside `path` ([`vtk::XmlFile::stage`]), to be committed by the caller.
fn stage_vti(
    path: &Path,
    own: &OwnFields,
    vorticity: &[f32],
    flags: &Flags,
) -> Result<bespoke_gpu::AtomicFile> {
    let ([w, h], [x0, y0]) = (own.size, own.origin);
    let cells = w * h;
    if [own.rho.len(), own.ux.len(), own.uy.len(), vorticity.len()] != [cells; 4] {
        return Err(LbmError::Shape(format!(
            "fields of {}, {}, {}, {} values for a {w}x{h} piece",
            own.rho.len(),
            own.ux.len(),
            own.uy.len(),
            vorticity.len()
        )));
    }
    let velocity: vtk::Values<'_> = Box::new(|out| {
        let v = (0..cells).flat_map(|k| [own.ux[k], own.uy[k], 0.0]);
        vtk::write_values(out, v, f32::to_le_bytes)
    });
    let types: vtk::Values<'_> = Box::new(|out| {
        let mut row = Vec::with_capacity(w);
        for y in y0..y0 + h {
            flags.row_cells(y, x0, w, &mut row);
            vtk::write_values(out, row.iter().map(|&c| cell_type(c)), i32::to_le_bytes)?;
        }
        Ok(())
    });
    let (f32s, i32s) = (vtk::Scalar::Float32, vtk::Scalar::Int32);
    vtk::XmlFile {
        kind: "ImageData",
        attributes: image_attributes(own.domain),
        piece: format!(r#"Extent="{}""#, extent(own.origin, own.size)),
        sections: vec![vtk::Section {
            tag: "CellData",
            attributes: CELL_DATA.into(),
            arrays: vec![
                vtk::DataArray::f32s("rho", &own.rho),
                vtk::DataArray::new("velocity", f32s, 3, cells, velocity),
                vtk::DataArray::f32s("vorticity", vorticity),
                vtk::DataArray::new("cell_type", i32s, 1, cells, types),
            ],
        }],
    }
    .stage(path)
    .map_err(|e| LbmError::io(path, e))
}

/// Writes the whole domain's `fields` as one serial XML image ([`write_vti`] of a rectangle that is the
/// domain).
pub fn write_fields_vti(path: &Path, fields: Fields, flags: &Flags) -> Result<()> {
    let vorticity = fields.vorticity();
    let own = OwnFields {
        domain: [fields.nx, fields.ny],
        origin: [0, 0],
        size: [fields.nx, fields.ny],
        rho: fields.rho,
        ux: fields.ux,
        uy: fields.uy,
    };
    write_vti(path, &own, &vorticity, flags)
}

/// Which VTK file a path's extension asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum VtkKind {
    /// Legacy structured points ([`write_vtk`]): any extension but the two below.
    Legacy,
    /// `.vti`: one serial XML image ([`write_fields_vti`]).
    Serial,
    /// `.pvti`: a parallel XML image, a piece a rank ([`write_pvti`]).
    Parallel,
}

impl VtkKind {
    pub fn of(path: &Path) -> Self {
        match path.extension().and_then(|e| e.to_str()) {
            Some(e) if e.eq_ignore_ascii_case("pvti") => Self::Parallel,
            Some(e) if e.eq_ignore_ascii_case("vti") => Self::Serial,
            _ => Self::Legacy,
        }
    }
}

/// Writes the lattice's fields to `path` in the kind its extension asks for ([`VtkKind`]): a parallel image's
/// pieces on every rank, or the whole fields gathered onto rank 0 for one file. Every rank must call it; an
/// error on any rank is every rank's.
pub fn write_fields(lat: &mut Lattice, path: &Path) -> Result<()> {
    let own = lat.own_fields()?;
    write_own_fields(lat, path, own)
}

/// [`write_fields`] of fields read already (`own`, from [`Lattice::own_fields`] at the current step), so that a
/// caller that checked them first reads the device once.
pub fn write_own_fields(lat: &mut Lattice, path: &Path, own: OwnFields) -> Result<()> {
    write_outputs(lat, own, None, Some(path))
}

/// One step's fields, read once (`own`, from [`Lattice::own_fields`] at the current step), written as a PNG of
/// `png`'s quantity (rank 0, from the whole domain gathered) and as VTK fields at `vtk` ([`write_fields`]),
/// either or both: a run's end or frame with both reads the device, and gathers across ranks, once. Every rank
/// must call it; an error on any rank (the PNG's on rank 0 among them) is every rank's.
pub fn write_outputs(
    lat: &mut Lattice,
    own: OwnFields,
    png: Option<(&Path, Quantity)>,
    vtk: Option<&Path>,
) -> Result<()> {
    let kind = vtk.map(VtkKind::of);
    if let (Some(path), Some(VtkKind::Parallel)) = (vtk, kind) {
        // Every rank writes its own piece: nothing is gathered unless the PNG asks for it.
        write_own_pvti(lat, path, &own)?;
        if png.is_none() {
            return Ok(());
        }
    }
    let whole = lat.fields_on_root(own)?;
    let wrote = whole.map_or(Ok(()), |f| {
        if let Some((path, quantity)) = png {
            write_png(path, &f, lat.flags(), quantity)?;
        }
        match (vtk, kind) {
            (Some(path), Some(VtkKind::Legacy)) => write_vtk(path, &f, lat.flags()),
            (Some(path), Some(VtkKind::Serial)) => write_fields_vti(path, f, lat.flags()),
            _ => Ok(()),
        }
    });
    lat.agree(wrote)
}

/// The path of a time series' frame beside `path` at the lattice's current step (`flow.pvti` →
/// `flow_00000200.pvti` at step 200), in `path`'s kind.
pub fn series_frame_path(lat: &Lattice, path: &Path) -> std::path::PathBuf {
    vtk::series_frame(path, lat.steps_done())
}

/// Rewrites ParaView's collection beside a series' `path` (`flow.pvd`, rank 0) to list every frame of the
/// series in the folder by step, so that a resumed run's frames join the earlier ones and an interrupted run
/// leaves a collection of the frames it wrote. Every rank must call it.
pub fn write_series_collection(lat: &Lattice, path: &Path) -> Result<()> {
    let listed = if lat.is_root() {
        vtk::write_series_collection(path)
            .map_err(|e| LbmError::io(bespoke_gpu::folder_of(path), e))
    } else {
        Ok(())
    };
    lat.agree(listed)
}

/// The default arrays ParaView colours by.
const CELL_DATA: &str = r#"Scalars="rho" Vectors="velocity""#;

/// The whole image's extent, origin and spacing: a domain of `nx × ny` cells is `nx + 1 × ny + 1` points.
fn image_attributes([nx, ny]: [usize; 2]) -> String {
    format!(
        r#"WholeExtent="{}" Origin="-0.5 -0.5 0" Spacing="1 1 1""#,
        extent([0, 0], [nx, ny])
    )
}

/// The point extent of the cells from `origin` of `size`.
fn extent([x0, y0]: [usize; 2], [w, h]: [usize; 2]) -> String {
    format!("{x0} {} {y0} {} 0 0", x0 + w, y0 + h)
}

/// Writes the lattice's fields as a parallel VTK XML image: every rank its own cells as a piece beside `path`
/// (`out.pvti` → `out_p0.vti`, `out_p1.vti`, …; [`write_vti`]), rank 0 the index `path` naming them. No rank
/// holds more than its block, its vorticity and the four lines of its neighbours' u that the vorticity at its
/// edges needs ([`Lattice::own_vorticity`]), and nothing is gathered, so its size is not bounded by one host.
/// The values are the whole domain's, bit for bit, whatever the decomposition (tested). A single domain writes
/// one piece. Every rank must call it; a piece or the index that cannot be written fails every rank, naming
/// the rank and the file.
pub fn write_pvti(lat: &mut Lattice, path: &Path) -> Result<()> {
    let own = lat.own_fields()?;
    write_own_pvti(lat, path, &own)
}

/// [`write_pvti`] of fields read already (`own`, at the current step).
fn write_own_pvti(lat: &mut Lattice, path: &Path, own: &OwnFields) -> Result<()> {
    let vorticity = lat.own_vorticity(own)?;
    let (rank, ranks) = lat.comm().map_or((0, 1), |c| (c.rank(), c.size()));
    let (piece, _) = vtk::piece_path(path, rank, ranks, "vti");
    // Every rank stages its piece; they take their places only once all were written (a rank that failed
    // leaves no other rank's new piece behind, and an earlier write's pieces and index stay whole).
    let staged = stage_vti(&piece, own, &vorticity, lat.flags());
    drop(vorticity);
    let staged = lat.agree(staged)?;
    lat.agree(staged.commit().map_err(|e| LbmError::io(&piece, e)))?;
    let index = if rank == 0 {
        let domain = [lat.config().nx, lat.config().ny];
        let blocks: Vec<[usize; 4]> = match lat.decomposition() {
            Some(d) => (0..ranks)
                .map(|r| {
                    let [bx, by] = d.block(r);
                    [bx.start, by.start, bx.len(), by.len()]
                })
                .collect(),
            None => vec![[0, 0, domain[0], domain[1]]],
        };
        let arrays = vec![
            ("rho", vtk::Scalar::Float32, 1),
            ("velocity", vtk::Scalar::Float32, 3),
            ("vorticity", vtk::Scalar::Float32, 1),
            ("cell_type", vtk::Scalar::Int32, 1),
        ];
        vtk::ParallelFile {
            kind: "ImageData",
            attributes: format!(r#"{} GhostLevel="0""#, image_attributes(domain)),
            sections: vec![vtk::ParallelSection {
                tag: "PCellData",
                attributes: CELL_DATA.into(),
                arrays,
            }],
            pieces: blocks
                .iter()
                .enumerate()
                .map(|(r, &[x0, y0, w, h])| {
                    (
                        format!(r#"Extent="{}""#, extent([x0, y0], [w, h])),
                        vtk::piece_path(path, r, ranks, "vti").1,
                    )
                })
                .collect(),
        }
        .write(path)
        .map_err(|e| LbmError::io(path, e))
    } else {
        Ok(())
    };
    lat.agree(index)
}

impl std::str::FromStr for Quantity {
    type Err = LbmError;
    fn from_str(s: &str) -> Result<Self> {
        Self::parse(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn colour_maps_hit_their_ends() {
        assert_eq!(ramp(&SEQUENTIAL, 0.0), [68, 1, 84]);
        assert_eq!(ramp(&SEQUENTIAL, 1.0), [253, 231, 37]);
        assert_eq!(ramp(&DIVERGING, 0.5), [247, 247, 247]);
        assert_eq!(ramp(&SEQUENTIAL, f64::NAN), [68, 1, 84]);
    }
}
