//! The generator's front door: one variant, one launch layout → WGSL text, or the reason the variant does not
//! apply.

use super::emit::{Emit, REG_BUDGET_BYTES, Work};
use super::families::{self, TableSize};
use super::layout::{LaunchCap, Layout, RowTerms};
use super::variant::{Beta, Family, ROLLED_ROWS, Variant};
use crate::dtype::DType;

/// Unrolled terms past which a kernel is not generated: driver compile time grows with the source, and a
/// matrix this dense is the dense GEMM's anyway (measured in docs/perf.md).
pub const MAX_TERMS: usize = 20_000;

/// Non-zeros one launch unrolls at most on `gpu`; more rows become more launches. Driver compile time grows
/// faster than linearly with a kernel's length: on llvmpipe a launch of 192 terms compiles in 0.6 s, 384 in
/// 1.9 s, 1008 in 8.8 s, and all 7056 terms of hex p6 m132 in one kernel in 685 s (docs/perf.md). GPU compilers
/// cope with longer kernels, and each extra launch re-reads the rows of B it shares with its neighbours.
pub fn terms_per_launch(gpu: &bespoke_gpu::Gpu) -> usize {
    if gpu.is_cpu() { 256 } else { 2048 }
}

/// Loads and stores of B and C one bstream launch spells out at most on a CPU adapter. Capped by terms (256) as
/// the other families are, hex-p5-m0 went in 6 launches that loaded B's 216 rows 1092 times; in one launch of
/// 568 accesses it ran 2.3× faster on llvmpipe (Mesa 22.3.6, 14.5–17 ms against 32–45 ms) and compiled in the
/// same 3.5–5 s (docs/perf.md).
pub const CPU_BSTREAM_ACCESSES: usize = 512;

/// How much one launch of `variant` spells out at most on `gpu`. bstream on a CPU adapter is capped by its loads
/// and stores, which is what its compile time and its traffic follow (each launch reloads the rows of B it
/// shares with the others); the other unrolled families, and every family on a GPU, by [`terms_per_launch`]. A
/// variant with its own cap (`bstream-a256`: [`Variant::with_launch_cap`]) is capped by that many loads and
/// stores on any adapter, as is a long twin of any unrolled family (`cstream-a4096`: [`Variant::long_twin`]).
pub fn launch_cap(gpu: &bespoke_gpu::Gpu, variant: Variant) -> LaunchCap {
    cap_of(variant, gpu.is_cpu(), terms_per_launch(gpu))
}

/// [`launch_cap`] for an adapter that is a CPU (`cpu`) with `terms` per launch.
pub(crate) fn cap_of(variant: Variant, cpu: bool, terms: usize) -> LaunchCap {
    match variant.family {
        _ if variant.launch > 0 => LaunchCap::Accesses(variant.launch as usize),
        Family::BStream if cpu => LaunchCap::Accesses(CPU_BSTREAM_ACCESSES),
        _ => LaunchCap::Terms(terms),
    }
}

/// Why a variant was not generated.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Skip(pub String);

impl std::fmt::Display for Skip {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// The rows `layout` writes with their terms inside its K slice.
pub(crate) fn work(a_rows: &[RowTerms], layout: &Layout) -> Work {
    layout
        .rows
        .iter()
        .filter(|&i| layout.writes(a_rows, i))
        .map(|i| (i, layout.terms(a_rows, i)))
        .collect()
}

/// Whether folding changes anything: some row has two terms of equal magnitude.
fn folds_anything(work: &Work) -> bool {
    work.iter().any(|(_, t)| {
        let mut m: Vec<u64> = t.iter().map(|(_, a)| a.abs().to_bits()).collect();
        m.sort_unstable();
        m.windows(2).any(|w| w[0] == w[1])
    })
}

/// WGSL for `variant` computing `layout`'s part of C = A·B + β·C with A's non-zeros `a_rows` inlined (the
/// rolled family's source does not depend on them: its table comes from `families::rolled_table`; here it declares
/// tables of the default [`TableSize`], [`generate_for`] takes the adapter's).
pub fn generate(
    a_rows: &[RowTerms],
    layout: &Layout,
    variant: Variant,
    dtype: DType,
) -> Result<String, Skip> {
    generate_for(a_rows, layout, variant, dtype, TableSize::default())
}

/// [`generate`] with the rolled family's tables of `table` bytes (what the adapter's uniform bindings hold).
pub fn generate_for(
    a_rows: &[RowTerms],
    layout: &Layout,
    variant: Variant,
    dtype: DType,
    table: TableSize,
) -> Result<String, Skip> {
    let v = variant.vec as usize;
    if ![1, 2, 4].contains(&v) {
        return Err(Skip(format!("vector width {v} is not 1, 2 or 4")));
    }
    if [layout.n, layout.ldb, layout.ldc]
        .iter()
        .any(|d| !d.is_multiple_of(v))
    {
        return Err(Skip(format!(
            "vec{v} needs N, ldb and ldc to be multiples of {v} (N = {}, ldb = {}, ldc = {})",
            layout.n, layout.ldb, layout.ldc
        )));
    }
    if v > 1 && layout.n < v {
        return Err(Skip(format!("N = {} is narrower than vec{v}", layout.n)));
    }
    if variant.family == Family::Rolled {
        if !ROLLED_ROWS.contains(&variant.split) {
            return Err(Skip(format!(
                "rolled blocks of {} rows: not one of {:?}",
                variant.split, ROLLED_ROWS
            )));
        }
        let mut e = Emit::new(dtype, variant, layout);
        families::rolled(&mut e, table);
        return Ok(e.out);
    }
    let w = work(a_rows, layout);
    let terms: usize = w.iter().map(|(_, t)| t.len()).sum();
    if terms > MAX_TERMS {
        return Err(Skip(format!(
            "{terms} non-zeros would unroll past the {MAX_TERMS}-term cap on generated source"
        )));
    }
    if variant.fold && !folds_anything(&w) {
        return Err(Skip(
            "no row repeats a coefficient magnitude: nothing to fold".into(),
        ));
    }
    if variant.touch && layout.beta != Beta::Zero {
        return Err(Skip(
            "-touch only changes β = 0 kernels: this one reads C already".into(),
        ));
    }
    let mut e = Emit::new(dtype, variant, layout);
    match variant.family {
        Family::CStream => families::cstream(&mut e, &w),
        Family::BStream => families::bstream(
            &mut e,
            &w,
            (REG_BUDGET_BYTES / variant.elem_bytes(dtype)).max(1),
        ),
        Family::BStreamMsplit => families::msplit(&mut e, &w).map_err(Skip)?,
        Family::CStreamKsplit => families::ksplit(&mut e, &w),
        Family::Rolled => unreachable!("handled above"),
    }
    Ok(e.out)
}
