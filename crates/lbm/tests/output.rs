//! The VTK files read back: the legacy file and a serial XML image of one domain, and the parallel image
//! (`.pvti`) each rank writes its own piece of, hold the one-domain fields bit for bit (ρ, velocity, the
//! vorticity with its wrap around the domain, the cell types) on every decomposition; a piece that cannot be
//! written fails every rank by name and leaves no piece or index; a PNG and a VTK file of one read are those of
//! two, and a PNG that cannot be written fails every rank.

#![allow(clippy::unwrap_used)] // a failed unwrap is a failed test

use std::collections::HashMap;
use std::path::Path;
use std::rc::Rc;

use bespoke_comm::{ThreadComm, run_threads};
use bespoke_gpu::testing::{fresh_seed, test_gpu};
use bespoke_gpu::vtk;
use bespoke_lbm::distributed::Ranks;
use bespoke_lbm::output::{Quantity, write_outputs, write_png, write_pvti, write_vti, write_vtk};
use bespoke_lbm::{Cell, Collision, Config, Fields, Flags, Lattice, LbmError};

const NX: usize = 23;
const NY: usize = 14;

/// Channel walls, an inlet, an outlet, a moving wall segment and a body: every cell type, and fluid at the
/// periodic x edges away from the channel walls' rows.
fn setup() -> (Config, Flags) {
    let mut flags = Flags::fluid(NX, NY);
    flags.channel_walls();
    for y in 1..NY - 1 {
        flags.set(0, y, Cell::Inlet([0.04, 0.0]));
    }
    for y in 1..5 {
        flags.set(NX - 1, y, Cell::Outlet(1.0));
    }
    for x in 4..9 {
        flags.set(x, NY - 1, Cell::MovingWall([0.03, 0.0]));
    }
    flags.add_circle([11.3, 7.2], 2.4, true);
    let cfg = Config {
        force: [1e-5, -2e-5],
        ..Config::new(NX, NY, Collision::trt(1.6))
    };
    (cfg, flags)
}

fn start(lat: &mut Lattice<'_>, seed: u64) -> Result<(), LbmError> {
    lat.init_equilibrium(move |x, y| {
        let h = |k: u64| {
            let v = (x as u64 * 7919 + y as u64 * 104_729 + k).wrapping_mul(seed | 1);
            ((v >> 11) % 10_000) as f64 / 10_000.0 - 0.5
        };
        (1.0 + 0.02 * h(1), [0.04 * h(2), 0.04 * h(3)])
    })?;
    lat.step(5)
}

/// One data array as read: its components and values as raw bits (f32 bits, or i32 as u32).
#[derive(Debug)]
struct Array {
    components: usize,
    bits: Vec<u32>,
}

