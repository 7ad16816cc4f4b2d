//! The CLI end to end on the adapter CI has: `info`, `bench --quick`, `mm dense-bench`, `mm ld`, `mm gen`,
//! `mm bench`, `lbm`, `fv`.

#![allow(clippy::unwrap_used)] // a failed unwrap is a failed test

use std::process::Command;

use bespoke::gpu::testing::test_gpu;
use serde_json::Value;

fn bespoke(args: &[&str]) -> std::process::Output {
    // One model cache for every test, so the micro-benchmarks run once per adapter, not once per test.
    Command::new(env!("CARGO_BIN_EXE_bespoke"))
        .env(
            "BESPOKE_CACHE_DIR",
            std::env::temp_dir().join("bespoke-cli-test-cache"),
        )
        .args(args)
        .output()
        .expect("the bespoke binary runs")
}

/// Runs `bespoke ARGS --json TMP`, asserts it succeeded and returns the JSON it wrote (the file is removed) and
/// its stdout.
fn bespoke_json(tag: &str, args: &[&str]) -> (Value, String) {
    let path = std::env::temp_dir().join(format!("bespoke-{tag}-{}.json", std::process::id()));
    let mut args = args.to_vec();
    args.extend(["--json", path.to_str().expect("utf-8 temp path")]);
    let out = bespoke(&args);
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{args:?} wrote no JSON at {}: {e}", path.display()));
    let _ = std::fs::remove_file(&path);
    let v = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{args:?}: bad JSON: {e}"));
    (v, String::from_utf8_lossy(&out.stdout).into_owned())
}

fn check_adapter(v: &Value) {
    for key in ["name", "backend", "device_type", "driver"] {
        assert!(
            v["adapter"][key].is_string(),
            "adapter.{key} missing in {v}"
        );
    }
    assert!(!v["adapter"]["name"].as_str().unwrap_or("").is_empty());
    let gbps = v["copy_gbps"].as_f64().expect("copy_gbps is a number");
    assert!(gbps > 0.0 && gbps.is_finite(), "copy_gbps = {gbps}");
}

#[test]
fn info_json_names_the_adapter_and_copy_bandwidth() {
    let Some(gpu) = test_gpu() else { return };
    let out = bespoke(&["info", "--json"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).expect("info --json prints JSON");
    check_adapter(&v);
    assert_eq!(v["adapter"]["name"].as_str(), Some(gpu.adapter_name()));
    assert!(
        v["limits"]["max_storage_buffer_binding_size"]
            .as_u64()
            .unwrap_or(0)
            > 0
    );
}

#[test]
fn bench_quick_writes_one_object_with_every_section() {
    if test_gpu().is_none() {
        return;
    }
    let (v, stdout) = bespoke_json("bench", &["bench", "--quick"]);
    assert!(
        stdout.contains("section") && stdout.contains("copy"),
        "{stdout}"
    );
    check_adapter(&v);
    for s in bespoke::bench::sections() {
        assert_eq!(
            v.get(s.name()).is_some(),
            s.by_default(),
            "section `{}`: in the JSON or not, as it runs by default or not",
            s.name()
        );
    }
    let runs = v["copy"]["runs"].as_array().expect("copy.runs");
    assert!(
        runs.iter()
            .all(|r| r["gbps"].as_f64().is_some_and(|g| g > 0.0))
    );
    assert!(
        runs.iter().any(|r| r["variant"] == "texture-to-buffer"),
        "the texture-read reference is reported: {runs:?}"
    );
}

#[test]
fn unwritable_json_path_is_a_clear_error() {
    if test_gpu().is_none() {
        return;
    }
    let out = bespoke(&["bench", "--quick", "--json", "/nonexistent-dir/x.json"]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("/nonexistent-dir/x.json"), "{err}");
}

/// A run that fails keeps the older report of the same name (the report is written at the end, atomically), and
/// a folder given as the report is refused before any work. Needs no device: both fail before one is opened.
#[test]
fn a_failed_run_keeps_the_old_report() {
    let dir = tempfile::tempdir().unwrap();
    let report = dir.path().join("report.json");
    let old = "{\"from\": \"the run before\"}\n";
    std::fs::write(&report, old).unwrap();
    let bad = dir.path().join("bad.mtx");
    std::fs::write(
        &bad,
        "%%MatrixMarket matrix coordinate real general\n2 2 1\n3 1 1.0\n",
    )
    .unwrap();
    let out = bespoke(&[
        "mm",
        "bench",
        bad.to_str().unwrap(),
        "--json",
        report.to_str().unwrap(),
    ]);
    assert!(!out.status.success(), "a malformed matrix was accepted");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("bad.mtx"), "{err}");
    assert_eq!(
        std::fs::read_to_string(&report).unwrap(),
        old,
        "the failed run touched the old report"
    );
    let left: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
    assert_eq!(left.len(), 2, "a temporary file was left behind: {left:?}");

    let out = bespoke(&[
        "bench",
        "--section",
        "copy",
        "--json",
        dir.path().to_str().unwrap(),
    ]);
    assert!(!out.status.success(), "a folder was accepted as the report");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("folder, not a file"), "{err}");
    assert!(!err.contains("adapter:"), "it ran before refusing: {err}");
}

