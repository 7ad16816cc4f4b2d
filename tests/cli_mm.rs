//! The `mm` commands end to end: `dense-bench`, `dense-sweep`, `ld`, `gen`, `bench`.

#![allow(clippy::unwrap_used)] // a failed unwrap is a failed test

mod common;

use bespoke::gpu::testing::test_gpu;
use common::{bespoke, bespoke_json, check_adapter};
use serde_json::Value;

#[test]
fn dense_bench_reports_gflops_and_peak_fraction() {
    if test_gpu().is_none() {
        return;
    }
    let args = [
        "mm",
        "dense-bench",
        "--m",
        "33",
        "--n",
        "40",
        "--k",
        "17",
        "--reps",
        "2",
    ];
    let (v, _) = bespoke_json("dense", &args);
    assert_eq!(v["m"], 33);
    assert!(v["gflops"].as_f64().unwrap() > 0.0);
    assert!(v["fma_peak_gflops"].as_f64().unwrap() > 0.0);
    assert!(v["peak_fraction"].as_f64().unwrap() > 0.0);
    // N = 40 is a multiple of 4, so the model's space uses vec4; the pick is checked on the device (timed now or
    // taken from the cache of an earlier run).
    let source = v["params_source"].as_str().unwrap();
    assert!(
        source.starts_with("checked") || source.starts_with("cached"),
        "{source}"
    );
    assert_eq!(v["params"]["vec"], 4, "{v}");
    assert!(v["params"]["key"].as_str().unwrap().contains("v4"), "{v}");
    // What the check timed: the pick among its candidates, the model's pick first.
    let check = &v["check"];
    assert_eq!(check["pick"], v["params"]["key"], "{v}");
    let timed = check["timed"].as_array().unwrap();
    assert_eq!(timed[0]["params"], check["model_pick"], "{v}");
    assert!(timed.iter().any(|t| t["params"] == check["pick"]), "{v}");
    // --model-only: the model's own pick, untimed.
    let (m, _) = bespoke_json("dense-model-only", &[&args[..], &["--model-only"]].concat());
    assert_eq!(m["params_source"], "model");
    assert!(m["check"].is_null());
    // --ablate with a given tiling: timed, and the JSON says which cost was taken out.
    let given = ["--params", "t4x4v4-w8x8-k8-s1-b2", "--ablate", "stage-once"];
    let (a, _) = bespoke_json("dense-ablated", &[&args[..], &given[..]].concat());
    assert_eq!(a["ablation"], "stage-once", "{a}");
    assert_eq!(a["params"]["key"], "t4x4v4-w8x8-k8-s1-b2", "{a}");
    assert!(a["gflops"].as_f64().unwrap() > 0.0);
    assert_eq!(v["ablation"], "none", "{v}");
}

