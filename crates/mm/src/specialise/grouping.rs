//! Rows in blocks that share columns: the rolled family loads, per block of `r` rows, each column any of the
//! block's rows uses once, so rows that read the same rows of B belong together.

/// Column checks one grouping may make before it settles for consecutive blocks (a dense operator of a few
/// thousand rows would take seconds, and gains nothing: every block of it reads every column).
const GROUPING_WORK: usize = 20_000_000;

/// Columns a grouping loads: the size of each block's union of its rows' columns, summed.
pub(crate) fn loads(cols: &[Vec<usize>], blocks: &[Vec<usize>]) -> usize {
    blocks
        .iter()
        .map(|b| {
            let mut u: Vec<usize> = b.iter().flat_map(|&i| cols[i].iter().copied()).collect();
            u.sort_unstable();
            u.dedup();
            u.len()
        })
        .sum()
}

/// Rows `0..cols.len()` (each row's columns, in any order) in blocks of `r`, each full but the last, the rows of
/// a block ascending, and the columns the blocks load ([`loads`]). A block starts at the first row not yet
/// placed and takes, one at a time, the row that adds the fewest columns to the block's union (the lowest such
/// row on a tie; rows without columns add none). Consecutive blocks where they load no more, and where the
/// search would pass [`GROUPING_WORK`].
pub(crate) fn group_rows(mut cols: Vec<Vec<usize>>, r: usize) -> (Vec<Vec<usize>>, usize) {
    for c in &mut cols {
        c.sort_unstable();
        c.dedup();
    }
    let width = cols.iter().flatten().max().map_or(0, |&p| p + 1);
    let all: Vec<usize> = (0..cols.len()).collect();
    let consecutive: Vec<Vec<usize>> = all.chunks(r.max(1)).map(<[usize]>::to_vec).collect();
    let in_order = loads(&cols, &consecutive);
    if r <= 1 {
        return (consecutive, in_order);
    }
    match greedy(&cols, r, width) {
        Some(g) => match loads(&cols, &g) {
            l if l < in_order => (g, l),
            _ => (consecutive, in_order),
        },
        None => (consecutive, in_order),
    }
}

/// The greedy grouping of [`group_rows`], or `None` past [`GROUPING_WORK`].
fn greedy(cols: &[Vec<usize>], r: usize, width: usize) -> Option<Vec<Vec<usize>>> {
    let n = cols.len();
    let mut rows_of: Vec<Vec<usize>> = vec![Vec::new(); width];
    for (i, c) in cols.iter().enumerate() {
        for &p in c {
            rows_of[p].push(i);
        }
    }
    let mut placed = vec![false; n];
    let mut in_union = vec![false; width];
    // The last search that looked at a row (a row met through several columns counts once).
    let mut seen = vec![usize::MAX; n];
    let (mut searches, mut work, mut next) = (0usize, 0usize, 0usize);
    let mut blocks = Vec::with_capacity(n.div_ceil(r));
    let take = |i: usize, placed: &mut [bool], in_union: &mut [bool], union: &mut Vec<usize>| {
        placed[i] = true;
        for &p in &cols[i] {
            if !in_union[p] {
                in_union[p] = true;
                union.push(p);
            }
        }
    };
    loop {
        while next < n && placed[next] {
            next += 1;
        }
        if next == n {
            return Some(blocks);
        }
        let mut block = vec![next];
        let mut union: Vec<usize> = Vec::new();
        take(next, &mut placed, &mut in_union, &mut union);
        while block.len() < r {
            searches += 1;
            // (new columns, row): the best among the rows that share a column with the block, else among all.
            let mut best: Option<(usize, usize)> = None;
            for &p in &union {
                work += rows_of[p].len();
                for &i in &rows_of[p] {
                    if placed[i] || seen[i] == searches {
                        continue;
                    }
                    seen[i] = searches;
                    work += cols[i].len();
                    let new = cols[i].iter().filter(|&&q| !in_union[q]).count();
                    if best.is_none_or(|b| (new, i) < b) {
                        best = Some((new, i));
                    }
                }
            }
            if best.is_none() {
                work += n - next;
                best = (next..n)
                    .filter(|&i| !placed[i])
                    .map(|i| (cols[i].len(), i))
                    .min();
            }
            if work > GROUPING_WORK {
                return None;
            }
            let Some((_, i)) = best else { break };
            block.push(i);
            take(i, &mut placed, &mut in_union, &mut union);
        }
        for &p in &union {
            in_union[p] = false;
        }
        block.sort_unstable();
        blocks.push(block);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_that_share_columns_share_a_block() {
        // Rows 0 and 2 read columns 0, 1; rows 1 and 3 read 2, 3; row 4 none. Consecutive pairs load 4 + 4 + 0.
        let cols = vec![vec![0, 1], vec![2, 3], vec![0, 1], vec![2, 3], vec![]];
        let (g, l) = group_rows(cols.clone(), 2);
        assert_eq!(g, vec![vec![0, 2], vec![1, 3], vec![4]]);
        assert_eq!((l, loads(&cols, &g)), (4, 4));
        // One row a block, or a grouping that loads no less: consecutive.
        assert_eq!(group_rows(cols, 1), ((0..5).map(|i| vec![i]).collect(), 8));
        let same = vec![vec![0], vec![0], vec![1], vec![1]];
        assert_eq!(group_rows(same, 2), (vec![vec![0, 1], vec![2, 3]], 2));
    }

    #[test]
    fn every_row_lands_in_one_full_block_and_never_loads_more() {
        let mut rng = bespoke_gpu::rng::seeded(bespoke_gpu::testing::fresh_seed());
        use bespoke_gpu::rng::Rng;
        for case in 0..200 {
            let (n, width) = (rng.random_range(1..60), rng.random_range(1..40));
            let r = [2, 3, 4, 8][case % 4];
            let cols: Vec<Vec<usize>> = (0..n)
                .map(|_| {
                    let mut c: Vec<usize> = (0..rng.random_range(0..6))
                        .map(|_| rng.random_range(0..width))
                        .collect();
                    c.sort_unstable();
                    c.dedup();
                    c
                })
                .collect();
            let (g, l) = group_rows(cols.clone(), r);
            assert_eq!(l, loads(&cols, &g), "case {case}");
            let mut all: Vec<usize> = g.iter().flatten().copied().collect();
            all.sort_unstable();
            assert_eq!(all, (0..n).collect::<Vec<_>>(), "case {case}");
            assert_eq!(g.len(), n.div_ceil(r), "case {case}");
            assert!(g.iter().all(|b| b.is_sorted() && b.len() <= r));
            assert!(g[..g.len() - 1].iter().all(|b| b.len() == r), "case {case}");
            let consecutive: Vec<Vec<usize>> = (0..n)
                .collect::<Vec<_>>()
                .chunks(r)
                .map(<[usize]>::to_vec)
                .collect();
            assert!(
                loads(&cols, &g) <= loads(&cols, &consecutive),
                "case {case}"
            );
        }
    }
}
