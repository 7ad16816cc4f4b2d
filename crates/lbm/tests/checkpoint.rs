//! A run restarted from a checkpoint continues bit for bit like one that never stopped (wall distances
//! included); bad files are errors.

use bespoke_gpu::rng::seeded;
use bespoke_gpu::testing::{emulating, fresh_seed, test_gpu};
use bespoke_gpu::{Gpu, GpuOptions, Quirks};
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use bespoke_lbm::cases::{Case, CaseOptions, run_case};
use bespoke_lbm::{Cell, Collision, Config, Flags, Lattice, LbmError, Storage, Streaming};

#[test]
fn restart_is_bit_identical() {
    let Some(shared) = test_gpu() else { return };
    // Also on a device whose kernels keep the in-place stash unrounded, as NVIDIA's driver 580 did by dropping
    // the f16 round trip: a restart that rebuilt the stash from the stored words differed there.
    let folded = emulating(
        shared,
        GpuOptions {
            quirks: Quirks {
                folds_f16_round_trip: true,
            },
            ..Default::default()
        },
    );
    for gpu in [shared, &folded] {
        restart_is_bit_identical_on(gpu);
    }
}

fn restart_is_bit_identical_on(gpu: &Gpu) {
    let quirks = gpu.quirks();
    let dir = std::env::temp_dir().join(format!(
        "bespoke-lbm-ckpt-{}-{}",
        std::process::id(),
        quirks.folds_f16_round_trip
    ));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let nx = 21;
    let base = |ny: usize| {
        let mut flags = Flags::fluid(nx, ny);
        flags.channel_walls();
        for x in 1..nx - 1 {
            flags.set(x, ny - 1, Cell::MovingWall([0.04, 0.0]));
        }
        flags.set(7, 5, Cell::Wall);
        flags
    };
    // f32, paired f16 and (odd ny) one f16 per cell.
    for (storage, ny) in [(Storage::F32, 12), (Storage::F16, 12), (Storage::F16, 11)] {
        let layout = Config {
            storage,
            ..Config::new(nx, ny, Collision::trt(1.3))
        };
        if let Err(e) = bespoke_lbm::check_storage(gpu, &layout) {
            bespoke_gpu::testing::skipped(&format!("checkpoint restart, {nx}x{ny}: {e}"));
            continue;
        }
        for streaming in [Streaming::Ab, Streaming::InPlace] {
            // An obstacle with interpolated bounce-back (its distances are saved too; in place, the restore
            // rebuilds its stash from the populations at the saved parity).
            let mut flags = base(ny);
            flags.add_circle([12.2, 6.3], 2.4, true);
            assert!(flags.has_wall_distances());
            // With the subgrid model, whose constant the checkpoint keeps.
            let cfg = Config {
                storage,
                streaming,
                force: [1e-5, 0.0],
                smagorinsky: 0.12,
                ..Config::new(nx, ny, Collision::trt(1.3))
            };
            let path = dir.join(format!("{}-{ny}-{}.ckpt", storage.name(), streaming.name()));
            let mut straight = Lattice::new(gpu, cfg.clone(), flags.clone()).expect("lattice");
            straight
                .init_equilibrium(|x, y| (1.0 + 0.01 * ((x * y) as f64).sin(), [0.02, 0.01]))
                .expect("init");
            // An odd step count, so the in-place lattice is saved mid-pair.
            straight.step(7).expect("steps");
            straight.checkpoint(&path, "test").expect("save");
            straight.step(5).expect("steps");

            let (mut resumed, meta) = Lattice::resume(gpu, &path).expect("resume");
            assert_eq!(meta, "test");
            assert_eq!(resumed.steps_done(), 7);
            assert_eq!(resumed.config(), &cfg);
            assert_eq!(resumed.flags(), &flags);
            resumed.step(5).expect("steps");
            let (a, b) = (
                straight.populations().expect("read"),
                resumed.populations().expect("read"),
            );
            let differ = bespoke_gpu::testing::differing_bits(&a, &b);
            assert_eq!(
                differ,
                0,
                "{} ny {ny} {} ({quirks:?}): {differ} populations differ",
                storage.name(),
                streaming.name()
            );
            let (ma, mb) = (
                straight.macroscopic().expect("m"),
                resumed.macroscopic().expect("m"),
            );
            assert_eq!(
                ma.ux.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
                mb.ux.iter().map(|v| v.to_bits()).collect::<Vec<_>>()
            );

            // Truncated and foreign files are errors naming the file.
            let bytes = std::fs::read(&path).expect("read back");
            let cut = dir.join("cut.ckpt");
            std::fs::write(&cut, &bytes[..bytes.len() - 3]).expect("write");
            match Lattice::resume(gpu, &cut) {
                Err(LbmError::File { path, why }) => {
                    assert!(
                        path.contains("cut.ckpt") && why.contains("truncated"),
                        "{path}: {why}"
                    )
                }
                other => panic!("truncated checkpoint: {other:?}"),
            }
            std::fs::write(&cut, b"not a checkpoint at all").expect("write");
            assert!(matches!(
                Lattice::resume(gpu, &cut),
                Err(LbmError::File { .. })
            ));
        }
    }
    // Version 3 (before the Smagorinsky constant) still reads, as C_s = 0: the same file less those 8 bytes
    // (after magic, metadata "test", nx, ny, three codes and four f64).
    let cfg = Config::new(nx, 12, Collision::trt(1.3));
    let mut lat = Lattice::new(gpu, cfg.clone(), base(12)).expect("lattice");
    lat.init_equilibrium(|x, _| (1.0, [0.01 * (x as f64).cos(), 0.0]))
        .expect("init");
    lat.step(3).expect("steps");
    // Format 7 stores these walls as each row's runs; with the cells a code a cell it reads alike.
    let (runs, each) = (dir.join("runs.ckpt"), dir.join("each.ckpt"));
    lat.checkpoint(&runs, "test").expect("save");
    lat.checkpoint_cells_each(&each, "test").expect("save");
    let (runs_bytes, mut bytes) = (
        std::fs::read(&runs).expect("read back"),
        std::fs::read(&each).expect("read back"),
    );
    // The cells' form follows parity: magic, metadata "test", nx, ny, three codes, five f64, the steps, parity.
    let form = 8 + 8 + 4 + 16 + 3 + 40 + 8 + 1;
    assert_eq!((runs_bytes[form], bytes[form]), (1, 0), "the cells' forms");
    let cells = nx * 12;
    // 16 runs: the bottom wall's row, ten fluid rows (one with the wall at (7, 5): three runs), the lid's
    // row (its moving wall between two walls: three).
    assert_eq!(
        bytes.len() - runs_bytes.len(),
        8 + 4 * cells - (12 * 4 + 16 * 8),
        "a code a cell against 12 rows of runs"
    );
    let (from_runs, _) = Lattice::resume(gpu, &runs).expect("runs read");
    let (from_each, _) = Lattice::resume(gpu, &each).expect("a code a cell reads");
    assert!(from_runs.flags() == lat.flags() && from_each.flags() == lat.flags());
    for l in [&from_runs, &from_each] {
        assert_eq!(
            l.populations().expect("read"),
            lat.populations().expect("read")
        );
    }
    // Runs that do not fill their row, a run of no cells, more runs than cells and an unknown form are errors
    // naming what is wrong, even under a matching checksum.
    let damaged = |at: usize, value: &[u8]| {
        let mut b = runs_bytes[..runs_bytes.len() - 4].to_vec();
        b[at..at + value.len()].copy_from_slice(value);
        let crc = crc32fast::hash(&b).to_le_bytes();
        b.extend_from_slice(&crc);
        let path = dir.join("damaged.ckpt");
        std::fs::write(&path, &b).expect("write");
        match Lattice::resume(gpu, &path) {
            Err(LbmError::File { why, .. }) => why,
            other => panic!("damaged at {at}: {:?}", other.map(|_| ())),
        }
    };
    // Row 0: one run (count at form + 1) of nx walls (length at form + 5).
    assert_eq!(
        runs_bytes[form + 1..form + 9],
        [&1u32.to_le_bytes()[..], &(nx as u32).to_le_bytes()].concat()
    );
    for (at, value, says) in [
        (
            form + 5,
            (nx as u32 + 1).to_le_bytes(),
            "row 0: runs of 22 cells in a row of 21",
        ),
        (form + 5, 0u32.to_le_bytes(), "row 0: a run of no cells"),
        (
            form + 1,
            22u32.to_le_bytes(),
            "row 0 has 22 runs, more than its 21 cells",
        ),
        (form + 9, 7u32.to_le_bytes(), "unknown kind 7"),
    ] {
        let why = damaged(at, &value);
        assert!(why.contains(says), "{why}");
    }
    assert!(damaged(form, &[2]).contains("unknown form 2 of the cells"));
    // Version 6: a code a cell without the form's byte, checksummed.
    bytes.truncate(bytes.len() - 4);
    bytes.remove(form);
    bytes[..8].copy_from_slice(b"BSPKLBM6");
    let mut v6_bytes = bytes.clone();
    v6_bytes.extend_from_slice(&crc32fast::hash(&bytes).to_le_bytes());
    let v6 = dir.join("v6.ckpt");
    std::fs::write(&v6, &v6_bytes).expect("write");
    let (old6, _) = Lattice::resume(gpu, &v6).expect("version 6 reads");
    assert!(old6.flags() == lat.flags());
    assert_eq!(
        old6.populations().expect("read"),
        lat.populations().expect("read")
    );
    // Version 5: the same without the stash (none here: two-lattice streaming, no wall distances), checksummed.
    assert_eq!(
        bytes[bytes.len() - 8..],
        0u64.to_le_bytes(),
        "an empty stash"
    );
    bytes.truncate(bytes.len() - 8);
    bytes[..8].copy_from_slice(b"BSPKLBM5");
    let mut v5_bytes = bytes.clone();
    v5_bytes.extend_from_slice(&crc32fast::hash(&bytes).to_le_bytes());
    let v5 = dir.join("v5.ckpt");
    std::fs::write(&v5, &v5_bytes).expect("write");
    let (old5, _) = Lattice::resume(gpu, &v5).expect("version 5 reads");
    assert_eq!(
        old5.populations().expect("read"),
        lat.populations().expect("read")
    );
    // Version 4: version 5 without the checksum; it reads, with a warning that it carries none.
    bytes[..8].copy_from_slice(b"BSPKLBM4");
    let v4 = dir.join("v4.ckpt");
    std::fs::write(&v4, &bytes).expect("write");
    let (old4, _) = Lattice::resume(gpu, &v4).expect("version 4 reads");
    assert!(
        old4.warnings()
            .iter()
            .any(|w| w.contains("carries no checksum")),
        "{:?}",
        old4.warnings()
    );
    let at = 8 + 8 + 4 + 16 + 3 + 32;
    assert_eq!(bytes[at..at + 8], 0.0f64.to_le_bytes());
    bytes.drain(at..at + 8);
    bytes[..8].copy_from_slice(b"BSPKLBM3");
    let v3 = dir.join("v3.ckpt");
    std::fs::write(&v3, &bytes).expect("write");
    let (old, _) = Lattice::resume(gpu, &v3).expect("version 3 reads");
    assert_eq!(old.config(), &cfg);
    assert_eq!(
        old.populations().expect("read"),
        lat.populations().expect("read")
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// The bytes of a checkpoint of a 14 × 10 channel with an interpolated circle after 5 steps, written to `path`.
fn small_checkpoint(gpu: &Gpu, path: &std::path::Path) -> Vec<u8> {
    let mut flags = Flags::fluid(14, 10);
    flags.channel_walls();
    flags.add_circle([6.5, 4.7], 2.1, true);
    let mut lat =
        Lattice::new(gpu, Config::new(14, 10, Collision::trt(1.2)), flags).expect("lattice");
    lat.init_equilibrium(|x, y| (1.0 + 0.001 * (x + y) as f64, [0.01, 0.0]))
        .expect("init");
    lat.step(5).expect("steps");
    lat.checkpoint(path, "small").expect("save");
    std::fs::read(path).expect("read")
}

#[test]
fn a_flipped_bit_anywhere_is_refused() {
    let Some(gpu) = test_gpu() else { return };
    let dir = std::env::temp_dir().join(format!("bespoke-lbm-flip-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let bytes = small_checkpoint(gpu, &dir.join("good.ckpt"));
    let n = bytes.len();
    // The header (metadata, sizes), the flags, the wall distances, the populations, the checksum itself.
    for at in [9, 20, 60, n / 3, n / 2, n - 100, n - 5, n - 1] {
        for bit in [0, 7] {
            let mut b = bytes.clone();
            b[at] ^= 1 << bit;
            let bad = dir.join("bad.ckpt");
            std::fs::write(&bad, &b).expect("write");
            match Lattice::resume(gpu, &bad) {
                Err(LbmError::File { why, .. }) => assert!(
                    why.contains("checksum mismatch")
                        || why.contains("magic")
                        || why.contains("version"),
                    "byte {at} bit {bit}: {why}"
                ),
                other => {
                    panic!("byte {at} bit {bit}: a corrupted checkpoint was accepted: {other:?}")
                }
            }
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// A taylor-green case's options for a checkpointed run.
fn tg_opts(steps: u64, checkpoint: Option<std::path::PathBuf>) -> CaseOptions {
    CaseOptions {
        size: Some((24, 24)),
        steps: Some(steps),
        checkpoint,
        ..CaseOptions::default()
    }
}

/// A resumed run takes its configuration from the checkpoint: options left out take the checkpoint's, the same
/// options again pass, and an option that asks for another configuration (size, storage, streaming, collision,
/// ω, or an ω through Re) is refused by name, before any step, instead of being ignored while the run goes on
/// with the checkpoint's.
#[test]
fn a_resume_refuses_options_the_checkpoint_does_not_hold() {
    let Some(gpu) = test_gpu() else { return };
    let dir = tempfile::tempdir().expect("temp dir");
    let saved = dir.path().join("cavity.ckpt");
    let first = CaseOptions {
        size: Some((34, 34)),
        steps: Some(20),
        re: Some(50.0),
        storage: Some(Storage::F16),
        ..CaseOptions::default()
    };
    let r = run_case(gpu, &Case::Cavity, &first, &mut |_, _| {}).expect("first run");
    r.lattice
        .checkpoint(&saved, &r.checkpoint_meta())
        .expect("checkpoint");
    let resume = |change: &dyn Fn(&mut CaseOptions)| -> CaseOptions {
        let mut o = CaseOptions {
            steps: Some(30),
            resume: Some(saved.clone()),
            ..first.clone()
        };
        change(&mut o);
        o
    };
    // The same options again, and none at all: both go on from step 20 with the checkpoint's configuration.
    for opts in [
        resume(&|_| {}),
        resume(&|o| {
            o.size = None;
            o.re = None;
            o.storage = None;
        }),
    ] {
        bespoke_lbm::cases::check(&Case::Cavity, &opts).expect("check");
        let r = run_case(gpu, &Case::Cavity, &opts, &mut |_, _| {}).expect("resumed run");
        assert_eq!(r.steps, 10);
        assert_eq!(r.lattice.config().storage, Storage::F16);
    }
    type Change<'a> = &'a dyn Fn(&mut CaseOptions);
    let cases: [(&str, Change); 6] = [
        ("size = 36x36", &|o| o.size = Some((36, 36))),
        ("storage = f32", &|o| o.storage = Some(Storage::F32)),
        ("streaming = inplace", &|o| {
            o.streaming = Some(Streaming::InPlace)
        }),
        ("collision = bgk", &|o| {
            o.collision = Some(bespoke_lbm::cases::CollisionKind::Bgk)
        }),
        ("omega = 1.5", &|o| o.omega = Some(1.5)),
        ("omega = ", &|o| o.re = Some(100.0)),
    ];
    for (says, change) in cases {
        let opts = resume(change);
        let refused = |e: String| {
            assert!(
                e.starts_with(says) && e.contains("the checkpoint"),
                "{says}: {e}"
            )
        };
        // The device-free check sees all but an ω that comes from Re (the case derives it); the run sees all.
        if says != "omega = " {
            refused(
                bespoke_lbm::cases::check(&Case::Cavity, &opts)
                    .expect_err("check accepted it")
                    .to_string(),
            );
        }
        let mut calls = 0;
        match run_case(gpu, &Case::Cavity, &opts, &mut |_, _| calls += 1) {
            Err(e) => refused(e.to_string()),
            Ok(r) => panic!("{says}: resumed as {:?}", r.lattice.config()),
        }
        assert_eq!(calls, 0, "{says}: it stepped before refusing");
    }
}

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

/// A checkpoint damaged at random (`testing::damage`) with its checksum made to match again — what a faulty
/// writer or a format-4 file without a checksum would hand the reader — is refused by name or resumes into a
/// lattice of finite populations: never a panic, never an allocation the file's bytes cannot back.
#[test]
fn a_damaged_checkpoint_with_a_matching_checksum_is_refused_or_sound() {
    use std::panic::{AssertUnwindSafe, catch_unwind};
    let Some(gpu) = test_gpu() else { return };
    let dir = tempfile::tempdir().expect("temp dir");
    let bytes = small_checkpoint(gpu, &dir.path().join("good.ckpt"));
    let body = &bytes[..bytes.len() - 4];
    let seed = fresh_seed();
    let mut rng = seeded(seed);
    let (mut failures, mut refused, mut resumed) = (Vec::new(), 0, 0);
    let bad = dir.path().join("bad.ckpt");
    for _ in 0..60 {
        let (what, mut damaged) = bespoke_gpu::testing::damage(body, &mut rng);
        let crc = crc32fast::hash(&damaged);
        damaged.extend_from_slice(&crc.to_le_bytes());
        std::fs::write(&bad, &damaged).expect("write");
        match catch_unwind(AssertUnwindSafe(|| Lattice::resume(gpu, &bad))) {
            Err(_) => failures.push(format!("{what}: panicked")),
            Ok(Ok((lat, _))) => {
                let pops = lat.populations().expect("populations");
                if pops.iter().any(|v| !v.is_finite()) {
                    failures.push(format!("{what}: resumed with non-finite populations"));
                }
                resumed += 1;
            }
            Ok(Err(e)) => {
                assert!(!e.to_string().is_empty(), "{what}: an empty error");
                refused += 1;
            }
        }
    }
    eprintln!(
        "{refused} refused, {resumed} resumed (damage to a population's value leaves a valid file)"
    );
    assert!(failures.is_empty(), "seed {seed}:\n{}", failures.join("\n"));
    assert!(
        refused > 10,
        "only {refused} of 60 damaged checkpoints refused"
    );
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