/// A serial XML image read back: its piece's extent (x0, x1, y0, y1 in points) and its arrays by name.
fn read_vti(path: &Path) -> ([usize; 4], HashMap<String, Array>) {
    let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let (head, read) =
        vtk::read_appended(&bytes).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    assert!(head.contains(r#"type="ImageData""#) && head.contains(r#"header_type="UInt64""#));
    let piece = &head[head.find("<Piece").unwrap()..];
    let e: Vec<usize> = vtk::attribute(piece, "Extent")
        .unwrap()
        .split(' ')
        .map(|v| v.parse().unwrap())
        .collect();
    assert_eq!(&e[4..], &[0, 0]);
    let mut arrays = HashMap::new();
    for a in read {
        assert!(a.scalar == "Float32" || a.scalar == "Int32", "{}", a.scalar);
        let bits: Vec<u32> = a
            .bytes
            .chunks_exact(4)
            .map(|c| u32::from_le_bytes(c.try_into().unwrap()))
            .collect();
        assert_eq!(
            bits.len(),
            a.components * (e[1] - e[0]) * (e[3] - e[2]),
            "{}",
            path.display()
        );
        arrays.insert(
            a.name,
            Array {
                components: a.components,
                bits,
            },
        );
    }
    ([e[0], e[1], e[2], e[3]], arrays)
}

/// The whole domain's arrays, each cell's tuple at its place, from pieces that must tile it exactly once.
fn assemble(pieces: &[([usize; 4], HashMap<String, Array>)]) -> HashMap<String, Vec<u32>> {
    let mut out: HashMap<String, Vec<u32>> = HashMap::new();
    let mut covered = vec![0u32; NX * NY];
    for ([x0, x1, y0, y1], arrays) in pieces {
        let w = x1 - x0;
        for y in *y0..*y1 {
            for x in *x0..*x1 {
                covered[y * NX + x] += 1;
            }
        }
        for (name, a) in arrays {
            let whole = out
                .entry(name.clone())
                .or_insert_with(|| vec![u32::MAX; a.components * NX * NY]);
            for y in *y0..*y1 {
                for x in *x0..*x1 {
                    let (k, i) = ((y - y0) * w + (x - x0), y * NX + x);
                    for c in 0..a.components {
                        whole[i * a.components + c] = a.bits[k * a.components + c];
                    }
                }
            }
        }
    }
    assert!(
        covered.iter().all(|&c| c == 1),
        "the pieces do not tile the domain: {covered:?}"
    );
    out
}

/// What the files must hold: the one-domain fields' bits, cell by cell.
fn expected(f: &Fields, flags: &Flags) -> HashMap<String, Vec<u32>> {
    let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
    let velocity: Vec<f32> = (0..NX * NY).flat_map(|k| [f.ux[k], f.uy[k], 0.0]).collect();
    let types = flags
        .cells()
        .map(|c| match c {
            Cell::Fluid => 0u32,
            Cell::Wall | Cell::MovingWall(_) => 1,
            Cell::Inlet(_) => 2,
            Cell::Outlet(_) => 3,
        })
        .collect();
    HashMap::from([
        ("rho".to_string(), bits(&f.rho)),
        ("velocity".to_string(), bits(&velocity)),
        ("vorticity".to_string(), bits(&f.vorticity())),
        ("cell_type".to_string(), types),
    ])
}

fn compare(got: &HashMap<String, Vec<u32>>, want: &HashMap<String, Vec<u32>>, what: &str) {
    let mut names: Vec<_> = got.keys().collect();
    names.sort();
    assert_eq!(
        names,
        ["cell_type", "rho", "velocity", "vorticity"],
        "{what}: arrays"
    );
    for (name, w) in want {
        let g = &got[name];
        let first = g.iter().zip(w).position(|(a, b)| a != b);
        assert!(
            first.is_none(),
            "{what}: {name} differs first at value {first:?}"
        );
    }
}

/// The pieces an index names, each with its extent, read back; the index's own whole extent checked.
fn read_pvti(path: &Path) -> Vec<([usize; 4], HashMap<String, Array>)> {
    let text = std::fs::read_to_string(path).unwrap();
    assert!(text.contains(r#"<VTKFile type="PImageData""#), "{text}");
    assert!(
        text.contains(&format!(r#"WholeExtent="0 {NX} 0 {NY} 0 0""#)),
        "{text}"
    );
    for name in ["rho", "velocity", "vorticity", "cell_type"] {
        assert!(text.contains(&format!(r#"Name="{name}""#)), "{text}");
    }
    text.split("<Piece")
        .skip(1)
        .map(|tag| {
            let get = |name: &str| vtk::attribute(tag, name).unwrap();
            let (extent, arrays) = read_vti(&path.with_file_name(get("Source")));
            assert_eq!(
                get("Extent"),
                format!(
                    "{} {} {} {} 0 0",
                    extent[0], extent[1], extent[2], extent[3]
                ),
                "the index and its piece disagree"
            );
            (extent, arrays)
        })
        .collect()
}

/// The legacy file's point data read back (big-endian), as bits.
fn read_legacy(path: &Path) -> HashMap<String, Vec<u32>> {
    let bytes = std::fs::read(path).unwrap();
    let n = NX * NY;
    let mut at = 0;
    let mut out = HashMap::new();
    let line = |at: &mut usize| {
        let end = *at + bytes[*at..].iter().position(|&c| c == b'\n').unwrap();
        let l = String::from_utf8_lossy(&bytes[*at..end]).into_owned();
        *at = end + 1;
        l
    };
    assert_eq!(line(&mut at), "# vtk DataFile Version 3.0");
    while at < bytes.len() {
        let l = line(&mut at);
        let (name, count) = if let Some(rest) = l.strip_prefix("SCALARS ") {
            assert_eq!(line(&mut at), "LOOKUP_TABLE default");
            (rest.split(' ').next().unwrap().to_string(), n)
        } else if l == "VECTORS velocity float" {
            ("velocity".to_string(), 3 * n)
        } else {
            continue;
        };
        let values = bytes[at..at + 4 * count]
            .chunks_exact(4)
            .map(|c| u32::from_be_bytes(c.try_into().unwrap()))
            .collect();
        at += 4 * count;
        assert_eq!(bytes[at], b'\n', "{name}: no line end after its values");
        at += 1;
        out.insert(name, values);
    }
    out
}

#[test]
fn vtk_files_of_one_domain_hold_its_fields_bit_for_bit() {
    let Some(gpu) = test_gpu() else { return };
    let (cfg, flags) = setup();
    let mut lat = Lattice::new(gpu, cfg, flags.clone()).unwrap();
    start(&mut lat, fresh_seed()).unwrap();
    let f = lat.macroscopic().unwrap();
    let want = expected(&f, &flags);
    let dir = tempfile::tempdir().unwrap();

    write_vtk(&dir.path().join("a.vtk"), &f, &flags).unwrap();
    compare(&read_legacy(&dir.path().join("a.vtk")), &want, "legacy");

    let own = lat.own_fields().unwrap();
    let vort = lat.own_vorticity(&own).unwrap();
    write_vti(&dir.path().join("b.vti"), &own, &vort, &flags).unwrap();
    let one = read_vti(&dir.path().join("b.vti"));
    assert_eq!(one.0, [0, NX, 0, NY]);
    compare(&assemble(&[one]), &want, "serial XML");

    let index = dir.path().join("c.pvti");
    write_pvti(&mut lat, &index).unwrap();
    let pieces = read_pvti(&index);
    assert_eq!(pieces.len(), 1);
    compare(&assemble(&pieces), &want, "one-piece index");
}

#[test]
fn a_parallel_image_from_any_decomposition_is_the_one_domain_field() {
    let Some(gpu) = test_gpu() else { return };
    let seed = fresh_seed();
    let (cfg, flags) = setup();
    let mut one = Lattice::new(gpu, cfg.clone(), flags.clone()).unwrap();
    start(&mut one, seed).unwrap();
    let want = expected(&one.macroscopic().unwrap(), &flags);
    // Slabs along x (two ranks: the left and right neighbours are one rank), along y, and a 2×2 grid whose
    // vorticity at the domain's edges wraps to the far ranks.
    for (p, grid) in [
        (2, None),
        (3, Some([1, 3])),
        (4, Some([2, 2])),
        (3, Some([3, 1])),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let index = dir.path().join("field.pvti");
        run_threads(p, |comm: ThreadComm| {
            let ranks = Ranks {
                grid,
                ..Ranks::new(Rc::new(comm))
            };
            let mut lat = Lattice::new_distributed(gpu, cfg.clone(), flags.clone(), &ranks)?;
            start(&mut lat, seed)?;
            write_pvti(&mut lat, &index)
        })
        .unwrap_or_else(|e| panic!("{p} ranks {grid:?}: {e}"));
        let pieces = read_pvti(&index);
        assert_eq!(pieces.len(), p, "{p} ranks {grid:?}: one piece a rank");
        for (extent, _) in &pieces {
            assert!(
                (extent[1] - extent[0]) * (extent[3] - extent[2]) < NX * NY,
                "{p} ranks {grid:?}: a piece holds the whole domain"
            );
        }
        compare(&assemble(&pieces), &want, &format!("{p} ranks {grid:?}"));
    }
}

#[test]
fn a_piece_that_cannot_be_written_fails_every_rank_and_leaves_no_piece_or_index() {
    let Some(gpu) = test_gpu() else { return };
    let (cfg, flags) = setup();
    let dir = tempfile::tempdir().unwrap();
    let index = dir.path().join("out.pvti");
    // Rank 1's piece path is a folder.
    std::fs::create_dir(dir.path().join("out_p1.vti")).unwrap();
    let errors = run_threads(2, |comm: ThreadComm| {
        let mut lat =
            Lattice::new_distributed(gpu, cfg.clone(), flags.clone(), &Ranks::new(Rc::new(comm)))?;
        start(&mut lat, 3)?;
        Ok::<_, LbmError>(write_pvti(&mut lat, &index).unwrap_err().to_string())
    })
    .unwrap();
    for (rank, e) in errors.iter().enumerate() {
        assert!(e.contains("out_p1.vti"), "rank {rank}: {e}");
        if rank == 0 {
            assert!(e.contains("rank 1"), "rank {rank}: {e}");
        }
    }
    assert!(!index.exists(), "an index naming a piece that is not there");
    // Rank 0's piece was staged, not put in place: nothing of the failed write is left but the folder.
    let left: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(left, ["out_p1.vti"], "left behind by a failed write");
}

/// A run's end (and a frame) writes its PNG and VTK file from one read of the fields: the files are those the
/// separate writes make, byte for byte, on one domain and on two ranks whatever the VTK kind; a PNG that rank 0
/// cannot write fails every rank by name (until 2026-12-02 a frame's PNG failed rank 0 alone, the other ranks
/// going on to the next collective).
#[test]
fn a_png_and_a_vtk_file_of_one_read_are_the_separate_writes_and_a_failed_png_fails_every_rank() {
    let Some(gpu) = test_gpu() else { return };
    let seed = fresh_seed();
    let (cfg, flags) = setup();
    let mut one = Lattice::new(gpu, cfg.clone(), flags.clone()).unwrap();
    start(&mut one, seed).unwrap();
    let fields = one.macroscopic().unwrap();
    let want = tempfile::tempdir().unwrap();
    let q = Quantity::Vorticity;
    write_png(&want.path().join("a.png"), &fields, &flags, q).unwrap();
    write_vtk(&want.path().join("a.vtk"), &fields, &flags).unwrap();
    let read = |p: &Path| std::fs::read(p).unwrap();
    for vtk in ["b.vtk", "b.vti", "b.pvti"] {
        let dir = tempfile::tempdir().unwrap();
        let (png, file) = (dir.path().join("b.png"), dir.path().join(vtk));
        let own = one.own_fields().unwrap();
        write_outputs(&mut one, own, Some((&png, q)), Some(&file)).unwrap();
        assert_eq!(read(&png), read(&want.path().join("a.png")), "{vtk}: PNG");
        if vtk == "b.vtk" {
            assert_eq!(read(&file), read(&want.path().join("a.vtk")), "legacy VTK");
        }
        let two = tempfile::tempdir().unwrap();
        let (png2, file2) = (two.path().join("b.png"), two.path().join(vtk));
        run_threads(2, |comm: ThreadComm| {
            let mut lat = Lattice::new_distributed(
                gpu,
                cfg.clone(),
                flags.clone(),
                &Ranks::new(Rc::new(comm)),
            )?;
            start(&mut lat, seed)?;
            let own = lat.own_fields()?;
            write_outputs(&mut lat, own, Some((&png2, q)), Some(&file2))
        })
        .unwrap_or_else(|e| panic!("{vtk}, 2 ranks: {e}"));
        assert_eq!(read(&png2), read(&png), "{vtk}, 2 ranks: PNG");
        if vtk == "b.pvti" {
            compare(
                &assemble(&read_pvti(&file2)),
                &expected(&fields, &flags),
                "2 ranks' pieces",
            );
        } else {
            assert_eq!(read(&file2), read(&file), "{vtk}, 2 ranks");
        }
    }
    // Rank 0's PNG path is a folder: both ranks fail, naming it, beside a parallel image whose pieces were written.
    let dir = tempfile::tempdir().unwrap();
    let png = dir.path().join("out.png");
    std::fs::create_dir(&png).unwrap();
    let errors = run_threads(2, |comm: ThreadComm| {
        let mut lat =
            Lattice::new_distributed(gpu, cfg.clone(), flags.clone(), &Ranks::new(Rc::new(comm)))?;
        start(&mut lat, seed)?;
        let own = lat.own_fields()?;
        let e = write_outputs(
            &mut lat,
            own,
            Some((&png, q)),
            Some(&dir.path().join("out.pvti")),
        );
        Ok::<_, LbmError>(e.unwrap_err().to_string())
    })
    .unwrap();
    for (rank, e) in errors.iter().enumerate() {
        assert!(e.contains("out.png"), "rank {rank}: {e}");
        if rank == 1 {
            assert!(e.contains("rank 0"), "rank {rank}: {e}");
        }
    }
}
