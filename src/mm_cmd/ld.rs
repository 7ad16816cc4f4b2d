//! `bespoke mm ld`: linkage disequilibrium through the popcount GEMM.

use bespoke::Error;
use bespoke::gpu::Gpu;
use bespoke::mm::dense::microbench::Op;
use bespoke::mm::ld::{R2Summary, SnpMatrix, check_r2, ld};
use bespoke::mm::popcount::PopShape;
use bespoke::report::{adapter_json, params_json};
use serde_json::{Value, json};

use super::{LdArgs, load_machine_for};
use crate::json_out::{open_json, write_json};
use crate::open_gpu;

/// The SNP sets of `mm ld`, read or described before a device is opened.
enum SnpInput {
    File(String, SnpMatrix),
    Random { m: usize, n: usize, samples: usize },
}

impl SnpInput {
    fn load(args: &LdArgs) -> Result<Self, Error> {
        match (&args.file, &args.random) {
            (Some(path), _) => {
                let text = std::fs::read_to_string(path)
                    .map_err(|e| format!("reading {}: {e}", path.display()))?;
                let m = SnpMatrix::parse(&text).map_err(|e| format!("{}: {e}", path.display()))?;
                Ok(Self::File(path.display().to_string(), m))
            }
            (None, Some(spec)) => {
                let bad = || format!("--random `{spec}` is not M,N,SAMPLES");
                let v: Vec<usize> = spec
                    .split(',')
                    .map(|x| x.trim().parse::<usize>())
                    .collect::<Result<_, _>>()
                    .map_err(|_| bad())?;
                let [m, n, samples] = v[..] else {
                    return Err(bad().into());
                };
                Ok(Self::Random { m, n, samples })
            }
            (None, None) => Err("give a SNP file or --random M,N,SAMPLES".into()),
        }
    }

    /// The two sets and where they came from; random sets are checked against the device before the bits are
    /// drawn.
    fn realise(self, gpu: &Gpu, seed: u64) -> Result<(SnpMatrix, SnpMatrix, String), Error> {
        match self {
            Self::File(name, m) => Ok((m.clone(), m, name)),
            Self::Random { m, n, samples } => {
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
                Ok((
                    SnpMatrix::random(m, samples, seed)?,
                    SnpMatrix::random(n, samples, seed ^ 0x5eed)?,
                    format!("random (seed {seed})"),
                ))
            }
        }
    }
}

pub(super) fn run_ld(args: LdArgs) -> Result<(), Error> {
    let out = open_json(args.json.as_deref())?;
    let input = SnpInput::load(&args)?;
    let gpu = open_gpu()?;
    let gpu = &gpu;
    let (a, b, source) = input.realise(gpu, args.seed)?;
    let params = args.params;
    // With --params the model (and its minute of micro-benchmarks on a CPU adapter) is not needed.
    let machine = match params {
        Some(_) => None,
        None => Some(load_machine_for(gpu, Op::Popcount, &args.model)?),
    };
    let res = ld(gpu, &a, &b, params, machine.as_ref(), args.reps)?;
    let shape = PopShape::packed(a.snps, b.snps, a.words);
    let gops = shape.word_ops() / res.seconds / 1e9;
    let peak = machine.as_ref().map(|m| m.peak_gflops() / 2.0);
    bespoke::say!(
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
    let sum = R2Summary::of(&res.r2);
    let mean = if sum.defined == 0 {
        "no mean: no pair is defined".to_owned()
    } else {
        format!("mean {:.4} over {} defined pairs", sum.mean, sum.defined)
    };
    bespoke::say!(
        "r²: {mean}, {} pairs ≥ 0.8, {} undefined (monomorphic SNP)",
        sum.strong,
        sum.undefined
    );
    let mut checked = Value::Null;
    if args.check {
        let worst = check_r2(&res.r2, &a, &b)?;
        bespoke::say!("checked against the CPU: max |Δr²| = {worst:e}");
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
            "r2_mean": sum.mean, "r2_pairs_ge_0_8": sum.strong, "r2_undefined": sum.undefined,
            "max_abs_diff_vs_cpu": checked,
            "r2": r2_json,
        }),
    )
}
