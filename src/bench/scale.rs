//! The `scale` section: the lattice on two ranks as threads of this process (each its own device), weak scaling
//! at a fixed block per rank and strong scaling on a fixed domain, the exchange's bytes and time per step and
//! the share of it that overlap hides. `bespoke scale` measures the same under `mpirun`.

use std::rc::Rc;

use bespoke_comm::{Comm, run_threads};
use bespoke_gpu::{Gpu, GpuOptions};
use bespoke_lbm::scale::{ScaleOptions, ScaleReport, scale};
use bespoke_lbm::{Storage, Streaming};
use serde_json::json;

use super::{BenchContext, Row, Section, SectionOutput};
use crate::Error;

#[derive(Debug)]
pub struct ScaleSection;

/// The section's rows from a report.
pub fn scale_rows(r: &ScaleReport) -> Vec<Row> {
    let on = &r.weak[0];
    let off = &r.weak[1];
    vec![
        Row {
            section: "scale",
            case: format!(
                "lbm weak {}×{}/rank, {} ranks",
                r.weak_one.nx, r.weak_one.ny, r.ranks
            ),
            seconds: on.seconds_per_step,
            rate: on.mlups_per_rank,
            unit: "MLUPS/rank",
            fraction: Some(r.weak_efficiency),
            note: format!(
                "E(weak) {:.3} vs 1 rank alone {:.1} MLUPS, {:.3} vs {} independent ranks {:.1}; {:.0} B/step, messages {:.3} ms; without overlap {:.3} ms/step \
                 (exchange +{:.3} ms), overlap hides {:.0} %",
                r.weak_efficiency,
                r.weak_one.mlups_per_rank,
                r.exchange_efficiency,
                r.ranks,
                r.weak_independent.mlups_per_rank,
                on.exchange_bytes_per_step,
                1e3 * off.message_seconds_per_step,
                1e3 * off.seconds_per_step,
                1e3 * r.exchange_cost,
                100.0 * r.overlap_hidden
            ),
        },
        Row {
            section: "scale",
            case: format!(
                "lbm strong {}×{}, {} ranks",
                r.strong.nx, r.strong.ny, r.ranks
            ),
            seconds: r.strong.seconds_per_step,
            rate: r.strong.mlups_per_rank,
            unit: "MLUPS/rank",
            fraction: Some(r.strong_efficiency),
            note: format!(
                "E(strong) {:.3} vs 1 rank {:.1} MLUPS",
                r.strong_efficiency, r.strong_one.mlups_per_rank
            ),
        },
    ]
}

impl Section for ScaleSection {
    fn name(&self) -> &'static str {
        "scale"
    }

    fn run(&self, ctx: &BenchContext<'_>) -> Result<SectionOutput, Error> {
        let side = if ctx.quick {
            128
        } else if ctx.gpu.is_cpu() {
            512
        } else {
            4096
        };
        let opts = ScaleOptions {
            block: [side, side],
            domain: [2 * side, side],
            steps: if ctx.quick { 10 } else { 50 },
            storage: Storage::F32,
            streaming: Streaming::Ab,
        };
        let reports = run_threads(2, |comm| {
            let gpu = Gpu::with_options(GpuOptions {
                rank: Some(comm.rank()),
                ..Default::default()
            })?;
            Ok::<_, Error>(scale(&gpu, Rc::new(comm), &opts)?)
        })
        .map_err(|e| e.to_string())?;
        let r = &reports[0];
        Ok(SectionOutput {
            rows: scale_rows(r),
            json: json!(r),
        })
    }
}
