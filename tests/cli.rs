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
