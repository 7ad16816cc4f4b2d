//! The layout's tests: launches within their caps and bindings, rolled tables, rows grouped by shared rows of B.

#![allow(clippy::single_range_in_vec_init)] // one-block lists of ranges are what these tests pass

use super::*;

fn rows() -> Vec<RowTerms> {
    // 3×6: row 0 uses columns 0 and 5, row 1 is empty, row 2 uses column 3.
    vec![vec![(0, 1.0), (5, 2.0)], vec![], vec![(3, -1.0)]]
}

#[test]
fn rolled_tables_group_whole_blocks_within_both_limits() {
    // 6×4, every row uses columns 0..3 (per block of 2 rows: an offset, 2 rows and 3 columns, 6 words).
    let a: Vec<RowTerms> = (0..6).map(|_| vec![(0, 1.0), (1, 2.0), (2, 3.0)]).collect();
    let cap = |tab_words, coef_elems| LaunchCap::Table {
        r: 2,
        tab_words,
        coef_elems,
    };
    let groups = |c| row_groups(&a, 0..6, &(0..4), Beta::Zero, c);
    // Room for everything: one launch.
    assert_eq!(groups(cap(100, 100)), vec![0..6]);
    // Two blocks take 2 + 1 offsets, 4 rows and 6 columns = 13 words, three take 19: groups of two blocks.
    assert_eq!(groups(cap(13, 100)), vec![0..4, 4..6]);
    // Coefficients: 2 per column, 6 per block; 12 fit two blocks.
    assert_eq!(groups(cap(100, 12)), vec![0..4, 4..6]);
    // A block past the limits on its own stands alone (the caller refuses its table).
    assert_eq!(groups(cap(3, 100)), vec![0..2, 2..4, 4..6]);
    // Columns outside the K slice do not count: only column 2 lies in 2..4 (1 + 2 + 1 words per block).
    let sliced = row_groups(&a, 0..6, &(2..4), Beta::One, cap(9, 100));
    assert_eq!(sliced, vec![0..4, 4..6]);
}

#[test]
fn one_launch_when_everything_fits() {
    let l = plan_layouts(
        &rows(),
        Beta::Zero,
        &[0..6],
        &[0..3],
        (8, 8, 8),
        8,
        LaunchCap::Terms(100),
    )
    .unwrap();
    assert_eq!(l.len(), 1);
    assert_eq!(l[0].bindings(), 2);
}

#[test]
fn k_groups_accumulate_and_skip_idle_blocks() {
    // B in three blocks of two rows, at most 2 bindings: one C block + one B block per launch.
    let b = [0..2, 2..4, 4..6];
    let l = plan_layouts(
        &rows(),
        Beta::Other(0.5),
        &b,
        &[0..3],
        (8, 8, 8),
        2,
        LaunchCap::Terms(100),
    )
    .unwrap();
    assert_eq!(l.len(), 3);
    assert_eq!(l[0].beta, Beta::Other(0.5));
    assert_eq!((l[1].beta, l[2].beta), (Beta::One, Beta::One));
    // β = 1 launches touch only blocks with terms.
    assert_eq!(l[1].b_blocks, vec![2..4]);
    assert!(!l[1].writes(&rows(), 0) && l[1].writes(&rows(), 2));
    // With β = 1 from the start, an all-empty slice is no launch at all.
    let empty: Vec<RowTerms> = vec![vec![(0, 1.0)], vec![]];
    let l = plan_layouts(
        &empty,
        Beta::One,
        &[0..1, 1..2],
        &[0..2],
        (4, 4, 4),
        2,
        LaunchCap::Terms(100),
    )
    .unwrap();
    assert_eq!(l.len(), 1);
}

#[test]
fn rows_group_under_the_access_cap() {
    // Rows 0–3 read rows 0..4 of B, rows 4–7 read rows 4..8; each row reads two of them. β = 0: one store
    // per row. Rows 0–3 cost 4 loads + 4 stores = 8 accesses, as do rows 4–7.
    let a: Vec<RowTerms> = (0..8)
        .map(|i| {
            let base = i / 4 * 4;
            vec![(base + i % 4, 1.0), (base + (i + 1) % 4, 2.0)]
        })
        .collect();
    let groups = |cap: usize, beta: Beta| {
        plan_layouts(
            &a,
            beta,
            &[0..8],
            &[0..8],
            (8, 8, 8),
            8,
            LaunchCap::Accesses(cap),
        )
        .unwrap()
        .iter()
        .map(|l| l.rows.clone())
        .collect::<Vec<_>>()
    };
    assert_eq!(groups(16, Beta::Zero), vec![0..8]);
    assert_eq!(groups(8, Beta::Zero), vec![0..4, 4..8]);
    // β ≠ 0 reads C too: 4 loads + 8 = 12 per half.
    assert_eq!(groups(12, Beta::Other(0.5)), vec![0..4, 4..8]);
    // One short: row 3 reads no new row of B but its C still costs 2, so the groups shift.
    assert_eq!(groups(11, Beta::Other(0.5)), vec![0..3, 3..6, 6..8]);
    // The same operator under a term cap of 8 splits the same way (2 terms a row).
    let by_terms = plan_layouts(
        &a,
        Beta::Zero,
        &[0..8],
        &[0..8],
        (8, 8, 8),
        8,
        LaunchCap::Terms(8),
    )
    .unwrap();
    assert_eq!(by_terms.len(), 2);
    // A row alone past the cap is still a launch of its own.
    assert_eq!(groups(1, Beta::Zero).len(), 8);
}

#[test]
fn launches_group_rows_that_share_rows_of_b() {
    // Rows 0, 2, 4 read rows 0..3 of B, rows 1, 3, 5 rows 3..6: in order, 2 launches of 3 rows load 6 + 6;
    // grouped, 3 + 3.
    let a: Vec<RowTerms> = (0..6)
        .map(|i| (0..3).map(|j| (i % 2 * 3 + j, 1.0)).collect())
        .collect();
    let plan = |a: &[RowTerms], terms| {
        plan_layouts(
            a,
            Beta::Zero,
            &[0..6],
            &[0..6],
            (8, 8, 8),
            8,
            LaunchCap::Terms(terms),
        )
        .unwrap()
        .into_iter()
        .map(|l| l.rows)
        .collect::<Vec<_>>()
    };
    assert_eq!(
        plan(&a, 9),
        vec![
            LaunchRows::List(vec![0, 2, 4]),
            LaunchRows::List(vec![1, 3, 5])
        ]
    );
    assert_eq!(
        LaunchRows::List(vec![0, 2, 4]).to_string(),
        "0..1, 2..3, 4..5"
    );
    assert_eq!(LaunchRows::of(vec![3, 4, 5]), LaunchRows::Range(3..6));
    // Each row its own row of B: row order reads each once already, and stays.
    let diagonal: Vec<RowTerms> = (0..6).map(|i| vec![(i, 1.0)]).collect();
    assert_eq!(plan(&diagonal, 9), vec![0..6]);
    assert_eq!(plan(&diagonal, 2), vec![0..2, 2..4, 4..6]);
}

#[test]
fn rows_group_under_the_term_cap() {
    // Rows of 2, 0, 1 terms with a cap of 2: rows 0..2, then row 2.
    let l = plan_layouts(
        &rows(),
        Beta::Zero,
        &[0..6],
        &[0..3],
        (8, 8, 8),
        8,
        LaunchCap::Terms(2),
    )
    .unwrap();
    assert_eq!(
        l.iter().map(|l| l.rows.clone()).collect::<Vec<_>>(),
        vec![0..2, 2..3]
    );
}
