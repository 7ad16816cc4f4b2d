//! The `copy` section: the probe itself at two sizes, so a reader sees the cache effect next to the figure
//! every other section divides by.

use bespoke_gpu::ProbeOptions;
use serde_json::json;

use super::{BenchContext, Row, Section, SectionOutput};
use crate::Error;
use crate::report::probe_json;

#[derive(Debug)]
pub struct CopySection;

impl Section for CopySection {
    fn name(&self) -> &'static str {
        "copy"
    }

    fn run(&self, ctx: &BenchContext<'_>) -> Result<SectionOutput, Error> {
        // Cache-resident sizes beside the reference probe (reused, not re-timed) show how much of it is DRAM.
        let smaller = [4u64 << 20, 64 << 20]
            .into_iter()
            .filter(|&b| b < ctx.probe.bytes);
        let mut probes = smaller
            .map(|bytes| {
                ctx.gpu.copy_bandwidth(&ProbeOptions {
                    bytes,
                    warmup: 2,
                    reps: if ctx.quick { 5 } else { 10 },
                })
            })
            .collect::<Result<Vec<_>, _>>()?;
        probes.push(ctx.probe.clone());
        // Not a reference any section divides by: where it beats the buffer copy, that adapter's storage-buffer
        // loads, not its memory, set the reference (llvmpipe: ~4×).
        probes.push(ctx.gpu.texture_copy_bandwidth(&ProbeOptions {
            bytes: ctx.probe.bytes,
            warmup: 2,
            reps: if ctx.quick { 5 } else { 10 },
        })?);
        let mut rows = Vec::new();
        let mut runs = Vec::new();
        for p in probes {
            rows.push(Row {
                section: "copy",
                case: if p.variant == "texture-to-buffer" {
                    format!("texture→buffer copy {} MiB", p.bytes >> 20)
                } else {
                    format!("vec4 copy {} MiB", p.bytes >> 20)
                },
                seconds: p.median_seconds,
                rate: p.gbps,
                unit: "GB/s",
                fraction: Some(p.gbps / ctx.copy_gbps),
                note: format!("{} ({})", p.variant, p.timing.as_str()),
            });
            let mut j = probe_json(&p);
            j["copy_fraction"] = json!(p.gbps / ctx.copy_gbps);
            runs.push(j);
        }
        Ok(SectionOutput {
            rows,
            json: json!({ "runs": runs }),
        })
    }
}
