//! The `lbm` section: the D2Q9 stepper on a periodic lattice well past the last-level cache, each streaming
//! pattern and storage; MLUPS and the fraction of the copy bandwidth at the bytes actually moved.

use bespoke_lbm::bench::bench_stepper;
use bespoke_lbm::{Storage, Streaming};
use serde_json::json;

use super::sizes::Sizes;
use super::{BenchContext, Row, Section, SectionOutput};
use crate::Error;

#[derive(Debug)]
pub struct LbmSection;

impl Section for LbmSection {
    fn name(&self) -> &'static str {
        "lbm"
    }

    fn run(&self, ctx: &BenchContext<'_>) -> Result<SectionOutput, Error> {
        let gpu = ctx.gpu;
        let side = Sizes::of(gpu.is_cpu(), ctx.quick).lbm_side;
        let reps = if ctx.quick { 3 } else { 10 };
        let mut rows = Vec::new();
        let mut runs = Vec::new();
        for storage in [Storage::F32, Storage::F16] {
            for streaming in [Streaming::Ab, Streaming::InPlace] {
                let b = match bench_stepper(gpu, side, side, storage, streaming, reps) {
                    Ok(b) => b,
                    // A lattice past this adapter's limits is reported, not fatal to the whole bench.
                    Err(e) => {
                        rows.push(Row {
                            section: "lbm",
                            case: format!("{side}² {} {}", storage.name(), streaming.name()),
                            seconds: f64::NAN,
                            rate: f64::NAN,
                            unit: "MLUPS",
                            fraction: None,
                            note: format!("not run: {e}"),
                        });
                        continue;
                    }
                };
                let fraction = b.gbps / ctx.copy_gbps;
                rows.push(Row {
                    section: "lbm",
                    case: format!("{side}² {} {}", storage.name(), streaming.name()),
                    seconds: b.seconds_per_step,
                    rate: b.mlups,
                    unit: "MLUPS",
                    fraction: Some(fraction),
                    note: format!(
                        "{:.2} GB/s at {} B/cell ({}), step {}{}",
                        b.gbps,
                        b.bytes_per_cell,
                        b.timing_source,
                        b.shape.describe(),
                        if b.f16_rounded_explicitly {
                            ", f16 stores rounded by the kernel (the device's pack does not round to nearest)"
                        } else {
                            ""
                        }
                    ),
                });
                runs.push(json!({
                    "nx": b.nx, "ny": b.ny, "storage": storage.name(), "streaming": streaming.name(),
                    "collision": "bgk", "seconds_per_step": b.seconds_per_step, "mlups": b.mlups,
                    "bytes_per_cell": b.bytes_per_cell, "gbps": b.gbps, "copy_fraction": fraction,
                    "timing": b.timing_source, "step_shape": b.shape,
                    "f16_rounded_explicitly": b.f16_rounded_explicitly,
                }));
            }
        }
        Ok(SectionOutput {
            rows,
            json: json!({ "runs": runs }),
        })
    }
}
