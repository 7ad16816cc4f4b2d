//! `bespoke mm …`: thin adapters over bespoke-mm.

use std::path::PathBuf;

use bespoke::Error;
use bespoke::bench::progress_bar;
use bespoke::gpu::Gpu;
use bespoke::mm::DType;
use bespoke::mm::dense::bench::time_dense;
use bespoke::mm::dense::microbench::Op;
use bespoke::mm::dense::sweep::{Method, sweep};
use bespoke::mm::dense::{DenseParams, GemmShape, Machine, MachineSource, TileLimits};
use bespoke::mm::ld::{SnpMatrix, ld, ld_ref};
use bespoke::mm::popcount::PopShape;
use bespoke::mm::spec::{Panel, SpecKernel, TuneOptions, Variant, bench_operator, read_mtx};
use bespoke::report::{adapter_json, machine_json, params_json};
use clap::{Args, Subcommand};

use crate::json_out::{open_json, write_json};
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
        /// Timed runs per full-shape configuration (after a one-tile warm-up); the median counts.
        #[arg(long, default_value_t = 3)]
        reps: usize,
        /// Screen: time every configuration once on a block of C of whole tiles (full K, at least this many
        /// GFLOP and twice the workgroups that fill the device), then only the fastest --confirm and the model's
        /// pick on the full shape. For shapes where timing every configuration takes hours.
        #[arg(long, value_name = "GFLOP")]
        screen: Option<f64>,
        /// With --screen: how many of the fastest screened configurations are timed on the full shape.
        #[arg(long, default_value_t = 8)]
        confirm: usize,
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
pub struct GenArgs {
    /// Matrix Market file holding A.
    file: PathBuf,
    #[arg(long, default_value = "f32")]
    dtype: String,
    /// β (default: the file's `% PyFR beta for this op:` line, else 0).
    #[arg(long)]
    beta: Option<f64>,
    /// Variant name, e.g. cstream, cstream-v4-fold, bstream-v2, bstream-msplit-s4, cstream-ksplit-s2-v4.
    #[arg(long, default_value = "cstream")]
    variant: String,
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
    dtype: String,
    /// β for files without a `% PyFR beta for this op:` line.
    #[arg(long, default_value_t = 0.0)]
    beta: f64,
    /// Timed repetitions (median) of the finalists and of the final timings.
    #[arg(long, default_value_t = 5)]
    reps: usize,
    /// Re-tune instead of reading earlier decisions from the cache.
    #[arg(long)]
    retune: bool,
    /// Only these variants (comma-separated names; default: every variant worth timing on this adapter).
    #[arg(long, value_delimiter = ',')]
    variants: Option<Vec<String>>,
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
    params: Option<String>,
    #[arg(long, default_value_t = 5)]
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

fn parse_params(key: &str) -> Result<DenseParams, Error> {
    DenseParams::parse(key)
        .ok_or_else(|| format!("--params `{key}` is not like t8x8v4-w16x16-k8-s1").into())
}

fn load_machine(gpu: &Gpu, dtype: DType, args: &ModelArgs) -> Result<Machine, Error> {
    load_machine_for(gpu, Op::Fma(dtype), args)
}

fn load_machine_for(gpu: &Gpu, op: Op, args: &ModelArgs) -> Result<Machine, Error> {
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

fn run_ld(gpu: &Gpu, args: LdArgs) -> Result<(), Error> {
    let out = open_json(args.json.as_deref())?;
    let (a, b, source) = match (&args.file, &args.random) {
        (Some(path), _) => {
            let text = std::fs::read_to_string(path)
                .map_err(|e| format!("reading {}: {e}", path.display()))?;
            let m = SnpMatrix::parse(&text).map_err(|e| format!("{}: {e}", path.display()))?;
            (m.clone(), m, path.display().to_string())
        }
        (None, Some(spec)) => {
            let v: Vec<usize> = spec
                .split(',')
                .map(|x| x.trim().parse::<usize>())
                .collect::<Result<_, _>>()
                .map_err(|_| format!("--random `{spec}` is not M,N,SAMPLES"))?;
            let [m, n, samples] = v[..] else {
                return Err(format!("--random `{spec}` is not M,N,SAMPLES").into());
            };
            // Past the device, say so before drawing the bits.
            let words = SnpMatrix::words_for(samples);
            gpu.check_len::<u32>(
                m.saturating_mul(words),
                "SNP matrix A (M × SAMPLES/32 words)",
            )?;
            gpu.check_len::<u32>(
                n.saturating_mul(words),
                "SNP matrix B (N × SAMPLES/32 words)",
            )?;
            gpu.check_len::<f32>(m.saturating_mul(n), "r² (M × N)")?;
            (
                SnpMatrix::random(m, samples, args.seed)?,
                SnpMatrix::random(n, samples, args.seed ^ 0x5eed)?,
                format!("random (seed {})", args.seed),
            )
        }
        (None, None) => return Err("give a SNP file or --random M,N,SAMPLES".into()),
    };
    let params = args.params.as_deref().map(parse_params).transpose()?;
    // With --params the model (and its minute of micro-benchmarks on a CPU adapter) is not needed.
    let machine = match params {
        Some(_) => None,
        None => Some(load_machine_for(gpu, Op::Popcount, &args.model)?),
    };
    let res = ld(gpu, &a, &b, params, machine.as_ref(), args.reps.max(1))?;
    let shape = PopShape::packed(a.snps, b.snps, a.words);
    let gops = shape.word_ops() / res.seconds / 1e9;
    let peak = machine.as_ref().map(|m| m.peak_gflops() / 2.0);
    println!(
        "{} × {} SNPs over {} samples ({} words each) from {source}: {} in {:.3} ms, {:.2} G word-ops/s \
         ({:.1} G bit-ops/s){}",
        a.snps,
        b.snps,
        a.samples,
        a.words,
        res.params.key(),
        res.seconds * 1e3,
        gops,
        gops * 32.0,
        peak.map_or(String::new(), |p| format!(
            ", {:.3} of the {p:.2} G/s popcount peak",
            gops / p
        ))
    );
    let finite: Vec<f64> = res.r2.iter().copied().filter(|v| v.is_finite()).collect();
    let mean = finite.iter().sum::<f64>() / finite.len().max(1) as f64;
    let strong = finite.iter().filter(|v| **v >= 0.8).count();
    println!(
        "r²: mean {mean:.4} over {} defined pairs, {strong} pairs ≥ 0.8, {} undefined (monomorphic SNP)",
        finite.len(),
        res.r2.len() - finite.len()
    );
    let mut checked = Value::Null;
    if args.check {
        let want = ld_ref(&a, &b)?;
        let worst = res
            .r2
            .iter()
            .zip(&want)
            .map(|(g, w)| {
                if g.is_nan() && w.is_nan() {
                    0.0
                } else {
                    (g - w).abs()
                }
            })
            .fold(0.0, f64::max);
        println!("checked against the CPU: max |Δr²| = {worst:e}");
        if worst.is_nan() || worst > 1e-6 {
            return Err(format!("r² differs from the CPU reference by {worst}").into());
        }
        checked = json!(worst);
    }
    let r2_json = (res.r2.len() <= 65536).then(|| {
        res.r2
            .iter()
            .map(|v| if v.is_finite() { json!(v) } else { Value::Null })
            .collect::<Vec<_>>()
    });
    write_json(
        out,
        &json!({
            "adapter": adapter_json(gpu),
            "source": source, "m": a.snps, "n": b.snps, "samples": a.samples, "words": a.words,
            "params": params_json(&res.params), "seconds": res.seconds,
            "gword_ops": gops, "gbit_ops": gops * 32.0,
            "popcount_peak_gops": peak, "peak_fraction": peak.map(|p| gops / p),
            "r2_mean": mean, "r2_pairs_ge_0_8": strong, "r2_undefined": res.r2.len() - finite.len(),
            "max_abs_diff_vs_cpu": checked,
            "r2": r2_json,
        }),
    )
}

fn run_gen(gpu: &Gpu, a: GenArgs) -> Result<(), Error> {
    let op = read_mtx(&a.file)?;
    let dtype = parse_dtype(&a.dtype)?;
    let beta = a.beta.or(op.beta_hint).unwrap_or(0.0);
    let variant = Variant::parse(&a.variant).ok_or_else(|| {
        format!(
            "--variant `{}` is not one of: {}",
            a.variant,
            Variant::all()
                .iter()
                .map(|v| v.name())
                .collect::<Vec<_>>()
                .join(", ")
        )
    })?;
    let panel = Panel {
        n: a.n,
        ldb: a.ldb.unwrap_or(a.n),
        ldc: a.ldc.unwrap_or(a.n),
    };
    let k = SpecKernel::new(gpu, &op, variant, dtype, beta, panel)?;
    for src in k.sources() {
        println!("{src}");
    }
    eprintln!(
        "{}: {}×{} with {} non-zeros, {} launch(es), {} bytes of WGSL generated in {:.1} ms",
        op.name,
        op.m,
        op.k,
        op.nnz(),
        k.sources().len(),
        k.compile.source_bytes,
        k.compile.generate_seconds * 1e3
    );
    Ok(())
}

/// The .mtx files named, folders expanded (sorted).
fn mtx_files(paths: &[PathBuf]) -> Result<Vec<PathBuf>, Error> {
    let mut out = Vec::new();
    for p in paths {
        if p.is_dir() {
            let mut v: Vec<PathBuf> = std::fs::read_dir(p)
                .map_err(|e| format!("reading {}: {e}", p.display()))?
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|f| f.extension().is_some_and(|x| x == "mtx"))
                .collect();
            v.sort();
            if v.is_empty() {
                return Err(format!("{} holds no .mtx files", p.display()).into());
            }
            out.extend(v);
        } else {
            out.push(p.clone());
        }
    }
    Ok(out)
}

fn run_bench(gpu: &Gpu, a: BenchArgs) -> Result<(), Error> {
    let out = open_json(a.json.as_deref())?;
    let dtype = parse_dtype(&a.dtype)?;
    dtype.require(gpu, "mm bench")?;
    if !a.beta.is_finite() {
        return Err(format!("--beta must be finite, got {}", a.beta).into());
    }
    let files = mtx_files(&a.paths)?;
    let variants = a
        .variants
        .as_ref()
        .map(|names| {
            names
                .iter()
                .map(|n| {
                    Variant::parse(n)
                        .ok_or_else(|| format!("--variants: `{n}` is not a variant name"))
                })
                .collect::<Result<Vec<_>, _>>()
        })
        .transpose()?;
    let opts = TuneOptions {
        variants,
        reps: a.reps,
        use_cache: true,
        ..Default::default()
    };
    let opts = if a.retune {
        // Re-tune, and store the new decision: a cache folder that is written but never read.
        TuneOptions {
            cache_dir: Some(
                std::env::temp_dir().join(format!("bespoke-retune-{}", std::process::id())),
            ),
            ..opts
        }
    } else {
        opts
    };
    let probe = gpu.copy_bandwidth(&bespoke::bench::probe_options(false))?;
    let copy = probe.gbps;
    println!(
        "adapter: {}, copy bandwidth {copy:.2} GB/s, {dtype}, N = {}",
        gpu.adapter_name(),
        a.n
    );
    let bar = progress_bar(files.len() as u64);
    let mut rows = Vec::new();
    let mut failed = Vec::new();
    for f in &files {
        let op = read_mtx(f)?;
        let beta = op.beta_hint.unwrap_or(a.beta);
        bar.set_message(op.name.clone());
        let r = match dtype {
            DType::F32 => bench_operator::<f32>(gpu, &op, beta, Panel::packed(a.n), &opts, 1)?,
            DType::F64 => bench_operator::<f64>(gpu, &op, beta, Panel::packed(a.n), &opts, 1)?,
        };
        let tol = if dtype == DType::F32 { 1e-5 } else { 1e-12 };
        if r.rel_err.is_nan() || r.rel_err > tol {
            failed.push(format!("{}: rel_err {:e}", r.name, r.rel_err));
        }
        bar.suspend(|| {
            println!(
                "{:<22} {:>4}×{:<4} nnz {:>6} β={} {:<22} {:>9.3} ms {:>7.2} GB/s ({:.3} of copy) dense {:>9.3} ms  ×{:<6.2} err {:.1e}{}",
                r.name, r.m, r.k, r.nnz, r.beta, r.variant, r.seconds * 1e3, r.gbps, r.gbps / copy,
                r.dense_seconds.unwrap_or(f64::NAN) * 1e3, r.speedup_vs_dense.unwrap_or(f64::NAN), r.rel_err,
                if r.tune.from_cache { " (cached decision)".to_owned() } else { format!(" (tuned in {:.1} s)", r.tune.tune_seconds) }
            )
        });
        rows.push(r);
        bar.inc(1);
    }
    bar.finish_and_clear();
    let speedups: Vec<f64> = rows.iter().filter_map(|r| r.speedup_vs_dense).collect();
    let geomean =
        (speedups.iter().map(|s| s.ln()).sum::<f64>() / speedups.len().max(1) as f64).exp();
    let min = speedups.iter().copied().fold(f64::INFINITY, f64::min);
    println!(
        "{} matrices: geomean speedup over dense ×{geomean:.2}, min ×{min:.2}, {} below 1.0",
        rows.len(),
        speedups.iter().filter(|s| **s < 1.0).count()
    );
    let matrices: Vec<Value> = rows
        .iter()
        .map(|r| {
            json!({
                "name": r.name, "m": r.m, "k": r.k, "nnz": r.nnz, "beta": r.beta, "variant": r.variant,
                "seconds": r.seconds, "gbps": r.gbps, "copy_fraction": r.gbps / copy,
                "dense_seconds": r.dense_seconds, "speedup_vs_dense": r.speedup_vs_dense, "rel_err": r.rel_err,
                "from_cache": r.tune.from_cache, "tune_seconds": r.tune.tune_seconds,
                "candidates": r.tune.candidates,
            })
        })
        .collect();
    write_json(
        out,
        &json!({
            "adapter": adapter_json(gpu), "copy_gbps": copy, "dtype": dtype.wgsl(), "n": a.n,
            "matrices": matrices, "geomean_speedup_vs_dense": geomean, "min_speedup_vs_dense": min,
        }),
    )?;
    if !failed.is_empty() {
        return Err(format!(
            "{} matrices exceed the tolerance: {}",
            failed.len(),
            failed.join("; ")
        )
        .into());
    }
    Ok(())
}

pub fn run(gpu: &Gpu, cmd: MmCommand) -> Result<(), Error> {
    match cmd {
        MmCommand::Gen(a) => run_gen(gpu, a),
        MmCommand::Bench(a) => run_bench(gpu, a),
        MmCommand::Ld(args) => run_ld(gpu, args),
        MmCommand::DenseBench {
            shape,
            params,
            reps,
            model,
            json: json_path,
        } => {
            let out = open_json(json_path.as_deref())?;
            let (shape, dtype) = shape.parse()?;
            let given = params.as_deref().map(parse_params).transpose()?;
            let machine = load_machine(gpu, dtype, &model)?;
            let (p, source) = match given {
                Some(p) => (p, "given"),
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
            screen,
            confirm,
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
            let machine = load_machine(gpu, dtype, &model)?;
            let bar = progress_bar(0);
            let s = sweep(gpu, &machine, dtype, shape, method, reps, |done, total| {
                bar.set_length(total as u64);
                bar.set_position(done as u64);
            })?;
            bar.finish_and_clear();
            let (pick, best) = (&s.points[s.pick], &s.points[s.best]);
            if let Method::Screened { .. } = method {
                println!(
                    "{}×{}×{} {dtype}: {} configurations screened on blocks of C, {} timed on the full shape, on {}",
                    shape.m,
                    shape.n,
                    shape.k,
                    s.screened(),
                    s.timed(),
                    gpu.adapter_name()
                );
                if let Some(r) = s.pick_sample_rank() {
                    println!(
                        "model pick ranked {} of {} in the screening",
                        r + 1,
                        s.screened()
                    );
                }
            } else {
                println!(
                    "{}×{}×{} {dtype}: {} configurations timed on {}",
                    shape.m,
                    shape.n,
                    shape.k,
                    s.timed(),
                    gpu.adapter_name()
                );
            }
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
                        "gflops": pt.gflops(),
                        "error": pt.measured.as_ref().and_then(|m| m.as_ref().err()),
                        "sample": pt.sample.as_ref().map(|(sub, m)| json!({
                            "m": sub.m, "n": sub.n, "gflops": m.as_ref().ok(), "error": m.as_ref().err(),
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
