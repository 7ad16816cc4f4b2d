//! Benchmarking one operator the way `bespoke mm bench` reports it: tune (or read the decision), check the
//! result against the f64 CPU reference on random data, time the choice and the dense kernel.

use bespoke_gpu::{Gpu, GpuBuffer, ProbeOptions, median};

use super::columns::ColumnBlocks;
use super::compile_cost::CompileLaws;
use super::dense_budget::model_dense_within;
use super::floor::AccessFloor;
use super::matmul::{Choice, MatMul, MatMulPlan};
use super::operator::Operator;
use super::run::Panel;
use super::tune_budget::LONG_RUN_SECONDS;
use super::tuning::{DenseSource, TuneOptions, TuneReport};
use crate::dense::bench::fill;
use crate::dense::{DenseParams, Element};
use crate::dtype::DType;
use crate::error::Result;
use crate::reference::{Shape, gemm_ref, rel_err};

/// One operator's line of the report.
#[derive(Clone, Debug, serde::Serialize)]
pub struct MatrixBench {
    pub name: String,
    pub m: usize,
    pub k: usize,
    pub nnz: usize,
    pub beta: f64,
    pub variant: String,
    /// The median of the choice's runs taken in alternation with its floor's (and dense's): the runs every ratio
    /// of the row is made of. Until 2026-11-28 it was a block of runs timed before them, which on the H200 ran
    /// before the clocks were up: hex-p6-m132 read 32.1 ms there and ~7.7 ms in the row's own pairs.
    pub seconds: f64,
    /// Minimum bytes: the rows of B that A's non-zero columns use read once (every row, for PyFR's operators; a
    /// column of zeros needs no row, and counting it put a 1×100 000 operator with one non-zero at 68× the copy
    /// bandwidth), C written once, C read once more when β ≠ 0.
    pub bytes: f64,
    pub gbps: f64,
    /// The adapter's copy of the same bytes (`bytes / 2` copied: read plus written), timed like the product:
    /// the bandwidth a kernel of this size can reach, launch cost and caches included.
    pub same_size_copy_gbps: f64,
    /// The operator's access floor ([`AccessFloor`]: its loads and stores, an add per load, on the same grid,
    /// at the choice's vector width, `-touch` where the choice has it) on the same buffers: what the adapter
    /// charges for the accesses alone (median of the runs paired with the choice's).
    pub floor_seconds: f64,
    /// The choice's time over its floor's: the median of `reps` ratios of runs taken in alternation.
    pub over_floor: f64,
    /// The bytes over the same-size copy's bandwidth: the floor a GPU sets (the access floor's extra adds and
    /// launch shape were calibrated on lavapipe; [`MatrixBench::floors`] names both where they differ).
    pub copy_floor_seconds: f64,
    /// The dense kernel the tuner would take (the model's tiling within the budget's dense share), timed in
    /// alternation with the choice: the median of its paired runs (one pair when a run is past
    /// half a second). None when dense is off. When the choice is the dense kernel, `seconds`.
    pub dense_seconds: Option<f64>,
    /// The median of the paired ratios dense / choice (so not always `dense_seconds / seconds`); 1 when the
    /// choice is the dense kernel.
    pub speedup_vs_dense: Option<f64>,
    pub rel_err: f64,
    /// Wall seconds the heater ran to raise a GPU's clocks during the row's timings (`Timing::warmed_seconds`
    /// summed; 0 on a CPU adapter or with the warm-up skipped): on a GPU at least one check a second of timings.
    pub warmed_seconds: f64,
    pub tune: TuneReport,
}

impl MatrixBench {
    /// The choice against its floors: `×a its access floor`, and `, ×b the copy floor` where the two floors
    /// differ by more than 10 %.
    pub fn floors(&self) -> String {
        let copy = self.seconds / self.copy_floor_seconds;
        let mut s = format!("×{:.2} its access floor", self.over_floor);
        let apart = self.floor_seconds / self.copy_floor_seconds;
        if !(0.9..=1.1).contains(&apart) {
            s.push_str(&format!(", ×{copy:.2} the copy floor"));
        }
        s
    }
}

/// The dense kernel's tiling the tuner would take: the model's, within the budget's dense share (None when
/// dense is off).
fn dense_params<T: Element>(
    gpu: &Gpu,
    op: &Operator,
    beta: f64,
    panel: Panel,
    opts: &TuneOptions,
) -> Result<Option<DenseParams>> {
    Ok(match opts.dense {
        DenseSource::Off => None,
        DenseSource::Fixed(p) => Some(p),
        DenseSource::Model => Some(
            model_dense_within::<T>(
                gpu,
                op,
                panel,
                beta,
                &mut CompileLaws::load(gpu, opts),
                opts.budget_seconds,
            )?
            .0,
        ),
    })
}

