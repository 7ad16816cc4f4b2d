//! bespoke-mm: WGSL matrix-multiply generators.
//!
//! - [`dense`]: a register-blocked, workgroup-tiled GEMM C = α·A·B + β·C over a legal tiling space.
//! - [`popcount`]: the same tiling for C[i][j] = Σ popcount(A[i][w] & B[j][w]); [`ld`]: r² from it.
//! - [`spec`]: the matrix-specialising generator (GiMMiK-class) and its tuner.
//! - [`reference`]: the f64 CPU reference every kernel is compared with.

pub mod dense;
pub mod dtype;
pub mod error;
pub mod ld;
pub mod popcount;
pub mod reference;
pub mod spec;

pub use dense::{DenseGemm, DenseParams, Element, GemmShape};
pub use dtype::DType;
pub use error::{MmError, Result};
