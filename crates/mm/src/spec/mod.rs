//! The matrix-specialising generator (GiMMiK-class): for a constant operator A it writes WGSL for
//! C = A·B + β·C with A's non-zeros inlined as exact literals, in four families × vector widths × folding,
//! plans launches past the binding limits, and picks the fastest candidate (dense GEMM included) by timing.

pub mod generate;
pub mod layout;
pub mod mtx;
pub mod operator;
pub mod variant;

mod emit;
mod families;

pub use generate::{MAX_TERMS, Skip, generate};
pub use layout::{Layout, RowTerms, plan_layouts};
pub use mtx::{parse_mtx, read_mtx};
pub use operator::Operator;
pub use variant::{Beta, Family, Variant, WG_X};

#[cfg(test)]
mod tests;