/// Largest relative error against the f64 reference a product may have in `dtype`.
pub fn tolerance(dtype: DType) -> f64 {
    match dtype {
        DType::F32 => 1e-5,
        DType::F64 => 1e-12,
    }
}

/// A suite of operators in a few numbers: speedups over the dense kernel and the products past tolerance.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct SuiteSummary {
    pub matrices: usize,
    /// Geometric mean of the speedups over dense (None when no operator had a dense time).
    pub geomean_speedup_vs_dense: Option<f64>,
    pub min_speedup_vs_dense: Option<f64>,
    pub below_dense: usize,
    /// Geometric mean of each choice's time over its access floor's (1: the accesses alone; None: no operators).
    pub geomean_over_floor: Option<f64>,
    /// `name: rel_err` of every product past [`tolerance`] (or NaN).
    pub failures: Vec<String>,
}

impl SuiteSummary {
    pub fn of(rows: &[MatrixBench], dtype: DType) -> Self {
        let speedups: Vec<f64> = rows.iter().filter_map(|r| r.speedup_vs_dense).collect();
        let n = speedups.len();
        Self {
            matrices: rows.len(),
            geomean_speedup_vs_dense: (n > 0)
                .then(|| (speedups.iter().map(|s| s.ln()).sum::<f64>() / n as f64).exp()),
            min_speedup_vs_dense: speedups.iter().copied().reduce(f64::min),
            below_dense: speedups.iter().filter(|s| **s < 1.0).count(),
            geomean_over_floor: (!rows.is_empty()).then(|| {
                (rows
                    .iter()
                    .map(|r| (r.seconds / r.floor_seconds).ln())
                    .sum::<f64>()
                    / rows.len() as f64)
                    .exp()
            }),
            failures: rows
                .iter()
                .filter(|r| r.rel_err.is_nan() || r.rel_err > tolerance(dtype))
                .map(|r| format!("{}: rel_err {:e}", r.name, r.rel_err))
                .collect(),
        }
    }
}

/// Runs `mm` (built for `op`) once on random B and C drawn from `seed` — C poisoned with NaN when β = 0, which
/// must not read it — and returns its relative error against the f64 CPU reference of C = A·B + β·C (A as the
/// kernel sees it, rounded to `T`).
pub fn check_against_cpu<T: Element>(
    gpu: &Gpu,
    op: &Operator,
    mm: &MatMul<T>,
    seed: u64,
) -> Result<f64> {
    run_checked(gpu, op, mm, seed).map(|r| r.0)
}

/// [`check_against_cpu`], keeping the bound B and C for timing.
fn run_checked<T: Element>(
    gpu: &Gpu,
    op: &Operator,
    mm: &MatMul<T>,
    seed: u64,
) -> Result<(f64, GpuBuffer<T>, GpuBuffer<T>)> {
    let (panel, beta) = (mm.panel, mm.beta);
    let (sb, sc) = (
        Shape::new(op.k, panel.n, panel.ldb),
        Shape::new(op.m, panel.n, panel.ldc),
    );
    let to_t = |v: &[f64]| v.iter().map(|&x| T::from_f64(x)).collect::<Vec<T>>();
    let back = |v: &[T]| v.iter().map(|x| x.to_f64()).collect::<Vec<f64>>();
    let b = to_t(&fill::<f64>(sb.min_len(), seed));
    let c0 = if beta == 0.0 {
        vec![T::from_f64(f64::NAN); sc.min_len()]
    } else {
        to_t(&fill::<f64>(sc.min_len(), seed ^ 0xc0ffee))
    };
    let (bb, cb) = (gpu.upload(&b)?, gpu.upload(&c0)?);
    mm.run(gpu, &bb, &cb)?;
    let got = gpu.read(&cb)?;
    // The reference on every column up to CHECK_COLUMNS, else on that many spread over N (the last included):
    // an f64 reference of hex-p6-m132 on 2^20 columns is 3.7e11 multiply-adds on one core.
    let cols: Vec<usize> = if panel.n <= CHECK_COLUMNS {
        (0..panel.n).collect()
    } else {
        (0..CHECK_COLUMNS)
            .map(|j| j * (panel.n - 1) / (CHECK_COLUMNS - 1))
            .collect()
    };
    let s = cols.len();
    let pick = |v: &[T], rows: usize, ld: usize| -> Vec<f64> {
        (0..rows)
            .flat_map(|r| cols.iter().map(move |&j| v[r * ld + j].to_f64()))
            .collect()
    };
    let got = pick(&got, op.m, panel.ldc);
    let mut want = pick(&c0, op.m, panel.ldc);
    let a = back(&to_t(op.values()));
    let (sb, sc) = (Shape::new(op.k, s, s), Shape::new(op.m, s, s));
    gemm_ref(
        1.0,
        &a,
        Shape::new(op.m, op.k, op.k),
        &pick(&b, op.k, panel.ldb),
        sb,
        beta,
        &mut want,
        sc,
    );
    Ok((rel_err(&got, &want, sc), bb, cb))
}

