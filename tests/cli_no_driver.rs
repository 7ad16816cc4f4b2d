//! Bad input gets its own error before a device is needed: every command below runs with no Vulkan driver
//! (`VK_DRIVER_FILES` and `VK_ICD_FILENAMES` point nowhere, `WGPU_BACKEND=vulkan` keeps wgpu off GL) and must name
//! the bad argument or file, not "no GPU adapter". A control proves the driver really is absent, so none of these
//! can pass by finding one. Needs no device.

mod common;

use std::path::Path;
use std::process::{Command, Output};

fn without_driver(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_bespoke"))
        .args(args)
        .env("VK_DRIVER_FILES", "/nonexistent/bespoke-no-driver.json")
        .env("VK_ICD_FILENAMES", "/nonexistent/bespoke-no-driver.json")
        .env("WGPU_BACKEND", "vulkan")
        .env_remove("WGPU_ADAPTER_NAME")
        .env(
            "BESPOKE_CACHE_DIR",
            std::env::temp_dir().join("bespoke-no-driver-cache"),
        )
        .output()
        .expect("run the bespoke binary")
}

/// A folder for one test's inputs, removed when dropped.
fn scratch(name: &str) -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix(&format!("bespoke-no-driver-{name}-"))
        .tempdir()
        .expect("scratch folder")
}

fn write(dir: &Path, name: &str, bytes: &[u8]) -> String {
    let p = dir.join(name);
    std::fs::write(&p, bytes).expect("write input");
    p.to_str().expect("utf-8 path").to_owned()
}

fn refuses(args: &[&str], needles: &[&str]) {
    let e = common::refused(&without_driver(args), args, needles);
    assert!(
        !e.contains("no GPU adapter"),
        "{args:?} looked for a device before checking its input:\n{e}"
    );
}

#[test]
fn control_there_really_is_no_driver() {
    common::refused(&without_driver(&["info"]), "info", &["no GPU adapter"]);
}

#[test]
fn mm_inputs_are_checked_first() {
    let d = scratch("mm");
    let bad = write(
        d.path(),
        "bad.mtx",
        b"%%MatrixMarket matrix array real general\n2 2\n1.0\nnot-a-number\n",
    );
    refuses(&["mm", "gen", &bad], &["bad.mtx"]);
    refuses(
        &["mm", "gen", "/nonexistent/op.mtx"],
        &["/nonexistent/op.mtx"],
    );
    refuses(
        &["mm", "gen", &bad, "--variant", "zigzag"],
        &["zigzag", "not a variant"],
    );
    refuses(&["mm", "gen", &bad, "--dtype", "f16"], &["f16"]);
    // A folder with one bad matrix among good ones: named before anything is tuned.
    let suite = scratch("mm-suite");
    write(
        suite.path(),
        "a-good.mtx",
        b"%%MatrixMarket matrix array real general\n1 1\n2.0\n",
    );
    write(
        suite.path(),
        "b-bad.mtx",
        b"%%MatrixMarket matrix coordinate real general\n2 2 5\n1 1 1.0\n",
    );
    refuses(
        &["mm", "bench", suite.path().to_str().expect("utf-8")],
        &["b-bad.mtx"],
    );
    // Finite, but past f32's range: refused for f32 kernels before a device is opened.
    let big = write(
        d.path(),
        "big.mtx",
        b"%%MatrixMarket matrix coordinate real general\n2 2 1\n2 1 -1e39\n",
    );
    for cmd in ["gen", "bench"] {
        refuses(
            &["mm", cmd, &big],
            &["big entry (2, 1) = -1e39 is past f32's range"],
        );
    }
    // A tiling key illegal on any device is the parser's to refuse; one past the bounds wrapped its products to 0
    // and was timed as an "empty GEMM 0×4×4" (found by fuzzing the arguments, 2026-12-03).
    for (key, why) in [
        ("t1073741824x1v1-w4x8-k4-s1", "tm = 1073741824 is past 256"),
        (
            "t0x32v1-w32x2-k4-s2",
            "every parameter must be a power of two",
        ),
    ] {
        for cmd in [
            &[
                "mm",
                "dense-bench",
                "--m",
                "8",
                "--n",
                "8",
                "--k",
                "8",
                "--params",
                key,
            ][..],
            &["mm", "ld", "--random", "8,8,64", "--params", key],
        ] {
            refuses(cmd, &[key, why]);
        }
    }
    // A folder names every operator past the range, not only the first.
    let wide = scratch("mm-wide");
    for (name, entries) in [
        ("p.mtx", "3\n1 1 1.0\n1 2 3e38\n2 2 5e38"),
        ("q.mtx", "2\n1 1 1.0\n2 1 1e39"),
    ] {
        let body = format!("%%MatrixMarket matrix coordinate real general\n2 2 {entries}\n");
        write(wide.path(), name, body.as_bytes());
    }
    refuses(
        &["mm", "bench", wide.path().to_str().expect("utf-8")],
        &[
            "2 operators are past f32's range",
            "p entry (2, 2) = 5e38",
            "q entry (2, 1) = 1e39",
        ],
    );
    let snps = write(d.path(), "snps.txt", b"0101\n01x1\n");
    refuses(&["mm", "ld", &snps], &["snps.txt"]);
    refuses(&["mm", "ld", "--random", "10,10"], &["M,N,SAMPLES"]);
    refuses(
        &["mm", "dense-bench", "--m", "0", "--n", "8", "--k", "8"],
        &["0"],
    );
    refuses(
        &[
            "mm",
            "dense-bench",
            "--m",
            "8",
            "--n",
            "8",
            "--k",
            "8",
            "--params",
            "t3",
        ],
        &["t3"],
    );
    refuses(&["mm", "dense-model", "--m", "64"], &["--m, --n and --k"]);
    for line in [
        "mm dense-bench --m 8 --n 8 --k 8 --reps 0",
        "mm dense-sweep --m 8 --n 8 --k 8 --reps 0",
        "mm dense-sweep --m 8 --n 8 --k 8 --confirm 0",
        "mm ld --random 8,8,8 --reps 0",
        "mm bench x.mtx --reps 0",
    ] {
        refuses(&line.split(' ').collect::<Vec<_>>(), &["at least 1"]);
    }
}

