//! The partition's tests: a tensor-product operator's cuts, random rows within their caps, exact counts.

use super::*;

/// hex-p6-m132's pattern: row (i, j, k) of 7³ reads B's pencils through it along each axis, 21 rows of B
/// in three blocks of 343.
fn tensor_rows() -> Vec<Row> {
    let at = |i: usize, j: usize, k: usize| i * 49 + j * 7 + k;
    let mut rows = Vec::new();
    for i in 0..7 {
        for j in 0..7 {
            for k in 0..7 {
                let reads =
                    (0..7).flat_map(|q| [at(i, j, q), 343 + at(i, q, k), 686 + at(q, j, k)]);
                rows.push(Row::new(reads, 1));
            }
        }
    }
    rows
}

#[test]
fn a_tensor_product_operator_is_cut_along_two_axes() {
    let rows = tensor_rows();
    let p = partition(&rows, Measure::Terms, 2048, 4).expect("a partition");
    assert_eq!(p.len(), 4);
    assert!(p.iter().all(|g| size(&rows, Measure::Terms, g) <= 2048));
    let mut all: Vec<usize> = p.iter().flatten().copied().collect();
    all.sort_unstable();
    assert_eq!(all, (0..343).collect::<Vec<_>>());
    // Slabs along one axis read 1029 + 3 · 343 = 2058; a cut along two axes 1715. Balanced within a cap of
    // 2048 terms the halves cannot both be whole planes: a little more.
    let l = loads(&rows, &p);
    assert!(l < 1800, "{l}");
    // Two launches: the slab split (343 · 4 = 1372) is the best there is.
    let p = partition(&rows, Measure::Accesses, 1024, 2).expect("a partition");
    assert_eq!(loads(&rows, &p), 1372);
    assert!(p.iter().all(|g| size(&rows, Measure::Accesses, g) <= 1024));
    // One launch too many for the cap: none.
    assert_eq!(partition(&rows, Measure::Terms, 1000, 4), None);
    // Four invocation rows of at most 87 rows: fewer rows of B than in slices along one axis (2058).
    let p = partition(&rows, Measure::Rows, 87, 4).expect("a partition");
    assert!(p.iter().all(|g| g.len() <= 87));
    assert!(loads(&rows, &p) < 2058, "{}", loads(&rows, &p));
}

/// `n` rows, each reading fewer than `most` random rows of B below `width`, with 0–2 accesses to C.
fn random_rows(
    rng: &mut impl bespoke_gpu::rng::Rng,
    n: usize,
    width: usize,
    most: usize,
) -> Vec<Row> {
    (0..n)
        .map(|_| {
            let reads: Vec<usize> = (0..rng.random_range(0..most))
                .map(|_| rng.random_range(0..width))
                .collect();
            Row::new(reads, rng.random_range(0..3))
        })
        .collect()
}

#[test]
fn every_partition_covers_each_row_once_within_its_cap() {
    use bespoke_gpu::rng::Rng;
    let mut rng = bespoke_gpu::rng::seeded(bespoke_gpu::testing::fresh_seed());
    for case in 0..150 {
        let (n, width) = (rng.random_range(1..80), rng.random_range(1..50));
        let rows = random_rows(&mut rng, n, width, 8);
        let measure = [Measure::Terms, Measure::Accesses, Measure::Rows][case % 3];
        let whole = size(&rows, measure, &(0..n).collect::<Vec<_>>());
        let parts = rng.random_range(1..6);
        let cap = (whole / parts).max(1) + rng.random_range(0..10);
        let Some(p) = partition(&rows, measure, cap, parts) else {
            continue;
        };
        assert!(p.len() <= parts, "case {case}");
        assert!(
            p.iter().all(|g| !g.is_empty() && g.is_sorted()),
            "case {case}"
        );
        assert!(
            p.iter().all(|g| size(&rows, measure, g) <= cap),
            "case {case}"
        );
        let mut all: Vec<usize> = p.iter().flatten().copied().collect();
        all.sort_unstable();
        assert_eq!(all, (0..n).collect::<Vec<_>>(), "case {case}");
        // The same rows give the same partition, made again or remembered.
        assert_eq!(
            made(&rows, measure, cap, parts),
            Some(p.clone()),
            "case {case}"
        );
        assert_eq!(
            partition(&rows, measure, cap, parts),
            Some(p),
            "case {case}"
        );
    }
}

/// The counts kept on each move are the counts made from scratch.
#[test]
fn moves_keep_the_counts_exact() {
    use bespoke_gpu::rng::Rng;
    let mut rng = bespoke_gpu::rng::seeded(bespoke_gpu::testing::fresh_seed());
    let rows = random_rows(&mut rng, 40, 20, 6);
    let verts: Vec<usize> = (0..40).collect();
    for measure in [Measure::Terms, Measure::Accesses, Measure::Rows] {
        let g = Graph::new(&rows, measure, &verts);
        let mut st = State::new(&g, (0..40).map(|v| (v % 2) as u8).collect());
        for _ in 0..200 {
            st.shift(&g, rng.random_range(0..40));
            let fresh = State::new(&g, st.side.clone());
            assert_eq!(
                (&st.cnt, &st.solo, &st.fresh, st.weight, st.cut),
                (
                    &fresh.cnt,
                    &fresh.solo,
                    &fresh.fresh,
                    fresh.weight,
                    fresh.cut
                )
            );
            let sides: [Vec<usize>; 2] =
                [0, 1].map(|s| verts.iter().copied().filter(|&v| st.side[v] == s).collect());
            assert_eq!(st.weight, [0, 1].map(|s| size(&rows, measure, &sides[s])));
        }
    }
}

/// A large random operator past what a partition may search gives up (`None`: the launches stay in row order)
/// rather than searching for seconds.
#[test]
fn the_search_is_bounded() {
    let mut rng = bespoke_gpu::rng::seeded(bespoke_gpu::testing::fresh_seed());
    let rows = random_rows(&mut rng, 5000, 2000, 6);
    let terms = size(&rows, Measure::Terms, &(0..5000).collect::<Vec<_>>());
    assert_eq!(
        made(&rows, Measure::Terms, 2048, terms.div_ceil(2048) + 1),
        None
    );
}
