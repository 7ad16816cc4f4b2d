//! bstream-msplit: B staged through workgroup memory in chunks of its used rows; rows of A dealt across the
//! workgroup's invocation rows (balanced by non-zeros), each keeping its rows' accumulators in registers.
//!
//! Within a chunk an invocation row reads each staged row of B once and scatters it into every accumulator of
//! its rows that uses it (as bstream does from device memory), in ascending rows of B: each accumulator meets its
//! terms in the order a per-row dot product would (`acc = b·a`, then `fma`), so the bits are the same, with one
//! workgroup-memory load per staged row an invocation row uses instead of one per term (hex-p6-m132 in one launch
//! at s4: 2226 a column against 7056). Folded variants sum equal coefficients' rows first: those keep the dot.

use std::fmt::Write;

use super::work_rows;
use crate::specialise::emit::{Acc, Emit, REG_BUDGET_BYTES, Work, deal, slices, used_rows};
use crate::specialise::partition::{Measure, loads, partition};

pub(crate) fn msplit(e: &mut Emit<'_>, work: &Work) -> Result<(), String> {
    let (x, s) = e.variant.workgroup();
    let (x, s) = (x as usize, s as usize);
    let vtb = e.variant.elem_bytes(e.dtype);
    let used: Vec<usize> = used_rows(work).into_iter().map(|(p, _)| p).collect();
    let groups = deal_rows(work, s);
    let rmax = groups.iter().map(Vec::len).max().unwrap_or(0);
    if rmax * vtb > REG_BUDGET_BYTES {
        return Err(format!(
            "{rmax} accumulators of {vtb} bytes per invocation exceed the {REG_BUDGET_BYTES}-byte register budget"
        ));
    }
    let kc = (e.variant.stage_bytes() / (x * vtb)).clamp(1, used.len().max(1));
    e.header(
        "bstream-msplit: B staged through workgroup memory, rows of A dealt across invocation rows",
    );
    let vt = e.vt();
    let _ = writeln!(e.out, "var<workgroup> sb: array<{vt}, {}>;", kc * x);
    e.open_main();
    e.out += "    let live = col < NV;\n    let cc = min(col, NV - 1u);\n";
    for j in 0..rmax {
        let _ = writeln!(e.out, "    var acc_{j}: {vt};");
    }
    let chunks: Vec<&[usize]> = used.chunks(kc).collect();
    for (ci, chunk) in chunks.iter().enumerate() {
        let _ = writeln!(e.out, "    // chunk {ci}: rows {:?}.. of B", chunk.first());
        e.out += "    switch lid.y {\n";
        for g in 0..s {
            let _ = writeln!(e.out, "        case {g}u: {{");
            for (t, p) in chunk.iter().enumerate().filter(|(t, _)| t % s == g) {
                let _ = writeln!(
                    e.out,
                    "            sb[{}u + lid.x] = {};",
                    t * x,
                    e.b_at(*p, "cc")
                );
            }
            e.out += "        }\n";
        }
        e.out += "        default: {}\n    }\n    workgroupBarrier();\n    switch lid.y {\n";
        for (g, rows) in groups.iter().enumerate() {
            let _ = writeln!(e.out, "        case {g}u: {{");
            if !e.variant.fold {
                scatter(e, work, rows, chunk, x);
                e.out += "        }\n";
                continue;
            }
            for (j, &w) in rows.iter().enumerate() {
                let (_, terms) = &work[w];
                let here: Vec<(usize, f64)> = terms
                    .iter()
                    .filter(|(p, _)| chunk.contains(p))
                    .copied()
                    .collect();
                if here.is_empty() {
                    continue;
                }
                let mode = if terms[0] == here[0] {
                    Acc::Assign
                } else {
                    Acc::Add
                };
                let slot = |p: usize| {
                    let t = chunk.iter().position(|q| *q == p).unwrap_or_default();
                    format!("sb[{}u + lid.x]", t * x)
                };
                e.out += &e.dot("            ", &format!("acc_{j}"), mode, &here, &slot);
            }
            e.out += "        }\n";
        }
        e.out += "        default: {}\n    }\n";
        if ci + 1 < chunks.len() {
            e.out += "    workgroupBarrier();\n";
        }
    }
    e.out += "    if (live) {\n        switch lid.y {\n";
    for (g, rows) in groups.iter().enumerate() {
        let _ = writeln!(e.out, "            case {g}u: {{");
        for (j, &w) in rows.iter().enumerate() {
            let (i, terms) = &work[w];
            let acc = format!("acc_{j}");
            let value = (!terms.is_empty()).then_some(acc.as_str());
            e.out += &e.store("                ", *i, "col", value);
        }
        e.out += "            }\n";
    }
    e.out += "            default: {}\n        }\n    }\n}\n";
    Ok(())
}

