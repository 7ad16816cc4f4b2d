//! `bespoke mm gen` and `bespoke mm bench`: the specialised kernels of PyFR-like operators.

use std::path::PathBuf;

use bespoke::Error;
use bespoke::bench::progress_bar;
use bespoke::mm::DType;
use bespoke::mm::specialise::{
    MatrixBench, Panel, SpecKernel, SuiteSummary, TuneOptions, TuneReport, bench_operator, read_mtx,
};
use bespoke::report::adapter_json;
use serde_json::{Value, json};

use super::{BenchArgs, GenArgs};
use crate::json_out::{open_json, write_json};
use crate::open_gpu;

pub(super) fn run_gen(a: GenArgs) -> Result<(), Error> {
    let op = read_mtx(&a.file)?;
    let beta = a.beta.or(op.beta_hint).unwrap_or(0.0);
    let panel = Panel {
        n: a.n,
        ldb: a.ldb.unwrap_or(a.n),
        ldc: a.ldc.unwrap_or(a.n),
    };
    panel.check()?;
    op.check_precision(a.dtype)?;
    let gpu = open_gpu()?;
    let k = SpecKernel::new(&gpu, &op, a.variant, a.dtype, beta, panel)?;
    for src in k.sources() {
        bespoke::say!("{src}");
    }
    eprintln!(
        "{}: {}×{} with {} non-zeros, {} launch(es), {} bytes of WGSL generated in {:.1} ms",
        op.name,
        op.m,
        op.k,
        op.nnz(),
        k.sources().len(),
        k.compile.source_bytes,
        k.compile.generate_seconds * 1e3
    );
    Ok(())
}

/// The .mtx files named, folders expanded (sorted).
fn mtx_files(paths: &[PathBuf]) -> Result<Vec<PathBuf>, Error> {
    let mut out = Vec::new();
    for p in paths {
        if p.is_dir() {
            let mut v: Vec<PathBuf> = std::fs::read_dir(p)
                .map_err(|e| format!("reading {}: {e}", p.display()))?
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|f| f.extension().is_some_and(|x| x == "mtx"))
                .collect();
            v.sort();
            if v.is_empty() {
                return Err(format!("{} holds no .mtx files", p.display()).into());
            }
            out.extend(v);
        } else {
            out.push(p.clone());
        }
    }
    Ok(out)
}

/// How the row's decision was reached: cached, or tuned in so long (and the one-off costs of the adapter beside
/// it, outside the tuning budget: the dense model's inputs for the first operator tuned on it, a compile law's
/// probes for the first operator that meets the family).
fn tuned_note(t: &TuneReport) -> String {
    if t.from_cache {
        return " (cached decision)".to_owned();
    }
    let mut apart = Vec::new();
    if t.model_seconds > 0.0 {
        apart.push(format!(
            "{:.1} s measuring the dense model's inputs",
            t.model_seconds
        ));
    }
    if t.probe_seconds > 0.0 {
        apart.push(format!("{:.1} s probing compile laws", t.probe_seconds));
    }
    // Compiled at once: how many kernels on how many workers, and what that took against one worker's sum.
    let at_once = t.parallel_compile.as_ref().map_or(String::new(), |p| {
        format!(
            ", {} kernels compiled on {} workers in {:.1} s ({:.1} s of compiles)",
            p.kernels, p.threads, p.wall_seconds, p.kernel_seconds
        )
    });
    if apart.is_empty() {
        format!(" (tuned in {:.1} s{at_once})", t.tune_seconds)
    } else {
        format!(
            " (tuned in {:.1} s{at_once}, after {}, once per adapter)",
            t.tune_seconds,
            apart.join(" and ")
        )
    }
}

