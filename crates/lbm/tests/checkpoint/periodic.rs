//! Periodic checkpoints, a stopped run resumed bit for bit, an unwritable path, a diverged state.

use super::*;

/// `--steps` is the run's total: a run stopped at step s and started again with the same options plus `resume`
/// does the steps that remain, and its final state (written as the CLI writes it) is the uninterrupted run's,
/// byte for byte; a resume with nothing left is refused.
#[test]
fn periodic_checkpoints_and_a_stop_resume_bit_for_bit() {
    let Some(gpu) = test_gpu() else { return };
    let dir = tempfile::tempdir().expect("temp dir");
    let dir = dir.path();
    let case = Case::TaylorGreen;
    let final_bytes = |r: &bespoke_lbm::cases::CaseRun<'_>, name: &str| {
        let path = dir.join(name);
        r.lattice
            .checkpoint(&path, &r.checkpoint_meta())
            .expect("final checkpoint");
        std::fs::read(&path).expect("read back")
    };
    let straight = run_case(gpu, &case, &tg_opts(1500, None), &mut |_, _| {}).expect("run");
    let want = final_bytes(&straight, "straight.ckpt");
    // The same options, resumed: the steps that remain, to the same end.
    let finish = |path: &std::path::Path, from: u64| {
        let opts = CaseOptions {
            resume: Some(path.to_owned()),
            ..tg_opts(1500, None)
        };
        let mut first = None;
        let r = run_case(gpu, &case, &opts, &mut |done, total| {
            first.get_or_insert((done, total));
        })
        .expect("resumed run");
        assert_eq!(
            first,
            Some((from, 1500)),
            "the first progress call names the resume point"
        );
        assert_eq!((r.steps, r.lattice.steps_done()), (1500 - from, 1500));
        final_bytes(&r, "resumed.ckpt")
    };

    // Every 600 steps: the file holds step 1200 when a 1500-step run ends (the caller writes the final state).
    let every = dir.join("every.ckpt");
    let opts = CaseOptions {
        checkpoint_every: Some(600),
        ..tg_opts(1500, Some(every.clone()))
    };
    run_case(gpu, &case, &opts, &mut |_, _| {}).expect("run");
    let (lat, _) = Lattice::resume(gpu, &every).expect("periodic checkpoint");
    assert_eq!(lat.steps_done(), 1200);
    assert!(
        finish(&every, 1200) == want,
        "resumed from the periodic checkpoint, the final checkpoint differs"
    );

    // A stop raised before the run: it ends after the first batch (the case's first sampling point, 300 steps,
    // before the checkpoint cadence), saving the state, and says so.
    let stopped = dir.join("stopped.ckpt");
    let opts = CaseOptions {
        checkpoint_every: Some(400),
        stop: Some(Arc::new(AtomicBool::new(true))),
        ..tg_opts(1500, Some(stopped.clone()))
    };
    let at = match run_case(gpu, &case, &opts, &mut |_, _| {}) {
        Err(LbmError::Interrupted {
            step,
            saved: Some(p),
        }) if p.contains("stopped.ckpt") => step,
        other => panic!("expected an interruption that saved the state: {other:?}"),
    };
    assert!(at > 0 && at <= 400, "stopped at step {at}");
    assert!(
        finish(&stopped, at) == want,
        "resumed after the stop at step {at}, the final checkpoint differs"
    );

    // Nothing remains: refused, naming the step and the end.
    for steps in [1500, 1200] {
        let opts = CaseOptions {
            resume: Some(dir.join("resumed.ckpt")),
            ..tg_opts(steps, None)
        };
        match run_case(gpu, &case, &opts, &mut |_, _| {}) {
            Err(e) => {
                let msg = e.to_string();
                assert!(
                    msg.contains("at step 1500") && msg.contains("nothing remains"),
                    "{msg}"
                );
            }
            Ok(r) => panic!("--steps {steps} from step 1500 ran {} steps", r.steps),
        }
    }
}