#[test]
fn dense_bench_reports_gflops_and_peak_fraction() {
    if test_gpu().is_none() {
        return;
    }
    let (v, _) = bespoke_json(
        "dense",
        &[
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
        ],
    );
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
    // --model-only: the model's own pick, untimed.
    let (m, _) = bespoke_json(
        "dense-model-only",
        &[
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
            "--model-only",
        ],
    );
    assert_eq!(m["params_source"], "model");
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
            "48",
            "--n",
            "40",
            "--k",
            "16",
            "--screen",
            "0",
            "--confirm",
            "2",
            "--reps",
            "1",
        ],
    );
    assert_eq!(v["method"], "screened", "{v}");
    let space = v["configs_in_space"].as_u64().unwrap();
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
    assert_eq!(
        sampled, screened,
        "every screened configuration carries its sample timing"
    );
    for bad in [
        &["--screen=-1"][..],
        &["--screen=nan"],
        &["--screen", "0.1", "--confirm", "0"],
    ] {
        let mut args = vec!["mm", "dense-sweep", "--m", "8", "--n", "8", "--k", "8"];
        args.extend(bad);
        let out = bespoke(&args);
        assert!(!out.status.success(), "{bad:?} accepted");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains("--screen") && err.contains("--confirm"),
            "{bad:?}: {err}"
        );
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
        (
            vec!["--m", "8", "--n", "8", "--k", "8", "--params", "t8x8"],
            "--params",
        ),
        // Past any device: an error naming the operand before host memory is filled (that aborted).
        (
            vec!["--m", "1000000000", "--n", "8", "--k", "1000000000"],
            "A (M × K)",
        ),
    ] {
        let out = bespoke(&[&["mm", "dense-bench"], &args[..]].concat());
        assert!(!out.status.success(), "{args:?} succeeded");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(needle), "{args:?}: {err}");
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
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
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
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("line 2") && err.contains("`a`"), "{err}");
    // Past any device: an error before 10¹⁵ samples are drawn (that ran until memory ran out).
    let out = bespoke(&["mm", "ld", "--random", "1000000000,8,1000000"]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("SNP matrix A"), "{err}");
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
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
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
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && err.contains("bstream-msplit-s4"),
        "{err}"
    );
    let bad = std::env::temp_dir().join(format!("bespoke-bad-{}.mtx", std::process::id()));
    std::fs::write(
        &bad,
        "%%MatrixMarket matrix coordinate real general\n2 2 2\n1 1 0.5\n3 1 1\n",
    )
    .unwrap();
    let out = bespoke(&["mm", "gen", bad.to_str().unwrap()]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && err.contains("line 4") && err.contains("row index 3"),
        "{err}"
    );
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

