//! `bespoke lbm … --ranks`: the same case on ranks as threads of one process is bitwise the single-domain run
//! (its checkpoint, written from the gathered state, has the same bytes), and the launcher's errors are clear.
//! The same checks under `mpirun` run in CI (`tests/mpi/check.sh`).

#![allow(clippy::unwrap_used)] // a failed unwrap is a failed test

mod common;

use std::path::PathBuf;

use bespoke::gpu::testing::test_gpu;
use serde_json::Value;

/// Runs the CLI; prints how long it took and its phases (`BESPOKE_PHASE_TIMES`: each rank's device, the copy
/// probe, the set-up with each tuning candidate, the run), shown with `--nocapture`: on an H200 these tests ran
/// past 125 s (on 2026-11-27 a `--ranks 2x2 --no-overlap` cavity ran past 230 s), and these times say where.
fn bespoke(args: &[&str], env: &[(&str, &str)]) -> std::process::Output {
    let started = std::time::Instant::now();
    let mut with_phases = vec![("BESPOKE_PHASE_TIMES", "2")];
    with_phases.extend_from_slice(env);
    let out = bespoke_untimed(args, &with_phases);
    eprintln!(
        "{:6.2} s  bespoke {}",
        started.elapsed().as_secs_f64(),
        args.join(" ")
    );
    for line in String::from_utf8_lossy(&out.stderr).lines() {
        if line.starts_with("[phase]") && !line.ends_with('…') {
            eprintln!("          {line}");
        }
    }
    out
}

/// How long one CLI run may take before the test stops it and fails with what it printed
/// (`BESPOKE_CLI_TIMEOUT` seconds; 300 by default): a run that never ends is a failure that names its phase, not
/// a test that hangs.
fn cli_timeout() -> std::time::Duration {
    let secs = std::env::var("BESPOKE_CLI_TIMEOUT")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(300);
    std::time::Duration::from_secs(secs)
}

fn bespoke_untimed(args: &[&str], env: &[(&str, &str)]) -> std::process::Output {
    use std::io::Read;
    use std::process::Stdio;
    let mut child = common::bespoke_command()
        .envs(env.iter().copied())
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the bespoke binary runs");
    let reader = |mut r: Box<dyn Read + Send>| {
        std::thread::spawn(move || {
            let mut v = Vec::new();
            let _ = r.read_to_end(&mut v);
            v
        })
    };
    let stdout = reader(Box::new(child.stdout.take().unwrap()));
    let stderr = reader(Box::new(child.stderr.take().unwrap()));
    let (started, limit) = (std::time::Instant::now(), cli_timeout());
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if started.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            let err = stderr.join().unwrap();
            panic!(
                "bespoke {} did not finish in {limit:?} (BESPOKE_CLI_TIMEOUT); its stderr:\n{}",
                args.join(" "),
                String::from_utf8_lossy(&err)
            );
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    std::process::Output {
        status,
        stdout: stdout.join().unwrap(),
        stderr: stderr.join().unwrap(),
    }
}

fn tmp(name: &str) -> PathBuf {
    std::env::temp_dir().join(format!("bespoke-ranks-{}-{name}", std::process::id()))
}

/// Runs a case with `extra` arguments; returns the checkpoint's bytes and the JSON.
fn run(case: &[&str], extra: &[&str], tag: &str) -> (Vec<u8>, Value) {
    let (ckpt, json) = (tmp(&format!("{tag}.ckpt")), tmp(&format!("{tag}.json")));
    let mut args = case.to_vec();
    args.extend(extra);
    args.extend([
        "--checkpoint",
        ckpt.to_str().unwrap(),
        "--json",
        json.to_str().unwrap(),
    ]);
    let out = bespoke(&args, &[]);
    let err = common::succeeded(&out, &args);
    for phase in [
        "open the device: ",
        "the copy probe: ",
        "set-up (lattice, launch shape, state): ",
        "run: ",
    ] {
        assert!(
            err.contains(phase),
            "{args:?}: no `{phase}` phase in\n{err}"
        );
    }
    // Only the root measures the copy bandwidth it prints.
    assert_eq!(err.matches("the copy probe: ").count(), 1, "{err}");
    let bytes = std::fs::read(&ckpt).unwrap();
    let v: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let _ = (std::fs::remove_file(&ckpt), std::fs::remove_file(&json));
    (bytes, v)
}

