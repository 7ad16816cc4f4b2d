//! cstream-ksplit: the used rows of B split into contiguous slices (balanced by non-zeros), one per invocation
//! row; each computes its partial dot products for a batch of rows into workgroup memory, then the invocation
//! rows share out the sums and stores.

use std::fmt::Write;

use crate::specialise::emit::{Acc, Emit, Work, slices, used_rows};

pub(crate) fn ksplit(e: &mut Emit<'_>, work: &Work) {
    let (x, s) = e.variant.workgroup();
    let (x, s) = (x as usize, s as usize);
    let vtb = e.variant.elem_bytes(e.dtype);
    let rows = used_rows(work);
    let used: Vec<usize> = rows.iter().map(|(p, _)| *p).collect();
    let weights: Vec<usize> = rows.iter().map(|(_, n)| *n).collect();
    // K slices as ranges of column indices.
    let ks: Vec<std::ops::Range<usize>> = slices(&weights, s)
        .into_iter()
        .map(|r| used[r.start]..used[r.end - 1] + 1)
        .collect();
    let batch = (e.variant.stage_bytes() / (s * x * vtb)).clamp(1, work.len().max(1));
    e.header(
        "cstream-ksplit: K split across invocation rows, partial sums combined in workgroup memory",
    );
    let vt = e.vt();
    let _ = writeln!(e.out, "var<workgroup> sp: array<{vt}, {}>;", s * batch * x);
    e.open_main();
    e.out += "    let live = col < NV;\n    let cc = min(col, NV - 1u);\n";
    let slot = |g: usize, r: usize| format!("sp[{}u + lid.x]", (g * batch + r) * x);
    let batches: Vec<_> = work.chunks(batch).collect();
    for (bi, rows) in batches.iter().enumerate() {
        e.out += "    switch lid.y {\n";
        for (g, kr) in ks.iter().enumerate() {
            let _ = writeln!(e.out, "        case {g}u: {{");
            for (r, (i, terms)) in rows.iter().enumerate() {
                let part: Vec<(usize, f64)> = terms
                    .iter()
                    .filter(|(p, _)| kr.contains(p))
                    .copied()
                    .collect();
                if part.is_empty() {
                    continue;
                }
                let _ = writeln!(e.out, "            {{ // row {i}");
                e.out += &e.dot("                ", "t", Acc::Declare, &part, &|p| {
                    e.b_at(p, "cc")
                });
                let _ = writeln!(e.out, "                {} = t;\n            }}", slot(g, r));
            }
            e.out += "        }\n";
        }
        e.out += "        default: {}\n    }\n    workgroupBarrier();\n    if (live) {\n        switch lid.y {\n";
        for g in 0..s {
            let _ = writeln!(e.out, "            case {g}u: {{");
            for (r, (i, terms)) in rows.iter().enumerate().filter(|(r, _)| r % s == g) {
                let parts: Vec<String> = ks
                    .iter()
                    .enumerate()
                    .filter(|(_, kr)| terms.iter().any(|(p, _)| kr.contains(p)))
                    .map(|(h, _)| slot(h, r))
                    .collect();
                if parts.is_empty() {
                    e.out += &e.store("                ", *i, "col", None);
                } else {
                    let _ = writeln!(
                        e.out,
                        "                {{\n                    let v = {};",
                        parts.join(" + ")
                    );
                    e.out += &e.store("                    ", *i, "col", Some("v"));
                    e.out += "                }\n";
                }
            }
            e.out += "            }\n";
        }
        e.out += "            default: {}\n        }\n    }\n";
        if bi + 1 < batches.len() {
            e.out += "    workgroupBarrier();\n";
        }
    }
    e.out += "}\n";
}
