//! The `fv` section: the ELLPACK diffusion step on a generated tet mesh whose x does not fit the last-level
//! cache, gmsh-like (random) numbering against METIS blocks, both kernels; GB/s at the minimum byte count.

use bespoke_fv::bench::{bench_operator, min_bytes_per_tet};
use bespoke_fv::generate::BoxMesh;
use bespoke_fv::operator::adjacency;
use bespoke_fv::ordering::OrderingKind;
use bespoke_fv::{Boundary, Operator};
use bespoke_gpu::phase;
use serde_json::json;

use super::sizes::Sizes;
use super::{BenchContext, Row, Section, SectionOutput};
use crate::Error;

#[derive(Debug)]
pub struct FvSection;

/// The METIS block and the block-cached kernel's block.
pub(super) const BLOCK: u32 = 2048;

/// The bench's operator: zero-flux diffusion on a jittered box of `n`³ cubes (6 tets each) numbered at random,
/// as gmsh numbers.
pub(super) fn box_operator(n: usize) -> Result<Operator, Error> {
    let mesh = phase(format!("fv box {n}³ cubes"), || {
        BoxMesh {
            cells: [n, n, n],
            jitter: 0.1,
            shuffle: Some(1),
            seed: 2,
        }
        .build()
    })?;
    let adj = phase("fv adjacency", || adjacency(&mesh))?;
    Ok(phase("fv operator", || {
        Operator::diffusion(&mesh, &adj, 1.0, Boundary::ZeroFlux)
    })?)
}

impl Section for FvSection {
    fn name(&self) -> &'static str {
        "fv"
    }

    fn run(&self, ctx: &BenchContext<'_>) -> Result<SectionOutput, Error> {
        // 88³ cubes = 4.09 M tets (x: 16 MB f32, operator 131 MB); quick: 24³ = 83 k. A GPU's last-level cache
        // holds 16 MB (an H100 has 50 MB of L2), so there 140³ = 16.5 M tets (x: 66 MB, operator 527 MB).
        let op = box_operator(Sizes::of(ctx.gpu.is_cpu(), ctx.quick).fv_cubes)?;
        let orderings = [
            OrderingKind::AsRead,
            OrderingKind::Metis {
                block: BLOCK as usize,
            },
        ];
        let runs = bench_operator::<f32>(
            ctx.gpu,
            &op,
            &orderings,
            BLOCK,
            if ctx.quick { 3 } else { 5 },
            |_| {},
        )?;
        let bytes = min_bytes_per_tet(4);
        let mut rows = Vec::new();
        let mut out = Vec::new();
        for r in &runs {
            if let Some(why) = &r.skipped {
                out.push(json!({
                    "ordering": r.ordering, "kernel": r.kernel, "layout": r.layout, "skipped": why,
                }));
                continue;
            }
            rows.push(Row {
                section: "fv",
                case: format!(
                    "{}k tets {} {} {}",
                    op.n() / 1000,
                    r.ordering,
                    r.kernel,
                    r.layout
                ),
                seconds: r.seconds_per_step,
                rate: r.gbps,
                unit: "GB/s",
                fraction: Some(r.gbps / ctx.copy_gbps),
                note: format!(
                    "{:.1} B/tet min; in-block {:.3}, far {:.3} ({})",
                    r.bytes_per_tet, r.in_block_fraction, r.far_fraction, r.timing
                ),
            });
            out.push(json!({
                "ordering": r.ordering, "kernel": r.kernel, "layout": r.layout,
                "seconds_per_step": r.seconds_per_step, "bytes_per_tet": r.bytes_per_tet, "gbps": r.gbps, "copy_fraction": r.gbps / ctx.copy_gbps,
                "in_block_fraction": r.in_block_fraction, "far_fraction": r.far_fraction, "ordering_seconds": r.ordering_seconds,
            }));
        }
        Ok(SectionOutput {
            rows,
            json: json!({ "tets": op.n(), "dtype": "f32", "block_size": BLOCK, "min_bytes_per_tet": bytes, "runs": out }),
        })
    }
}
