//! Images and ParaView files from macroscopic fields.

use std::io::Write;
use std::path::Path;

use crate::error::{LbmError, Result};
use crate::fields::Fields;
use crate::flags::{Cell, Flags};

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

/// Writes `q` of `fields` as an RGB PNG (top row = largest y), walls grey.
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
    let file = std::fs::File::create(path).map_err(|e| LbmError::io(path, e))?;
    let mut enc = png::Encoder::new(std::io::BufWriter::new(file), nx as u32, ny as u32);
    enc.set_color(png::ColorType::Rgb);
    enc.set_depth(png::BitDepth::Eight);
    let mut w = enc
        .write_header()
        .map_err(|e| LbmError::file(path, format!("writing PNG: {e}")))?;
    w.write_image_data(&rgb)
        .map_err(|e| LbmError::file(path, format!("writing PNG: {e}")))?;
    w.finish()
        .map_err(|e| LbmError::file(path, format!("writing PNG: {e}")))
}

/// Writes VTK legacy structured points (image data; ParaView reads it): point data ρ, velocity, vorticity and
/// the cell type (0 fluid, 1 solid, 2 inlet, 3 outlet), one point per lattice cell.
pub fn write_vtk(path: &Path, fields: &Fields, flags: &Flags) -> Result<()> {
    let (nx, ny) = (fields.nx, fields.ny);
    let n = nx * ny;
    let mut out = Vec::with_capacity(n * 24 + 512);
    let _ = write!(
        out,
        "# vtk DataFile Version 3.0\nbespoke-lbm D2Q9 fields\nBINARY\nDATASET STRUCTURED_POINTS\n\
         DIMENSIONS {nx} {ny} 1\nORIGIN 0 0 0\nSPACING 1 1 1\nPOINT_DATA {n}\n"
    );
    let scalars = |out: &mut Vec<u8>, name: &str, v: &[f32]| {
        let _ = write!(out, "SCALARS {name} float 1\nLOOKUP_TABLE default\n");
        for x in v {
            out.extend_from_slice(&x.to_be_bytes());
        }
        out.push(b'\n');
    };
    scalars(&mut out, "rho", &fields.rho);
    let _ = writeln!(out, "VECTORS velocity float");
    for k in 0..n {
        for v in [fields.ux[k], fields.uy[k], 0.0] {
            out.extend_from_slice(&v.to_be_bytes());
        }
    }
    out.push(b'\n');
    scalars(&mut out, "vorticity", &fields.vorticity());
    let _ = write!(out, "SCALARS cell_type int 1\nLOOKUP_TABLE default\n");
    for c in flags.cells() {
        let t: i32 = match c {
            Cell::Fluid => 0,
            Cell::Wall | Cell::MovingWall(_) => 1,
            Cell::Inlet(_) => 2,
            Cell::Outlet(_) => 3,
        };
        out.extend_from_slice(&t.to_be_bytes());
    }
    out.push(b'\n');
    std::fs::write(path, out).map_err(|e| LbmError::io(path, e))
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
