//! CubeCL's matmul through burn's wgpu backend (autotune on; WGSL, or SPIR-V with `--features spirv`): C = A·B with A M×K and
//! B K×N row-major, as `bespoke mm dense-bench` runs it. Checks C against an f64 CPU product on sampled entries
//! before timing. Writes {peer, dtype, m, n, k, reps, seconds, gflops, adapter?} as JSON.
#![recursion_limit = "256"]

use burn::tensor::{DType, Device, Tensor, TensorData};
use std::time::Instant;

struct Args {
    m: usize,
    n: usize,
    k: usize,
    dtype: String,
    reps: usize,
    json: Option<String>,
    compiler: String,
}

fn parse() -> Result<Args, String> {
    let mut a = Args { m: 1024, n: 1024, k: 1024, dtype: "f32".into(), reps: 5, json: None, compiler: "wgsl".into() };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut val = || it.next().ok_or_else(|| format!("{flag} needs a value"));
        let num = |s: String| s.parse::<usize>().map_err(|e| format!("{flag}: {e}"));
        match flag.as_str() {
            "--m" => a.m = num(val()?)?,
            "--n" => a.n = num(val()?)?,
            "--k" => a.k = num(val()?)?,
            "--reps" => a.reps = num(val()?)?,
            "--dtype" => a.dtype = val()?,
            "--json" => a.json = Some(val()?),
            "--compiler" => a.compiler = val()?,
            _ => return Err(format!("unknown argument {flag}")),
        }
    }
    if a.m == 0 || a.n == 0 || a.k == 0 || a.reps == 0 {
        return Err("--m/--n/--k/--reps must be positive".into());
    }
    if a.dtype != "f32" && a.dtype != "f64" {
        return Err(format!("--dtype {}: f32 or f64", a.dtype));
    }
    if a.compiler != "spirv" && a.compiler != "wgsl" {
        return Err(format!("--compiler {}: spirv (burn's vulkan device) or wgsl (its wgpu device)", a.compiler));
    }
    Ok(a)
}

/// Deterministic values in [-1, 1): SplitMix64.
fn fill(len: usize, seed: u64) -> Vec<f64> {
    let mut s = seed;
    (0..len)
        .map(|_| {
            s = s.wrapping_add(0x9e37_79b9_7f4a_7c15);
            let mut z = s;
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            z ^= z >> 31;
            (z >> 11) as f64 / (1u64 << 52) as f64 - 1.0
        })
        .collect()
}

fn tensor(v: &[f64], rows: usize, cols: usize, f64s: bool, dev: &Device) -> Tensor<2> {
    if f64s {
        Tensor::<2>::from_data(TensorData::new(v.to_vec(), [rows, cols]), (dev, DType::F64))
    } else {
        let w: Vec<f32> = v.iter().map(|&x| x as f32).collect();
        Tensor::<2>::from_data(TensorData::new(w, [rows, cols]), (dev, DType::F32))
    }
}

fn values(t: Tensor<2>) -> Vec<f64> {
    let d = t.into_data();
    match d.dtype() {
        DType::F64 => d.try_to_vec::<f64>().expect("f64 data"),
        _ => d.convert::<f32>().try_to_vec::<f32>().expect("f32 data").into_iter().map(f64::from).collect(),
    }
}

fn main() {
    // CubeCL reports some refusals (e.g. a buffer past the adapter's binding limit) by panicking: turn them into
    // an exit status the driver can tell from a wrong result.
    match std::panic::catch_unwind(run) {
        Ok(()) => {}
        Err(_) => {
            eprintln!("cubecl-peer: CubeCL failed on this shape (its message is above)");
            std::process::exit(3);
        }
    }
}

fn run() {
    let a = match parse() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("cubecl-peer: {e}");
            std::process::exit(2);
        }
    };
    let f64s = a.dtype == "f64";
    // spirv: CubeCL's own SPIR-V compiler (burn's `vulkan` device); wgsl: CubeCL's WGSL through wgpu/naga.
    #[cfg(feature = "spirv")]
    let dev = if a.compiler == "spirv" {
        Device::vulkan(Default::default())
    } else {
        Device::wgpu(Default::default())
    };
    #[cfg(not(feature = "spirv"))]
    let dev = if a.compiler == "spirv" {
        eprintln!("cubecl-peer: --compiler spirv needs `cargo build --release --features spirv`");
        std::process::exit(2);
    } else {
        Device::wgpu(Default::default())
    };
    let av = fill(a.m * a.k, 1);
    let bv = fill(a.k * a.n, 2);
    let ta = tensor(&av, a.m, a.k, f64s, &dev);
    let tb = tensor(&bv, a.k, a.n, f64s, &dev);

    // Check against an f64 CPU product on sampled entries (the first call also autotunes).
    let c = values(ta.clone().matmul(tb.clone()));
    let eps = if f64s { 1e-12 } else { 2e-6 };
    let samples = 4096.min(a.m * a.n);
    let mut worst = 0.0f64;
    for s in 0..samples {
        let idx = (s as u64).wrapping_mul(0x9e37_79b9) as usize % (a.m * a.n);
        let (i, j) = (idx / a.n, idx % a.n);
        let (mut r, mut absum) = (0.0f64, 0.0f64);
        for p in 0..a.k {
            r += av[i * a.k + p] * bv[p * a.n + j];
            absum += (av[i * a.k + p] * bv[p * a.n + j]).abs();
        }
        let err = (c[idx] - r).abs() / (absum * eps * (a.k as f64).sqrt()).max(f64::MIN_POSITIVE);
        worst = worst.max(err);
        if !c[idx].is_finite() || err > 8.0 {
            eprintln!("cubecl-peer: wrong result at ({i},{j}): {} vs {r}", c[idx]);
            std::process::exit(1);
        }
    }

    // Warm up once more, then time `reps` products queued back to back and finished by one small readback.
    let _ = values(ta.clone().matmul(tb.clone()).slice([0..1, 0..1]));
    let t0 = Instant::now();
    let mut last = None;
    for _ in 0..a.reps {
        last = Some(ta.clone().matmul(tb.clone()));
    }
    let _ = values(last.expect("reps > 0").slice([0..1, 0..1]));
    let seconds = t0.elapsed().as_secs_f64() / a.reps as f64;
    let gflops = 2.0 * (a.m * a.n * a.k) as f64 / seconds / 1e9;
    let out = serde_json::json!({
        "peer": format!("cubecl 0.11.3 / cubek-matmul 0.3.1 (burn 0.22.1, {} compiler, autotune)", a.compiler),
        "compiler": a.compiler,
        "dtype": a.dtype, "m": a.m, "n": a.n, "k": a.k, "reps": a.reps,
        "seconds": seconds, "gflops": gflops, "check_worst_scaled_error": worst,
    });
    println!("{}", serde_json::to_string_pretty(&out).expect("json"));
    if let Some(p) = a.json {
        std::fs::write(&p, out.to_string()).unwrap_or_else(|e| {
            eprintln!("cubecl-peer: cannot write {p}: {e}");
            std::process::exit(1);
        });
    }
}
