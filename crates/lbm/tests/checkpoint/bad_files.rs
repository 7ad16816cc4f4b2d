//! A flipped bit, a damaged file with a matching checksum, options the checkpoint does not hold: refused.

use super::*;

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
        // Ranks are checked against the checkpoint's 34 × 34 cells (the case's default is 128 × 128).
        let across = |ranks| bespoke_lbm::cases::check_across(&Case::Cavity, &opts, Some(ranks));
        across((17, None)).expect("17 slabs of 2 cells");
        let e = across((18, None)).expect_err("18 slabs").to_string();
        assert!(e.contains("34 cells along x in 18 blocks"), "{e}");
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
