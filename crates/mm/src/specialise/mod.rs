//! The matrix-specialising generator (GiMMiK-class): for a constant operator A it writes WGSL for
//! C = A·B + β·C with A's non-zeros inlined as exact literals, in four families × vector widths × folding,
//! plans launches past the binding limits, and picks the fastest candidate (dense GEMM included) by timing.

pub mod bench;
mod candidates;
pub mod columns;
mod compile_cost;
mod dense_budget;
pub mod floor;
pub mod generate;
mod grouping;
pub mod layout;
pub mod matmul;
pub mod mtx;
pub mod operator;
mod partition;
pub mod run;
mod tune;
mod tune_budget;
pub mod tune_cache;
mod tune_precompile;
pub mod tuning;
pub mod variant;

mod emit;
mod families;

pub use bench::{MatrixBench, SuiteSummary, bench_operator, check_against_cpu, tolerance};
pub use candidates::{CPU_CSTREAM_TERMS, MSPLIT_S8_ROWS, default_variants};
pub use columns::ColumnBlocks;
pub use families::TableSize;
pub use floor::AccessFloor;
pub use generate::{
    CPU_BSTREAM_ACCESSES, MAX_TERMS, Skip, generate, generate_for, launch_cap, terms_per_launch,
};
pub use layout::{LaunchCap, LaunchRows, Layout, RowTerms, plan_layouts};
pub use matmul::{Choice, MatMul, MatMulPlan};
pub use mtx::{parse_mtx, read_mtx};
pub use operator::Operator;
pub use run::{CompileTime, Panel, SpecKernel};
pub use tune::model_dense;
pub use tuning::{
    Candidate, DEFAULT_TUNE_BUDGET, DenseSource, ParallelCompile, TuneOptions, TuneReport,
};
pub use variant::{
    Beta, Family, LAUNCH_CAPS, LONG_LAUNCH, MID_LAUNCH, MSPLIT_SPLITS, STAGE_KIB, Variant, WG_X,
};

#[cfg(test)]
mod tests;