#[test]
fn dense_sweep_screens_then_confirms_on_the_full_shape() {
    if test_gpu().is_none() {
        return;
    }
    let (v, _) = bespoke_json(
        "sweep",
        &[
            "mm",
            "dense-sweep",
            "--m",
            "16",
            "--n",
            "16",
            "--k",
            "8",
            "--screen",
            "0",
            "--confirm",
            "2",
            "--reps",
            "1",
            "--unrolled",
        ],
    );
    assert_eq!(v["method"], "screened", "{v}");
    let space = v["configs_in_space"].as_u64().unwrap();
    // --unrolled: each configuration and its twin with the K steps unrolled; the model picks among the loops.
    let keys: Vec<&str> = v["configs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["params"].as_str().unwrap())
        .collect();
    let twins = keys.iter().filter(|k| k.ends_with("-u")).count();
    assert_eq!(2 * twins, keys.len(), "{keys:?}");
    for k in keys.iter().filter(|k| !k.ends_with("-u")) {
        assert!(keys.contains(&format!("{k}-u").as_str()), "{k} has no twin");
    }
    let pick = v["model_pick"]["params"]["key"].as_str().unwrap();
    assert!(!pick.ends_with("-u"), "{pick}");
    let screened = v["configs_screened"].as_u64().unwrap();
    let timed = v["configs_timed"].as_u64().unwrap();
    assert!(
        space > 3 && screened == space,
        "screened {screened} of {space}"
    );
    // The two fastest of the screen plus the model's pick and the checked pick (when not among them) on the full
    // shape.
    assert!((2..=4).contains(&timed), "{timed} timed on the full shape");
    let e = v["efficiency"].as_f64().unwrap();
    assert!(e > 0.0 && e <= 1.0 + 1e-12, "E = {e}");
    let ec = v["checked_pick"]["efficiency"].as_f64().unwrap();
    assert!(ec > 0.0 && ec <= 1.0 + 1e-12, "checked E = {ec}");
    assert!(v["pick_sample_rank"].as_u64().unwrap() >= 1);
    let sampled = v["configs"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["sample"]["gflops"].as_f64().is_some_and(|g| g > 0.0))
        .count() as u64;
    // Each sample's shape (16×16 at the full K of 8: the whole shape here) and the workgroups it launched.
    for c in v["configs"].as_array().unwrap() {
        let s = &c["sample"];
        assert_eq!(
            (s["m"].as_u64(), s["n"].as_u64(), s["k"].as_u64()),
            (Some(16), Some(16), Some(8)),
            "{c}"
        );
        assert!(s["groups"].as_u64().is_some_and(|g| g >= 1), "{c}");
    }
    assert_eq!(
        sampled, screened,
        "every screened configuration carries its sample timing"
    );
    for (bad, needles) in [
        (&["--screen=-1"][..], &["--screen", "--confirm"][..]),
        (&["--screen=nan"], &["--screen", "--confirm"]),
        // Refused by the argument parser, as every count is.
        (
            &["--screen", "0.1", "--confirm", "0"],
            &["--confirm", "must be at least 1"],
        ),
    ] {
        let mut args = vec!["mm", "dense-sweep", "--m", "8", "--n", "8", "--k", "8"];
        args.extend(bad);
        let out = bespoke(&args);
        common::refused(&out, bad, needles);
    }
}

#[test]
fn dense_bench_rejects_bad_input_clearly() {
    if test_gpu().is_none() {
        return;
    }
    for (args, needle) in [
        (
            vec!["--m", "8", "--n", "8", "--k", "8", "--dtype", "f16"],
            "--dtype",
        ),
        (vec!["--m", "0", "--n", "8", "--k", "8"], "empty GEMM"),
        // Named by dimension, the shape as M×N×K (it was the shape's Debug form).
        (
            vec!["--m", "99999999999", "--n", "8", "--k", "8"],
            "GEMM 99999999999×8×8: M = 99999999999 exceeds the kernels' 32-bit indexing",
        ),
        (
            vec!["--m", "8", "--n", "8", "--k", "8", "--params", "t8x8"],
            "--params",
        ),
        // An ablation times a given tiling, never the pick; and only the named ones.
        (
            vec!["--m", "8", "--n", "8", "--k", "8", "--ablate", "stage-once"],
            "--params",
        ),
        (
            vec![
                "--m",
                "8",
                "--n",
                "8",
                "--k",
                "8",
                "--params",
                "t4x4v4-w8x8-k8-s1",
                "--ablate",
                "stage",
            ],
            "fragments-once",
        ),
        // Past any device: an error naming the operand before host memory is filled (that aborted).
        (
            vec!["--m", "1000000000", "--n", "8", "--k", "1000000000"],
            "A (M × K)",
        ),
    ] {
        let out = bespoke(&[&["mm", "dense-bench"], &args[..]].concat());
        common::refused(&out, &args, &[needle]);
    }
}

#[test]
fn ld_random_checks_against_the_cpu() {
    if test_gpu().is_none() {
        return;
    }
    let (v, _) = bespoke_json(
        "ld",
        &[
            "mm",
            "ld",
            "--random",
            "40,30,100",
            "--params",
            "t4x4v1-w8x8-k8-s1",
            "--check",
        ],
    );
    assert_eq!(
        (v["m"].as_u64(), v["n"].as_u64(), v["samples"].as_u64()),
        (Some(40), Some(30), Some(100))
    );
    assert_eq!(v["words"], 4);
    assert_eq!(v["r2"].as_array().unwrap().len(), 1200);
    assert!(v["max_abs_diff_vs_cpu"].as_f64().unwrap() <= 1e-6);
    assert!(v["gword_ops"].as_f64().unwrap() > 0.0);
}

#[test]
fn ld_file_gives_r2_and_names_bad_lines() {
    if test_gpu().is_none() {
        return;
    }
    let dir = std::env::temp_dir();
    let good = dir.join(format!("bespoke-snps-{}.txt", std::process::id()));
    // SNP 2 equals SNP 1, SNP 3 is its complement (r² = 1 both), SNP 4 is independent of SNP 1 (r² = 0).
    std::fs::write(
        &good,
        "# four SNPs, eight samples\n11001100\n11001100\n00110011\n10101010\n",
    )
    .unwrap();
    let json = dir.join(format!("bespoke-snps-{}.json", std::process::id()));
    let out = bespoke(&[
        "mm",
        "ld",
        good.to_str().unwrap(),
        "--params",
        "t2x2v1-w8x8-k4-s1",
        "--json",
        json.to_str().unwrap(),
    ]);
    common::succeeded(&out, "mm ld good.mtx");
    let v: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let r2: Vec<f64> = v["r2"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_f64().unwrap())
        .collect();
    assert_eq!(r2.len(), 16);
    for (i, want) in [(1, 1.0), (2, 1.0), (3, 0.0), (5, 1.0)] {
        assert!((r2[i] - want).abs() < 1e-12, "r2[{i}] = {}", r2[i]);
    }
    std::fs::write(&good, "0101\n01a1\n").unwrap();
    let out = bespoke(&[
        "mm",
        "ld",
        good.to_str().unwrap(),
        "--params",
        "t2x2v1-w8x8-k4-s1",
    ]);
    common::refused(
        &out,
        "mm ld on a malformed genotype file",
        &["line 2", "`a`"],
    );
    // Past any device: an error before 10¹⁵ samples are drawn (that ran until memory ran out).
    let out = bespoke(&["mm", "ld", "--random", "1000000000,8,1000000"]);
    common::refused(&out, "mm ld past any device", &["SNP matrix A"]);
    let _ = (std::fs::remove_file(&good), std::fs::remove_file(&json));
}

#[test]
fn mm_gen_prints_validated_wgsl_and_names_bad_input() {
    if test_gpu().is_none() {
        return;
    }
    let out = bespoke(&[
        "mm",
        "gen",
        "tests/data/pyfr/quad-p4-m3-dflt.mtx",
        "--variant",
        "cstream-v4-fold",
        "--n",
        "64",
    ]);
    common::succeeded(&out, "mm gen --variant cstream-v4-fold");
    let src = String::from_utf8_lossy(&out.stdout);
    assert!(src.contains("@compute") && src.contains("fma("), "{src}");
    // β comes from the file's PyFR header (1 for M3): C is read back.
    assert!(src.contains("beta = 1"), "{src}");
    let out = bespoke(&[
        "mm",
        "gen",
        "tests/data/pyfr/quad-p4-m3-dflt.mtx",
        "--variant",
        "nope",
    ]);
    common::refused(&out, "mm gen --variant nope", &["bstream-msplit-s4"]);
    let bad = std::env::temp_dir().join(format!("bespoke-bad-{}.mtx", std::process::id()));
    std::fs::write(
        &bad,
        "%%MatrixMarket matrix coordinate real general\n2 2 2\n1 1 0.5\n3 1 1\n",
    )
    .unwrap();
    let out = bespoke(&["mm", "gen", bad.to_str().unwrap()]);
    common::refused(
        &out,
        "mm gen on a bad row index",
        &["line 4", "row index 3"],
    );
    // Finite, but past f32: it was emitted as the literal `inf.0` (invalid WGSL), and the rolled family's
    // coefficient buffer would have held ±∞.
    std::fs::write(
        &bad,
        "%%MatrixMarket matrix coordinate real general\n2 2 2\n1 1 1e39\n2 2 1\n",
    )
    .unwrap();
    for variant in ["cstream", "rolled-r4"] {
        let out = bespoke(&["mm", "gen", bad.to_str().unwrap(), "--variant", variant]);
        common::refused(
            &out,
            format!("mm gen --variant {variant} of 1e39 in f32"),
            &["entry (1, 1) = 1e39 is past f32's range: use f64"],
        );
    }
    let _ = std::fs::remove_file(bad);
}

#[test]
fn mm_bench_checks_times_and_reports_json() {
    if test_gpu().is_none() {
        return;
    }
    let (v, _) = bespoke_json(
        "mm-bench",
        &[
            "mm",
            "bench",
            "tests/data/pyfr/tri-p2-m0-dflt.mtx",
            "tests/data/pyfr/quad-p4-m3-dflt.mtx",
            "--n",
            "2000",
            "--reps",
            "1",
            "--variants",
            "cstream,bstream-v4",
            "--retune",
        ],
    );
    check_adapter(&v);
    assert_eq!(v["n"].as_u64(), Some(2000));
    // Written after every operator; `complete` once all of them are in.
    assert_eq!(v["complete"].as_bool(), Some(true), "{v}");
    assert_eq!(v["operators"].as_u64(), Some(2));
    let ms = v["matrices"].as_array().unwrap();
    assert_eq!(ms.len(), 2);
    for m in ms {
        for key in [
            "name",
            "m",
            "k",
            "nnz",
            "beta",
            "variant",
            "seconds",
            "gbps",
            "copy_fraction",
            "dense_seconds",
            "speedup_vs_dense",
            "rel_err",
            "warmed_seconds",
            "floor_seconds",
            "over_floor",
            "tune_seconds",
            "model_seconds",
            "probe_seconds",
        ] {
            assert!(!m[key].is_null(), "{key} missing in {m}");
        }
        assert!(m["rel_err"].as_f64().unwrap() <= 1e-5, "{m}");
        assert!(m["seconds"].as_f64().unwrap() > 0.0);
        assert!(m["floor_seconds"].as_f64().unwrap() > 0.0, "{m}");
        assert!(m["over_floor"].as_f64().unwrap() > 0.0, "{m}");
        // The dense kernel timed in alternation with the choice, its speedup a median of paired ratios.
        assert!(m["dense_seconds"].as_f64().unwrap() > 0.0, "{m}");
        assert!(m["speedup_vs_dense"].as_f64().unwrap() > 0.0, "{m}");
    }
    // β from the files' PyFR headers: 0 for tri p2 M0, 1 for quad p4 M3.
    assert_eq!(ms[0]["beta"].as_f64(), Some(0.0), "{}", ms[0]["name"]);
    assert_eq!(ms[1]["beta"].as_f64(), Some(1.0), "{}", ms[1]["name"]);
    assert!(v["geomean_speedup_vs_dense"].as_f64().unwrap() > 0.0);
    assert!(v["geomean_over_floor"].as_f64().unwrap() > 0.0);
}
