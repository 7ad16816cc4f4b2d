//! The `scale` section: the lattice and the mesh on two ranks as threads of this process (each its own
//! device): weak scaling at a fixed size per rank and strong scaling on a fixed domain, the exchange's bytes
//! and time per step and the share of it that overlap hides. `bespoke scale` measures the same under `mpirun`.

use std::rc::Rc;

use bespoke_comm::run_threads;
use bespoke_comm::scaling::ScaleReport;
use bespoke_gpu::{Gpu, GpuOptions};
use serde_json::json;

use super::sizes::Sizes;
use super::{BenchContext, Row, Section, SectionOutput};
use crate::Error;

#[derive(Debug)]
pub struct ScaleSection;

/// The section's rows from a report: weak scaling (rate per rank, E against one rank alone) and strong.
pub fn scale_rows(r: &ScaleReport) -> Vec<Row> {
    let (w, off) = (&r.weak, &r.weak_no_overlap);
    vec![
        Row {
            section: "scale",
            case: format!("{}: weak, {} ranks", r.code, r.ranks),
            seconds: w.seconds_per_step,
            rate: w.mups_per_rank,
            unit: "M/s/rank",
            fraction: Some(r.weak_efficiency),
            note: format!(
                "E {:.3} vs one rank alone ({:.1} M/s), {:.3} vs {} independent ranks ({:.1}); {:.0} B/step, \
                 messages {:.3} ms; no overlap {:.3} ms/step (exchange +{:.3} ms), overlap hides {:.0} %",
                r.weak_efficiency,
                r.weak_one.mups_per_rank,
                r.exchange_efficiency,
                r.ranks,
                r.weak_independent.mups_per_rank,
                w.exchange_bytes_per_step,
                1e3 * off.message_seconds_per_step,
                1e3 * off.seconds_per_step,
                1e3 * r.exchange_cost,
                100.0 * r.overlap_hidden
            ),
        },
        Row {
            section: "scale",
            case: format!("{}: strong, {} ranks", r.code, r.ranks),
            seconds: r.strong.seconds_per_step,
            rate: r.strong.mups_per_rank,
            unit: "M/s/rank",
            fraction: Some(r.strong_efficiency),
            note: format!(
                "E {:.3} vs one rank ({:.1} M/s){}",
                r.strong_efficiency,
                r.strong_one.mups_per_rank,
                if r.interleaved {
                    String::new()
                } else {
                    format!("; {}", r.memory_note)
                }
            ),
        },
    ]
}

/// Device bytes a scaling run's setups may hold at once, all ranks together: on a CPU adapter, whose device
/// buffers are host memory beside the host's own copies (each thread rank builds the whole mesh or flag field,
/// and lavapipe's resident memory ran at about twice the device bytes), an eighth of the memory the host has
/// available; on a GPU, whose memory wgpu does not report, 16 GiB (`--memory-budget` sets it).
pub fn default_memory_budget(gpu: &Gpu) -> u64 {
    if !gpu.is_cpu() {
        return 16 << 30;
    }
    crate::host::available_memory().unwrap_or(8 << 30) / 8
}

/// Both codes' reports on `ranks` thread ranks.
pub fn thread_reports(
    ranks: usize,
    lbm: &bespoke_lbm::scale::ScaleOptions,
    fv: &bespoke_fv::scale::ScaleOptions,
) -> Result<Vec<ScaleReport>, Error> {
    let reports = run_threads(ranks, |comm| {
        let gpu = Gpu::with_options(GpuOptions {
            node_rank: Some(bespoke_comm::Comm::node_rank(&comm)),
            ..crate::gpu_options()
        })?;
        let comm: Rc<dyn bespoke_comm::Comm> = Rc::new(comm);
        let a = bespoke_lbm::scale::scale(&gpu, comm.clone(), lbm)?;
        let b = bespoke_fv::scale::scale(&gpu, comm, fv)?;
        Ok::<_, Error>(vec![a, b])
    })
    .map_err(|e| e.to_string())?;
    Ok(reports.into_iter().next().unwrap_or_default())
}

impl Section for ScaleSection {
    fn name(&self) -> &'static str {
        "scale"
    }

    fn run(&self, ctx: &BenchContext<'_>) -> Result<SectionOutput, Error> {
        let sizes = Sizes::of(ctx.gpu.is_cpu(), ctx.quick);
        let (side, cubes) = (sizes.scale_side, sizes.scale_cubes);
        let lbm = bespoke_lbm::scale::ScaleOptions {
            block: [side, side],
            domain: [2 * side, side],
            steps: if ctx.quick { 5 } else { 20 },
            rounds: if ctx.quick { 1 } else { 5 },
            storage: bespoke_lbm::Storage::F32,
            streaming: bespoke_lbm::Streaming::Ab,
            memory_budget: default_memory_budget(ctx.gpu),
        };
        let fv = bespoke_fv::scale::ScaleOptions {
            cubes,
            strong: [2 * cubes, cubes, cubes],
            steps: if ctx.quick { 5 } else { 20 },
            rounds: if ctx.quick { 1 } else { 5 },
            ordering: bespoke_fv::ordering::OrderingKind::Rcm,
            memory_budget: default_memory_budget(ctx.gpu),
        };
        let reports = thread_reports(2, &lbm, &fv)?;
        Ok(SectionOutput {
            rows: reports.iter().flat_map(scale_rows).collect(),
            json: json!(reports),
        })
    }
}