#[test]
fn fv_inputs_are_checked_first() {
    let d = scratch("fv");
    let bad = write(
        d.path(),
        "torn.msh",
        b"$MeshFormat\n2.2 0 8\n$EndMeshFormat\n$Nodes\n3\n1 0 0 0\n",
    );
    refuses(&["fv", "run", &bad], &["torn.msh"]);
    refuses(&["fv", "bench", &bad], &["torn.msh"]);
    refuses(&["fv", "sweep", &bad], &["torn.msh"]);
    refuses(
        &["fv", "run", "--box", "2", "--layout", "diagonal"],
        &["diagonal"],
    );
    refuses(
        &["fv", "run", "--box", "2", "--ordering", "alphabetical"],
        &["alphabetical"],
    );
    refuses(
        &["fv", "run", "--box", "2", "--kernel", "magic"],
        &["magic"],
    );
    refuses(&["fv", "run", "--box", "2", "--dtype", "f8"], &["f8"]);
    refuses(
        &["fv", "bench", "--box", "2", "--reps", "0"],
        &["at least 1"],
    );
    refuses(
        &["fv", "sweep", "--box", "2", "--reps", "0"],
        &["at least 1"],
    );
    // A box past the host's memory is refused before it is built (`--box 400` grew past 21 GB here).
    refuses(&["fv", "run", "--box", "100000"], &["100000"]);
    refuses(&["fv", "order", "--box", "100000"], &["100000"]);
    refuses(
        &["fv", "run", "--box", "2", "--ranks", "100"],
        &["--ranks 100", "at most 64"],
    );
    // A boundary value past f32's range: every stored entry would be ±∞. Refused before the ranks open their
    // devices (it was "rank 1 of 2 failed: x = 0: entry 0 less the steady state …" after them); NaN is the
    // operator's to refuse, in its own words.
    for ranks in ["1", "2"] {
        refuses(
            &[
                "fv",
                "run",
                "--box",
                "2",
                "--dirichlet",
                "1e39",
                "--ranks",
                ranks,
            ],
            &["dirichlet = 1e39", "past f32's range", "use f64"],
        );
    }
    refuses(
        &["fv", "run", "--box", "2", "--dirichlet", "nan"],
        &["dirichlet = NaN: boundary value must be finite"],
    );
    // Outputs written after the run are checked before it (the VTU once failed after the steps).
    let gone = d.path().join("no/such");
    let (vtu, png) = (gone.join("x.vtu"), gone.join("x.png"));
    let folder = d.path().to_str().unwrap();
    refuses(
        &["fv", "run", "--box", "2", "--vtu", vtu.to_str().unwrap()],
        &["cannot write the VTU file", "does not exist"],
    );
    refuses(
        &["fv", "run", "--box", "2", "--vtu", folder],
        &["cannot write the VTU file", "a folder"],
    );
    refuses(
        &["fv", "sweep", "--box", "2", "--png", png.to_str().unwrap()],
        &["cannot write the plot", "does not exist"],
    );
}

