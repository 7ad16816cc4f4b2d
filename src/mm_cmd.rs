//! `bespoke mm …`: thin adapters over bespoke-mm.

use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};

use bespoke::Error;
use bespoke::gpu::Gpu;
use bespoke::mm::DType;
use bespoke::mm::dense::bench::time_dense;
use bespoke::mm::dense::sweep::sweep;
use bespoke::mm::dense::{DenseParams, GemmShape, Machine, MachineSource, TileLimits};
use bespoke::report::{adapter_json, machine_json, params_json};
use clap::{Args, Subcommand};
use indicatif::{ProgressBar, ProgressStyle};
use serde_json::{Value, json};

#[derive(Subcommand, Debug)]
pub enum MmCommand {
    /// Time one dense GEMM C = A·B: GFLOP/s and fraction of the measured FMA peak.
    DenseBench {
        #[command(flatten)]
        shape: ShapeArgs,
        /// Tiling as a key, e.g. t8x8v4-w16x16-k8-s1 (default: the analytical model's pick).
        #[arg(long)]
        params: Option<String>,
        #[arg(long, default_value_t = 10)]
        reps: usize,
        #[command(flatten)]
        model: ModelArgs,
        #[arg(long, value_name = "FILE")]
        json: Option<PathBuf>,
    },
    /// Time every configuration the model considers for a shape; report the model's pick, the best found and
    /// the efficiency E = pick ÷ best.
    DenseSweep {
        #[command(flatten)]
        shape: ShapeArgs,
        /// Timed runs per configuration (after one warm-up); the median counts.
        #[arg(long, default_value_t = 3)]
        reps: usize,
        #[command(flatten)]
        model: ModelArgs,
        #[arg(long, value_name = "FILE")]
        json: Option<PathBuf>,
    },
    /// The model's measured inputs for this adapter (cached on disk) and, with a shape, its pick.
    DenseModel {
        #[arg(long, default_value = "f32")]
        dtype: String,
        #[arg(long)]
        m: Option<usize>,
        #[arg(long)]
        n: Option<usize>,
        #[arg(long)]
        k: Option<usize>,
        #[command(flatten)]
        model: ModelArgs,
        #[arg(long, value_name = "FILE")]
        json: Option<PathBuf>,
    },
}

#[derive(Args, Debug)]
pub struct ShapeArgs {
    #[arg(long)]
    m: usize,
    #[arg(long)]
    n: usize,
    #[arg(long)]
    k: usize,
    /// f32 or f64.
    #[arg(long, default_value = "f32")]
    dtype: String,
}

#[derive(Args, Debug)]
pub struct ModelArgs {
    /// Re-run the model's micro-benchmarks instead of reading the per-adapter cache.
    #[arg(long)]
    remeasure: bool,
}

pub fn parse_dtype(s: &str) -> Result<DType, Error> {
    DType::parse(s).ok_or_else(|| format!("--dtype must be f32 or f64, got `{s}`").into())
}

impl ShapeArgs {
    fn parse(&self) -> Result<(GemmShape, DType), Error> {
        let shape = GemmShape::packed(self.m, self.n, self.k);
        shape.check()?;
        Ok((shape, parse_dtype(&self.dtype)?))
    }
}

/// Creates the JSON output now, so a bad path fails before minutes of timing.
fn open_json(path: Option<&Path>) -> Result<Option<(std::fs::File, PathBuf)>, Error> {
    path.map(|p| {
        std::fs::File::create(p)
            .map(|f| (f, p.to_path_buf()))
            .map_err(|e| format!("cannot write the JSON report to {}: {e}", p.display()).into())
    })
    .transpose()
}

fn write_json(out: Option<(std::fs::File, PathBuf)>, v: &Value) -> Result<(), Error> {
    if let Some((mut f, p)) = out {
        writeln!(f, "{}", serde_json::to_string_pretty(v)?)
            .map_err(|e| format!("writing {}: {e}", p.display()))?;
    }
    Ok(())
}

fn load_machine(gpu: &Gpu, dtype: DType, args: &ModelArgs) -> Result<Machine, Error> {
    let (m, src) = Machine::load_or_measure(gpu, dtype, args.remeasure)?;
    match src {
        MachineSource::Cache(p) => eprintln!("model inputs: {}", p.display()),
        MachineSource::Measured(Some(p)) => {
            eprintln!("model inputs measured, cached in {}", p.display())
        }
        MachineSource::Measured(None) => eprintln!("model inputs measured (no cache folder)"),
    }
    Ok(m)
}

