//! The `fv` commands end to end: run, bench, sweep, order, bad input; a run stopped, resumed and saved as a
//! series (`stops.rs`).

#![allow(clippy::unwrap_used)] // a failed unwrap is a failed test

#[path = "../common/mod.rs"]
mod common;
mod stops;

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
    common::succeeded(&out, "fv run --ordering rcm");
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
    // A fixed boundary value moves the mass: no drift is reported for it (the mass still is).
    let (v, _) = bespoke_json(
        "fv-run-dirichlet",
        &[
            "fv",
            "run",
            "--box",
            "2",
            "--steps",
            "20",
            "--dirichlet",
            "1",
        ],
    );
    assert!(v["mass_rel_drift"].is_null(), "{v}");
    assert_eq!(v["dirichlet"].as_f64(), Some(1.0), "{v}");
    assert!(
        v["mass_final"].as_f64().unwrap() > v["mass_initial"].as_f64().unwrap(),
        "{v}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn fv_run_takes_a_mesh_of_one_tet() {
    // Nothing couples under zero flux: Δt was 0.5 / 0 = ∞ (refused as "Δt < 1 / max row sum = inf") and the
    // initial bump 0 / 0 (refused as "x = NaN"). Now Δt = 1 and the tet holds its value; with a fixed boundary
    // value it relaxes towards it.
    if test_gpu().is_none() {
        return;
    }
    let dir = std::env::temp_dir().join(format!("bespoke-fv-one-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let mesh = dir.join("one.msh");
    std::fs::write(
        &mesh,
        "$MeshFormat\n2.2 0 8\n$EndMeshFormat\n$Nodes\n4\n1 0 0 0\n2 1 0 0\n3 0 1 0\n4 0 0 1\n$EndNodes\n\
         $Elements\n1\n1 4 2 0 1 1 2 3 4\n$EndElements\n",
    )
    .unwrap();
    let (v, _) = bespoke_json(
        "fv-run-one-tet",
        &["fv", "run", mesh.to_str().unwrap(), "--steps", "3"],
    );
    assert_eq!(
        (v["tets"].as_u64(), v["dt"].as_f64()),
        (Some(1), Some(1.0)),
        "{v}"
    );
    let m0 = v["mass_initial"].as_f64().unwrap();
    assert!((m0 - 1.0 / 6.0).abs() < 1e-15, "{v}");
    assert_eq!(v["mass_final"], v["mass_initial"], "{v}");
    let (v, _) = bespoke_json(
        "fv-run-one-tet-dirichlet",
        &[
            "fv",
            "run",
            mesh.to_str().unwrap(),
            "--steps",
            "3",
            "--dirichlet",
            "2",
        ],
    );
    // 1 → 1.5 → 1.75 → 1.875 (Δt half the bound: each step halves the distance to the boundary value).
    let m = v["mass_final"].as_f64().unwrap();
    assert!((m - 1.875 / 6.0).abs() < 1e-7, "{v}");
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
        // The field less its steady state (here the boundary value) past f32: it ran to ±∞ and NaN, exit 0.
        (
            vec!["fv", "run", "--box", "2", "--dirichlet", "1e39"],
            "past f32's range: use f64",
        ),
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
        common::refused(&out, &args, &[needle]);
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
    common::succeeded(&out, "fv bench --png");
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
        let stderr = common::succeeded(&out, args);
        (String::from_utf8_lossy(&out.stdout).into_owned(), stderr)
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
        common::refused(&out, &args, &[needle]);
    }
    if test_gpu().is_none() {
        return;
    }
    let (stdout, stderr) = run(&["bench", "--quick", "--section", "fv"]);
    assert!(stdout.contains("82k tets metis"), "{stdout}");
    assert!(!metis_ran(&stderr), "the bench ran METIS again: {stderr}");
}
