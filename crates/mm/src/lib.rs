//! bespoke-mm: WGSL matrix-multiply generators.
//!
//! - [`dense`]: a register-blocked, workgroup-tiled GEMM C = α·A·B + β·C over a legal tiling space.
//! - [`popcount`]: the same tiling for `C[i][j] = Σ popcount(A[i][w] & B[j][w])`; [`ld`]: r² from it.
//! - [`specialise`]: the matrix-specialising generator (GiMMiK-class) and its tuner.
//! - [`reference`](mod@reference): the f64 CPU reference every kernel is compared with.
//!
//! Generating a specialised kernel needs no device: the WGSL below is what the tuner would time.
//!
//! ```
//! use bespoke_mm::DType;
//! use bespoke_mm::specialise::{Beta, Layout, Variant, generate, parse_mtx};
//!
//! // A 2×3 operator with one zero, in Matrix Market form (PyFR writes its operators this way).
//! let op = parse_mtx("%%MatrixMarket matrix array real general\n2 3\n1.0\n0.0\n0.5\n-2.0\n0.25\n1.0\n", "tiny")?;
//! let rows = op.rows();
//! let layout = Layout::single(&rows, op.k, Beta::Zero, 1024, 1024, 1024).expect("fits one binding");
//! let wgsl = generate(&rows, &layout, Variant::parse("cstream-v4").expect("a variant"), DType::F32)
//!     .expect("cstream-v4 applies");
//! bespoke_gpu::validate_wgsl(&wgsl, DType::F32.caps())?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! On a device, [`specialise::MatMul::tuned`] times every candidate (the dense GEMM included) and keeps the fastest.

pub mod dense;
pub mod dtype;
pub mod error;
pub mod ld;
pub mod popcount;
pub mod reference;
pub mod specialise;

pub use dense::{DenseGemm, DenseParams, Element, GemmShape};
pub use dtype::DType;
pub use error::{MmError, Result};
