//! `bespoke lbm … --checkpoint F --checkpoint-every N`: SIGINT stops a run (on one domain or across thread
//! ranks) after the step batch in flight, saves its state and exits non-zero saying so; the saved state is the
//! one an uninterrupted run reaches at that step, byte for byte. A corrupted checkpoint is refused.

#![allow(clippy::unwrap_used)] // a failed unwrap is a failed test

mod common;

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use bespoke::gpu::testing::test_gpu;

fn bin() -> Command {
    common::bespoke_command()
}

fn tmp(name: &str) -> PathBuf {
    std::env::temp_dir().join(format!("bespoke-ckpt-cli-{}-{name}", std::process::id()))
}

#[test]
fn sigint_saves_a_checkpoint_an_uninterrupted_run_matches() {
    if test_gpu().is_none() {
        return;
    }
    let case = ["lbm", "taylor-green", "--size", "48x48"];
    for ranks in [None, Some("2")] {
        let saved = tmp(&format!("sig-{}.ckpt", ranks.unwrap_or("1")));
        let _ = std::fs::remove_file(&saved);
        let mut args: Vec<&str> = case.to_vec();
        args.extend([
            "--steps",
            "100000000",
            "--checkpoint-every",
            "500",
            "--checkpoint",
            saved.to_str().unwrap(),
        ]);
        if let Some(r) = ranks {
            args.extend(["--ranks", r]);
        }
        let mut child = bin()
            .args(&args)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        // Once the first periodic checkpoint exists, the run is well under way.
        let t = Instant::now();
        while !saved.exists() {
            assert!(
                t.elapsed() < Duration::from_secs(120),
                "no periodic checkpoint after 120 s"
            );
            assert!(
                child.try_wait().unwrap().is_none(),
                "the run ended before it was interrupted"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        let status = Command::new("kill")
            .args(["-INT", &child.id().to_string()])
            .status()
            .unwrap();
        assert!(status.success());
        let t = Instant::now();
        let code = loop {
            if let Some(s) = child.try_wait().unwrap() {
                break s;
            }
            assert!(
                t.elapsed() < Duration::from_secs(120),
                "the run did not stop within 120 s of SIGINT"
            );
            std::thread::sleep(Duration::from_millis(50));
        };
        let mut err = String::new();
        std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut err).unwrap();
        assert!(
            !code.success(),
            "an interrupted run must exit non-zero: {err}"
        );
        let step: u64 = err
            .split("interrupted at step ")
            .nth(1)
            .and_then(|t| t.split(|c: char| !c.is_ascii_digit()).next())
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("no step in the message: {err}"));
        assert!(err.contains("the state is saved in"), "{err}");
        // The same run, uninterrupted, to that step on one domain: the same checkpoint, byte for byte.
        let straight = tmp(&format!("straight-{}.ckpt", ranks.unwrap_or("1")));
        let step_s = step.to_string();
        let mut args: Vec<&str> = case.to_vec();
        args.extend([
            "--steps",
            &step_s,
            "--checkpoint",
            straight.to_str().unwrap(),
        ]);
        let out = bin().args(&args).output().unwrap();
        common::succeeded(&out, &args);
        assert!(
            std::fs::read(&saved).unwrap() == std::fs::read(&straight).unwrap(),
            "ranks {ranks:?}: the checkpoint saved at step {step} differs from the uninterrupted run's"
        );
        // A flipped bit is refused with its own message.
        let mut bytes = std::fs::read(&saved).unwrap();
        let mid = bytes.len() / 2;
        bytes[mid] ^= 0x10;
        std::fs::write(&saved, &bytes).unwrap();
        let out = bin()
            .args(["lbm", "taylor-green", "--resume", saved.to_str().unwrap()])
            .output()
            .unwrap();
        common::refused(
            &out,
            "a resume from a damaged checkpoint",
            &["checksum mismatch"],
        );
        let _ = (
            std::fs::remove_file(&saved),
            std::fs::remove_file(&straight),
        );
    }
}