/// A negative value where only a positive one makes sense reaches the command's own check, which names the
/// parameter and its range (not the parser's "unexpected argument '-0.1'").
#[test]
fn negative_values_are_refused_by_name() {
    for (args, needle) in [
        (
            &["lbm", "cavity", "--u", "-0.1"][..],
            "u = -0.1: the characteristic velocity must be positive",
        ),
        (
            &["lbm", "cavity", "--omega", "-0.5"],
            "omega = -0.5: the relaxation rate must lie in (0, 2)",
        ),
        (
            &["lbm", "cavity", "--re", "-5"],
            "re = -5: the Reynolds number must be positive",
        ),
        (
            &["lbm", "cavity", "--smagorinsky", "-0.1"],
            "smagorinsky = -0.1",
        ),
        (&["scale", "--memory-budget", "-1"], "--memory-budget -1"),
        (
            &["mm", "bench", "tests/data/pyfr", "--tune-budget", "-1"],
            "--tune-budget must be positive",
        ),
        (
            &[
                "mm",
                "dense-sweep",
                "--m",
                "8",
                "--n",
                "8",
                "--k",
                "8",
                "--screen",
                "-1",
            ],
            "--screen -1 --confirm 8: give a sample size ≥ 0 GFLOP",
        ),
    ] {
        refuses(args, &[needle]);
    }
}

#[test]
fn lbm_inputs_are_checked_first() {
    let d = scratch("lbm");
    refuses(&["lbm", "cavity", "--omega", "2.5"], &["2.5"]);
    refuses(&["lbm", "cavity", "--re=-3"], &["Reynolds"]);
    refuses(&["lbm", "cavity", "--u", "0.9"], &["Mach"]);
    refuses(&["lbm", "cavity", "--size", "1x1"], &["1x1"]);
    refuses(&["lbm", "cavity", "--storage", "f8"], &["f8"]);
    refuses(&["lbm", "vortex-street"], &["vortex-street"]);
    // The decay cases fit from the first fifth of the run and need a resolved wave (a 2-cell sine is no flow).
    refuses(&["lbm", "shear-wave", "--steps", "9"], &["steps = 9"]);
    refuses(&["lbm", "taylor-green", "--steps", "1"], &["steps = 1"]);
    refuses(&["lbm", "shear-wave", "--size", "8x3"], &["size = 8x3"]);
    refuses(&["lbm", "taylor-green", "--size", "2x2"], &["size = 2x2"]);
    // No fluid cell between the walls (this ran, said it converged and gave a NaN error).
    refuses(
        &["lbm", "poiseuille", "--size", "4x2"],
        &["size = 4x2", "needs at least 3"],
    );
    refuses(
        &["lbm", "cavity", "--ranks", "65"],
        &["--ranks 65", "at most 64"],
    );
    // The lattice (--size, or the case's default) cut into the ranks' blocks, before any rank opens a device.
    refuses(
        &["lbm", "taylor-green", "--size", "16x16", "--ranks", "64"],
        &[
            "more ranks than the lattice can be cut into",
            "16 cells along x",
        ],
    );
    refuses(
        &["lbm", "cylinder", "--ranks", "1x50"],
        &[
            "more ranks than the lattice can be cut into",
            "84 cells along y",
        ],
    );
    let png = write(
        d.path(),
        "mask.png",
        b"\x89PNG\r\n\x1a\nthis is not a PNG body",
    );
    refuses(&["lbm", "mask", "--mask", &png], &["mask.png"]);
    let ckpt = write(d.path(), "state.ckpt", b"BSPKLBM5 torn checkpoint");
    refuses(&["lbm", "cavity", "--resume", &ckpt], &["state.ckpt"]);
    refuses(
        &[
            "lbm",
            "cavity",
            "--checkpoint",
            "/nonexistent/folder/state.ckpt",
        ],
        &["/nonexistent/folder", "does not exist"],
    );
}

