//! A run restarted from a checkpoint continues bit for bit like one that never stopped (wall distances
//! included); bad files are errors (`bad_files`); periodic checkpoints, a stop and a diverged state (`periodic`).

mod bad_files;
mod periodic;

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
                ..Default::default()
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

/// A taylor-green case's options for a checkpointed run.
fn tg_opts(steps: u64, checkpoint: Option<std::path::PathBuf>) -> CaseOptions {
    CaseOptions {
        size: Some((24, 24)),
        steps: Some(steps),
        checkpoint,
        ..CaseOptions::default()
    }
}