/// Columns of C checked against the CPU reference at most (spread over N past it).
pub const CHECK_COLUMNS: usize = 1 << 14;

/// Tunes `op` for (β, panel), checks it on random B and C against the CPU, times the choice and dense. A panel
/// whose B or C passes the adapter's largest buffer goes in column blocks of one width ([`ColumnBlocks`]): tuned
/// and checked on the first block, and timed over all of them (every block's launches in one submission).
pub fn bench_operator<T: Element>(
    gpu: &Gpu,
    op: &Operator,
    beta: f64,
    panel: Panel,
    opts: &TuneOptions,
    seed: u64,
) -> Result<MatrixBench> {
    let blocks = ColumnBlocks::for_adapter(gpu, op.m, op.k, T::DTYPE, panel.n)?;
    let block_panel = if blocks.count == 1 {
        panel
    } else {
        blocks.panel()
    };
    let mm = MatMul::<T>::tuned(gpu, op, beta, block_panel, opts)?;
    let (err, bb, cb) = run_checked(gpu, op, &mm, seed)?;
    // The other blocks' B and C: the same sizes, any finite values (the timing does not depend on them).
    let mut bufs = vec![(bb, cb)];
    for _ in 1..blocks.count {
        bufs.push((
            gpu.alloc_filled(op.k * block_panel.ldb, T::from_f64(0.5))?,
            gpu.alloc_filled(op.m * block_panel.ldc, T::from_f64(0.25))?,
        ));
    }

    let reps = opts.reps.max(1);
    let plans = bufs
        .iter()
        .map(|(b, c)| mm.plan(gpu, b, c))
        .collect::<Result<Vec<_>>>()?;
    let launches: Vec<_> = plans.iter().flat_map(MatMulPlan::launches).collect();
    // One run before the pairs: the first dispatch of a pipeline compiles it (llvmpipe) and allocates.
    gpu.run(&launches)?;
    // The floor at the choice's vector width, reading C before its β = 0 stores where the choice does, timed in
    // alternation with the choice (one submission each, `reps` pairs): on a VM whose speed drifts by 2× between
    // seconds, only a paired ratio says how far the choice is from its floor.
    let (floor_vec, touch) = match mm.choice {
        Choice::Spec(v) => (v.vec, v.touch),
        Choice::Dense(_) => (
            [4, 2, 1]
                .into_iter()
                .find(|v| block_panel.alignment().is_multiple_of(*v as usize))
                .unwrap_or(1),
            false,
        ),
    };
    let floor = AccessFloor::new(gpu, op, T::DTYPE, beta, block_panel, floor_vec, touch)?;
    let floor_plans = bufs
        .iter()
        .map(|(b, c)| floor.plan(gpu, b, c))
        .collect::<Result<Vec<_>>>()?;
    let floor_launches: Vec<_> = floor_plans.iter().flatten().collect();
    // The dense kernel the tuner would take, timed in the same alternation: the tuner's own dense time was
    // taken minutes earlier on a VM whose speed drifts, and a short kernel's two timings there can differ by
    // ×1.8, so only a paired ratio says whether the choice beats dense. When the choice is the dense kernel,
    // its time is the dense time: two timings of one kernel would only report noise as a speedup.
    let dense = match mm.choice {
        Choice::Dense(_) => None,
        Choice::Spec(_) => dense_params::<T>(gpu, op, beta, block_panel, opts)?
            .map(|p| MatMul::<T>::with_choice(gpu, op, beta, block_panel, Choice::Dense(p)))
            .transpose()?,
    };
    let dense_plans = dense
        .as_ref()
        .map(|d| {
            bufs.iter()
                .map(|(b, c)| d.plan(gpu, b, c))
                .collect::<Result<Vec<_>>>()
        })
        .transpose()?;
    let dense_launches: Option<Vec<_>> = dense_plans
        .as_ref()
        .map(|p| p.iter().flat_map(MatMulPlan::launches).collect());
    gpu.run(&floor_launches)?;
    if let Some(d) = &dense_launches {
        gpu.run(d)?;
    }
    let mut choice_t: Vec<f64> = Vec::with_capacity(reps);
    let mut floor_t: Vec<f64> = Vec::with_capacity(reps);
    let mut dense_pairs: Vec<(f64, f64)> = Vec::new();
    let mut warmed_seconds = 0.0;
    let mut time = |launches: &[&bespoke_gpu::Launch]| -> Result<f64> {
        let t = gpu.time(launches, 0, 1)?;
        warmed_seconds += t.warmed_seconds;
        Ok(t.median())
    };
    for _ in 0..reps {
        let c = time(&launches)?;
        choice_t.push(c);
        floor_t.push(time(&floor_launches)?);
        // A dense run past LONG_RUN_SECONDS is paired once: runs that long stray little from the next
        // (docs/perf.md, 2026-11-26), and on a CPU adapter one can take seconds.
        let paired = dense_pairs
            .last()
            .is_some_and(|(d, _)| *d >= LONG_RUN_SECONDS);
        if let (Some(d), false) = (&dense_launches, paired) {
            dense_pairs.push((time(d)?, c));
        }
    }
    drop((launches, floor_launches, dense_launches));
    drop((plans, floor_plans, dense_plans));
    let seconds = median(&choice_t);
    let ratios: Vec<f64> = choice_t.iter().zip(&floor_t).map(|(c, f)| c / f).collect();
    let over_floor = median(&ratios);
    let floor_seconds = median(&floor_t);
    let (dense_seconds, speedup_vs_dense) = match mm.choice {
        Choice::Dense(_) => (Some(seconds), Some(1.0)),
        Choice::Spec(_) if dense_pairs.is_empty() => (None, None),
        Choice::Spec(_) => (
            Some(median(&dense_pairs.iter().map(|p| p.0).collect::<Vec<_>>())),
            Some(median(
                &dense_pairs.iter().map(|(d, c)| d / c).collect::<Vec<_>>(),
            )),
        ),
    };
    let c_passes = if beta == 0.0 { 1.0 } else { 2.0 };
    let b_rows = op.used_columns().len() as f64;
    let bytes = (T::DTYPE.size() * panel.n) as f64 * (b_rows + c_passes * op.m as f64);
    drop(bufs);
    let same_size_copy_gbps = gpu
        .copy_bandwidth(&ProbeOptions {
            // Capped at the largest buffer the adapter gives the probe's source and destination.
            bytes: ((bytes / 2.0) as u64).min(gpu.limits().max_buffer_size / 16 * 16),
            warmup: 1,
            reps,
        })?
        .gbps;
    Ok(MatrixBench {
        name: op.name.clone(),
        m: op.m,
        k: op.k,
        nnz: op.nnz(),
        beta,
        variant: mm.choice.name(),
        seconds,
        bytes,
        gbps: bytes / seconds / 1e9,
        same_size_copy_gbps,
        floor_seconds,
        over_floor,
        copy_floor_seconds: bytes / (same_size_copy_gbps * 1e9),
        dense_seconds,
        speedup_vs_dense,
        rel_err: err,
        warmed_seconds,
        tune: mm.report,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_floors_are_named_where_they_differ() {
        let row = |floor_seconds: f64| MatrixBench {
            name: "op".into(),
            m: 2,
            k: 2,
            nnz: 4,
            beta: 0.0,
            variant: "bstream".into(),
            seconds: 3.0,
            bytes: 8.0,
            gbps: 8.0 / 3.0 / 1e9,
            same_size_copy_gbps: 4.0,
            floor_seconds,
            over_floor: 3.0 / floor_seconds,
            copy_floor_seconds: 2.0,
            dense_seconds: None,
            speedup_vs_dense: None,
            rel_err: 0.0,
            warmed_seconds: 0.0,
            tune: TuneReport::default(),
        };
        assert_eq!(row(2.1).floors(), "×1.43 its access floor");
        assert_eq!(
            row(1.0).floors(),
            "×3.00 its access floor, ×1.50 the copy floor"
        );
    }
}