#[test]
fn cases_on_thread_ranks_match_one_domain_bit_for_bit() {
    if test_gpu().is_none() {
        return;
    }
    // Cases whose metrics read cells (cavity), probes (cylinder), row means (poiseuille, shear wave) and sums
    // over the domain (Taylor–Green), each rank from its own cells.
    let cases: [&[&str]; 5] = [
        &[
            "lbm",
            "cavity",
            "--re",
            "100",
            "--size",
            "34x34",
            "--steps",
            "31",
            "--streaming",
            "inplace",
            "--storage",
            "f16",
        ],
        &["lbm", "cylinder", "--steps", "40", "--collision", "bgk"],
        &["lbm", "poiseuille", "--size", "8x24", "--steps", "25"],
        &["lbm", "taylor-green", "--size", "24x24", "--steps", "20"],
        &["lbm", "shear-wave", "--size", "12x20", "--steps", "20"],
    ];
    for (k, case) in cases.iter().enumerate() {
        let (one, v1) = run(case, &[], &format!("{k}-one"));
        assert!(v1["ranks"].is_null());
        // The steps asked for are the steps run (the cylinder raised 40 to 100 unsaid until 2026-11-30).
        let asked: u64 = case[case.iter().position(|a| *a == "--steps").unwrap() + 1]
            .parse()
            .unwrap();
        assert_eq!(v1["steps_total"].as_u64(), Some(asked), "{case:?}");
        for extra in [
            &["--ranks", "2"][..],
            &["--ranks", "2x2", "--no-overlap"][..],
            &["--ranks", "3"][..],
        ] {
            let (many, v) = run(case, extra, &format!("{k}-{}", extra[1]));
            assert!(
                one == many,
                "{case:?} {extra:?}: the checkpoint differs from the single-domain run"
            );
            assert_eq!(v["metrics"], v1["metrics"], "{case:?} {extra:?}");
            let r = &v["ranks"];
            assert_eq!(r["transport"], "threads");
            assert_eq!(r["overlap"], extra.len() == 2);
            assert!(
                r["exchange_bytes_per_step_rank0"].as_f64().unwrap() > 0.0,
                "{r}"
            );
        }
    }
}

#[test]
fn fv_on_thread_ranks_matches_one_rank_bit_for_bit() {
    if test_gpu().is_none() {
        return;
    }
    let vtu = |ranks: &str, tag: &str| {
        let p = tmp(&format!("fv-{tag}.vtu"));
        let json = tmp(&format!("fv-{tag}.json"));
        let mut args = vec![
            "fv",
            "run",
            "--box",
            "8",
            "--steps",
            "30",
            "--ordering",
            "rcm",
            "--vtu",
            p.to_str().unwrap(),
            "--json",
            json.to_str().unwrap(),
        ];
        if !ranks.is_empty() {
            args.extend(["--ranks", ranks]);
        }
        let out = bespoke(&args, &[]);
        common::succeeded(&out, &args);
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        let bytes = std::fs::read(&p).unwrap();
        let v: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
        let _ = (std::fs::remove_file(&p), std::fs::remove_file(&json));
        // The masses are exact sums: the same bits on any number of ranks.
        let mass = ["mass_initial", "mass_final"].map(|k| v[k].as_f64().unwrap().to_bits());
        let layout = ["layout", "layout_source"].map(|k| v[k].as_str().unwrap_or("").to_owned());
        ((bytes, mass), text, layout)
    };
    let (one, _, _) = vtu("1", "1");
    // One domain too (no ranks): its zero-flux shift is an exact sum, the same bits in its ordering's order.
    let (single, _, [layout, _]) = vtu("", "single");
    assert!(one == single, "fv on one domain differs from one rank");
    for r in ["2", "4"] {
        let (many, text, [ranks_layout, source]) = vtu(r, r);
        // `--layout auto` across ranks: rank 0's choice on its device (here the one domain's, from the cache).
        assert_eq!(ranks_layout, layout, "fv on {r} ranks: {source}");
        assert!(source.ends_with("on rank 0"), "fv on {r} ranks: {source}");
        assert!(
            one.0 == many.0,
            "fv on {r} ranks: the VTU differs from one rank"
        );
        assert_eq!(
            one.1, many.1,
            "fv on {r} ranks: the mass differs from one rank"
        );
        assert!(
            text.contains(&format!("ranks {r} (threads, METIS recursive bisection)")),
            "{text}"
        );
    }
}

