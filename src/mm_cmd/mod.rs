//! `bespoke mm …`: thin adapters over bespoke-mm (arguments and the dense commands here; `ld` and the
//! specialised-kernel commands in their own files).

mod ld;
mod specialise;

use std::path::PathBuf;

use bespoke::Error;
use bespoke::bench::progress_bar;
use bespoke::gpu::Gpu;
use bespoke::mm::DType;
use bespoke::mm::dense::bench::DenseTimer;
use bespoke::mm::dense::microbench::Op;
use bespoke::mm::dense::sweep::{Method, sweep};
use bespoke::mm::dense::{
    Ablation, DenseParams, GemmShape, Machine, MachineSource, TileLimits, checked_pick,
    checked_pick_on,
};
use bespoke::mm::specialise::Variant;
use bespoke::report::{adapter_json, check_json, machine_json, params_json};
use clap::{Args, Subcommand};

use crate::json_out::{open_json, write_json};
use crate::open_gpu;
use serde_json::{Value, json};

#[derive(Subcommand, Debug)]
pub enum MmCommand {
    /// Time one dense GEMM C = A·B: GFLOP/s and fraction of the measured FMA peak.
    DenseBench {
        #[command(flatten)]
        shape: ShapeArgs,
        /// Tiling as a key, e.g. t8x8v4-w16x16-k8-s1 (default: the model's pick checked on the device: the
        /// best-predicted tiling of each of its first few register-tile shapes timed on a sample, cached).
        #[arg(long)]
        params: Option<DenseParams>,
        /// The analytical model's own pick, untimed (instead of the checked pick).
        #[arg(long, conflicts_with = "params")]
        model_only: bool,
        #[arg(long, default_value_t = 10, value_parser = crate::count::<usize>)]
        reps: usize,
        /// Keep naga's runtime bounds checks in the kernel (they are off: every index is in range by
        /// construction), to measure what they cost.
        #[arg(long)]
        bounds_checks: bool,
        /// Time the kernel with a cost taken out (its result is then not A·B): stage-once (no loads from A and B
        /// after the first K tile) or fragments-once (workgroup-memory fragment loads once per K tile).
        #[arg(
            long,
            value_name = "ABLATION",
            default_value = "none",
            requires = "params"
        )]
        ablate: Ablation,
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
        /// Timed runs per full-shape configuration (after a one-tile warm-up); the median counts.
        #[arg(long, default_value_t = 3, value_parser = crate::count::<usize>)]
        reps: usize,
        /// Screen: time every configuration once on a sample of at least this many GFLOP (C whole with K cut
        /// where that or 1 ms of the FMA peak leaves 256 of depth, as on a GPU; else a block of C of whole tiles,
        /// full K, twice the workgroups that fill the device), then only the fastest --confirm and the model's pick on the full shape. For
        /// shapes where timing every configuration takes hours.
        #[arg(long, value_name = "GFLOP", allow_negative_numbers = true)]
        screen: Option<f64>,
        /// With --screen: how many of the fastest screened configurations are timed on the full shape.
        #[arg(long, default_value_t = 8, value_parser = crate::count::<usize>)]
        confirm: usize,
        /// Time each configuration's twin with its K steps unrolled (`-u`) too, as the checked pick does on GPUs.
        #[arg(long)]
        unrolled: bool,
        #[command(flatten)]
        model: ModelArgs,
        #[arg(long, value_name = "FILE")]
        json: Option<PathBuf>,
    },
    /// Print the WGSL of a kernel specialised to the operator in a Matrix Market file (one kernel per launch).
    Gen(GenArgs),
    /// Tune, check and time specialised kernels against the dense GEMM for .mtx files or folders of them.
    Bench(BenchArgs),
    /// Linkage disequilibrium r² between SNPs through the popcount GEMM.
    Ld(LdArgs),
    /// The model's measured inputs for this adapter (cached on disk) and, with a shape, its pick.
    DenseModel {
        #[arg(long, default_value = "f32")]
        dtype: DType,
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
pub struct GenArgs {
    /// Matrix Market file holding A.
    file: PathBuf,
    #[arg(long, default_value = "f32")]
    dtype: DType,
    /// β (default: the file's `% PyFR beta for this op:` line, else 0).
    #[arg(long, allow_negative_numbers = true)]
    beta: Option<f64>,
    /// Variant name, e.g. cstream, cstream-v4-fold, bstream-v2, bstream-msplit-s4, cstream-ksplit-s2-v4.
    #[arg(long, default_value = "cstream")]
    variant: Variant,
    #[arg(long, default_value_t = 32768)]
    n: usize,
    /// Leading dimension of B (default N).
    #[arg(long)]
    ldb: Option<usize>,
    /// Leading dimension of C (default N).
    #[arg(long)]
    ldc: Option<usize>,
}

#[derive(Args, Debug)]
pub struct BenchArgs {
    /// .mtx files or folders of them.
    #[arg(required = true)]
    paths: Vec<PathBuf>,
    #[arg(long, default_value_t = 32800)]
    n: usize,
    #[arg(long, default_value = "f32")]
    dtype: DType,
    /// β for files without a `% PyFR beta for this op:` line.
    #[arg(long, default_value_t = 0.0, allow_negative_numbers = true)]
    beta: f64,
    /// Timed repetitions (median) of the finalists and of the final timings.
    #[arg(long, default_value_t = 5, value_parser = crate::count::<usize>)]
    reps: usize,
    /// Re-tune instead of reading earlier decisions from the cache, and keep the new decisions there.
    #[arg(long)]
    retune: bool,
    /// Seconds one operator's tuning may spend (candidates predicted to compile past it are skipped; `inf`: no
    /// bound).
    #[arg(long, default_value_t = bespoke::mm::specialise::DEFAULT_TUNE_BUDGET, value_name = "SECONDS", allow_negative_numbers = true)]
    tune_budget: f64,
    /// Workers that compile an operator's candidates at once before they are timed (1: one by one; default:
    /// every core on a GPU, one on a CPU adapter, whose llvmpipe compiles at the first dispatch anyway).
    #[arg(long, value_name = "N")]
    compile_threads: Option<usize>,
    /// Only these variants (comma-separated names; default: every variant worth timing on this adapter).
    #[arg(long, value_delimiter = ',')]
    variants: Option<Vec<Variant>>,
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,
}

#[derive(Args, Debug)]
pub struct LdArgs {
    /// SNP file: one SNP per line of 0/1 characters (one per sample); `#` lines and blank lines skipped.
    #[arg(required_unless_present = "random", conflicts_with = "random")]
    file: Option<PathBuf>,
    /// Random data instead: M SNPs against N SNPs over SAMPLES samples, e.g. 2000,2000,10000.
    #[arg(long, value_name = "M,N,SAMPLES")]
    random: Option<String>,
    /// Seed for --random.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Tiling key (default: the model's pick for popcount), e.g. t8x8v1-w16x16-k8-s1.
    #[arg(long)]
    params: Option<DenseParams>,
    #[arg(long, default_value_t = 5, value_parser = crate::count::<usize>)]
    reps: usize,
    /// Also compute every r² on the CPU and compare (slow for big inputs).
    #[arg(long)]
    check: bool,
    #[command(flatten)]
    model: ModelArgs,
    /// JSON report; holds the r² matrix when it has at most 65536 entries.
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,
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
    dtype: DType,
}

#[derive(Args, Debug)]
pub struct ModelArgs {
    /// Re-run the model's micro-benchmarks instead of reading the per-adapter cache.
    #[arg(long)]
    remeasure: bool,
}

impl ShapeArgs {
    fn parse(&self) -> Result<(GemmShape, DType), Error> {
        let shape = GemmShape::packed(self.m, self.n, self.k);
        shape.check()?;
        Ok((shape, self.dtype))
    }
}

fn load_machine(gpu: &Gpu, dtype: DType, args: &ModelArgs) -> Result<Machine, Error> {
    load_machine_for(gpu, Op::Fma(dtype), args)
}

pub(crate) fn load_machine_for(gpu: &Gpu, op: Op, args: &ModelArgs) -> Result<Machine, Error> {
    if args.remeasure || Machine::load_cached(gpu, op).is_none() {
        // Seconds on a GPU, a minute or two on a CPU adapter: say so before the silence.
        eprintln!(
            "measuring the dense model's inputs for {} on this adapter (once; cached for later runs) …",
            op.name()
        );
    }
    let (m, src) = Machine::load_or_measure(gpu, op, args.remeasure)?;
    match src {
        MachineSource::Cache(p) => eprintln!("model inputs: {}", p.display()),
        MachineSource::Measured(Some(p)) => {
            eprintln!("model inputs measured, cached in {}", p.display())
        }
        MachineSource::Measured(None) => eprintln!("model inputs measured (no cache folder)"),
    }
    Ok(m)
}

/// Runs an `mm` command: arguments and input files are checked first, the device is opened after.
pub fn run(cmd: MmCommand) -> Result<(), Error> {
    match cmd {
        MmCommand::Gen(a) => specialise::run_gen(a),
        MmCommand::Bench(a) => specialise::run_bench(a),
        MmCommand::Ld(args) => ld::run_ld(args),
        MmCommand::DenseBench {
            shape,
            params,
            model_only,
            reps,
            bounds_checks,
            ablate,
            model,
            json: json_path,
        } => {
            let out = open_json(json_path.as_deref())?;
            let (shape, dtype) = shape.parse()?;
            let given = params;
            let gpu = &open_gpu()?;
            let machine = load_machine(gpu, dtype, &model)?;
            // A, B and C once: the checked pick (where it is not cached) times its shortlist on them too.
            let timer = DenseTimer::new(gpu, dtype, shape)?
                .with_bounds_checks(bounds_checks)
                .with_ablation(ablate);
            let (p, source, check) = match given {
                Some(p) => (p, "given".to_owned(), None),
                None if model_only => (
                    machine.pick(dtype, &TileLimits::of(gpu), &shape, false)?.0,
                    "model".to_owned(),
                    None,
                ),
                None => {
                    // The pick is made (and cached) without bounds checks, whatever this run times.
                    let c = if bounds_checks {
                        checked_pick(gpu, &machine, dtype, &shape, false)?
                    } else {
                        checked_pick_on(gpu, &machine, &timer, false)?
                    };
                    (c.params, c.describe(), Some(c))
                }
            };
            let peak = machine.peak_gflops();
            let t = timer.time(gpu, p, reps)?;
            bespoke::say!(
                "{}×{}×{} {dtype} {} ({source}{}): {:.3} ms, {:.2} GFLOP/s, {:.3} of the {:.2} GFLOP/s FMA peak",
                shape.m,
                shape.n,
                shape.k,
                p.key(),
                match (bounds_checks, ablate) {
                    (false, Ablation::None) => String::new(),
                    (true, Ablation::None) => ", bounds-checked".into(),
                    (b, a) => format!(
                        "{}, ablated: {}",
                        if b { ", bounds-checked" } else { "" },
                        a.name()
                    ),
                },
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
                    "params": params_json(&p), "params_source": source, "bounds_checks": bounds_checks,
                    "ablation": ablate.name(),
                    "seconds": t.seconds, "gflops": t.gflops,
                    "fma_peak_gflops": peak, "peak_fraction": t.gflops / peak,
                    // What the check timed (each candidate's sample and GFLOP/s, the two finalists again).
                    "check": check.map(|c| check_json(&c)),
                }),
            )
        }
        MmCommand::DenseSweep {
            shape,
            reps,
            screen,
            confirm,
            unrolled,
            model,
            json: json_path,
        } => {
            let out = open_json(json_path.as_deref())?;
            let (shape, dtype) = shape.parse()?;
            let method = match screen {
                None => Method::Exhaustive,
                Some(g) if g.is_finite() && g >= 0.0 && confirm >= 1 => Method::Screened {
                    sample_gflop: g,
                    confirm,
                },
                Some(g) => {
                    return Err(format!(
                        "--screen {g} --confirm {confirm}: give a sample size ≥ 0 GFLOP and --confirm ≥ 1"
                    )
                    .into());
                }
            };
            let gpu = &open_gpu()?;
            let machine = load_machine(gpu, dtype, &model)?;
            let bar = progress_bar(0);
            let s = sweep(
                gpu,
                &machine,
                dtype,
                shape,
                method,
                reps,
                unrolled,
                |done, total| {
                    bar.set_length(total as u64);
                    bar.set_position(done as u64);
                },
            )?;
            bar.finish_and_clear();
            let (pick, best) = (&s.points[s.pick], &s.points[s.best]);
            if let Method::Screened { .. } = method {
                bespoke::say!(
                    "{}×{}×{} {dtype}: {} configurations screened on samples (the pick's: {}), {} timed on the full shape, on {}",
                    shape.m,
                    shape.n,
                    shape.k,
                    s.screened(),
                    pick.sample
                        .as_ref()
                        .map_or("none".into(), |(sub, _)| format!(
                            "{}×{}×{}",
                            sub.m, sub.n, sub.k
                        )),
                    s.timed(),
                    gpu.adapter_name()
                );
                if let Some(r) = s.pick_sample_rank() {
                    bespoke::say!(
                        "model pick ranked {} of {} in the screening",
                        r + 1,
                        s.screened()
                    );
                }
            } else {
                bespoke::say!(
                    "{}×{}×{} {dtype}: {} configurations timed on {}",
                    shape.m,
                    shape.n,
                    shape.k,
                    s.timed(),
                    gpu.adapter_name()
                );
            }
            bespoke::say!(
                "model pick {} {:.2} GFLOP/s (predicted {:.2}, {} bound), rank {} of {}",
                pick.params.key(),
                s.pick_gflops(),
                shape.flops() / pick.predicted.seconds / 1e9,
                pick.predicted.bound,
                s.pick_rank() + 1,
                s.timed()
            );
            bespoke::say!(
                "best       {} {:.2} GFLOP/s (predicted {:.2})",
                best.params.key(),
                s.best_gflops(),
                shape.flops() / best.predicted.seconds / 1e9
            );
            bespoke::say!("efficiency E = {:.3}", s.efficiency());
            let checked = &s.points[s.checked];
            bespoke::say!(
                "checked    {} {:.2} GFLOP/s (the model's shortlist, one tile shape each, checked as the library checks): E = {:.3}",
                checked.params.key(),
                s.checked_gflops(),
                s.checked_efficiency()
            );
            let configs: Vec<Value> = s
                .points
                .iter()
                .map(|pt| {
                    json!({
                        "params": pt.params.key(),
                        "predicted_gflops": shape.flops() / pt.predicted.seconds / 1e9,
                        "bound": pt.predicted.bound,
                        "gflops": pt.gflops(),
                        "error": pt.measured.as_ref().and_then(|m| m.as_ref().err()),
                        "sample": pt.sample.as_ref().map(|(sub, m)| json!({
                            "m": sub.m, "n": sub.n, "k": sub.k, "gflops": m.as_ref().ok(), "error": m.as_ref().err(),
                            // Workgroups the sample launches (a GPU runs them in waves).
                            "groups": pt.params.groups(sub.m, sub.n),
                        })),
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
                    "checked_pick": {"params": params_json(&checked.params), "gflops": s.checked_gflops(),
                                     "efficiency": s.checked_efficiency(),
                                     "check": s.check.as_ref().map(check_json)},
                    "method": match method { Method::Exhaustive => "exhaustive", Method::Screened { .. } => "screened" },
                    "configs_timed": s.timed(),
                    "configs_screened": s.screened(),
                    "configs_in_space": s.points.len(),
                    "pick_sample_rank": s.pick_sample_rank().map(|r| r + 1),
                    "reps": reps,
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
            let shape = match (m, n, k) {
                (Some(m), Some(n), Some(k)) => {
                    let shape = GemmShape::packed(m, n, k);
                    shape.check()?;
                    Some(shape)
                }
                (None, None, None) => None,
                _ => return Err("give all of --m, --n and --k, or none".into()),
            };
            let gpu = &open_gpu()?;
            let machine = load_machine(gpu, dtype, &model)?;
            bespoke::say!("{}", serde_json::to_string_pretty(&machine_json(&machine))?);
            let mut v = json!({"adapter": adapter_json(gpu), "machine": machine_json(&machine)});
            if let Some(shape) = shape {
                let (m, n, k) = (shape.m, shape.n, shape.k);
                let (p, pred) = machine.pick(dtype, &TileLimits::of(gpu), &shape, false)?;
                let gflops = shape.flops() / pred.seconds / 1e9;
                bespoke::say!(
                    "pick for {m}×{n}×{k}: {} (predicted {gflops:.2} GFLOP/s, {} bound)",
                    p.key(),
                    pred.bound
                );
                v["pick"] = json!({"m": m, "n": n, "k": k, "params": params_json(&p),
                                   "predicted_gflops": gflops, "bound": pred.bound});
            }
            write_json(out, &v)
        }
    }
}