pub(super) fn run_bench(a: BenchArgs) -> Result<(), Error> {
    let out = open_json(a.json.as_deref())?;
    let dtype = a.dtype;
    if !a.beta.is_finite() {
        return Err(format!("--beta must be finite, got {}", a.beta).into());
    }
    if a.tune_budget.is_nan() || a.tune_budget <= 0.0 {
        return Err(format!(
            "--tune-budget must be positive (or inf), got {}",
            a.tune_budget
        )
        .into());
    }
    // Every matrix is read (and refused, if it must be) before a device is opened.
    let ops = mtx_files(&a.paths)?
        .iter()
        .map(|f| read_mtx(f))
        .collect::<Result<Vec<_>, _>>()?;
    // Every operator past the precision's range is named, not only the first.
    let refused: Vec<String> = ops
        .iter()
        .filter_map(|op| op.check_precision(dtype).err())
        .map(|e| e.to_string())
        .collect();
    match refused.as_slice() {
        [] => {}
        [one] => return Err(one.clone().into()),
        all => {
            return Err(format!(
                "{} operators are past {dtype}'s range:\n  {}",
                all.len(),
                all.join("\n  ")
            )
            .into());
        }
    }
    let opts = TuneOptions {
        variants: a.variants.clone(),
        reps: a.reps,
        use_cache: true,
        // Tuned again and the cached decision replaced (until 2026-11-27 the new decision went to a folder of
        // its own in the temporary directory, never read and never removed).
        refresh: a.retune,
        budget_seconds: a.tune_budget.is_finite().then_some(a.tune_budget),
        compile_threads: a.compile_threads,
        ..Default::default()
    };
    let gpu = open_gpu()?;
    let gpu = &gpu;
    dtype.require(gpu, "mm bench")?;
    let probe = gpu.copy_bandwidth(&bespoke::bench::probe_options(false))?;
    let copy = probe.gbps;
    let info = gpu.info();
    bespoke::say!(
        "adapter: {} ({}, {}), copy bandwidth {copy:.2} GB/s, {dtype}, N = {}",
        info.name,
        info.backend,
        info.driver_info,
        a.n
    );
    // The JSON report of the operators measured so far (`complete` once all of them are).
    let report = |rows: &[MatrixBench], of: usize| -> Value {
        let sum = SuiteSummary::of(rows, dtype);
        let matrices: Vec<Value> = rows
            .iter()
            .map(|r| {
                json!({
                    "name": r.name, "m": r.m, "k": r.k, "nnz": r.nnz, "beta": r.beta, "variant": r.variant,
                    "seconds": r.seconds, "gbps": r.gbps, "copy_fraction": r.gbps / copy,
                    "same_size_copy_gbps": r.same_size_copy_gbps, "floor_seconds": r.floor_seconds, "over_floor": r.over_floor, "copy_floor_seconds": r.copy_floor_seconds,
                    "dense_seconds": r.dense_seconds, "speedup_vs_dense": r.speedup_vs_dense, "rel_err": r.rel_err, "warmed_seconds": r.warmed_seconds,
                    "from_cache": r.tune.from_cache, "tune_seconds": r.tune.tune_seconds,
                    "model_seconds": r.tune.model_seconds, "probe_seconds": r.tune.probe_seconds,
                    "candidates": r.tune.candidates, "parallel_compile": r.tune.parallel_compile,
                })
            })
            .collect();
        json!({
            "adapter": adapter_json(gpu), "copy_gbps": copy, "dtype": dtype.wgsl(), "n": a.n,
            "complete": rows.len() == of, "operators": of,
            "matrices": matrices, "geomean_speedup_vs_dense": sum.geomean_speedup_vs_dense,
            "min_speedup_vs_dense": sum.min_speedup_vs_dense,
            "geomean_over_floor": sum.geomean_over_floor,
        })
    };
    let bar = progress_bar(ops.len() as u64);
    let mut rows = Vec::new();
    for op in &ops {
        let beta = op.beta_hint.unwrap_or(a.beta);
        bar.set_message(op.name.clone());
        let r = match dtype {
            DType::F32 => bench_operator::<f32>(gpu, op, beta, Panel::packed(a.n), &opts, 1)?,
            DType::F64 => bench_operator::<f64>(gpu, op, beta, Panel::packed(a.n), &opts, 1)?,
        };
        bar.suspend(|| {
            bespoke::say!(
                "{:<22} {:>4}×{:<4} nnz {:>6} β={} {:<22} {:>9.3} ms {:>7.2} GB/s ({:.3} of copy, {:.3} of a same-size copy, {}) dense {:>9.3} ms  ×{:<6.2} err {:.1e}{}",
                r.name, r.m, r.k, r.nnz, r.beta, r.variant, r.seconds * 1e3, r.gbps, r.gbps / copy, r.gbps / r.same_size_copy_gbps, r.floors(),
                r.dense_seconds.unwrap_or(f64::NAN) * 1e3, r.speedup_vs_dense.unwrap_or(f64::NAN), r.rel_err,
                tuned_note(&r.tune)
            )
        });
        rows.push(r);
        // The report so far, after every operator: a run cut short by a time limit (a GPU session's stage) keeps
        // what it measured, each operator's tuning included.
        write_json(out.clone(), &report(&rows, ops.len()))?;
        bar.inc(1);
    }
    bar.finish_and_clear();
    let sum = SuiteSummary::of(&rows, dtype);
    bespoke::say!(
        "{} matrices: geomean speedup over dense ×{:.2}, min ×{:.2}, {} below 1.0; time over the access floor: geomean ×{:.2}",
        sum.matrices,
        sum.geomean_speedup_vs_dense.unwrap_or(f64::NAN),
        sum.min_speedup_vs_dense.unwrap_or(f64::NAN),
        sum.below_dense,
        sum.geomean_over_floor.unwrap_or(f64::NAN)
    );
    write_json(out, &report(&rows, ops.len()))?;
    if !sum.failures.is_empty() {
        return Err(format!(
            "{} matrices exceed the tolerance: {}",
            sum.failures.len(),
            sum.failures.join("; ")
        )
        .into());
    }
    Ok(())
}
