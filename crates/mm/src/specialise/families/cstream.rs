//! cstream: one dot product per row of C over the row's non-zeros, B read straight from device memory.

use std::fmt::Write;

use crate::specialise::emit::{Acc, Emit, Work};

pub(crate) fn cstream(e: &mut Emit<'_>, work: &Work) {
    e.header("cstream: per row of C an unrolled dot product over its non-zeros, B read directly");
    e.open_main();
    e.out += "    if (col >= NV) {\n        return;\n    }\n";
    for (i, terms) in work {
        let i = *i;
        if terms.is_empty() {
            e.out += &e.store("    ", i, "col", None);
            continue;
        }
        let _ = writeln!(e.out, "    {{ // row {i}: {} terms", terms.len());
        let body = e.dot("        ", "s", Acc::Declare, terms, &|p| e.b_at(p, "col"));
        e.out += &body;
        e.out += &e.store("        ", i, "col", Some("s"));
        e.out += "    }\n";
    }
    e.out += "}\n";
}
