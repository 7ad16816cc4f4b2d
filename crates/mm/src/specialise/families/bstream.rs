//! bstream: each used row of B loaded once into a register and scattered into per-row accumulators; a row of
//! C is stored as soon as its last contribution is in. Where the accumulators live at once would pass the
//! register budget, the rows go in blocks that each fit it, and a row of B is loaded once per block that uses it.

use std::fmt::Write;

use super::work_rows;
use crate::specialise::emit::{Emit, Work};
use crate::specialise::grouping::group_rows;
use crate::specialise::partition::{Measure, partition};

/// Accumulators live at once when B's rows are streamed in ascending order.
pub(crate) fn bstream_live(work: &Work) -> usize {
    let mut events: Vec<(usize, i64)> = Vec::new();
    for (_, t) in work {
        if let (Some(first), Some(last)) = (t.first(), t.last()) {
            events.push((2 * first.0, 1));
            events.push((2 * last.0 + 1, -1));
        }
    }
    events.sort_unstable();
    let (mut live, mut max) = (0i64, 0i64);
    for (_, d) in events {
        live += d;
        max = max.max(live);
    }
    max as usize
}

/// The rows with terms, in blocks that each keep at most `max_live` accumulators live (at least one row per
/// block). One block when the whole launch fits. Otherwise the fewest loads of B of three blockings: rows taken
/// in order of their first and last row of B, a block growing while it fits (rows that read nearby rows of B
/// retire early, so a block may hold more than `max_live` rows); blocks of `max_live` rows that share rows of B
/// (`grouping::group_rows`, the rolled family's greedy blocks); or blocks of at most `max_live` rows cut by the
/// rows of B they share as launches are (`partition`): hex-p6-m132 at 64 accumulators loads 2791 rows of B a
/// column by reach, 2219 greedy, 2086 cut.
pub(crate) fn bstream_blocks(work: &Work, max_live: usize) -> Vec<Work> {
    let rows: Work = work
        .iter()
        .filter(|(_, t)| !t.is_empty())
        .cloned()
        .collect();
    if bstream_live(&rows) <= max_live {
        return if rows.is_empty() { vec![] } else { vec![rows] };
    }
    let cols = rows
        .iter()
        .map(|(_, t)| t.iter().map(|x| x.0).collect())
        .collect();
    let grouped: Vec<Work> = group_rows(cols, max_live)
        .0
        .into_iter()
        .map(|b| b.into_iter().map(|k| rows[k].clone()).collect())
        .collect();
    // Blocks of at most `max_live` rows cut by the rows of B they share, as launches are (`partition`).
    let parts = rows.len().div_ceil(max_live.max(1));
    let cut: Option<Vec<Work>> =
        partition(&work_rows(&rows), Measure::Rows, max_live, parts).map(|p| {
            p.into_iter()
                .map(|b| b.into_iter().map(|k| rows[k].clone()).collect())
                .collect()
        });
    let by_reach = reach_blocks(rows, max_live);
    [Some(grouped), cut]
        .into_iter()
        .flatten()
        .fold(by_reach, |best, b| {
            if bstream_loads(&b) < bstream_loads(&best) {
                b
            } else {
                best
            }
        })
}

/// Rows in order of their first and last row of B, in blocks that grow while their live accumulators fit.
fn reach_blocks(mut rows: Work, max_live: usize) -> Vec<Work> {
    rows.sort_by_key(|(i, t)| (t[0].0, t[t.len() - 1].0, *i));
    let mut blocks: Vec<Work> = Vec::new();
    let mut cur: Work = Vec::new();
    for row in rows {
        cur.push(row);
        if cur.len() > 1 && bstream_live(&cur) > max_live {
            let row = cur.pop().unwrap_or_else(|| unreachable!("just pushed"));
            blocks.push(std::mem::take(&mut cur));
            cur.push(row);
        }
    }
    if !cur.is_empty() {
        blocks.push(cur);
    }
    blocks
}

/// Loads of B a bstream kernel spells out: one per distinct row of B per block.
pub(crate) fn bstream_loads(blocks: &[Work]) -> usize {
    blocks
        .iter()
        .map(|b| {
            let mut ps: Vec<usize> = b.iter().flat_map(|(_, t)| t.iter().map(|x| x.0)).collect();
            ps.sort_unstable();
            ps.dedup();
            ps.len()
        })
        .sum()
}

