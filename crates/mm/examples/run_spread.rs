#![allow(clippy::unwrap_used)]
//! Diagnostic: how far one run of a long kernel strays from the next, the measurement behind the tuner's
//! `LONG_RUN_SECONDS` and `FINALIST_REACH` (tune_budget.rs): `run_spread FILE.mtx CHOICE[,CHOICE…] [N] [ROUNDS]`
//! (choices as the tuner names them: `rolled-r8-v4`, `dense:…`; default N = 32800, 5 rounds). Each round runs
//! every choice once, in turn, after one warm-up run each; it prints each run, each choice's largest ratio
//! between consecutive runs, and in each round every choice's ratio to the round's first choice.
use bespoke_gpu::Gpu;
use bespoke_gpu::rng::{Rng, seeded};
use bespoke_mm::specialise::{Choice, MatMul, Panel, read_mtx};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let op = read_mtx(std::path::Path::new(&args[1])).unwrap();
    let choices: Vec<Choice> = args[2]
        .split(',')
        .map(|s| Choice::parse(s).unwrap())
        .collect();
    let n: usize = args.get(3).map_or(32800, |s| s.parse().unwrap());
    let rounds: usize = args.get(4).map_or(5, |s| s.parse().unwrap());
    let beta = op.beta_hint.unwrap_or(0.0);
    let panel = Panel::packed(n);
    let gpu = Gpu::new().unwrap();
    // Fresh values in [-0.5, 0.5) from the project's RNG (the data does not change the timing).
    let mut rng = seeded(0x5eed);
    let mut fill =
        |len: usize| -> Vec<f32> { (0..len).map(|_| rng.random::<f32>() - 0.5).collect() };
    let b = gpu.upload(&fill(op.k * n)).unwrap();
    let c = gpu.upload(&fill(op.m * n)).unwrap();
    let mms: Vec<MatMul<f32>> = choices
        .iter()
        .map(|&ch| MatMul::with_choice(&gpu, &op, beta, panel, ch).unwrap())
        .collect();
    let plans: Vec<_> = mms.iter().map(|m| m.plan(&gpu, &b, &c).unwrap()).collect();
    for p in &plans {
        gpu.run(&p.launches()).unwrap();
    }
    let mut runs = vec![Vec::new(); plans.len()];
    for r in 0..rounds {
        let mut line = format!("round {r}:");
        for (i, p) in plans.iter().enumerate() {
            let s = gpu.time(&p.launches(), 0, 1).unwrap().median();
            runs[i].push(s);
            line += &format!(" {:.3}", s);
        }
        let ratios: Vec<String> = runs
            .iter()
            .map(|v| format!("{:.3}", v[r] / runs[0][r]))
            .collect();
        println!(
            "{line}   ratio to {}: {}",
            args[2].split(',').next().unwrap(),
            ratios.join(" ")
        );
    }
    for (i, ch) in choices.iter().enumerate() {
        let worst = runs[i]
            .windows(2)
            .map(|w| (w[1] / w[0]).max(w[0] / w[1]))
            .fold(1.0, f64::max);
        println!(
            "{}: largest ratio between consecutive runs {worst:.3}",
            ch.name()
        );
    }
}
