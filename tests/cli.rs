//! The CLI end to end: `bespoke info --json` and `bespoke bench --quick --json` on the adapter CI has.

#![allow(clippy::unwrap_used)] // a failed unwrap is a failed test

use std::process::Command;

use bespoke::gpu::testing::test_gpu;
use serde_json::Value;

fn bespoke(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_bespoke"))
        .args(args)
        .output()
        .expect("the bespoke binary runs")
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
    let path = std::env::temp_dir().join(format!("bespoke-bench-{}.json", std::process::id()));
    let out = bespoke(&[
        "bench",
        "--quick",
        "--json",
        path.to_str().expect("utf-8 temp path"),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("section") && stdout.contains("copy"),
        "{stdout}"
    );
    let v: Value =
        serde_json::from_str(&std::fs::read_to_string(&path).expect("bench wrote its JSON"))
            .unwrap();
    let _ = std::fs::remove_file(&path);
    check_adapter(&v);
    for s in bespoke::bench::sections() {
        assert!(
            v.get(s.name()).is_some(),
            "section `{}` missing from the JSON",
            s.name()
        );
    }
    let runs = v["copy"]["runs"].as_array().expect("copy.runs");
    assert!(
        runs.iter()
            .all(|r| r["gbps"].as_f64().is_some_and(|g| g > 0.0))
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

#[test]
fn dense_bench_reports_gflops_and_peak_fraction() {
    if test_gpu().is_none() {
        return;
    }
    let path = std::env::temp_dir().join(format!("bespoke-dense-{}.json", std::process::id()));
    let p = path.to_str().unwrap();
    let out = bespoke(&[
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
        "--json",
        p,
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    let _ = std::fs::remove_file(&path);
    assert_eq!(v["m"], 33);
    assert!(v["gflops"].as_f64().unwrap() > 0.0);
    assert!(v["fma_peak_gflops"].as_f64().unwrap() > 0.0);
    assert!(v["peak_fraction"].as_f64().unwrap() > 0.0);
    // N = 40 is a multiple of 4, so the default tiling uses vec4.
    assert!(v["params"].as_str().unwrap().contains("v4"), "{v}");
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
    ] {
        let out = bespoke(&[&["mm", "dense-bench"], &args[..]].concat());
        assert!(!out.status.success(), "{args:?} succeeded");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(needle), "{args:?}: {err}");
    }
}
