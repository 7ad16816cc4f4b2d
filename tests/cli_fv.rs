//! The `fv` commands end to end: run, bench, sweep, order, bad input.

#![allow(clippy::unwrap_used)] // a failed unwrap is a failed test

mod common;

use bespoke::gpu::testing::test_gpu;
use common::{bespoke, bespoke_json, check_adapter, fv_layout_binds_too_many};
use serde_json::Value;

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
    // `auto`: the layouts timed on the device (or read from the cache), one of them taken.
    let source = v["layout_source"].as_str().unwrap_or("");
    assert!(["tuned", "cached"].contains(&source), "{v}");
    let names = bespoke::fv::kernel::Layout::ALL.map(|l| l.name());
    assert!(names.contains(&v["layout"].as_str().unwrap_or("")), "{v}");
    assert!(v["mass_rel_drift"].as_f64().unwrap() < 1e-5, "{v}");
    let (head, arrays) = bespoke::gpu::vtk::read_appended(&std::fs::read(&vtu).unwrap()).unwrap();
    assert!(head.starts_with("<?xml") && head.contains(r#"NumberOfCells="2694""#));
    let x = arrays.iter().find(|a| a.name == "x").expect("x in the VTU");
    assert_eq!((x.scalar.as_str(), x.bytes.len()), ("Float64", 8 * 2694));
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
        6 * 8,
        "every ordering × (gather: slot-major, tet-major, tet-major-d16, x4, x4-d16, texture; block-cached: slot-major, texture)"
    );
    for r in runs {
        // Timed, or (on a device held to WebGPU's limits) a layout that binds too many buffers, saying so.
        if let Some(why) = r["skipped"].as_str() {
            assert!(
                fv_layout_binds_too_many(r["layout"].as_str().unwrap_or(""), why),
                "not timed: {r}"
            );
            continue;
        }
        for key in [
            "ordering",
            "kernel",
            "seconds_per_step",
            "gbps",
            "copy_fraction",
            "in_block_fraction",
            "far_fraction",
            "ordering_seconds",
        ] {
            assert!(r.get(key).is_some(), "{key} missing from {r}");
        }
        assert!(r["gbps"].as_f64().is_some_and(|g| g > 0.0), "{r}");
    }
    assert!(runs.iter().any(|r| r["skipped"].is_null()), "nothing timed");
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
    // Six orderings under gather, in the slot-major (tet-major where the device binds fewer buffers) and (f32)
    // texture layouts.
    let marks = v["orderings"].as_array().unwrap();
    assert_eq!(marks.len(), 12);
    let buffers = bespoke::fv::sweep::buffer_layout(test_gpu().expect("checked above")).name();
    for layout in [buffers, "texture"] {
        assert_eq!(marks.iter().filter(|m| m["layout"] == layout).count(), 6);
    }
    assert_eq!(&std::fs::read(&png).unwrap()[1..4], b"PNG");
    let _ = std::fs::remove_dir_all(&dir);
}

