//! `bespoke mm …`: thin adapters over bespoke-mm.

use std::path::PathBuf;

use bespoke::Error;
use bespoke::gpu::Gpu;
use bespoke::mm::DType;
use bespoke::mm::dense::bench::{default_params, time_dense};
use bespoke::mm::dense::microbench::fma_peak;
use bespoke::mm::dense::{DenseParams, GemmShape, TileLimits};
use bespoke::report::adapter_json;
use clap::Subcommand;
use serde_json::json;

#[derive(Subcommand, Debug)]
pub enum MmCommand {
    /// Time one dense GEMM C = A·B: GFLOP/s and fraction of the measured FMA peak.
    DenseBench {
        #[arg(long)]
        m: usize,
        #[arg(long)]
        n: usize,
        #[arg(long)]
        k: usize,
        /// f32 or f64.
        #[arg(long, default_value = "f32")]
        dtype: String,
        /// Tiling as a key, e.g. t8x8v4-w16x16-k8-s1 (default: a fixed CUTLASS-like point; the analytical
        /// model is not built yet).
        #[arg(long)]
        params: Option<String>,
        #[arg(long, default_value_t = 10)]
        reps: usize,
        #[arg(long, value_name = "FILE")]
        json: Option<PathBuf>,
    },
}

pub fn parse_dtype(s: &str) -> Result<DType, Error> {
    DType::parse(s).ok_or_else(|| format!("--dtype must be f32 or f64, got `{s}`").into())
}

pub fn run(gpu: &Gpu, cmd: MmCommand) -> Result<(), Error> {
    match cmd {
        MmCommand::DenseBench {
            m,
            n,
            k,
            dtype,
            params,
            reps,
            json: json_path,
        } => {
            let dtype = parse_dtype(&dtype)?;
            let shape = GemmShape::packed(m, n, k);
            shape.check()?;
            let (p, source) = match params {
                Some(key) => (
                    DenseParams::parse(&key).ok_or_else(|| {
                        format!("--params `{key}` is not like t8x8v4-w16x16-k8-s1")
                    })?,
                    "given",
                ),
                None => (
                    default_params(dtype, &shape, &TileLimits::of(gpu)),
                    "fixed default",
                ),
            };
            let peak = fma_peak(gpu, dtype, false)?;
            let t = time_dense(gpu, dtype, shape, p, reps)?;
            println!(
                "{m}×{n}×{k} {dtype} {} ({source}): {:.3} ms, {:.2} GFLOP/s, {:.3} of the {:.2} GFLOP/s FMA peak",
                p.key(),
                t.seconds * 1e3,
                t.gflops,
                t.gflops / peak,
                peak
            );
            if let Some(path) = json_path {
                let v = json!({
                    "adapter": adapter_json(gpu),
                    "m": m, "n": n, "k": k, "dtype": dtype.wgsl(),
                    "params": p.key(), "params_source": source,
                    "seconds": t.seconds, "gflops": t.gflops,
                    "fma_peak_gflops": peak, "peak_fraction": t.gflops / peak,
                });
                std::fs::write(&path, serde_json::to_string_pretty(&v)?)
                    .map_err(|e| format!("writing {}: {e}", path.display()))?;
            }
            Ok(())
        }
    }
}