#[test]
fn launcher_errors_are_clear() {
    // Started by mpirun without the mpi feature: refused before any device is opened.
    if !cfg!(feature = "mpi") {
        let out = bespoke(
            &["lbm", "cavity", "--steps", "10"],
            &[("OMPI_COMM_WORLD_SIZE", "2")],
        );
        common::refused(
            &out,
            "mpirun without the mpi feature",
            &["built without the `mpi` feature"],
        );
    }
    for (args, want) in [
        (
            &["lbm", "cavity", "--ranks", "2x0"][..],
            "neither a rank count",
        ),
        (
            &["lbm", "cavity", "--no-overlap"][..],
            "--no-overlap applies to runs across ranks",
        ),
        (
            &["lbm", "cavity", "--size", "6x6", "--ranks", "4"][..],
            "more ranks than the lattice can be cut into",
        ),
        // Checked before any flag field is made (this aborted on a 240 GB allocation).
        (
            &[
                "scale",
                "--ranks",
                "2",
                "--code",
                "lbm",
                "--block",
                "100000x100000",
                "--steps",
                "1",
                "--rounds",
                "1",
            ][..],
            "size = 100000x100000: more cells than 32-bit cell indices can address",
        ),
    ] {
        // Each is found before any rank opens a device.
        let out = bespoke(args, &[]);
        common::refused(&out, args, &[want]);
    }
}

/// `--vtk X.pvti` on ranks: the index names a piece a rank, each the size of its block (bespoke-lbm's
/// `output` tests compare every value with one domain's); `.vti` is one XML file; a VTK path whose folder does
/// not exist is refused before the run.
#[test]
fn vtk_outputs_on_thread_ranks() {
    if test_gpu().is_none() {
        return;
    }
    let dir = tmp("vtk");
    std::fs::create_dir_all(&dir).unwrap();
    let case = ["lbm", "cavity", "--size", "34x34", "--steps", "12"];
    let with = |more: &[&str]| {
        let mut a = case.to_vec();
        a.extend_from_slice(more);
        let out = bespoke(&a, &[]);
        let err = String::from_utf8_lossy(&out.stderr).into_owned();
        (out.status.success(), err)
    };
    let p = |name: &str| dir.join(name).to_str().unwrap().to_owned();
    let (ok, err) = with(&["--ranks", "2x2", "--vtk", &p("many.pvti")]);
    assert!(ok, "{err}");
    let index = std::fs::read_to_string(dir.join("many.pvti")).unwrap();
    assert!(index.contains(r#"WholeExtent="0 34 0 34 0 0""#), "{index}");
    assert_eq!(index.matches("<Piece ").count(), 4, "{index}");
    for r in 0..4 {
        let piece = std::fs::read(dir.join(format!("many_p{r}.vti"))).unwrap();
        assert!(piece.starts_with(b"<?xml"), "piece {r}");
        assert!(
            index.contains(&format!(r#"Source="many_p{r}.vti""#)),
            "{index}"
        );
        // ρ, velocity, vorticity and cell type of 17 × 17 cells: (1 + 3 + 1 + 1) × 4 B a cell, 8 B headers.
        let data = 17 * 17 * 6 * 4 + 4 * 8;
        assert!(
            piece.len() > data && piece.len() < data + 2048,
            "piece {r}: {} bytes",
            piece.len()
        );
    }
    let (ok, err) = with(&["--vtk", &p("one.vti")]);
    assert!(ok, "{err}");
    let one = std::fs::read(dir.join("one.vti")).unwrap();
    assert!(String::from_utf8_lossy(&one[..400]).contains(r#"<VTKFile type="ImageData""#));
    let (ok, err) = with(&["--vtk", &p("missing/x.pvti")]);
    assert!(
        !ok && err.contains("cannot write the VTK file") && !err.contains("run: "),
        "{err}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