/// One invocation row's work on one chunk in scatter order: each row of B of `chunk` that some of `rows` (indices
/// into `work`, accumulator `acc_j` for the j-th) uses, loaded once from workgroup memory, then one multiply or
/// FMA per such row, in the order of the rows' own terms.
fn scatter(e: &mut Emit<'_>, work: &Work, rows: &[usize], chunk: &[usize], x: usize) {
    for (t, &p) in chunk.iter().enumerate() {
        let users: Vec<(usize, f64, bool)> = rows
            .iter()
            .enumerate()
            .filter_map(|(j, &w)| {
                let terms = &work[w].1;
                terms
                    .iter()
                    .position(|(q, _)| *q == p)
                    .map(|k| (j, terms[k].1, k == 0))
            })
            .collect();
        if users.is_empty() {
            continue;
        }
        let _ = writeln!(e.out, "            let v{t} = sb[{}u + lid.x];", t * x);
        for (j, a, first) in users {
            let c = e.lit(a);
            let _ = if first {
                writeln!(e.out, "            acc_{j} = v{t} * {c};")
            } else {
                writeln!(e.out, "            acc_{j} = fma(v{t}, {c}, acc_{j});")
            };
        }
    }
}

/// The launch's rows (indices into `work`) dealt across `s` invocation rows: by longest-processing-time on their
/// non-zeros, or, where either loads fewer staged rows of B, in contiguous slices or grouped by the rows of B
/// they share (`partition`; rows that read the same rows of B sit together, as a tensor-product operator's do:
/// hex-p6-m132 in one launch at s4 loads 2808 staged rows a column dealt, 2226 in slices, 1913 grouped; at s8
/// 4558, 3416, 2279), for at
/// most one accumulator and a tenth of the terms more on the busiest invocation row. Which invocation row sums a
/// row of C does not change its bits.
pub(crate) fn deal_rows(work: &Work, s: usize) -> Vec<Vec<usize>> {
    let weights: Vec<usize> = work.iter().map(|(_, t)| t.len()).collect();
    let dealt = deal(&weights, s);
    let sliced: Vec<Vec<usize>> = slices(&weights, s)
        .into_iter()
        .map(|r| r.collect())
        .collect();
    let rows = work_rows(work);
    let loads = |groups: &[Vec<usize>]| loads(&rows, groups);
    let most = |groups: &[Vec<usize>]| groups.iter().map(Vec::len).max().unwrap_or(0);
    let heaviest = |groups: &[Vec<usize>]| {
        groups
            .iter()
            .map(|rows| rows.iter().map(|&w| weights[w]).sum::<usize>())
            .max()
            .unwrap_or(0)
    };
    // Grouped by the rows of B they share (`partition`), each invocation row within one accumulator more than
    // the deal's and (checked below) a tenth more terms than its busiest.
    let grouped = partition(&rows, Measure::Rows, most(&dealt) + 1, s);
    let fits =
        |g: &[Vec<usize>]| most(g) <= most(&dealt) + 1 && 10 * heaviest(g) <= 11 * heaviest(&dealt);
    let mut best = dealt.clone();
    for g in [Some(sliced), grouped].into_iter().flatten() {
        if fits(&g) && loads(&g) < loads(&best) {
            best = g;
        }
    }
    best
}

#[cfg(test)]
mod tests {
    use super::*;

    /// msplit gives its invocation rows consecutive rows of A where those share more rows of B than dealing by
    /// non-zeros does, and keeps the deal where not; either way every row once.
    #[test]
    fn rows_that_share_columns_go_together_without_a_device() {
        let work_of = |cols: &dyn Fn(usize) -> [usize; 2]| -> Work {
            (0..8)
                .map(|i| (i, cols(i).iter().map(|&p| (p, 1.0)).collect()))
                .collect()
        };
        // Rows 0–3 read B's rows 0 and 1, rows 4–7 rows 2 and 3: in halves each invocation row loads two rows of B.
        let halves = work_of(&|i| if i < 4 { [0, 1] } else { [2, 3] });
        assert_eq!(
            deal_rows(&halves, 2),
            vec![vec![0, 1, 2, 3], vec![4, 5, 6, 7]]
        );
        // Alternating rows: the deal by non-zeros (round robin here) already puts like rows together.
        let alternating = work_of(&|i| if i % 2 == 0 { [0, 1] } else { [2, 3] });
        let groups = deal_rows(&alternating, 2);
        assert_eq!(groups, vec![vec![0, 2, 4, 6], vec![1, 3, 5, 7]]);
        for g in [deal_rows(&halves, 3), deal_rows(&alternating, 4)] {
            let mut all: Vec<usize> = g.concat();
            all.sort_unstable();
            assert_eq!(all, (0..8).collect::<Vec<_>>(), "{g:?}");
        }
    }
}
