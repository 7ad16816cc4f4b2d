//! The CLI end to end on the adapter CI has: `info`, `bench --quick`, the reports' JSON, `lab`. The kernel
//! commands have files of their own: `cli_mm.rs` (dense, ld, gen, bench), `cli_lbm.rs`, `cli_fv/`.

#![allow(clippy::unwrap_used)] // a failed unwrap is a failed test

mod common;

use bespoke::gpu::testing::test_gpu;
use common::{bespoke, bespoke_json, check_adapter, fv_layout_binds_too_many};
use serde_json::Value;

#[test]
fn info_json_names_the_adapter_and_copy_bandwidth() {
    let Some(gpu) = test_gpu() else { return };
    let out = bespoke(&["info", "--json"]);
    common::succeeded(&out, "info --json");
    let v: Value = serde_json::from_slice(&out.stdout).expect("info --json prints JSON");
    check_adapter(&v);
    assert_eq!(v["adapter"]["name"].as_str(), Some(gpu.adapter_name()));
    assert!(
        v["limits"]["max_storage_buffer_binding_size"]
            .as_u64()
            .unwrap_or(0)
            > 0
    );
    // How the pack rounds, as the device says (null where a backend has no pack).
    assert_eq!(
        v["f16_pack_to_nearest_even"].as_bool(),
        gpu.rounds_f16_to_nearest_even().ok(),
        "{v}"
    );
}

/// A whole command on a device without SHADER_F64, SHADER_F16 and TIMESTAMP_QUERY (`BESPOKE_WITHOUT_FEATURES`:
/// Apple's GPUs through Metal lack f64, others f16): `info` lists what it has, the bench's dense and fv
/// sections run and time by the wall clock, and a run that needs a missing feature is refused naming it.
#[test]
fn commands_run_on_a_device_without_optional_features() {
    if test_gpu().is_none() {
        return;
    }
    let off = "SHADER_F64,SHADER_F16,TIMESTAMP_QUERY";
    let run = |args: &[&str]| {
        common::bespoke_command()
            .env("BESPOKE_WITHOUT_FEATURES", off)
            .args(args)
            .output()
            .expect("the bespoke binary runs")
    };
    let out = run(&["info", "--json"]);
    common::succeeded(&out, "info --json with features off");
    let v: Value = serde_json::from_slice(&out.stdout).expect("info --json prints JSON");
    let features: Vec<&str> = v["features"]
        .as_array()
        .expect("features")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert!(
        off.split(',').all(|f| !features.contains(&f)),
        "{features:?}"
    );
    let path = std::env::temp_dir().join(format!("bespoke-bare-{}.json", std::process::id()));
    let out = run(&[
        "bench",
        "--quick",
        "--section",
        "dense",
        "--section",
        "fv",
        "--json",
        path.to_str().expect("utf-8 temp path"),
    ]);
    common::succeeded(&out, "bench --quick dense fv");
    let v: Value =
        serde_json::from_slice(&std::fs::read(&path).expect("the report")).expect("JSON");
    let _ = std::fs::remove_file(&path);
    check_adapter(&v);
    assert_eq!(
        v["copy_probe"]["timing"], "wall-clock",
        "{}",
        v["copy_probe"]
    );
    let dense = v["dense"]["runs"].as_array().expect("dense.runs");
    assert!(
        dense
            .iter()
            .any(|r| r["gflops"].as_f64().is_some_and(|g| g > 0.0))
    );
    // f64 is not dropped unsaid: its row says what it lacks.
    assert!(
        dense.iter().any(|r| r["dtype"] == "f64"
            && r["not_run"]
                .as_str()
                .is_some_and(|w| w.contains("SHADER_F64"))),
        "{dense:?}"
    );
    let fv = v["fv"]["runs"].as_array().expect("fv.runs");
    // Every row timed, but for a layout the device binds too many buffers for (held to WebGPU's limits).
    assert!(
        fv.iter()
            .any(|r| r["gbps"].as_f64().is_some_and(|g| g > 0.0))
            && fv.iter().all(|r| match r["skipped"].as_str() {
                Some(why) => fv_layout_binds_too_many(r["layout"].as_str().unwrap_or(""), why),
                None => r["gbps"].as_f64().is_some_and(|g| g > 0.0),
            }),
        "{fv:?}"
    );
    for (args, feature) in [
        (
            &["fv", "run", "--box", "4", "--steps", "2", "--dtype", "f64"][..],
            "SHADER_F64",
        ),
        (
            &[
                "lbm",
                "shear-wave",
                "--size",
                "4x63",
                "--storage",
                "f16",
                "--steps",
                "40",
            ][..],
            "SHADER_F16",
        ),
    ] {
        let out = run(args);
        common::refused(&out, args, &[feature]);
    }
    let out = common::bespoke_command()
        .env("BESPOKE_WITHOUT_FEATURES", "f64")
        .args(["info"])
        .output()
        .expect("the bespoke binary runs");
    common::refused(&out, "info without f64", &["`f64`", "SHADER_F64"]);
}