pub(crate) fn bstream(e: &mut Emit<'_>, work: &Work, max_live: usize) {
    let blocks = bstream_blocks(work, max_live);
    if blocks.len() > 1 {
        e.header(&format!(
            "bstream: each used row of B loaded once per block of rows ({} blocks of at most {max_live} live \
             accumulators, {} loads of B), scattered into row accumulators",
            blocks.len(),
            bstream_loads(&blocks)
        ));
    } else {
        e.header("bstream: each used row of B loaded once, scattered into row accumulators");
    }
    e.open_main();
    e.out += "    if (col >= NV) {\n        return;\n    }\n";
    // Rows without terms first (zero or β·C).
    for (i, t) in work {
        if t.is_empty() {
            e.out += &e.store("    ", *i, "col", None);
        }
    }
    let scoped = blocks.len() > 1;
    for (n, block) in blocks.iter().enumerate() {
        let ind = if scoped { "        " } else { "    " };
        if scoped {
            let _ = writeln!(e.out, "    {{ // block {n}: {} rows", block.len());
        }
        scatter(e, block, ind);
        if scoped {
            e.out += "    }\n";
        }
    }
    e.out += "}\n";
}

/// One block: per row of B it uses, one load, then a multiply-add into each row of C it feeds.
fn scatter(e: &mut Emit<'_>, block: &Work, ind: &str) {
    // Per row of B: which rows of C it feeds, and where each row of C ends.
    let mut by_p: std::collections::BTreeMap<usize, Vec<(usize, f64, bool, bool)>> =
        Default::default();
    for (i, t) in block {
        for (n, &(p, a)) in t.iter().enumerate() {
            by_p.entry(p)
                .or_default()
                .push((*i, a, n == 0, n + 1 == t.len()));
        }
    }
    for (p, uses) in by_p {
        let _ = writeln!(e.out, "{ind}let b_{p} = {};", e.b_at(p, "col"));
        for (i, a, first, last) in uses {
            let c = e.lit(a);
            if first {
                let _ = writeln!(e.out, "{ind}var r_{i} = b_{p} * {c};");
            } else {
                let _ = writeln!(e.out, "{ind}r_{i} = fma(b_{p}, {c}, r_{i});");
            }
            if last {
                e.out += &e.store(ind, i, "col", Some(&format!("r_{i}")));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every row of C in exactly one block, each block within the budget, and fewer loads than cstream's.
    #[test]
    fn blocks_cover_every_row_once_within_the_budget() {
        // 60 rows, each reading rows (i mod 10) and 10 + (i mod 7) of B: all 60 live at once unblocked.
        let work: Work = (0..60)
            .map(|i| (i, vec![(i % 10, 1.0 + i as f64), (10 + i % 7, -2.0)]))
            .chain(std::iter::once((60, vec![])))
            .collect();
        assert!(bstream_live(&work) > 16);
        for max_live in [1, 4, 16, 64] {
            let blocks = bstream_blocks(&work, max_live);
            let mut seen: Vec<usize> = blocks.iter().flatten().map(|(i, _)| *i).collect();
            seen.sort_unstable();
            assert_eq!(seen, (0..60).collect::<Vec<_>>(), "max_live {max_live}");
            for b in &blocks {
                assert!(
                    bstream_live(b) <= max_live,
                    "max_live {max_live}: {}",
                    bstream_live(b)
                );
            }
            let loads = bstream_loads(&blocks);
            assert!(loads <= 120, "max_live {max_live}: {loads} loads");
            if max_live >= bstream_live(&work) {
                assert_eq!(blocks.len(), 1);
            }
        }
        assert_eq!(bstream_blocks(&work, 64).len(), 1);
        assert!(bstream_blocks(&work, 16).len() >= 4);
        assert!(bstream_loads(&bstream_blocks(&work, 16)) < 120);
    }

    /// On hex-p6-m132 (every row reads three lines of a 7 × 7 × 7 lattice, so all 343 accumulators are live at
    /// once), blocks of rows that share rows of B load fewer of them than blocks by reach, within the budget of
    /// a vec2 f32 kernel (64: 2086 against 2791) and of a vec4 one (32: 2799 against 3528).
    #[test]
    fn rows_that_share_rows_of_b_share_a_block_on_hex_p6_m132() {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/data/pyfr/hex-p6-m132-dflt.mtx");
        let op = crate::specialise::mtx::read_mtx(&path).unwrap();
        let work: Work = op.rows().into_iter().enumerate().collect();
        for (max_live, reach, cut) in [(64, 2791, 2086), (32, 3528, 2799)] {
            let blocks = bstream_blocks(&work, max_live);
            let mut seen: Vec<usize> = blocks.iter().flatten().map(|(i, _)| *i).collect();
            seen.sort_unstable();
            assert_eq!(seen, (0..op.m).collect::<Vec<_>>());
            assert!(blocks.iter().all(|b| bstream_live(b) <= max_live));
            assert_eq!(bstream_loads(&reach_blocks(work.clone(), max_live)), reach);
            let loads = bstream_loads(&blocks);
            assert_eq!(loads, cut, "{max_live}");
            assert!(
                loads * 10 < reach * 9,
                "{max_live}: {loads} loads against {reach}"
            );
        }
    }
}
