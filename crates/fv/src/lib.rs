//! bespoke-fv: cell-centred finite volume on tetrahedral meshes.
//!
//! Gmsh meshes ([`gmsh`]) or generated boxes ([`generate`]) → face adjacency and the diffusion operator in ELLPACK
//! form ([`operator`]) → an ordering ([`ordering`]: as read, random, RCM, Hilbert, METIS blocks, METIS nested
//! dissection) → WGSL step kernels ([`kernel`]: gather, block-cached) run by [`Diffusion`]. The CPU reference
//! of a step is [`Operator::step_reference`].

pub mod bench;
pub mod diffusion;
pub mod dist;
mod error;
pub mod generate;
pub mod gmsh;
pub mod kernel;
pub mod mesh;
pub mod operator;
pub mod ordering;
pub mod output;
pub mod plot;
pub mod scale;
pub mod sweep;

pub use diffusion::{Diffusion, Real};
pub use dist::DistDiffusion;
pub use error::{FvError, Result};
pub use mesh::TetMesh;
pub use operator::{Boundary, Operator};