/// A whole command under a GPU's quirks (`BESPOKE_QUIRKS=stale-workgroup-memory,reversed-workgroups,
/// fused-multiply-add,flushed-subnormals`: its workgroup memory holds what an earlier workgroup left, it runs
/// workgroups in an order of its own, its compiler fuses multiply-adds, it flushes subnormals): the popcount GEMM stages its tiles through workgroup memory and
/// `--check` compares every r² with the CPU's; the report says the device emulated each; an unknown quirk is an
/// error naming the quirks.
#[test]
fn a_command_runs_under_a_gpus_quirks() {
    if test_gpu().is_none() {
        return;
    }
    let run = |quirks: &str, args: &[&str]| {
        common::bespoke_command()
            .env("BESPOKE_QUIRKS", quirks)
            .args(args)
            .output()
            .expect("the bespoke binary runs")
    };
    let quirks = "stale-workgroup-memory,reversed-workgroups,fused-multiply-add,flushed-subnormals";
    let out = run(quirks, &["info", "--json"]);
    common::succeeded(&out, quirks);
    let v: Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert!(
        v["adapter"]["emulation"]
            .as_str()
            .is_some_and(|e| ["-stalewg", "-revwg", "-fma", "-ftz"]
                .iter()
                .all(|q| e.contains(q))),
        "{}",
        v["adapter"]
    );
    let out = run(
        quirks,
        &[
            "mm",
            "ld",
            "--random",
            "200,300,100",
            "--check",
            "--params",
            "t8x8v1-w16x16-k8-s1",
        ],
    );
    common::succeeded(&out, "mm ld --check under the quirks");
    let out = run("stale", &["info"]);
    common::refused(
        &out,
        "BESPOKE_QUIRKS=stale",
        &[
            "`stale`",
            "stale-workgroup-memory",
            "reversed-workgroups",
            "fused-multiply-add",
            "flushed-subnormals",
        ],
    );
}

