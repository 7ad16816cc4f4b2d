//! bespoke-fv: cell-centred finite volume on tetrahedral meshes (ELLPACK operators, orderings, WGSL kernels).

mod error;
pub mod gmsh;
pub mod mesh;

pub use error::{FvError, Result};
pub use mesh::TetMesh;
