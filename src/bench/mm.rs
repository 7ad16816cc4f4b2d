//! The `mm` section: the nine PyFR operators shipped in tests/data/pyfr (built into the binary), each tuned,
//! checked against the CPU and timed against the dense GEMM at PyFR-like N; GB/s at the minimum bytes and the
//! fraction of the copy bandwidth. At a GPU's N = 2^20 a panel past the adapter's largest buffer (hex-p6-m132's
//! B) goes in column blocks (`bespoke_mm::specialise::ColumnBlocks`).

use bespoke_mm::DType;
use bespoke_mm::specialise::{Operator, Panel, TuneOptions, bench_operator, parse_mtx};
use serde_json::json;

use super::sizes::Sizes;
use super::{BenchContext, Row, Section, SectionOutput};
use crate::Error;

#[derive(Debug)]
pub struct MmSection;

/// (name, Matrix Market text): sparse tensor-product (hex), dense simplex (tet), mixed (pri, pyr) operators.
pub const MATRICES: &[(&str, &str)] = &[
    (
        "hex-p2-m460",
        include_str!("../../tests/data/pyfr/hex-p2-m460-dflt.mtx"),
    ),
    (
        "hex-p3-m0",
        include_str!("../../tests/data/pyfr/hex-p3-m0-dflt.mtx"),
    ),
    (
        "hex-p3-m6",
        include_str!("../../tests/data/pyfr/hex-p3-m6-dflt.mtx"),
    ),
    (
        "tet-p3-m460",
        include_str!("../../tests/data/pyfr/tet-p3-m460-dflt.mtx"),
    ),
    (
        "pri-p2-m132",
        include_str!("../../tests/data/pyfr/pri-p2-m132-dflt.mtx"),
    ),
    (
        "pyr-p2-m6",
        include_str!("../../tests/data/pyfr/pyr-p2-m6-dflt.mtx"),
    ),
    (
        "quad-p4-m3",
        include_str!("../../tests/data/pyfr/quad-p4-m3-dflt.mtx"),
    ),
    (
        "tri-p2-m0",
        include_str!("../../tests/data/pyfr/tri-p2-m0-dflt.mtx"),
    ),
    (
        "hex-p6-m132",
        include_str!("../../tests/data/pyfr/hex-p6-m132-dflt.mtx"),
    ),
];

impl Section for MmSection {
    fn name(&self) -> &'static str {
        "mm"
    }

    fn run(&self, ctx: &BenchContext<'_>) -> Result<SectionOutput, Error> {
        let gpu = ctx.gpu;
        // Quick: three small operators at a short panel; full: all of them at N = 32 800 (PyFR pads to 32) on a
        // CPU adapter, at the N = 2^20 on a GPU.
        let sizes = Sizes::of(gpu.is_cpu(), ctx.quick);
        let (take, n) = (sizes.mm_operators.min(MATRICES.len()), sizes.mm_n);
        let opts = TuneOptions {
            reps: if ctx.quick { 2 } else { 5 },
            ..Default::default()
        };
        let mut rows = Vec::new();
        let mut runs = Vec::new();
        for dtype in [DType::F32, DType::F64] {
            if ctx.quick && dtype == DType::F64 {
                continue;
            }
            // An adapter without f64 says so in the report rather than leave it out.
            if let Err(e) = dtype.require(gpu, "the specialised operators") {
                runs.push(super::dtype_not_run("mm", dtype, &e));
                continue;
            }
            for (name, text) in &MATRICES[..take] {
                let op: Operator = parse_mtx(text, name)?;
                let beta = op.beta_hint.unwrap_or(0.0);
                let panel = Panel::packed(n);
                let r = match dtype {
                    DType::F32 => bench_operator::<f32>(gpu, &op, beta, panel, &opts, 1)?,
                    DType::F64 => bench_operator::<f64>(gpu, &op, beta, panel, &opts, 1)?,
                };
                let tol = if dtype == DType::F32 { 1e-5 } else { 1e-12 };
                if r.rel_err.is_nan() || r.rel_err > tol {
                    return Err(
                        format!("{name} {dtype}: rel_err {:e} over {tol:e}", r.rel_err).into(),
                    );
                }
                let frac = r.gbps / ctx.copy_gbps;
                rows.push(Row {
                    section: "mm",
                    case: format!("{name} {}×{} nnz {} N={n} {dtype}", r.m, r.k, r.nnz),
                    seconds: r.seconds,
                    rate: r.gbps,
                    unit: "GB/s",
                    fraction: Some(frac),
                    note: format!(
                        "{} ×{:.2} vs dense, {:.2} of a same-size copy, {}{}",
                        r.variant,
                        r.speedup_vs_dense.unwrap_or(f64::NAN),
                        r.gbps / r.same_size_copy_gbps,
                        r.floors(),
                        if r.tune.from_cache {
                            ", cached decision"
                        } else {
                            ""
                        }
                    ),
                });
                runs.push(json!({
                    "name": name, "m": r.m, "k": r.k, "nnz": r.nnz, "beta": r.beta, "n": n,
                    "dtype": dtype.wgsl(), "variant": r.variant, "seconds": r.seconds, "gbps": r.gbps,
                    "copy_fraction": frac, "same_size_copy_gbps": r.same_size_copy_gbps,
                    "floor_seconds": r.floor_seconds, "over_floor": r.over_floor,
                    "copy_floor_seconds": r.copy_floor_seconds,
                    "dense_seconds": r.dense_seconds, "speedup_vs_dense": r.speedup_vs_dense, "rel_err": r.rel_err, "warmed_seconds": r.warmed_seconds,
                }));
            }
        }
        Ok(SectionOutput {
            rows,
            json: json!({ "runs": runs }),
        })
    }
}
