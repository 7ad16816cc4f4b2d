//! `fv run` stopped and carried on: SIGINT keeps the state reached, checkpoints resume bit for bit on any ranks,
//! a VTU series joins its resumed run.

use super::common::{self, bespoke};
use bespoke::gpu::testing::test_gpu;
use serde_json::Value;

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
            common::succeeded(&out, &args);
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
        common::succeeded(&out, &args);
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
    common::succeeded(&out, &args);
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
        common::refused(&out, &args, &[why]);
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
    // Each run ends on a multiple: its last frame's field is the run's final VTU too (gathered once).
    let last_frame_is_the_vtu = |step: usize| {
        assert!(
            std::fs::read(path(&format!("out_{step:08}.vtu"))).unwrap()
                == std::fs::read(&out).unwrap(),
            "the frame at step {step} differs from the run's final VTU"
        );
    };
    run(&[
        "--steps",
        "20",
        "--ranks",
        "2",
        "--vtu-every",
        "10",
        "--vtu",
        &out,
        "--checkpoint",
        &ck,
    ]);
    last_frame_is_the_vtu(20);
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
    last_frame_is_the_vtu(40);
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
        common::refused(&o, &args, &[why]);
    }
}
