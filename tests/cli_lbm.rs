//! The `lbm` command end to end: cases, outputs, bad input.

#![allow(clippy::unwrap_used)] // a failed unwrap is a failed test

mod common;

use bespoke::gpu::testing::test_gpu;
use common::{bespoke, bespoke_json};
use serde_json::Value;

#[test]
fn lbm_case_reports_json_and_writes_outputs() {
    if test_gpu().is_none() {
        return;
    }
    let dir = std::env::temp_dir().join(format!("bespoke-lbm-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let p = |name: &str| dir.join(name).to_str().unwrap().to_owned();
    let case = [
        "lbm",
        "shear-wave",
        "--size",
        "4x64",
        "--omega",
        "1.0",
        "--u",
        "0.02",
        "--streaming",
        "inplace",
    ];
    fn with<'a>(case: &[&'a str], more: &[&'a str]) -> Vec<&'a str> {
        [case, more].concat()
    }
    let out = bespoke(&with(
        &case,
        &[
            "--json",
            &p("a.json"),
            "--png",
            &p("a.png"),
            "--vtk",
            &p("a.vtk"),
            "--checkpoint",
            &p("a.ckpt"),
            "--frames",
            &p("frames"),
            "--frame-every",
            "200",
        ],
    ));
    common::succeeded(&out, "the first run");
    let v: Value = serde_json::from_str(&std::fs::read_to_string(p("a.json")).unwrap()).unwrap();
    for key in [
        "case",
        "nx",
        "ny",
        "steps",
        "storage",
        "streaming",
        "collision",
        "mlups",
        "bytes_per_cell",
        "copy_gbps",
        "copy_fraction",
        "metrics",
    ] {
        assert!(v.get(key).is_some(), "{key} missing from {v}");
    }
    assert_eq!(v["case"], "shear-wave");
    assert_eq!(v["u"].as_f64(), Some(0.02));
    assert_eq!((v["nx"].as_u64(), v["ny"].as_u64()), (Some(4), Some(64)));
    assert_eq!(v["bytes_per_cell"].as_u64(), Some(72));
    let err = v["metrics"]["nu_rel_err"].as_f64().unwrap();
    assert!(err < 5e-3, "ν error {err}");
    assert!(v["mlups"].as_f64().unwrap() > 0.0);
    let png = std::fs::read(p("a.png")).unwrap();
    // shear-wave at ν = 1/6 on 64 rows runs 623 steps: frames at 200, 400, 600.
    let mut frames: Vec<String> = std::fs::read_dir(p("frames"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    frames.sort();
    assert_eq!(
        frames,
        [
            "frame_00000200.png",
            "frame_00000400.png",
            "frame_00000600.png"
        ]
    );
    assert_eq!(&png[1..4], b"PNG");
    let vtk = std::fs::read(p("a.vtk")).unwrap();
    assert!(
        vtk.starts_with(b"# vtk DataFile") && vtk.windows(16).any(|w| w == b"DIMENSIONS 4 64 ")
    );

    // Resume continues the same case at the checkpoint's velocity, to the same end: --steps counts from the
    // case's start, so 723 in all from the checkpoint at step 623 runs 100, says so, and ends on the state an
    // uninterrupted 723-step run ends on, byte for byte. Another velocity or case is refused, and so is a
    // resume with nothing left to run.
    let out = bespoke(&[
        "lbm",
        "shear-wave",
        "--resume",
        &p("a.ckpt"),
        "--steps",
        "723",
        "--json",
        &p("b.json"),
        "--checkpoint",
        &p("b.ckpt"),
    ]);
    let err = common::succeeded(&out, "the resume");
    assert!(
        err.contains("resuming at step 623 of 723: 100 steps remain"),
        "{err}"
    );
    let v: Value = serde_json::from_str(&std::fs::read_to_string(p("b.json")).unwrap()).unwrap();
    assert_eq!(v["steps"].as_u64(), Some(100));
    assert_eq!(v["steps_total"].as_u64(), Some(723));
    assert_eq!(v["u"].as_f64(), Some(0.02));
    let out = bespoke(&with(
        &case,
        &["--steps", "723", "--checkpoint", &p("straight.ckpt")],
    ));
    common::succeeded(&out, "the straight run");
    assert!(
        std::fs::read(p("b.ckpt")).unwrap() == std::fs::read(p("straight.ckpt")).unwrap(),
        "the resumed run's final checkpoint differs from the uninterrupted run's"
    );
    for steps in ["723", "623", "100"] {
        let out = bespoke(&[
            "lbm",
            "shear-wave",
            "--resume",
            &p("b.ckpt"),
            "--steps",
            steps,
        ]);
        common::refused(
            &out,
            format!("--steps {steps} from step 723"),
            &["at step 723", "nothing remains"],
        );
    }
    let out = bespoke(&["lbm", "shear-wave", "--resume", &p("a.ckpt"), "--u", "0.01"]);
    common::refused(&out, "a resume at another u", &["ran at u = 0.02"]);
    let out = bespoke(&["lbm", "taylor-green", "--resume", &p("a.ckpt")]);
    common::refused(&out, "a resume as another case", &["shear-wave"]);
    let out = bespoke(&[
        "lbm",
        "shear-wave",
        "--resume",
        &p("a.ckpt"),
        "--smagorinsky",
        "0.1",
    ]);
    common::refused(&out, "a resume with another C_s", &["ran with C_s = 0"]);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn lbm_smagorinsky_keeps_an_under_resolved_cavity_stable() {
    if test_gpu().is_none() {
        return;
    }
    // Re 10 000 on 64² (ω 1.992): BGK diverges within 1000 steps; the subgrid model runs on.
    let args = [
        "lbm",
        "cavity",
        "--re",
        "10000",
        "--size",
        "64x64",
        "--steps",
        "3000",
        "--collision",
        "bgk",
    ];
    let out = bespoke(&args);
    common::refused(&out, args, &["diverged", "smagorinsky"]);
    let mut les = args.to_vec();
    les.extend(["--smagorinsky", "0.15"]);
    let (v, _) = bespoke_json("les", &les);
    assert_eq!(v["smagorinsky"].as_f64(), Some(0.15));
    assert_eq!(v["steps"].as_u64(), Some(3000));
    assert!(
        v["metrics"]["steady_change"]
            .as_f64()
            .is_some_and(f64::is_finite)
    );
}

#[test]
fn lbm_rejects_bad_parameters_clearly() {
    if test_gpu().is_none() {
        return;
    }
    for (args, needle) in [
        (&["lbm", "shear-wave", "--omega", "2.5"][..], "omega"),
        (&["lbm", "shear-wave", "--size", "1x64"][..], "size"),
        (&["lbm", "shear-wave", "--size", "64"][..], "--size"),
        (&["lbm", "vortex-street"][..], "expected shear-wave"),
        (&["lbm", "mask"][..], "PNG"),
        (&["lbm", "cavity", "--re=-5"][..], "Reynolds"),
        (
            &["lbm", "cavity", "--u", "0"][..],
            "characteristic velocity",
        ),
        (&["lbm", "cylinder", "--u", "0.2"][..], "Mach"),
        (&["lbm", "shear-wave", "--storage", "f8"][..], "storage"),
        (&["lbm", "cavity", "--smagorinsky=-0.5"][..], "smagorinsky"),
        (
            &["lbm", "cavity", "--smagorinsky", "1.5"][..],
            "smagorinsky",
        ),
        (
            &["lbm", "cavity", "--interpolated-mask"][..],
            "mask case only",
        ),
        // Past 32-bit cell indices: refused before the device opens (240 GB of host-side flags once aborted).
        (
            &["lbm", "taylor-green", "--size", "100000x100000"][..],
            "32-bit cell indices",
        ),
        // Addressable, but past the device's bindings: refused before the flags are allocated.
        (
            &["lbm", "taylor-green", "--size", "40000x40000"][..],
            "binding limit",
        ),
    ] {
        let out = bespoke(args);
        common::refused(&out, args, &[needle]);
    }
}

/// `--vtk FILE --vtk-every N`: a frame every N steps in FILE's kind and ParaView's collection listing them by
/// step; a resumed run's frames join the earlier ones in the collection; the final file as without a series.
#[test]
fn lbm_vtk_series_and_its_collection_across_a_resume() {
    if test_gpu().is_none() {
        return;
    }
    let dir = std::env::temp_dir().join(format!("bespoke-lbm-series-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let p = |name: &str| dir.join(name).to_str().unwrap().to_owned();
    let (series, ckpt) = (p("s.pvti"), p("s.ckpt"));
    let run = |steps: &str, more: &[&str]| {
        let mut args = vec![
            "lbm",
            "poiseuille",
            "--size",
            "8x24",
            "--steps",
            steps,
            "--vtk",
            &series,
            "--vtk-every",
            "10",
            "--checkpoint",
            &ckpt,
        ];
        args.extend_from_slice(more);
        let out = bespoke(&args);
        common::succeeded(&out, &args);
    };
    let listed = || {
        let pvd = std::fs::read_to_string(p("s.pvd")).unwrap();
        assert!(pvd.contains(r#"<VTKFile type="Collection""#), "{pvd}");
        pvd.lines()
            .filter_map(|l| bespoke::gpu::vtk::attribute(l, "file"))
            .collect::<Vec<_>>()
    };
    run("25", &[]);
    assert_eq!(listed(), ["s_00000010.pvti", "s_00000020.pvti"]);
    for f in ["s.pvti", "s_p0.vti", "s_00000010.pvti", "s_00000010_p0.vti"] {
        assert!(dir.join(f).exists(), "{f} missing");
    }
    run("41", &["--resume", &ckpt]);
    assert_eq!(
        listed(),
        [
            "s_00000010.pvti",
            "s_00000020.pvti",
            "s_00000030.pvti",
            "s_00000040.pvti"
        ]
    );
    let out = bespoke(&["lbm", "poiseuille", "--vtk-every", "10"]);
    common::refused(&out, "--vtk-every without --vtk", &["--vtk"]);
    let out = bespoke(&[
        "lbm",
        "poiseuille",
        "--vtk",
        &p("z.vtk"),
        "--vtk-every",
        "0",
    ]);
    common::refused(&out, "--vtk-every 0", &["--vtk-every must be at least 1"]);
    let _ = std::fs::remove_dir_all(&dir);
}

/// A step that is both a PNG frame's and a VTK frame's reads the fields once and writes both from them, on one
/// domain and across ranks: the last frames are byte for byte the run's final `--png` and `--vtk`.
#[test]
fn png_and_vtk_frames_of_one_step_are_the_final_files() {
    if test_gpu().is_none() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let p = |name: &str| dir.path().join(name).to_str().unwrap().to_owned();
    for ranks in ["1", "2"] {
        let (frames, vti, png) = (
            p(&format!("f{ranks}")),
            p(&format!("s{ranks}.vti")),
            p(&format!("a{ranks}.png")),
        );
        let out = bespoke(&[
            "lbm",
            "cavity",
            "--size",
            "24x24",
            "--steps",
            "20",
            "--ranks",
            ranks,
            "--frames",
            &frames,
            "--frame-every",
            "10",
            "--vtk",
            &vti,
            "--vtk-every",
            "10",
            "--png",
            &png,
        ]);
        common::succeeded(&out, "the cylinder with --vtk and --png");
        let read = |f: &str| std::fs::read(f).unwrap_or_else(|e| panic!("{f}: {e}"));
        let frame = format!("{frames}/frame_00000020.png");
        assert!(
            read(&frame) == read(&png),
            "{ranks} ranks: the PNG frame at step 20 is not the final PNG"
        );
        assert!(
            read(&p(&format!("s{ranks}_00000020.vti"))) == read(&vti),
            "{ranks} ranks: the VTK frame at step 20 is not the final VTK"
        );
        assert!(std::path::Path::new(&format!("{frames}/frame_00000010.png")).exists());
    }
}
