//! The `dense` section: the dense GEMM at the model's pick checked on the device (`dense::choose`) for one square and one PyFR-like shape (M, K ≤ 1029,
//! N ≥ 10⁵), GFLOP/s and fraction of the measured FMA peak; and the popcount GEMM of an LD problem.

use bespoke_mm::DType;
use bespoke_mm::dense::bench::time_dense;
use bespoke_mm::dense::microbench::Op;
use bespoke_mm::dense::{GemmShape, Machine, checked_pick};
use bespoke_mm::ld::{SnpMatrix, ld};
use bespoke_mm::popcount::PopShape;
use serde_json::json;

use super::sizes::Sizes;
use super::{BenchContext, Row, Section, SectionOutput};
use crate::Error;
use crate::report::params_json;

#[derive(Debug)]
pub struct DenseSection;

/// The model's inputs: cached per adapter; in quick mode a missing cache is measured quickly and not saved.
fn machine(ctx: &BenchContext<'_>, op: Op) -> Result<Machine, Error> {
    Ok(if ctx.quick {
        Machine::load_cached(ctx.gpu, op).map_or_else(|| Machine::measure(ctx.gpu, op, true), Ok)?
    } else {
        Machine::load_or_measure(ctx.gpu, op, false)?.0
    })
}

impl Section for DenseSection {
    fn name(&self) -> &'static str {
        "dense"
    }

    fn run(&self, ctx: &BenchContext<'_>) -> Result<SectionOutput, Error> {
        let gpu = ctx.gpu;
        // The PyFR-like panel: hex p3 M0-like, 96 flux points from 64 solution points, 10⁵ elements.
        let sizes = Sizes::of(gpu.is_cpu(), ctx.quick);
        let [pm, pn, pk] = sizes.dense_pyfr;
        let (square, pyfr) = (sizes.dense_square, GemmShape::packed(pm, pn, pk));
        let snps = if ctx.quick {
            (256, 2048)
        } else {
            (2048, 10_000)
        };
        let reps = if ctx.quick { 3 } else { 10 };
        let mut rows = Vec::new();
        let mut runs = Vec::new();
        for dtype in [DType::F32, DType::F64] {
            // An adapter without f64 (Metal, Intel's Arc) says so in the report rather than leave it out.
            if let Err(e) = dtype.require(gpu, "the dense GEMM") {
                runs.push(super::dtype_not_run("dense", dtype, &e));
                continue;
            }
            let m = machine(ctx, Op::Fma(dtype))?;
            let peak = m.peak_gflops();
            for (label, shape) in [
                ("square", GemmShape::packed(square, square, square)),
                ("pyfr-like", pyfr),
            ] {
                // The model's pick checked on the device (its shortlist timed on samples, cached).
                let checked = checked_pick(gpu, &m, dtype, &shape, false)?;
                let p = checked.params;
                let pred = m.predict(&p, dtype.size(), &shape, false);
                let t = time_dense(gpu, dtype, shape, p, reps)?;
                // A·B reads A and B once and writes C at least: the floor on bytes moved.
                let bytes = (dtype.size()
                    * (shape.m * shape.k + shape.k * shape.n + shape.m * shape.n))
                    as f64;
                rows.push(Row {
                    section: "dense",
                    case: format!("{label} {}×{}×{} {dtype}", shape.m, shape.n, shape.k),
                    seconds: t.seconds,
                    rate: t.gflops,
                    unit: "GFLOP/s",
                    fraction: Some(t.gflops / peak),
                    note: format!(
                        "{} ({}), of {peak:.1} GFLOP/s FMA peak; {:.2} GB/s = {:.3} of copy",
                        p.key(),
                        checked.describe(),
                        bytes / t.seconds / 1e9,
                        bytes / t.seconds / 1e9 / ctx.copy_gbps
                    ),
                });
                runs.push(json!({
                    "case": label, "m": shape.m, "n": shape.n, "k": shape.k, "dtype": dtype.wgsl(),
                    "params": params_json(&p), "predicted_gflops": shape.flops() / pred.seconds / 1e9,
                    "model_pick": params_json(&checked.model_pick), "pick": checked.describe(),
                    "seconds": t.seconds, "gflops": t.gflops,
                    "fma_peak_gflops": peak, "peak_fraction": t.gflops / peak,
                    "min_bytes": bytes, "gbps": bytes / t.seconds / 1e9,
                    "copy_fraction": bytes / t.seconds / 1e9 / ctx.copy_gbps,
                }));
            }
        }
        // Popcount GEMM of an LD problem at the popcount model's pick.
        let pm = machine(ctx, Op::Popcount)?;
        let a = SnpMatrix::random(snps.0, snps.1, 7)?;
        let res = ld(gpu, &a, &a, None, Some(&pm), reps)?;
        let shape = PopShape::packed(a.snps, a.snps, a.words);
        let gops = shape.word_ops() / res.seconds / 1e9;
        let peak = pm.peak_gflops() / 2.0;
        rows.push(Row {
            section: "dense",
            case: format!("popcount LD {}² SNPs × {} samples", a.snps, a.samples),
            seconds: res.seconds,
            rate: gops,
            unit: "Gword-op/s",
            fraction: Some(gops / peak),
            note: format!(
                "{} (model), of {peak:.1} G/s popcount peak",
                res.params.key()
            ),
        });
        runs.push(json!({
            "case": "popcount-ld", "snps": a.snps, "samples": a.samples, "words": a.words,
            "params": params_json(&res.params), "seconds": res.seconds, "gword_ops": gops,
            "popcount_peak_gops": peak, "peak_fraction": gops / peak,
        }));
        Ok(SectionOutput {
            rows,
            json: json!({ "runs": runs }),
        })
    }
}
