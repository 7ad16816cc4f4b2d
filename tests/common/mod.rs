//! What the CLI's end-to-end tests share: running the binary (one model cache for all of them), its JSON, the
//! adapter block every report carries.

#![allow(dead_code)] // each test binary uses some of these

use std::fmt::Debug;
use std::process::{Command, Output};

use serde_json::Value;

/// The binary as the CLI tests run it: one model cache for every test (the micro-benchmarks run once per adapter,
/// not once per test), and timings without a GPU's clock warm-up (the tests check results, not speed).
pub fn bespoke_command() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_bespoke"));
    c.env(
        "BESPOKE_CACHE_DIR",
        std::env::temp_dir().join("bespoke-cli-test-cache"),
    )
    .env("BESPOKE_SKIP_WARM_UP", "1")
    // The commands tune as a user's do (and the tests of what they report say so), whatever the stage running
    // the tests asks of the library's tuners; a test of the knob sets it.
    .env_remove("BESPOKE_NO_TUNING");
    c
}

pub fn bespoke(args: &[&str]) -> std::process::Output {
    bespoke_command()
        .args(args)
        .output()
        .expect("the bespoke binary runs")
}

/// Asserts that a command succeeded (naming `what` and quoting its stderr if not) and returns its stderr.
#[track_caller]
pub fn succeeded(out: &Output, what: impl Debug) -> String {
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{what:?} failed: {err}");
    err
}

/// Asserts that a command was refused by name: it failed, it did not panic (a panic is never the answer to bad
/// input), and its stderr names every one of `needles`. Returns the stderr.
#[track_caller]
pub fn refused(out: &Output, what: impl Debug, needles: &[&str]) -> String {
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(!out.status.success(), "{what:?} succeeded: {err}");
    assert!(
        out.status.code() != Some(101) && !err.contains("panicked"),
        "{what:?} panicked: {err}"
    );
    for n in needles {
        assert!(err.contains(n), "{what:?}: no `{n}` in {err}");
    }
    err
}

/// Runs `bespoke ARGS --json TMP`, asserts it succeeded and returns the JSON it wrote (the file is removed) and
/// its stdout.
pub fn bespoke_json(tag: &str, args: &[&str]) -> (Value, String) {
    let path = std::env::temp_dir().join(format!("bespoke-{tag}-{}.json", std::process::id()));
    let mut args = args.to_vec();
    args.extend(["--json", path.to_str().expect("utf-8 temp path")]);
    let out = bespoke(&args);
    succeeded(&out, &args);
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{args:?} wrote no JSON at {}: {e}", path.display()));
    let _ = std::fs::remove_file(&path);
    let v = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{args:?}: bad JSON: {e}"));
    (v, String::from_utf8_lossy(&out.stdout).into_owned())
}

pub fn check_adapter(v: &Value) {
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

/// Whether an FV row left out (the bench's `skipped`, the lab's `not_run`: `why`) names a `layout` that binds more
/// storage buffers per kernel than the shared test device allows: the one reason such a row may be left out on a
/// device held to WebGPU's limits (`BESPOKE_LIMITS=webgpu`: 8, where slot-major binds 10).
pub fn fv_layout_binds_too_many(layout: &str, why: &str) -> bool {
    let max = bespoke::gpu::testing::test_gpu().map_or(u32::MAX, |g| {
        g.limits().max_storage_buffers_per_shader_stage
    });
    why.contains("storage buffers per kernel")
        && bespoke::fv::kernel::Layout::parse(layout).is_some_and(|l| l.storage_buffers() > max)
}