/// `fv order` needs no device and keeps the METIS order where the bench reads it: after `fv order --box 24`, the
/// quick bench's fv section (the same 24³-cube box, 82 944 tets) orders without running METIS. A GPU session runs
/// `fv order --box 140` on a spare core beside other stages for the same reason (METIS: 84–93 s on 16.5 M tets).
#[test]
fn fv_order_keeps_the_metis_order_the_bench_reads() {
    let cache = tempfile::tempdir().unwrap();
    let run = |args: &[&str]| {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_bespoke"))
            .env("BESPOKE_CACHE_DIR", cache.path())
            .env("BESPOKE_PHASE_TIMES", "1")
            .args(args)
            .output()
            .unwrap();
        let (stdout, stderr) = (
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        );
        assert!(out.status.success(), "{args:?}: {stderr}");
        (stdout, stderr)
    };
    let metis_ran = |stderr: &str| stderr.contains("[phase] fv METIS parts");
    let (stdout, stderr) = run(&["fv", "order", "--box", "24"]);
    assert!(stdout.contains("82944 tets, metis order in"), "{stdout}");
    assert!(metis_ran(&stderr), "{stderr}");
    let entries: Vec<String> = std::fs::read_dir(cache.path().join("fv-metis-order-v1"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert!(
        entries.len() == 1 && entries[0].starts_with("blocks-2048-of-82944-"),
        "{entries:?}"
    );
    let (_, stderr) = run(&["fv", "order", "--box", "24"]);
    assert!(
        !metis_ran(&stderr),
        "the second order ran METIS again: {stderr}"
    );
    for (args, needle) in [
        (
            vec!["fv", "order", "--box", "3", "--ordering", "zigzag"],
            "ordering",
        ),
        (
            vec!["fv", "order", "--box", "3", "--block-size", "0"],
            "block-size",
        ),
        (vec!["fv", "order"], "--box"),
    ] {
        let out = bespoke(&args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{args:?} succeeded");
        assert!(
            err.contains(needle) && !err.contains("panicked"),
            "{args:?}: {err}"
        );
    }
    if test_gpu().is_none() {
        return;
    }
    let (stdout, stderr) = run(&["bench", "--quick", "--section", "fv"]);
    assert!(stdout.contains("82k tets metis"), "{stdout}");
    assert!(!metis_ran(&stderr), "the bench ran METIS again: {stderr}");
}

/// SIGINT stops `fv run` (one domain, and two thread ranks) after the batch of steps in flight: it exits non-zero
/// saying after how many steps, and its VTU, JSON and checkpoint are those of that step, byte for byte the VTU an
/// uninterrupted one-domain run to that step writes; resumed on the other decomposition, the run ends with the
/// bits of one that never stopped.
#[test]
fn sigint_stops_fv_run_and_keeps_the_state_it_reached() {
    use std::io::{BufRead, BufReader};
    use std::process::{Command, Stdio};
    use std::time::{Duration, Instant};
    if test_gpu().is_none() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    for ranks in [None, Some("2")] {
        let tag = ranks.unwrap_or("1");
        let (vtu, json, ck) = (
            dir.path().join(format!("stopped-{tag}.vtu")),
            dir.path().join(format!("stopped-{tag}.json")),
            dir.path().join(format!("stopped-{tag}.fv")),
        );
        let mut args = vec!["fv", "run", "--box", "6", "--steps", "1000000000"];
        args.extend(["--vtu", vtu.to_str().unwrap()]);
        args.extend(["--json", json.to_str().unwrap()]);
        args.extend(["--checkpoint", ck.to_str().unwrap()]);
        if let Some(r) = ranks {
            args.extend(["--ranks", r]);
        }
        let mut child = common::bespoke_command()
            .args(&args)
            .env("BESPOKE_PHASE_TIMES", "2")
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        // The phase line says the steps have begun; the rest of stderr is kept for the checks.
        let (tx, rx) = std::sync::mpsc::channel();
        let stderr = child.stderr.take().unwrap();
        let reader = std::thread::spawn(move || {
            let mut all = String::new();
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if line.contains("[phase] fv steps …") {
                    let _ = tx.send(());
                }
                all.push_str(&line);
                all.push('\n');
            }
            all
        });
        if rx.recv_timeout(Duration::from_secs(120)).is_err() {
            let _ = child.kill();
            panic!("the steps did not begin within 120 s");
        }
        std::thread::sleep(Duration::from_millis(500));
        let sent = Command::new("kill")
            .args(["-INT", &child.id().to_string()])
            .status()
            .unwrap();
        assert!(sent.success());
        let t = Instant::now();
        let code = loop {
            if let Some(s) = child.try_wait().unwrap() {
                break s;
            }
            if t.elapsed() > Duration::from_secs(60) {
                let _ = child.kill();
                panic!("fv run did not stop within 60 s of SIGINT");
            }
            std::thread::sleep(Duration::from_millis(50));
        };
        let err = reader.join().unwrap();
        assert!(
            !code.success(),
            "an interrupted run must exit non-zero: {err}"
        );
        let done: usize = err
            .split("interrupted after ")
            .nth(1)
            .and_then(|t| t.split(' ').next())
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("no step count in: {err}"));
        assert!((1..1_000_000_000).contains(&done), "{done} steps");
        let report: Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
        assert_eq!(report["steps"], done, "{report}");
        assert_eq!(report["interrupted"], true);
        let straight = dir.path().join(format!("straight-{tag}.vtu"));
        // An uninterrupted one-domain run to `steps`, its VTU at `straight`.
        let straight_to = |steps: usize| {
            let n = steps.to_string();
            let mut args = vec!["fv", "run", "--box", "6", "--steps", &n];
            args.extend(["--vtu", straight.to_str().unwrap()]);
            let out = bespoke(&args);
            assert!(
                out.status.success(),
                "{}",
                String::from_utf8_lossy(&out.stderr)
            );
        };
        straight_to(done);
        assert!(
            std::fs::read(&vtu).unwrap() == std::fs::read(&straight).unwrap(),
            "ranks {tag}: the VTU of the run stopped after step {done} differs from an uninterrupted run's"
        );
        // Seven steps more from the checkpoint, on the other decomposition, against seven more straight.
        let (more, resumed) = (
            (done + 7).to_string(),
            dir.path().join(format!("resumed-{tag}.vtu")),
        );
        let mut args = vec!["fv", "run", "--box", "6", "--steps", &more];
        args.extend(["--resume", ck.to_str().unwrap()]);
        args.extend(["--vtu", resumed.to_str().unwrap()]);
        if ranks.is_none() {
            args.extend(["--ranks", "2"]);
        }
        let out = bespoke(&args);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            stdout.contains(&format!("resumed at step {done}")),
            "{stdout}"
        );
        straight_to(done + 7);
        assert!(
            std::fs::read(&resumed).unwrap() == std::fs::read(&straight).unwrap(),
            "ranks {tag}: resumed from step {done}, the run ends otherwise than an uninterrupted one"
        );
    }
}