pub fn run(gpu: &Gpu, cmd: MmCommand) -> Result<(), Error> {
    match cmd {
        MmCommand::DenseBench {
            shape,
            params,
            reps,
            model,
            json: json_path,
        } => {
            let out = open_json(json_path.as_deref())?;
            let (shape, dtype) = shape.parse()?;
            let machine = load_machine(gpu, dtype, &model)?;
            let (p, source) = match params {
                Some(key) => (
                    DenseParams::parse(&key).ok_or_else(|| {
                        format!("--params `{key}` is not like t8x8v4-w16x16-k8-s1")
                    })?,
                    "given",
                ),
                None => (
                    machine.pick(dtype, &TileLimits::of(gpu), &shape, false)?.0,
                    "model",
                ),
            };
            let peak = machine.peak_gflops();
            let t = time_dense(gpu, dtype, shape, p, reps)?;
            println!(
                "{}×{}×{} {dtype} {} ({source}): {:.3} ms, {:.2} GFLOP/s, {:.3} of the {:.2} GFLOP/s FMA peak",
                shape.m,
                shape.n,
                shape.k,
                p.key(),
                t.seconds * 1e3,
                t.gflops,
                t.gflops / peak,
                peak
            );
            write_json(
                out,
                &json!({
                    "adapter": adapter_json(gpu),
                    "m": shape.m, "n": shape.n, "k": shape.k, "dtype": dtype.wgsl(),
                    "params": params_json(&p), "params_source": source,
                    "seconds": t.seconds, "gflops": t.gflops,
                    "fma_peak_gflops": peak, "peak_fraction": t.gflops / peak,
                }),
            )
        }
        MmCommand::DenseSweep {
            shape,
            reps,
            model,
            json: json_path,
        } => {
            let out = open_json(json_path.as_deref())?;
            let (shape, dtype) = shape.parse()?;
            let machine = load_machine(gpu, dtype, &model)?;
            let bar = if std::io::stderr().is_terminal() {
                ProgressBar::new(0)
            } else {
                ProgressBar::hidden()
            };
            bar.set_style(
                ProgressStyle::with_template("{spinner} [{elapsed_precise}] {bar:30} {pos}/{len}")
                    .unwrap_or_else(|_| ProgressStyle::default_bar()),
            );
            let s = sweep(gpu, &machine, dtype, shape, reps, |done, total| {
                bar.set_length(total as u64);
                bar.set_position(done as u64);
            })?;
            bar.finish_and_clear();
            let (pick, best) = (&s.points[s.pick], &s.points[s.best]);
            println!(
                "{}×{}×{} {dtype}: {} configurations timed on {}",
                shape.m,
                shape.n,
                shape.k,
                s.timed(),
                gpu.adapter_name()
            );
            println!(
                "model pick {} {:.2} GFLOP/s (predicted {:.2}, {} bound), rank {} of {}",
                pick.params.key(),
                s.pick_gflops(),
                shape.flops() / pick.predicted.seconds / 1e9,
                pick.predicted.bound,
                s.pick_rank() + 1,
                s.timed()
            );
            println!(
                "best       {} {:.2} GFLOP/s (predicted {:.2})",
                best.params.key(),
                s.best_gflops(),
                shape.flops() / best.predicted.seconds / 1e9
            );
            println!("efficiency E = {:.3}", s.efficiency());
            let configs: Vec<Value> = s
                .points
                .iter()
                .map(|pt| {
                    json!({
                        "params": pt.params.key(),
                        "predicted_gflops": shape.flops() / pt.predicted.seconds / 1e9,
                        "bound": pt.predicted.bound,
                        "gflops": pt.measured.as_ref().ok(),
                        "error": pt.measured.as_ref().err(),
                    })
                })
                .collect();
            write_json(
                out,
                &json!({
                    "adapter": adapter_json(gpu),
                    "m": shape.m, "n": shape.n, "k": shape.k, "dtype": dtype.wgsl(),
                    "model_pick": {"params": params_json(&pick.params), "gflops": s.pick_gflops(),
                                   "predicted_gflops": shape.flops() / pick.predicted.seconds / 1e9,
                                   "rank": s.pick_rank() + 1},
                    "best": {"params": params_json(&best.params), "gflops": s.best_gflops()},
                    "efficiency": s.efficiency(),
                    "configs_timed": s.timed(),
                    "fma_peak_gflops": machine.peak_gflops(),
                    "machine": machine_json(&machine),
                    "configs": configs,
                }),
            )
        }
        MmCommand::DenseModel {
            dtype,
            m,
            n,
            k,
            model,
            json: json_path,
        } => {
            let out = open_json(json_path.as_deref())?;
            let dtype = parse_dtype(&dtype)?;
            let machine = load_machine(gpu, dtype, &model)?;
            println!("{}", serde_json::to_string_pretty(&machine_json(&machine))?);
            let mut v = json!({"adapter": adapter_json(gpu), "machine": machine_json(&machine)});
            match (m, n, k) {
                (Some(m), Some(n), Some(k)) => {
                    let shape = GemmShape::packed(m, n, k);
                    shape.check()?;
                    let (p, pred) = machine.pick(dtype, &TileLimits::of(gpu), &shape, false)?;
                    let gflops = shape.flops() / pred.seconds / 1e9;
                    println!(
                        "pick for {m}×{n}×{k}: {} (predicted {gflops:.2} GFLOP/s, {} bound)",
                        p.key(),
                        pred.bound
                    );
                    v["pick"] = json!({"m": m, "n": n, "k": k, "params": params_json(&p),
                                       "predicted_gflops": gflops, "bound": pred.bound});
                }
                (None, None, None) => {}
                _ => return Err("give all of --m, --n and --k, or none".into()),
            }
            write_json(out, &v)
        }
    }
}
