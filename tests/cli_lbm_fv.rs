//! The `lbm` and `fv` commands end to end: cases, outputs, bad input.

#![allow(clippy::unwrap_used)] // a failed unwrap is a failed test

mod common;

use bespoke::gpu::testing::test_gpu;
use common::{bespoke, bespoke_json, check_adapter};
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
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
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
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
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
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
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
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            !out.status.success(),
            "--steps {steps} from step 723 ran: {err}"
        );
        assert!(
            err.contains("at step 723") && err.contains("nothing remains"),
            "{err}"
        );
    }
    let out = bespoke(&["lbm", "shear-wave", "--resume", &p("a.ckpt"), "--u", "0.01"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("ran at u = 0.02"));
    let out = bespoke(&["lbm", "taylor-green", "--resume", &p("a.ckpt")]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("shear-wave"));
    let out = bespoke(&[
        "lbm",
        "shear-wave",
        "--resume",
        &p("a.ckpt"),
        "--smagorinsky",
        "0.1",
    ]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("ran with C_s = 0"));
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
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("diverged") && err.contains("smagorinsky"),
        "{err}"
    );
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
        assert!(!out.status.success(), "{args:?} succeeded");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(needle), "{args:?}: {err}");
        assert!(!err.contains("panicked"), "{args:?}: {err}");
    }
}

fn fv_mesh(name: &str) -> String {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/meshes")
        .join(name)
        .to_str()
        .unwrap()
        .to_owned()
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
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
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
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("--vtk"));
    let out = bespoke(&[
        "lbm",
        "poiseuille",
        "--vtk",
        &p("z.vtk"),
        "--vtk-every",
        "0",
    ]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("--vtk-every must be at least 1"));
    let _ = std::fs::remove_dir_all(&dir);
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
    assert_eq!(v["layout"], "texture", "f32 defaults to the texture layout");
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
        6 * 6,
        "every ordering × (gather: slot-major, tet-major, x4, texture; block-cached: slot-major, texture)"
    );
    for r in runs {
        for key in [
            "ordering",
            "kernel",
            "seconds_per_step",
            "gbps",
            "copy_fraction",
            "in_block_fraction",
            "ordering_seconds",
        ] {
            assert!(r.get(key).is_some(), "{key} missing from {r}");
        }
        assert!(r["gbps"].as_f64().unwrap() > 0.0);
    }
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
    // Six orderings under gather, in the slot-major and (f32) texture layouts.
    let marks = v["orderings"].as_array().unwrap();
    assert_eq!(marks.len(), 12);
    for layout in ["slot-major", "texture"] {
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