#[test]
fn lbm_case_reports_json_and_writes_outputs() {
    if test_gpu().is_none() {
        return;
    }
    let dir = std::env::temp_dir().join(format!("bespoke-lbm-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let p = |name: &str| dir.join(name).to_str().unwrap().to_owned();
    let case = [
        "lbm",
        "shear-wave",
        "--size",
        "4x64",
        "--omega",
        "1.0",
        "--u",
        "0.02",
        "--streaming",
        "inplace",
    ];
    fn with<'a>(case: &[&'a str], more: &[&'a str]) -> Vec<&'a str> {
        [case, more].concat()
    }
    let out = bespoke(&with(
        &case,
        &[
            "--json",
            &p("a.json"),
            "--png",
            &p("a.png"),
            "--vtk",
            &p("a.vtk"),
            "--checkpoint",
            &p("a.ckpt"),
            "--frames",
            &p("frames"),
            "--frame-every",
            "200",
        ],
    ));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_str(&std::fs::read_to_string(p("a.json")).unwrap()).unwrap();
    for key in [
        "case",
        "nx",
        "ny",
        "steps",
        "storage",
        "streaming",
        "collision",
        "mlups",
        "bytes_per_cell",
        "copy_gbps",
        "copy_fraction",
        "metrics",
    ] {
        assert!(v.get(key).is_some(), "{key} missing from {v}");
    }
    assert_eq!(v["case"], "shear-wave");
    assert_eq!(v["u"].as_f64(), Some(0.02));
    assert_eq!((v["nx"].as_u64(), v["ny"].as_u64()), (Some(4), Some(64)));
    assert_eq!(v["bytes_per_cell"].as_u64(), Some(72));
    let err = v["metrics"]["nu_rel_err"].as_f64().unwrap();
    assert!(err < 5e-3, "ν error {err}");
    assert!(v["mlups"].as_f64().unwrap() > 0.0);
    let png = std::fs::read(p("a.png")).unwrap();
    // shear-wave at ν = 1/6 on 64 rows runs 623 steps: frames at 200, 400, 600.
    let mut frames: Vec<String> = std::fs::read_dir(p("frames"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    frames.sort();
    assert_eq!(
        frames,
        [
            "frame_00000200.png",
            "frame_00000400.png",
            "frame_00000600.png"
        ]
    );
    assert_eq!(&png[1..4], b"PNG");
    let vtk = std::fs::read(p("a.vtk")).unwrap();
    assert!(
        vtk.starts_with(b"# vtk DataFile") && vtk.windows(16).any(|w| w == b"DIMENSIONS 4 64 ")
    );

    // Resume continues the same case at the checkpoint's velocity, to the same end: --steps counts from the
    // case's start, so 723 in all from the checkpoint at step 623 runs 100, says so, and ends on the state an
    // uninterrupted 723-step run ends on, byte for byte. Another velocity or case is refused, and so is a
    // resume with nothing left to run.
    let out = bespoke(&[
        "lbm",
        "shear-wave",
        "--resume",
        &p("a.ckpt"),
        "--steps",
        "723",
        "--json",
        &p("b.json"),
        "--checkpoint",
        &p("b.ckpt"),
    ]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(
        err.contains("resuming at step 623 of 723: 100 steps remain"),
        "{err}"
    );
    let v: Value = serde_json::from_str(&std::fs::read_to_string(p("b.json")).unwrap()).unwrap();
    assert_eq!(v["steps"].as_u64(), Some(100));
    assert_eq!(v["steps_total"].as_u64(), Some(723));
    assert_eq!(v["u"].as_f64(), Some(0.02));
    let out = bespoke(&with(
        &case,
        &["--steps", "723", "--checkpoint", &p("straight.ckpt")],
    ));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        std::fs::read(p("b.ckpt")).unwrap() == std::fs::read(p("straight.ckpt")).unwrap(),
        "the resumed run's final checkpoint differs from the uninterrupted run's"
    );
    for steps in ["723", "623", "100"] {
        let out = bespoke(&[
            "lbm",
            "shear-wave",
            "--resume",
            &p("b.ckpt"),
            "--steps",
            steps,
        ]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            !out.status.success(),
            "--steps {steps} from step 723 ran: {err}"
        );
        assert!(
            err.contains("at step 723") && err.contains("nothing remains"),
            "{err}"
        );
    }
    let out = bespoke(&["lbm", "shear-wave", "--resume", &p("a.ckpt"), "--u", "0.01"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("ran at u = 0.02"));
    let out = bespoke(&["lbm", "taylor-green", "--resume", &p("a.ckpt")]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("shear-wave"));
    let out = bespoke(&[
        "lbm",
        "shear-wave",
        "--resume",
        &p("a.ckpt"),
        "--smagorinsky",
        "0.1",
    ]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("ran with C_s = 0"));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn lbm_smagorinsky_keeps_an_under_resolved_cavity_stable() {
    if test_gpu().is_none() {
        return;
    }
    // Re 10 000 on 64² (ω 1.992): BGK diverges within 1000 steps; the subgrid model runs on.
    let args = [
        "lbm",
        "cavity",
        "--re",
        "10000",
        "--size",
        "64x64",
        "--steps",
        "3000",
        "--collision",
        "bgk",
    ];
    let out = bespoke(&args);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("diverged") && err.contains("smagorinsky"),
        "{err}"
    );
    let mut les = args.to_vec();
    les.extend(["--smagorinsky", "0.15"]);
    let (v, _) = bespoke_json("les", &les);
    assert_eq!(v["smagorinsky"].as_f64(), Some(0.15));
    assert_eq!(v["steps"].as_u64(), Some(3000));
    assert!(
        v["metrics"]["steady_change"]
            .as_f64()
            .is_some_and(f64::is_finite)
    );
}

#[test]
fn lbm_rejects_bad_parameters_clearly() {
    if test_gpu().is_none() {
        return;
    }
    for (args, needle) in [
        (&["lbm", "shear-wave", "--omega", "2.5"][..], "omega"),
        (&["lbm", "shear-wave", "--size", "1x64"][..], "size"),
        (&["lbm", "shear-wave", "--size", "64"][..], "--size"),
        (&["lbm", "vortex-street"][..], "expected shear-wave"),
        (&["lbm", "mask"][..], "PNG"),
        (&["lbm", "cavity", "--re=-5"][..], "Reynolds"),
        (
            &["lbm", "cavity", "--u", "0"][..],
            "characteristic velocity",
        ),
        (&["lbm", "cylinder", "--u", "0.2"][..], "Mach"),
        (&["lbm", "shear-wave", "--storage", "f8"][..], "storage"),
        (&["lbm", "cavity", "--smagorinsky=-0.5"][..], "smagorinsky"),
        (
            &["lbm", "cavity", "--smagorinsky", "1.5"][..],
            "smagorinsky",
        ),
        (
            &["lbm", "cavity", "--interpolated-mask"][..],
            "mask case only",
        ),
        // Past 32-bit cell indices: refused before the device opens (240 GB of host-side flags once aborted).
        (
            &["lbm", "taylor-green", "--size", "100000x100000"][..],
            "32-bit cell indices",
        ),
        // Addressable, but past the device's bindings: refused before the flags are allocated.
        (
            &["lbm", "taylor-green", "--size", "40000x40000"][..],
            "binding limit",
        ),
    ] {
        let out = bespoke(args);
        assert!(!out.status.success(), "{args:?} succeeded");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(needle), "{args:?}: {err}");
        assert!(!err.contains("panicked"), "{args:?}: {err}");
    }
}

fn fv_mesh(name: &str) -> String {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/meshes")
        .join(name)
        .to_str()
        .unwrap()
        .to_owned()
}

#[test]
fn fv_run_conserves_mass_and_writes_vtu() {
    if test_gpu().is_none() {
        return;
    }
    let dir = std::env::temp_dir().join(format!("bespoke-fv-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (json, vtu) = (dir.join("run.json"), dir.join("run.vtu"));
    let out = bespoke(&[
        "fv",
        "run",
        &fv_mesh("sphere_h0.2_v4.1_bin.msh"),
        "--steps",
        "50",
        "--ordering",
        "rcm",
        "--json",
        json.to_str().unwrap(),
        "--vtu",
        vtu.to_str().unwrap(),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    for key in [
        "mesh",
        "tets",
        "steps",
        "ordering",
        "mass_initial",
        "mass_final",
        "mass_rel_drift",
        "seconds",
    ] {
        assert!(v.get(key).is_some(), "{key} missing from {v}");
    }
    assert_eq!(v["tets"].as_u64(), Some(2694));
    assert_eq!(v["ordering"], "rcm");
    assert_eq!(v["layout"], "texture", "f32 defaults to the texture layout");
    assert!(v["mass_rel_drift"].as_f64().unwrap() < 1e-5, "{v}");
    let text = std::fs::read_to_string(&vtu).unwrap();
    assert!(text.starts_with("<?xml") && text.contains(r#"NumberOfCells="2694""#));
    // No steps, no drift: the initial mass is that of x as stored (it was the unrounded field's: 1.8e-9).
    let (v, _) = bespoke_json("fv-run-0", &["fv", "run", "--box", "3", "--steps", "0"]);
    assert_eq!(v["mass_rel_drift"].as_f64(), Some(0.0), "{v}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn fv_bench_times_every_ordering_and_kernel() {
    if test_gpu().is_none() {
        return;
    }
    let (v, _) = bespoke_json(
        "fv-bench",
        &[
            "fv",
            "bench",
            "--box",
            "5",
            "--reps",
            "1",
            "--block-size",
            "256",
        ],
    );
    check_adapter(&v);
    assert_eq!(v["tets"].as_u64(), Some(750));
    let runs = v["runs"].as_array().unwrap();
    assert_eq!(
        runs.len(),
        6 * 6,
        "every ordering × (gather: slot-major, tet-major, x4, texture; block-cached: slot-major, texture)"
    );
    for r in runs {
        for key in [
            "ordering",
            "kernel",
            "seconds_per_step",
            "gbps",
            "copy_fraction",
            "in_block_fraction",
            "ordering_seconds",
        ] {
            assert!(r.get(key).is_some(), "{key} missing from {r}");
        }
        assert!(r["gbps"].as_f64().unwrap() > 0.0);
    }
}

#[test]
fn fv_rejects_bad_input_clearly() {
    if test_gpu().is_none() {
        return;
    }
    let dir = std::env::temp_dir().join(format!("bespoke-fv-bad-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let cut = dir.join("cut.msh");
    let full = std::fs::read(fv_mesh("sphere_h0.2_v2.2.msh")).unwrap();
    std::fs::write(&cut, &full[..full.len() / 2]).unwrap();
    let cut = cut.to_str().unwrap().to_owned();
    for (args, needle) in [
        (
            vec!["fv", "run", "/nonexistent/mesh.msh"],
            "/nonexistent/mesh.msh",
        ),
        (vec!["fv", "run", cut.as_str()], "cut.msh"),
        (
            vec!["fv", "run", "--box", "3", "--ordering", "zigzag"],
            "ordering",
        ),
        (
            vec![
                "fv",
                "run",
                "--box",
                "3",
                "--kernel",
                "block-cached",
                "--block-size",
                "100",
            ],
            "block-size",
        ),
        (vec!["fv", "run", "--box", "3", "--dtype", "f16"], "dtype"),
        (
            vec!["fv", "run", "--box", "3", "--layout", "csr"],
            "--layout `csr`",
        ),
        (
            vec![
                "fv", "run", "--box", "3", "--layout", "texture", "--dtype", "f64",
            ],
            "f32 values only",
        ),
        (vec!["fv", "run"], "--box"),
        // Past any device: an error before the ideal operators are built (that aborted).
        (
            vec!["fv", "sweep", "--tets", "100000000000"],
            "ideal operator values",
        ),
        // Block 0 divided by zero in the in-block fraction (a panic) before the kernel refused it.
        (
            vec!["fv", "bench", "--box", "3", "--block-size", "0"],
            "block-size",
        ),
        (
            vec!["fv", "sweep", "--tets", "5000", "--block-size", "0"],
            "block-size",
        ),
    ] {
        let out = bespoke(&args);
        assert!(!out.status.success(), "{args:?} succeeded");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(needle), "{args:?}: {err}");
        assert!(!err.contains("panicked"), "{args:?}: {err}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn fv_sweep_plots_ideal_operators_and_real_orderings() {
    if test_gpu().is_none() {
        return;
    }
    let dir = std::env::temp_dir().join(format!("bespoke-fv-sweep-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (json, png) = (dir.join("sweep.json"), dir.join("sweep.png"));
    let out = bespoke(&[
        "fv",
        "sweep",
        "--tets",
        "4096",
        "--box",
        "4",
        "--block-size",
        "256",
        "--reps",
        "1",
        "--json",
        json.to_str().unwrap(),
        "--png",
        png.to_str().unwrap(),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let ideal = v["ideal"].as_array().unwrap();
    // Blocks 32 … 4096: 8 sizes × (gather, block-cached, gather texture).
    assert_eq!(ideal.len(), 24);
    assert!(ideal.iter().all(|p| p["gbps"].as_f64().unwrap() > 0.0));
    // Six orderings under gather, in the slot-major and (f32) texture layouts.
    let marks = v["orderings"].as_array().unwrap();
    assert_eq!(marks.len(), 12);
    for layout in ["slot-major", "texture"] {
        assert_eq!(marks.iter().filter(|m| m["layout"] == layout).count(), 6);
    }
    assert_eq!(&std::fs::read(&png).unwrap()[1..4], b"PNG");
    let _ = std::fs::remove_dir_all(&dir);
}

/// `bespoke lab --quick`: every group's rows, each with a fraction of copy and a ratio to its default, the
/// default rows at ratio 1, the ablations and every step workgroup present; JSON to a file.
#[test]
fn lab_times_every_shape_and_ablation() {
    if test_gpu().is_none() {
        return;
    }
    let (v, out) = bespoke_json("lab", &["lab", "--quick"]);
    check_adapter(&v);
    let runs = v["lab"]["runs"].as_array().expect("lab.runs");
    for group in ["copy", "lbm", "mm", "fv"] {
        assert!(
            runs.iter().any(|r| r["group"] == group),
            "no {group} rows in {out}"
        );
    }
    for r in runs {
        for key in ["seconds", "gbps", "copy_fraction", "ratio_to_default"] {
            let x = r[key].as_f64().unwrap_or(f64::NAN);
            assert!(x.is_finite() && x > 0.0, "{key} = {x} in {r}");
        }
    }
    let lbm: Vec<&Value> = runs.iter().filter(|r| r["group"] == "lbm").collect();
    for variant in [
        "wg64",
        "wg256",
        "wg64 no-collision",
        "wg64 mask-wrap",
        "wg64 walls",
        "wg64 split-grid",
        "wg64 2-cells",
        "wg256 4-cells",
        "wg64 one-buffer",
        "wg256 one-buffer",
        "wg64 no-pull",
    ] {
        let n = lbm.iter().filter(|r| r["variant"] == variant).count();
        assert_eq!(n, 4, "{variant}: {n} of the 4 storage × streaming rows");
    }
    for r in lbm.iter().filter(|r| r["variant"] == "wg64") {
        assert_eq!(r["ratio_to_default"].as_f64(), Some(1.0), "{r}");
    }
    assert!(runs.iter().any(|r| r["variant"] == "access floor"));
    let fv: Vec<&Value> = runs.iter().filter(|r| r["group"] == "fv").collect();
    assert!(
        fv.iter().any(|r| r["variant"] == "wg256 no-gather"),
        "no FV ablation"
    );
    assert!(
        fv.iter().any(|r| r["variant"] == "wg64"),
        "no FV workgroup candidates"
    );
    assert!(
        fv.iter().any(|r| r["variant"] == "wg256 split-grid"),
        "no FV split grid"
    );
    assert!(
        fv.iter().any(|r| r["variant"] == "wg256 4-tets"),
        "no FV tets per invocation"
    );
    if test_gpu().is_some_and(|g| g.has_f64()) {
        assert!(
            fv.iter()
                .any(|r| r["case"].as_str().is_some_and(|c| c.contains("f64"))),
            "no FV rows in f64"
        );
    }
    // Each group is a section of its own (a GPU session's stages).
    let (v, _) = bespoke_json("lab-copy", &["bench", "--quick", "--section", "lab-copy"]);
    let runs = v["lab-copy"]["runs"].as_array().expect("lab-copy.runs");
    assert!(
        !runs.is_empty() && runs.iter().all(|r| r["group"] == "copy"),
        "{runs:?}"
    );
    // The default bench leaves the lab out.
    let out = bespoke(&["bench", "--section", "nosuch"]);
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("lab"),
        "the lab is a section by name"
    );
}
