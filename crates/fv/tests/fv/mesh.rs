//! Gmsh files, generated boxes and face adjacency; damaged files give errors, never panics.

use super::*;

fn check_adjacency(adj: &[[u32; 4]]) -> usize {
    let mut boundary = 0;
    for (t, row) in adj.iter().enumerate() {
        for &nb in row {
            if nb == BOUNDARY {
                boundary += 1;
            } else {
                assert_ne!(nb as usize, t, "tet {t} is its own neighbour");
                assert!(
                    adj[nb as usize].contains(&(t as u32)),
                    "{t} → {nb} is not symmetric"
                );
            }
        }
    }
    boundary
}

#[test]
fn gmsh_variants_agree_and_adjacency_is_symmetric() {
    // gmsh wrote the 2.2 ASCII and 4.1 binary files; data/msh_variants.py re-encoded them as 2.2 binary and
    // 4.1 ASCII (encoding only), so every reader path sees the same mesh.
    let a = sphere();
    let read = |name: &str| read_msh(&data(name)).unwrap_or_else(|e| panic!("{name}: {e}"));
    let variants = [
        ("2.2 binary", read("sphere_h0.2_v2.2_bin.msh")),
        ("4.1 binary", read("sphere_h0.2_v4.1_bin.msh")),
        ("4.1 ASCII", read("sphere_h0.2_v4.1.msh")),
    ];
    let adj_a = adjacency(&a).expect("adjacency");
    for (what, b) in &variants {
        // ASCII 2.2 prints 16 significant digits, the 4.1 files keep all 17: the same nodes up to rounding.
        assert_eq!(a.nodes.len(), b.nodes.len(), "{what}");
        let worst = a
            .nodes
            .iter()
            .zip(&b.nodes)
            .flat_map(|(p, q)| (0..3).map(move |d| (p[d] - q[d]).abs()))
            .fold(0.0, f64::max);
        assert!(
            worst < 1e-14,
            "2.2 ASCII and {what} nodes differ by {worst}"
        );
        assert!(a.tets == b.tets, "2.2 ASCII and {what} disagree on tets");
        assert_eq!(a.physical, b.physical, "{what}");
        assert_eq!(adj_a, adjacency(b).expect("adjacency"), "{what}");
    }
    // Re-encoding keeps every bit of the coordinates.
    assert!(
        a.nodes == variants[0].1.nodes,
        "2.2 binary = 2.2 ASCII exactly"
    );
    assert!(
        variants[1].1.nodes == variants[2].1.nodes,
        "4.1 ASCII = 4.1 binary exactly"
    );
    assert!(
        a.physical.iter().all(|&p| p == 1),
        "tets are in the `domain` group"
    );
    let boundary = check_adjacency(&adj_a);
    assert!(boundary > 0 && boundary < 4 * a.tets.len());
    let c = read_msh(&data("boxcyl_h0.1_v4.1.msh")).expect("ASCII 4.1 reads");
    check_adjacency(&adjacency(&c).expect("adjacency"));
}

#[test]
fn generated_boxes_are_closed_and_fill_the_box() {
    let m = jittered_box();
    assert_eq!(m.tets.len(), 6 * 7 * 5 * 6);
    let adj = adjacency(&m).expect("adjacency");
    let boundary = check_adjacency(&adj);
    assert_eq!(
        boundary,
        4 * (7 * 5 + 5 * 6 + 7 * 6),
        "two boundary triangles per boundary square"
    );
    let op = Operator::diffusion(&m, &adj, 1.0, Boundary::ZeroFlux).expect("operator");
    let volume: f64 = op.volumes.iter().sum();
    assert!((volume - 1.0).abs() < 1e-12, "volume {volume}");
    assert!(
        BoxMesh {
            jitter: 0.5,
            ..BoxMesh::cube(2)
        }
        .build()
        .is_err()
    );
}