#[test]
fn bench_and_scale_arguments_are_checked_first() {
    refuses(&["bench", "--section", "nonsense"], &["nonsense"]);
    refuses(&["scale", "--code", "cfd"], &["cfd"]);
    refuses(&["scale", "--storage", "f8"], &["f8"]);
    refuses(&["scale", "--steps", "0"], &["--steps", "at least 1"]);
    refuses(&["scale", "--rounds", "0"], &["--rounds", "at least 1"]);
    refuses(
        &["scale", "--ranks", "1000"],
        &["--ranks 1000", "at most 64"],
    );
    // More ranks than the box's tets: checked where the mesh is read, before any rank opens a device (it was
    // found by rank 0 on its device and relayed to the others).
    refuses(
        &["fv", "run", "--box", "1", "--steps", "5", "--ranks", "7"],
        &["ranks = 7: more ranks than the mesh has tets (6)"],
    );
    // The strong domain cut into the ranks' slabs, before any rank opens a device.
    refuses(
        &["scale", "--ranks", "4", "--code", "lbm", "--domain", "4x4"],
        &[
            "more ranks than the lattice can be cut into",
            "4 cells along x",
        ],
    );
    // No ranks at all: refused by name (it was "rank 0 of 0 failed" once the job had started).
    refuses(&["scale", "--ranks", "0"], &["--ranks", "at least 1"]);
    refuses(
        &["fv", "run", "--box", "2", "--ranks", "0"],
        &["--ranks", "at least 1"],
    );
    refuses(
        &["lbm", "cavity", "--ranks", "0"],
        &["--ranks `0`", "rank count"],
    );
}

/// `fv order` needs no device at all (a GPU session runs it on a spare core beside stages that use the GPU).
#[test]
fn fv_order_runs_without_a_driver() {
    let o = without_driver(&["fv", "order", "--box", "4"]);
    let out = String::from_utf8_lossy(&o.stdout);
    common::succeeded(&o, "fv order --box 4");
    assert!(out.contains("384 tets, metis order in"), "{out}");
}

/// `BESPOKE_ARGS_ONLY` (what `benches/gpu/check_session.sh` replays the GPU session's commands through): a
/// command line the CLI takes ends at once with success and no output, running nothing (here, where no driver
/// exists, a run would fail); a refused one still fails, with the parser's or the section check's words.
#[test]
fn args_only_parses_and_runs_nothing() {
    let only = |args: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_bespoke"))
            .args(args)
            .env("BESPOKE_ARGS_ONLY", "1")
            .env("VK_DRIVER_FILES", "/nonexistent/bespoke-no-driver.json")
            .env("VK_ICD_FILENAMES", "/nonexistent/bespoke-no-driver.json")
            .env("WGPU_BACKEND", "vulkan")
            .output()
            .expect("run the bespoke binary")
    };
    for ok in [
        &[
            "mm",
            "dense-bench",
            "--m",
            "64",
            "--n",
            "64",
            "--k",
            "64",
            "--params",
            "t4x4v4-w8x8-k4-s1-b2-u",
        ][..],
        &[
            "bench",
            "--section",
            "lab-lbm",
            "--json",
            "/nonexistent/dir/out.json",
        ],
        &["lbm", "cylinder", "--size", "881x166"],
    ] {
        let o = only(ok);
        common::succeeded(&o, ok);
        assert!(
            o.stdout.is_empty() && o.stderr.is_empty(),
            "{ok:?} printed something"
        );
    }
    // Negative values are values: a boundary held at −5 and β = −1 are legal (`--dirichlet -5` was "unexpected
    // argument '-5'" until 2026-12-03, so only `--dirichlet=-5` ran).
    let mtx = "tests/data/pyfr/hex-p2-m460-dflt.mtx";
    for ok in [
        &["fv", "run", "--box", "2", "--dirichlet", "-5"][..],
        &["mm", "gen", mtx, "--beta", "-1"],
        &["mm", "bench", mtx, "--beta", "-0.5"],
    ] {
        common::succeeded(&only(ok), ok);
    }
    for (bad, needle) in [
        (&["mm", "dense-sweep", "--confirm", "0"][..], "--confirm"),
        (&["bench", "--section", "nope"], "no bench section `nope`"),
        (&["mm", "dense-bench", "--params", "t3x4v4"], "--params"),
    ] {
        common::refused(&only(bad), bad, &[needle]);
    }
}
