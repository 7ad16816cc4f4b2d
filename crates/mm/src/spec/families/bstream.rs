//! bstream: each used row of B loaded once into a register and scattered into per-row accumulators; a row of
//! C is stored as soon as its last contribution is in.

use std::fmt::Write;

use crate::spec::emit::{Emit, Work};

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

pub(crate) fn bstream(e: &mut Emit<'_>, work: &Work) {
    e.header("bstream: each used row of B loaded once, scattered into row accumulators");
    e.open_main();
    e.out += "    if (col >= NV) {\n        return;\n    }\n";
    let terms = work;
    // Rows without terms first (zero or β·C).
    for (i, t) in terms {
        if t.is_empty() {
            e.out += &e.store("    ", *i, "col", None);
        }
    }
    // Per row of B: which rows of C it feeds, and where each row of C ends.
    let mut by_p: std::collections::BTreeMap<usize, Vec<(usize, f64, bool, bool)>> =
        Default::default();
    for (i, t) in terms {
        for (n, &(p, a)) in t.iter().enumerate() {
            by_p.entry(p)
                .or_default()
                .push((*i, a, n == 0, n + 1 == t.len()));
        }
    }
    for (p, uses) in by_p {
        let _ = writeln!(e.out, "    let b_{p} = {};", e.b_at(p, "col"));
        for (i, a, first, last) in uses {
            let c = e.lit(a);
            if first {
                let _ = writeln!(e.out, "    var r_{i} = b_{p} * {c};");
            } else {
                let _ = writeln!(e.out, "    r_{i} = fma(b_{p}, {c}, r_{i});");
            }
            if last {
                e.out += &e.store("    ", i, "col", Some(&format!("r_{i}")));
            }
        }
    }
    e.out += "}\n";
}
