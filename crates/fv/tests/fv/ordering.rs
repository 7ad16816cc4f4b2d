//! Orderings are permutations; METIS blocks, their cache and their thread safety.

use super::*;

#[test]
fn orderings_are_permutations_and_metis_blocks_have_the_requested_size() {
    for mesh in [sphere(), jittered_box()] {
        let adj = adjacency(&mesh).expect("adjacency");
        let op = Operator::diffusion(&mesh, &adj, 1.0, Boundary::ZeroFlux).expect("operator");
        let n = op.n();
        let mut fractions = Vec::new();
        for kind in OrderingKind::all(128) {
            let (p, _) = order(&op, kind).unwrap_or_else(|e| panic!("{}: {e}", kind.name()));
            let mut seen = vec![false; n];
            for &o in p.new_to_old() {
                assert!(!seen[o as usize], "{}: {o} twice", kind.name());
                seen[o as usize] = true;
            }
            let permuted = p.apply_operator(&op);
            fractions.push((kind.name(), in_block_fraction(&permuted, 128)));
            // Undo restores the field.
            let f: Vec<f64> = (0..n).map(|i| i as f64).collect();
            assert_eq!(p.undo(&p.apply(&f)), f);
        }
        let frac = |name: &str| {
            fractions
                .iter()
                .find(|(k, _)| *k == name)
                .map(|f| f.1)
                .unwrap_or(0.0)
        };
        eprintln!("in-block fractions (block 128): {fractions:?}");
        assert!(frac("metis") > frac("random") + 0.3, "{fractions:?}");
        // METIS's default imbalance is 1.03; allow one tet of rounding.
        let parts = n.div_ceil(128);
        let part = metis_partition(&op, parts).expect("partition");
        let mut sizes = vec![0usize; parts];
        for p in part {
            sizes[p as usize] += 1;
        }
        let max = *sizes.iter().max().unwrap_or(&0) as f64;
        assert!(
            max <= 1.03 * (n as f64 / parts as f64) + 1.0,
            "largest block {max} for {n} tets in {parts}"
        );
    }
}

#[test]
fn metis_blocks_keep_each_part_contiguous_in_graph_order() {
    use bespoke_fv::ordering::order_within_parts;
    let mesh = jittered_box();
    let adj = adjacency(&mesh).expect("adjacency");
    let op = Operator::diffusion(&mesh, &adj, 1.0, Boundary::ZeroFlux).expect("operator");
    let n = op.n();
    let (xadj, adjncy) = op.graph();
    // METIS's parts, and a hand-made assignment with empty parts (5 and 6 of 7).
    let metis = metis_partition(&op, 10).expect("partition");
    let striped: Vec<u32> = (0..n as u32).map(|v| v % 5).collect();
    for (part, parts, connected) in [(metis, 10, true), (striped, 7, false)] {
        let order = order_within_parts(&xadj, &adjncy, &part, parts).expect("an order");
        let mut seen = vec![false; n];
        for &v in &order {
            assert!(!seen[v as usize], "{v} twice");
            seen[v as usize] = true;
        }
        assert!(
            order
                .windows(2)
                .all(|w| part[w[0] as usize] <= part[w[1] as usize]),
            "parts must follow one another"
        );
        if !connected {
            continue;
        }
        // Inside a METIS part (connected), a BFS order: most consecutive tets are neighbours or share one.
        let near = order
            .windows(2)
            .filter(|w| part[w[0] as usize] == part[w[1] as usize])
            .filter(|w| {
                let nb = |v: u32| &adjncy[xadj[v as usize] as usize..xadj[v as usize + 1] as usize];
                nb(w[0]).contains(&w[1]) || nb(w[0]).iter().any(|u| nb(w[1]).contains(u))
            })
            .count();
        eprintln!("{near} of {n} consecutive tets near each other");
        assert!(
            near * 2 > n,
            "{near} of {n} consecutive tets near each other"
        );
    }
}

#[test]
fn metis_orders_are_kept_per_graph_and_a_bad_entry_is_ordered_again() {
    use bespoke_fv::ordering::{ORDER_CACHE, metis_blocks_in};
    use bespoke_gpu::DiskCache;
    let dir = tempfile::tempdir().unwrap();
    let cache = DiskCache::at(dir.path(), ORDER_CACHE, 1);
    let entries = || std::fs::read_dir(cache.dir()).map_or(0, |d| d.count());
    let op = |mesh: &TetMesh| {
        let adj = adjacency(mesh).expect("adjacency");
        Operator::diffusion(mesh, &adj, 1.0, Boundary::ZeroFlux).expect("operator")
    };
    let (a, b) = (op(&jittered_box()), op(&sphere()));
    let fresh = metis_blocks_in(&a, 64, None).expect("ordered");
    let first = metis_blocks_in(&a, 64, Some(&cache)).expect("ordered and kept");
    assert_eq!(first, fresh);
    assert_eq!(entries(), 1);
    assert_eq!(
        metis_blocks_in(&a, 64, Some(&cache)).unwrap(),
        fresh,
        "read back"
    );
    // Another block size and another graph are other entries.
    metis_blocks_in(&a, 128, Some(&cache)).unwrap();
    let other = metis_blocks_in(&b, 64, Some(&cache)).unwrap();
    assert_eq!(other.len(), b.n());
    assert_eq!(entries(), 3);
    // Every entry overwritten with bytes that are no entry: said on stderr, ordered again, right, kept again.
    let files: Vec<_> = std::fs::read_dir(cache.dir())
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    for f in &files {
        std::fs::write(f, b"not an entry").unwrap();
    }
    assert_eq!(metis_blocks_in(&a, 64, Some(&cache)).unwrap(), fresh);
    assert_eq!(metis_blocks_in(&a, 64, Some(&cache)).unwrap(), fresh);
}

#[test]
fn metis_on_several_threads_at_once_gives_its_one_answer() {
    // Its random-number state is one per process: calls at once raced on it and gave different parts each run.
    let mesh = jittered_box();
    let adj = adjacency(&mesh).expect("adjacency");
    let op = Operator::diffusion(&mesh, &adj, 1.0, Boundary::ZeroFlux).expect("operator");
    let alone = metis_partition(&op, 40).expect("partition");
    let at_once: Vec<Vec<u32>> = std::thread::scope(|s| {
        let runs: Vec<_> = (0..4)
            .map(|_| s.spawn(|| metis_partition(&op, 40).expect("partition")))
            .collect();
        runs.into_iter().map(|r| r.join().unwrap()).collect()
    });
    for p in at_once {
        assert_eq!(p, alone);
    }
}
