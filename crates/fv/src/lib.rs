//! bespoke-fv: cell-centred finite volume on tetrahedral meshes.
//!
//! Gmsh meshes ([`gmsh`]) or generated boxes ([`generate`]) → face adjacency and the diffusion operator in ELLPACK
//! form ([`operator`]) → an ordering ([`ordering`]: as read, random, RCM, Hilbert, METIS blocks, METIS nested
//! dissection) → WGSL step kernels ([`kernel`]: gather, block-cached) run by [`Diffusion`]. The CPU reference
//! of a step is [`Operator::step_reference`].
//!
//! ```
//! use bespoke_fv::generate::BoxMesh;
//! use bespoke_fv::operator::adjacency;
//! use bespoke_fv::{Boundary, Operator};
//!
//! let mesh = BoxMesh::cube(2).build()?; // 2×2×2 cubes, 48 tets
//! let op = Operator::diffusion(&mesh, &adjacency(&mesh)?, 1.0, Boundary::ZeroFlux)?;
//! let x = vec![1.0; op.n()];
//! // A uniform field is steady under zero flux: the CPU reference step leaves it alone.
//! let y = op.step_reference(&x, op.default_dt());
//! assert!(y.iter().all(|v| (v - 1.0).abs() < 1e-12));
//! # Ok::<(), bespoke_fv::FvError>(())
//! ```
//!
//! On a device, [`Diffusion::new`] uploads the operator in a layout and [`Diffusion::step`] runs `k` steps.

pub mod batches;
pub mod bench;
pub mod checkpoint;
pub mod diffusion;
pub mod distributed;
mod error;
pub mod generate;
pub mod gmsh;
pub mod kernel;
pub mod mesh;
pub mod operator;
pub mod ordering;
pub mod output;
pub mod plot;
pub mod run;
pub mod scale;
pub mod sweep;
pub mod testing;

pub use diffusion::{Diffusion, Real};
pub use distributed::DistDiffusion;
pub use error::{FvError, Result};
pub use mesh::TetMesh;
pub use operator::{Boundary, Operator};
