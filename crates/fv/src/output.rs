//! VTU (VTK XML unstructured grid) output with cell data, for ParaView: raw little-endian values in one
//! appended block, streamed into the file (`bespoke_gpu::vtk`; whole or not at all).

use std::path::Path;

use bespoke_gpu::vtk::{self, DataArray, Scalar, Section, XmlFile};

use crate::error::{FvError, Result};
use crate::mesh::TetMesh;

/// VTK's cell type of a linear tetrahedron.
const VTK_TETRA: u8 = 10;

/// Writes the mesh with one or more cell fields (each one value per tet, in the mesh's order) and each tet's
/// physical tag (`physical`, 0 where the mesh has none): nodes and fields as Float64 (full precision),
/// connectivity and offsets as Int64.
pub fn write_vtu(path: &Path, mesh: &TetMesh, fields: &[(&str, &[f64])]) -> Result<()> {
    let n = mesh.tets.len();
    for (name, f) in fields {
        if f.len() != n {
            return Err(FvError::Shape(format!(
                "field `{name}` has {} values for {n} tets",
                f.len()
            )));
        }
    }
    let points = DataArray::new(
        "Points",
        Scalar::Float64,
        3,
        mesh.nodes.len(),
        Box::new(|w| {
            let xyz = mesh.nodes.iter().flat_map(|p| *p);
            vtk::write_values(w, xyz, f64::to_le_bytes)
        }),
    );
    let connectivity = DataArray::new(
        "connectivity",
        Scalar::Int64,
        1,
        4 * n,
        Box::new(|w| {
            let nodes = mesh.tets.iter().flat_map(|t| t.map(i64::from));
            vtk::write_values(w, nodes, i64::to_le_bytes)
        }),
    );
    let offsets = DataArray::new(
        "offsets",
        Scalar::Int64,
        1,
        n,
        Box::new(move |w| vtk::write_values(w, (1..=n as i64).map(|i| 4 * i), i64::to_le_bytes)),
    );
    let types = DataArray::new(
        "types",
        Scalar::UInt8,
        1,
        n,
        Box::new(move |w| w.write_all(&vec![VTK_TETRA; n])),
    );
    let physical = DataArray::new(
        "physical",
        Scalar::Int32,
        1,
        mesh.physical.len(),
        Box::new(|w| vtk::write_values(w, mesh.physical.iter().copied(), i32::to_le_bytes)),
    );
    let mut cell_data: Vec<DataArray<'_>> = fields
        .iter()
        .map(|&(name, f)| DataArray::f64s(name, f))
        .collect();
    if mesh.physical.len() == n {
        cell_data.push(physical);
    }
    let scalars = fields
        .first()
        .map_or(String::new(), |(name, _)| format!(r#"Scalars="{name}""#));
    XmlFile {
        kind: "UnstructuredGrid",
        attributes: String::new(),
        piece: format!(
            r#"NumberOfPoints="{}" NumberOfCells="{n}""#,
            mesh.nodes.len()
        ),
        sections: vec![
            Section {
                tag: "Points",
                attributes: String::new(),
                arrays: vec![points],
            },
            Section {
                tag: "Cells",
                attributes: String::new(),
                arrays: vec![connectivity, offsets, types],
            },
            Section {
                tag: "CellData",
                attributes: scalars,
                arrays: cell_data,
            },
        ],
    }
    .write(path)
    .map_err(|e| FvError::io(path, e))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every array read back with its bytes: nodes and fields bit for bit, connectivity, offsets, types and
    /// physical tags as the mesh has them; a field of the wrong length is refused by name.
    #[test]
    fn a_vtu_holds_the_mesh_and_its_fields_bit_for_bit() {
        let mesh = TetMesh {
            nodes: vec![
                [0.0, 0.0, 0.0],
                [1.0, 0.0, 0.0],
                [0.0, 1.0, 0.0],
                [0.0, 0.0, 1.0],
                [1.0 / 3.0, 1.0, 1.0e-300],
            ],
            tets: vec![[0, 1, 2, 3], [1, 2, 3, 4]],
            physical: vec![7, -2],
            physical_names: Vec::new(),
        };
        let x = [0.1f64, -2.5e-310];
        let x0 = [f64::MAX, 3.0];
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("m.vtu");
        write_vtu(&path, &mesh, &[("x", &x), ("x0", &x0)]).unwrap();
        let (head, arrays) = vtk::read_appended(&std::fs::read(&path).unwrap()).unwrap();
        assert!(
            head.contains(r#"NumberOfPoints="5" NumberOfCells="2""#),
            "{head}"
        );
        let f64s = |b: &[u8]| -> Vec<u64> {
            b.chunks_exact(8)
                .map(|c| u64::from_le_bytes(c.try_into().unwrap()))
                .collect()
        };
        let bits = |v: &[f64]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        let by_name = |n: &str| arrays.iter().find(|a| a.name == n).unwrap();
        let names: Vec<_> = arrays.iter().map(|a| a.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "Points",
                "connectivity",
                "offsets",
                "types",
                "x",
                "x0",
                "physical"
            ]
        );
        let nodes: Vec<f64> = mesh.nodes.iter().flatten().copied().collect();
        assert_eq!(f64s(&by_name("Points").bytes), bits(&nodes));
        assert_eq!(by_name("Points").components, 3);
        assert_eq!(
            f64s(&by_name("connectivity").bytes),
            [0, 1, 2, 3, 1, 2, 3, 4]
        );
        assert_eq!(f64s(&by_name("offsets").bytes), [4, 8]);
        assert_eq!(by_name("types").bytes, [10, 10]);
        assert_eq!(f64s(&by_name("x").bytes), bits(&x));
        assert_eq!(f64s(&by_name("x0").bytes), bits(&x0));
        let tags: Vec<i32> = by_name("physical")
            .bytes
            .chunks_exact(4)
            .map(|c| i32::from_le_bytes(c.try_into().unwrap()))
            .collect();
        assert_eq!(tags, [7, -2]);
        let e = write_vtu(&dir.path().join("bad.vtu"), &mesh, &[("x", &[1.0])]).unwrap_err();
        assert!(
            e.to_string().contains("field `x` has 1 values for 2 tets"),
            "{e}"
        );
    }
}