/// A checkpoint path that is a folder, or in a folder that does not exist, is refused before any step (by the
/// device-free `check` and by the run itself), and the folder is left as it was.
#[test]
fn an_unwritable_checkpoint_is_refused_before_the_first_step() {
    let dir = tempfile::tempdir().expect("temp dir");
    for (path, says) in [
        (dir.path().to_owned(), "folder, not a file"),
        (dir.path().join("no/such/state.ckpt"), "does not exist"),
    ] {
        let opts = tg_opts(1500, Some(path.clone()));
        let msg = bespoke_lbm::cases::check(&Case::TaylorGreen, &opts)
            .expect_err("check accepted it")
            .to_string();
        assert!(msg.contains(says), "{msg}");
        if let Some(gpu) = test_gpu() {
            let mut calls = 0;
            match run_case(gpu, &Case::TaylorGreen, &opts, &mut |_, _| calls += 1) {
                Err(e) => assert!(e.to_string().contains(says), "{e}"),
                Ok(_) => panic!("ran with the checkpoint at {}", path.display()),
            }
            assert_eq!(calls, 0, "it stepped before refusing");
        }
    }
    assert_eq!(std::fs::read_dir(dir.path()).expect("list").count(), 0);
}

/// A run that diverges between periodic checkpoints fails by name and leaves its last good checkpoint, which
/// resumes; a lattice whose state has diverged refuses to write a checkpoint over the previous one.
#[test]
fn a_diverged_state_never_replaces_the_last_good_checkpoint() {
    let Some(gpu) = test_gpu() else { return };
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("cavity.ckpt");
    // Re 10 000 on 64² (ω 1.992): BGK diverges within 1000 steps (tests/cli_lbm_fv.rs).
    let opts = CaseOptions {
        size: Some((64, 64)),
        steps: Some(3000),
        re: Some(10_000.0),
        collision: Some(bespoke_lbm::cases::CollisionKind::Bgk),
        checkpoint: Some(path.clone()),
        checkpoint_every: Some(100),
        ..CaseOptions::default()
    };
    let e = run_case(gpu, &Case::Cavity, &opts, &mut |_, _| {})
        .expect_err("an unstable run passed")
        .to_string();
    // The run's own check (every rank alike, naming the step and the cell), not the writer's refusal.
    assert!(e.contains("diverged by step"), "{e}");
    let (mut lat, _) = Lattice::resume(gpu, &path).expect("the last good checkpoint resumes");
    let saved_at = lat.steps_done();
    assert!(
        saved_at >= 100 && saved_at.is_multiple_of(100),
        "saved at {saved_at}"
    );
    assert!(
        lat.populations()
            .expect("read")
            .iter()
            .all(|v| v.is_finite())
    );
    // The library itself: step the resumed state on until it diverges; its checkpoint is refused and the file
    // keeps the good state.
    let good = std::fs::read(&path).expect("read");
    let mut diverged = false;
    for _ in 0..30 {
        lat.step(100).expect("steps");
        if lat
            .populations()
            .expect("read")
            .iter()
            .any(|v| !v.is_finite())
        {
            diverged = true;
            break;
        }
    }
    assert!(diverged, "the state did not diverge within 3000 more steps");
    let e = lat
        .checkpoint(&path, "diverged")
        .expect_err("a diverged state was written")
        .to_string();
    assert!(e.contains("non-finite") && e.contains("cavity.ckpt"), "{e}");
    assert_eq!(std::fs::read(&path).expect("read"), good);
    // Across two thread ranks: rank 0 alone sees the words, and every rank refuses.
    let at = lat.steps_done();
    let errors = bespoke_comm::run_threads(2, |comm| {
        let ranks = bespoke_lbm::distributed::Ranks::new(std::rc::Rc::new(comm));
        let (mut lat, _) = Lattice::resume_distributed(gpu, &path, &ranks)?;
        lat.step(at - saved_at)?;
        Ok::<_, LbmError>(lat.checkpoint(&path, "diverged").map_err(|e| e.to_string()))
    })
    .expect("two ranks");
    for (rank, e) in errors.iter().enumerate() {
        let e = e
            .as_ref()
            .expect_err("a diverged state was written on two ranks");
        assert!(e.contains("non-finite"), "rank {rank}: {e}");
    }
    assert_eq!(std::fs::read(&path).expect("read"), good);
}