/// `bespoke fv run --box 5 EXTRA…`, asserted to succeed.
fn box5(extra: &[&str]) -> std::process::Output {
    let mut args = vec!["fv", "run", "--box", "5"];
    args.extend(extra);
    let out = bespoke(&args);
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// `fv run --checkpoint` and `--resume`: a run stopped at a step and resumed (on one domain or on ranks, either
/// way, in f32 and f64, with periodic saves) ends with the bits of one that never stopped, its report the
/// same masses; a checkpoint of another mesh, boundary, precision or Δt, one at or past the end, a damaged or
/// truncated file, and bad flags are errors naming the problem.
#[test]
fn fv_run_resumes_a_checkpoint_bit_for_bit_on_any_ranks() {
    if test_gpu().is_none() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let path = |name: &str| dir.path().join(name).to_str().unwrap().to_owned();
    let run = |extra: &[&str]| {
        box5(extra);
    };
    let refused = |extra: &[&str], why: &str| {
        let mut args = vec!["fv", "run", "--box", "5"];
        args.extend(extra);
        let out = bespoke(&args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            !out.status.success() && err.contains(why),
            "{args:?}: {err}"
        );
    };
    let same = |a: &str, b: &str| {
        assert!(
            std::fs::read(path(a)).unwrap() == std::fs::read(path(b)).unwrap(),
            "{a} and {b} differ"
        );
    };
    for dtype in ["f32", "f64"] {
        let straight = format!("straight-{dtype}.vtu");
        run(&[
            "--dtype",
            dtype,
            "--steps",
            "30",
            "--vtu",
            &path(&straight),
            "--json",
            &path("s.json"),
        ]);
        let masses = |f: &str| {
            let v: Value = serde_json::from_slice(&std::fs::read(path(f)).unwrap()).unwrap();
            (v["mass_initial"].clone(), v["mass_final"].clone())
        };
        let want = masses("s.json");
        for (first, second) in [(None, Some("2")), (Some("2"), None), (Some("3"), Some("2"))] {
            let (ck, out) = (
                path(&format!("c-{dtype}.fv")),
                format!("resumed-{dtype}.vtu"),
            );
            let mut a = vec!["--dtype", dtype, "--steps", "12", "--checkpoint", &ck];
            a.extend(first.map(|r| ["--ranks", r]).into_iter().flatten());
            run(&a);
            let mut b = vec!["--dtype", dtype, "--steps", "30", "--resume", &ck];
            let (vtu, json) = (path(&out), path("r.json"));
            b.extend(["--vtu", &vtu, "--json", &json]);
            b.extend(second.map(|r| ["--ranks", r]).into_iter().flatten());
            run(&b);
            same(&straight, &out);
            assert_eq!(masses("r.json"), want, "{first:?} → {second:?}");
        }
    }
    // Periodic saves: the last is the end's; resumed from it with more steps, the run ends as a straight one.
    let every = path("every.fv");
    run(&[
        "--steps",
        "25",
        "--checkpoint-every",
        "7",
        "--checkpoint",
        &every,
        "--ranks",
        "2",
    ]);
    run(&[
        "--steps",
        "30",
        "--resume",
        &every,
        "--vtu",
        &path("every.vtu"),
    ]);
    same("straight-f32.vtu", "every.vtu");
    let ck = path("c-f32.fv");
    refused(
        &["--steps", "30", "--dtype", "f64", "--resume", &ck],
        "this run is in f64",
    );
    refused(
        &["--steps", "12", "--resume", &ck],
        "at or past the run's end",
    );
    refused(
        &["--steps", "30", "--dirichlet", "1", "--resume", &ck],
        "fingerprint",
    );
    let other = bespoke(&["fv", "run", "--box", "4", "--steps", "30", "--resume", &ck]);
    assert!(String::from_utf8_lossy(&other.stderr).contains("tets"));
    let bytes = std::fs::read(&ck).unwrap();
    let mut damaged = bytes.clone();
    damaged[100] ^= 1;
    std::fs::write(path("damaged.fv"), &damaged).unwrap();
    refused(
        &["--steps", "30", "--resume", &path("damaged.fv")],
        "checksum",
    );
    refused(
        &[
            "--steps",
            "30",
            "--resume",
            &path("damaged.fv"),
            "--ranks",
            "2",
        ],
        "checksum",
    );
    std::fs::write(path("short.fv"), &bytes[..200]).unwrap();
    refused(
        &["--steps", "30", "--resume", &path("short.fv")],
        "truncated",
    );
    refused(
        &["--steps", "30", "--resume", &path("missing.fv")],
        "missing.fv",
    );
    refused(
        &["--steps", "30", "--checkpoint-every", "3"],
        "needs --checkpoint",
    );
    refused(
        &[
            "--steps",
            "30",
            "--checkpoint-every",
            "0",
            "--checkpoint",
            &ck,
        ],
        "at least 1",
    );
}

/// `fv run --vtu-every N`: a frame every N steps beside --vtu (out_00000010.vtu …), each the VTU a straight run to
/// that step writes, byte for byte, on one domain or ranks, and ParaView's collection out.pvd listing every frame
/// in the folder, a resumed run's joining the earlier; the flag needs --vtu and at least 1.
#[test]
fn fv_run_writes_a_vtu_series_that_a_resumed_run_joins() {
    if test_gpu().is_none() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let path = |name: &str| dir.path().join(name).to_str().unwrap().to_owned();
    let run = box5;
    let (out, ck) = (path("out.vtu"), path("c.fv"));
    run(&[
        "--steps",
        "25",
        "--ranks",
        "2",
        "--vtu-every",
        "10",
        "--vtu",
        &out,
        "--checkpoint",
        &ck,
    ]);
    run(&[
        "--steps",
        "40",
        "--vtu-every",
        "10",
        "--vtu",
        &out,
        "--resume",
        &ck,
    ]);
    let pvd = std::fs::read_to_string(path("out.pvd")).unwrap();
    let listed: Vec<&str> = pvd.lines().filter(|l| l.contains("<DataSet")).collect();
    assert_eq!(listed.len(), 4, "{pvd}");
    for (i, step) in [10, 20, 30, 40].iter().enumerate() {
        let frame = format!("out_{step:08}.vtu");
        assert!(listed[i].contains(&frame) && listed[i].contains(&format!("timestep=\"{step}\"")));
        let straight = path(&format!("straight-{step}.vtu"));
        run(&["--steps", &step.to_string(), "--vtu", &straight]);
        assert!(
            std::fs::read(path(&frame)).unwrap() == std::fs::read(&straight).unwrap(),
            "{frame} differs from a straight run's VTU at step {step}"
        );
    }
    for (extra, why) in [
        (&["--steps", "30", "--vtu-every", "10"][..], "needs --vtu"),
        (
            &["--steps", "30", "--vtu-every", "0", "--vtu", &out][..],
            "at least 1",
        ),
    ] {
        let mut args = vec!["fv", "run", "--box", "5"];
        args.extend(extra);
        let o = bespoke(&args);
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(!o.status.success() && err.contains(why), "{args:?}: {err}");
    }
}