/// Whole commands on a device held to WebGPU's default limits (`BESPOKE_LIMITS=webgpu`: 256 invocations a
/// workgroup, 16 KiB of workgroup memory, 8 storage buffers a kernel, 128 MiB bindings), what WebGPU guarantees
/// on every adapter: the FV and LBM bench sections run, each FV layout that binds more
/// storage buffers reported as not timed with the reason, and FV and LBM run across two thread ranks (the halo
/// exchange binding the lattice's one buffer).
#[test]
fn commands_run_on_a_device_held_to_webgpu_limits() {
    if test_gpu().is_none() {
        return;
    }
    let run = |args: &[&str]| {
        let out = common::bespoke_command()
            .env("BESPOKE_LIMITS", "webgpu")
            .args(args)
            .output()
            .expect("the bespoke binary runs");
        common::succeeded(&out, args);
        out
    };
    let v: Value = serde_json::from_slice(&run(&["info", "--json"]).stdout).expect("JSON");
    let l = &v["limits"];
    // Every report says what the device emulated.
    assert!(
        v["adapter"]["emulation"]
            .as_str()
            .is_some_and(|e| e.contains("-limitswebgpu")),
        "{}",
        v["adapter"]
    );
    assert_eq!(l["max_compute_invocations_per_workgroup"], 256, "{l}");
    assert_eq!(l["max_compute_workgroup_storage_size"], 16384, "{l}");
    assert_eq!(l["max_storage_buffers_per_shader_stage"], 8, "{l}");
    let path = std::env::temp_dir().join(format!("bespoke-webgpu-{}.json", std::process::id()));
    run(&[
        "bench",
        "--quick",
        "--section",
        "fv",
        "--section",
        "lbm",
        "--json",
        path.to_str().expect("utf-8 temp path"),
    ]);
    let v: Value =
        serde_json::from_slice(&std::fs::read(&path).expect("the report")).expect("JSON");
    let _ = std::fs::remove_file(&path);
    let fv = v["fv"]["runs"].as_array().expect("fv.runs");
    for r in fv {
        let binds = r["layout"]
            .as_str()
            .and_then(bespoke::fv::kernel::Layout::parse)
            .expect("a layout")
            .storage_buffers();
        if binds > 8 {
            assert!(
                r["skipped"]
                    .as_str()
                    .is_some_and(|w| w.contains("storage buffers")),
                "{r}"
            );
        } else {
            assert!(r["gbps"].as_f64().is_some_and(|g| g > 0.0), "{r}");
        }
    }
    assert!(fv.iter().any(|r| r["layout"] == "tet-major"), "{fv:?}");
    let lbm = v["lbm"]["runs"].as_array().expect("lbm.runs");
    assert!(
        !lbm.is_empty()
            && lbm
                .iter()
                .all(|r| r["mlups"].as_f64().is_some_and(|m| m > 0.0)),
        "{lbm:?}"
    );
    let out = run(&["fv", "run", "--box", "3", "--steps", "4", "--ranks", "2"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains(" layout (") && !text.contains("slot-major"),
        "{text}"
    );
    // A layout asked for by name that binds too many is refused, naming those that bind fewer.
    let out = common::bespoke_command()
        .env("BESPOKE_LIMITS", "webgpu")
        .args([
            "fv",
            "run",
            "--box",
            "3",
            "--steps",
            "4",
            "--layout",
            "slot-major",
        ])
        .output()
        .expect("the bespoke binary runs");
    common::refused(
        &out,
        "fv run --layout slot-major on WebGPU limits",
        &["10 storage buffers", "tet-major 4"],
    );
    run(&[
        "lbm", "cavity", "--re", "100", "--size", "34x34", "--steps", "31", "--ranks", "2",
    ]);
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
    common::refused(
        &out,
        "bench --json into a missing folder",
        &["/nonexistent-dir/x.json"],
    );
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
    common::refused(&out, "mm bench bad.mtx", &["bad.mtx"]);
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
    let err = common::refused(&out, "bench --json to a folder", &["folder, not a file"]);
    assert!(!err.contains("adapter:"), "it ran before refusing: {err}");
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
    // A row that did not run says why; only a shape binding nine directions a side where the adapter's storage
    // buffers per kernel cannot (wgpu's GL backend: 16), and f64 where it lacks SHADER_F64, may not run.
    let gpu = test_gpu().expect("checked above");
    let nine_fit = gpu.limits().max_storage_buffers_per_shader_stage >= 20;
    for r in runs {
        if let Some(why) = r["not_run"].as_str() {
            let bindings =
                !nine_fit && r["group"] == "lbm" && why.contains("storage buffers per kernel");
            let f64_missing = !gpu.has_f64() && why.contains("SHADER_F64");
            // An FV row names its layout last in its case.
            let fv_layout = r["group"] == "fv"
                && fv_layout_binds_too_many(
                    r["case"]
                        .as_str()
                        .and_then(|c| c.rsplit(' ').next())
                        .unwrap_or(""),
                    why,
                );
            assert!(bindings || f64_missing || fv_layout, "not run: {r}");
            continue;
        }
        for key in ["seconds", "gbps", "copy_fraction", "ratio_to_default"] {
            let x = r[key].as_f64().unwrap_or(f64::NAN);
            assert!(x.is_finite() && x > 0.0, "{key} = {x} in {r}");
        }
    }
    let all_lbm: Vec<&Value> = runs.iter().filter(|r| r["group"] == "lbm").collect();
    // The lab's side (its largest) and, at a quarter of it, the default against alternate steps backwards.
    let side_of = |r: &Value| -> usize {
        r["case"]
            .as_str()
            .and_then(|c| c.split('²').next())
            .and_then(|s| s.parse().ok())
            .unwrap_or(0)
    };
    let side = all_lbm.iter().map(|r| side_of(r)).max().unwrap_or(0);
    let lbm: Vec<&Value> = all_lbm
        .iter()
        .copied()
        .filter(|r| side_of(r) == side)
        .collect();
    let quarter: Vec<&Value> = all_lbm
        .iter()
        .copied()
        .filter(|r| side_of(r) == side / 4)
        .collect();
    for variant in ["wg64", "wg64 alternate"] {
        let n = quarter.iter().filter(|r| r["variant"] == variant).count();
        assert_eq!(n, 4, "{variant} at {}²: {n} of 4 rows", side / 4);
    }
    assert!(
        quarter
            .iter()
            .filter(|r| r["variant"] == "wg64" && r["not_run"].is_null())
            .all(|r| r["ratio_to_default"].as_f64() == Some(1.0)),
        "{quarter:?}"
    );
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
        "wg64 alternate",
    ] {
        let n = lbm.iter().filter(|r| r["variant"] == variant).count();
        assert_eq!(
            n, 4,
            "{variant}: {n} of the 4 storage × streaming rows, run or not"
        );
        let ran = lbm
            .iter()
            .filter(|r| r["variant"] == variant && r["not_run"].is_null())
            .count();
        // Where two lattices' rows say in-place streaming binds fewer buffers (wgpu's GL backend, 16 a kernel), at
        // least in place's two rows run; where not (WebGPU's 8), every row not run said why (above).
        let in_place_fits = lbm.iter().any(|r| {
            r["variant"] == variant
                && r["not_run"]
                    .as_str()
                    .is_some_and(|w| w.contains("in-place streaming needs fewer"))
        });
        if nine_fit || variant.contains("one-buffer") {
            assert_eq!(ran, 4, "{variant}: {ran} of 4 ran");
        } else if in_place_fits {
            assert!(ran >= 2, "{variant}: {ran} of 4 ran");
        }
    }
    for r in lbm
        .iter()
        .filter(|r| r["variant"] == "wg64" && r["not_run"].is_null())
    {
        assert_eq!(r["ratio_to_default"].as_f64(), Some(1.0), "{r}");
    }
    // The f16 stores rounded explicitly: the two f16 rows only.
    let exact: Vec<&&Value> = lbm
        .iter()
        .filter(|r| r["variant"] == "wg64 exact-f16")
        .collect();
    assert_eq!(exact.len(), 2, "{exact:?}");
    assert!(
        exact
            .iter()
            .all(|r| r["case"].as_str().is_some_and(|c| c.contains("f16"))),
        "{exact:?}"
    );
    assert!(runs.iter().any(|r| r["variant"] == "access floor"));
    let fv: Vec<&Value> = runs.iter().filter(|r| r["group"] == "fv").collect();
    for ablation in ["no-gather", "no-index", "no-gather no-index"] {
        let n = fv
            .iter()
            .filter(|r| r["variant"] == format!("wg256 {ablation}").as_str())
            .count();
        assert_eq!(n, 6, "FV {ablation}: {n} of the 6 gather layouts' rows");
    }
    assert!(
        fv.iter().any(|r| r["variant"] == "wg64"),
        "no FV workgroup candidates"
    );
    assert!(
        fv.iter().any(|r| r["variant"] == "wg256 split-grid"),
        "no FV split grid"
    );
    assert!(
        fv.iter().any(|r| r["variant"] == "wg256 alternate"),
        "no FV alternate steps backwards"
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

/// `BESPOKE_NO_TUNING=1`: the LBM step's launch shape and the FV layout (one domain and across ranks) are the
/// defaults, said so in the reports, and nothing is timed into the cache.
#[test]
fn no_tuning_takes_the_defaults_and_caches_nothing() {
    if test_gpu().is_none() {
        return;
    }
    let cache = tempfile::tempdir().unwrap();
    let json = cache.path().join("out.json");
    let run = |args: &[&str]| -> Value {
        let out = common::bespoke_command()
            .env("BESPOKE_CACHE_DIR", cache.path())
            .env("BESPOKE_NO_TUNING", "1")
            .args(args)
            .args(["--json", json.to_str().unwrap()])
            .output()
            .expect("the bespoke binary runs");
        common::succeeded(&out, args);
        serde_json::from_slice(&std::fs::read(&json).unwrap()).expect("JSON")
    };
    let untuned = "default (BESPOKE_NO_TUNING)";
    let lbm = run(&["lbm", "taylor-green", "--size", "32x32", "--steps", "20"]);
    assert_eq!(
        lbm["step_shape"]["source"], untuned,
        "{}",
        lbm["step_shape"]
    );
    let fv = run(&["fv", "run", "--box", "3", "--steps", "2"]);
    assert_eq!(fv["layout_source"], untuned, "{fv}");
    let fv = run(&["fv", "run", "--box", "3", "--steps", "2", "--ranks", "2"]);
    assert_eq!(fv["layout_source"], format!("{untuned} on rank 0"), "{fv}");
    let shapes: Vec<String> = std::fs::read_dir(cache.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains("shape"))
        .collect();
    assert!(shapes.is_empty(), "tuned into the cache: {shapes:?}");
}

/// A reader that stops reading (`bespoke … | head -1`) closes the pipe under the command: its output stops there,
/// and it carries on to its files and a zero exit status, where `println!` panicked ("failed printing to stdout:
/// Broken pipe") before the files were written.
#[test]
fn a_closed_pipe_on_stdout_ends_the_output_not_the_run() {
    if test_gpu().is_none() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let ckpt = dir.path().join("cavity.ckpt");
    let (reader, writer) = std::io::pipe().unwrap();
    // Closed before the command starts, so its first line meets a broken pipe.
    drop(reader);
    let out = common::bespoke_command()
        .args([
            "lbm", "cavity", "--re", "100", "--size", "32x32", "--steps", "20",
        ])
        .arg("--checkpoint")
        .arg(&ckpt)
        .stdout(writer)
        .stderr(std::process::Stdio::piped())
        .output()
        .expect("the bespoke binary runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{:?}: {stderr}", out.status);
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert!(
        std::fs::metadata(&ckpt).is_ok_and(|m| m.len() > 0),
        "the checkpoint was written: {stderr}"
    );
}
