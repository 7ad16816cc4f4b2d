//! VTU (VTK XML unstructured grid) output with cell data, for ParaView.

use std::io::Write;
use std::path::Path;

use crate::error::{FvError, Result};
use crate::mesh::TetMesh;

/// Writes the mesh with one or more cell fields (each one value per tet, in the mesh's order).
pub fn write_vtu(path: &Path, mesh: &TetMesh, fields: &[(&str, &[f64])]) -> Result<()> {
    let io = |e: std::io::Error| FvError::Io {
        path: path.display().to_string(),
        err: e,
    };
    let n = mesh.tets.len();
    for (name, f) in fields {
        if f.len() != n {
            return Err(FvError::Shape(format!(
                "field `{name}` has {} values for {n} tets",
                f.len()
            )));
        }
    }
    let file = std::fs::File::create(path).map_err(io)?;
    let mut w = std::io::BufWriter::new(file);
    let mut go = || -> std::io::Result<()> {
        writeln!(w, r#"<?xml version="1.0"?>"#)?;
        writeln!(
            w,
            r#"<VTKFile type="UnstructuredGrid" version="0.1" byte_order="LittleEndian">"#
        )?;
        writeln!(w, "<UnstructuredGrid>")?;
        writeln!(
            w,
            r#"<Piece NumberOfPoints="{}" NumberOfCells="{n}">"#,
            mesh.nodes.len()
        )?;
        writeln!(
            w,
            r#"<Points><DataArray type="Float64" NumberOfComponents="3" format="ascii">"#
        )?;
        for p in &mesh.nodes {
            writeln!(w, "{} {} {}", p[0], p[1], p[2])?;
        }
        writeln!(w, "</DataArray></Points>")?;
        writeln!(
            w,
            r#"<Cells><DataArray type="Int64" Name="connectivity" format="ascii">"#
        )?;
        for t in &mesh.tets {
            writeln!(w, "{} {} {} {}", t[0], t[1], t[2], t[3])?;
        }
        writeln!(
            w,
            r#"</DataArray><DataArray type="Int64" Name="offsets" format="ascii">"#
        )?;
        for i in 1..=n {
            writeln!(w, "{}", 4 * i)?;
        }
        writeln!(
            w,
            r#"</DataArray><DataArray type="UInt8" Name="types" format="ascii">"#
        )?;
        for _ in 0..n {
            writeln!(w, "10")?;
        }
        writeln!(w, "</DataArray></Cells>")?;
        writeln!(w, "<CellData>")?;
        for (name, f) in fields {
            writeln!(
                w,
                r#"<DataArray type="Float64" Name="{name}" format="ascii">"#
            )?;
            for v in f.iter() {
                writeln!(w, "{v}")?;
            }
            writeln!(w, "</DataArray>")?;
        }
        writeln!(w, "</CellData></Piece></UnstructuredGrid></VTKFile>")?;
        w.flush()
    };
    go().map_err(io)
}