#[test]
fn adjacency_matches_a_map_of_faces_and_names_bad_meshes() {
    use std::collections::HashMap;
    // A shuffled box of 24 576 tets (two of adjacency's chunks of 16 384 tets; node ranges per core) against a
    // plain map of faces.
    let mesh = BoxMesh {
        cells: [16, 16, 16],
        jitter: 0.2,
        shuffle: Some(9),
        seed: 4,
    }
    .build()
    .expect("box builds");
    let mut by_face: HashMap<[u32; 3], Vec<(usize, usize)>> = HashMap::new();
    for (t, tet) in mesh.tets.iter().enumerate() {
        for k in 0..4 {
            let mut f: Vec<u32> = (0..4).filter(|&v| v != k).map(|v| tet[v]).collect();
            f.sort_unstable();
            by_face.entry([f[0], f[1], f[2]]).or_default().push((t, k));
        }
    }
    let mut want = vec![[BOUNDARY; 4]; mesh.tets.len()];
    for sides in by_face.values() {
        if let [(a, ka), (b, kb)] = sides[..] {
            want[a][ka] = b as u32;
            want[b][kb] = a as u32;
        }
    }
    assert_eq!(adjacency(&mesh).expect("adjacency"), want);

    let bad = |tets: Vec<[u32; 4]>| {
        let m = TetMesh {
            nodes: mesh.nodes.clone(),
            physical: vec![0; tets.len()],
            tets,
            physical_names: Vec::new(),
        };
        adjacency(&m).expect_err("a bad mesh").to_string()
    };
    let mut three = mesh.tets.clone();
    three.push(mesh.tets[5]);
    let e = bad(three);
    assert!(e.contains("shared by 3 tets"), "{e}");
    let mut twice = mesh.tets.clone();
    twice.push([0, 1, 1, 2]);
    let e = bad(twice);
    assert!(e.contains("the same face twice"), "{e}");
    let mut past = mesh.tets.clone();
    past[7][2] = mesh.nodes.len() as u32;
    let e = bad(past);
    assert!(e.contains("tet 7 names node"), "{e}");
}

/// Damaged mesh files: every shipped gmsh variant damaged at random (`testing::damage`: bytes overwritten, cut
/// short, a stretch deleted or repeated, a number replaced by a huge, negative or non-numeric one) gives an error
/// or a mesh whose operator has positive volumes and finite, non-negative coefficients: never a panic.
#[test]
fn damaged_meshes_give_an_error_or_a_sound_operator_never_a_panic() {
    use std::panic::{AssertUnwindSafe, catch_unwind};
    const FILES: [&str; 5] = [
        "sphere_h0.2_v2.2.msh",
        "sphere_h0.2_v2.2_bin.msh",
        "sphere_h0.2_v4.1.msh",
        "sphere_h0.2_v4.1_bin.msh",
        "boxcyl_h0.1_v4.1.msh",
    ];
    let seed = fresh_seed();
    let mut rng = seeded(seed);
    let (mut failures, mut errors, mut meshes) = (Vec::new(), 0, 0);
    for name in FILES {
        let bytes = std::fs::read(data(name)).expect("shipped mesh");
        for _ in 0..40 {
            let (what, damaged) = bespoke_gpu::testing::damage(&bytes, &mut rng);
            let outcome = catch_unwind(AssertUnwindSafe(|| {
                let mesh = bespoke_fv::gmsh::parse_msh(name, &damaged)?;
                let adj = adjacency(&mesh)?;
                let op = Operator::diffusion(&mesh, &adj, 1.0, Boundary::Dirichlet(0.0))?;
                let sound = |v: f64, floor: f64| v.is_finite() && v >= floor;
                let unsound = |t: usize| {
                    !sound(op.volumes[t], f64::MIN_POSITIVE)
                        || op.values[t].iter().any(|&v| !sound(v, 0.0))
                };
                Ok::<_, FvError>(
                    (0..op.n())
                        .find(|&t| unsound(t))
                        .map(|t| (t, op.volumes[t], op.values[t])),
                )
            }));
            match outcome {
                Err(_) => failures.push(format!("{name}, {what}: panicked")),
                Ok(Ok(Some((t, v, values)))) => failures.push(format!(
                    "{name}, {what}: read, but tet {t} has volume {v:e} and coefficients {values:?}"
                )),
                Ok(Ok(None)) => meshes += 1,
                Ok(Err(e)) => {
                    assert!(!e.to_string().is_empty(), "{name}, {what}: an empty error");
                    errors += 1;
                }
            }
        }
    }
    eprintln!("{errors} damaged files refused, {meshes} read (damage may leave a valid file)");
    assert!(failures.is_empty(), "seed {seed}:\n{}", failures.join("\n"));
    assert!(
        errors > 100,
        "only {errors} of 200 damaged files refused: the damage does little"
    );
}
