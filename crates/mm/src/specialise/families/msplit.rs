//! bstream-msplit: B staged through workgroup memory in chunks of its used rows; rows of A dealt across the
//! workgroup's invocation rows (balanced by non-zeros), each keeping its rows' accumulators in registers.
//!
//! Within a chunk an invocation row reads each staged row of B once and scatters it into every accumulator of
//! its rows that uses it (as bstream does from device memory), in ascending rows of B: each accumulator meets its
//! terms in the order a per-row dot product would (`acc = b·a`, then `fma`), so the bits are the same, with one
//! workgroup-memory load per staged row an invocation row uses instead of one per term (hex-p6-m132 in one launch
//! at s4: 2808 a column against 7056). Folded variants sum equal coefficients' rows first: those keep the dot.

use std::fmt::Write;

use crate::specialise::emit::{Acc, Emit, REG_BUDGET_BYTES, Work, deal, used_rows};

pub(crate) fn msplit(e: &mut Emit<'_>, work: &Work) -> Result<(), String> {
    let (x, s) = e.variant.workgroup();
    let (x, s) = (x as usize, s as usize);
    let vtb = e.variant.elem_bytes(e.dtype);
    let used: Vec<usize> = used_rows(work).into_iter().map(|(p, _)| p).collect();
    let groups = deal(&work.iter().map(|(_, t)| t.len()).collect::<Vec<_>>(), s);
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
