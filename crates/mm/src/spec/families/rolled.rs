//! rolled: A's non-zeros in a device table walked by loops, not inlined. Rows are taken in blocks of `r`; each
//! block lists the columns any of its rows uses with `r` coefficients per column (zeros where a row lacks it),
//! so one load of B feeds `r` accumulators. The source depends only on (r, vec, precision, β): it compiles once
//! for any A, and N, ldb and ldc are read from a uniform at run time.

use std::fmt::Write;

use bespoke_gpu::GRID_WGSL;

use crate::spec::emit::Emit;
use crate::spec::layout::{Layout, RowTerms};
use crate::spec::variant::Beta;

/// Bytes of the `Params` uniform: nv, ldb, ldc (vector units), blocks, rows, c_row0, two pads.
pub(crate) const PARAMS_WORDS: usize = 8;

/// One launch's table: `tab` = block offsets (blocks + 1 of them) then one column per entry (relative to the
/// launch's K slice); `coef` = `r` coefficients per entry, row-major within the block.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct RolledTable {
    pub blocks: usize,
    pub tab: Vec<u32>,
    pub coef: Vec<f64>,
}

/// The table for `layout`'s rows and K slice in blocks of `r` rows.
pub(crate) fn rolled_table(a_rows: &[RowTerms], layout: &Layout, r: usize) -> RolledTable {
    let rows: Vec<usize> = layout.rows.clone().collect();
    let blocks = rows.len().div_ceil(r);
    let mut offsets = Vec::with_capacity(blocks + 1);
    let (mut cols, mut coef) = (Vec::new(), Vec::new());
    for blk in rows.chunks(r) {
        offsets.push(cols.len() as u32);
        let mut used: Vec<usize> = blk
            .iter()
            .flat_map(|&i| layout.terms(a_rows, i).into_iter().map(|(p, _)| p))
            .collect();
        used.sort_unstable();
        used.dedup();
        for p in used {
            cols.push((p - layout.ks.start) as u32);
            for j in 0..r {
                let v = blk
                    .get(j)
                    .and_then(|&i| a_rows[i].iter().find(|(q, _)| *q == p))
                    .map_or(0.0, |(_, v)| *v);
                coef.push(v);
            }
        }
    }
    offsets.push(cols.len() as u32);
    offsets.extend(cols);
    RolledTable {
        blocks,
        tab: offsets,
        coef,
    }
}

/// The rolled kernel's WGSL. Bindings: 0 B (the launch's K slice), 1 C (its row block), 2 the table, 3 the
/// coefficients, 4 the parameters.
pub(crate) fn rolled(e: &mut Emit<'_>) {
    let vt = e.vt();
    let t = e.dtype.wgsl();
    let r = e.variant.split as usize;
    let _ = writeln!(
        e.out,
        "// bespoke-mm {} {}: beta = {}; A's non-zeros from a table, N, ldb and ldc at run time",
        e.variant.name(),
        e.dtype,
        e.layout.beta.value()
    );
    e.out += "// rolled: per block of rows, one load of B per used column feeds every row's accumulator\n";
    e.out.push_str(GRID_WGSL);
    let _ = write!(
        e.out,
        "struct Params {{ nv: u32, ldb: u32, ldc: u32, blocks: u32, rows: u32, c_row0: u32, pad0: u32, pad1: u32 }}
@group(0) @binding(0) var<storage, read> b0: array<{vt}>;
@group(0) @binding(1) var<storage, read_write> c0: array<{vt}>;
@group(0) @binding(2) var<storage, read> tab: array<u32>;
@group(0) @binding(3) var<storage, read> coef: array<{t}>;
@group(0) @binding(4) var<uniform> P: Params;
"
    );
    e.open_main();
    e.out += "    if (col >= P.nv) {\n        return;\n    }\n";
    e.out += "    let cols = P.blocks + 1u;\n";
    e.out += "    for (var blk = 0u; blk < P.blocks; blk++) {\n";
    let zero = e.lit(0.0);
    for j in 0..r {
        let _ = writeln!(e.out, "        var s{j} = {zero};");
    }
    let _ = writeln!(
        e.out,
        "        for (var q = tab[blk]; q < tab[blk + 1u]; q++) {{
            let x = b0[tab[cols + q] * P.ldb + col];
            let a = q * {r}u;"
    );
    for j in 0..r {
        let a = if j == 0 {
            "coef[a]".to_owned()
        } else {
            format!("coef[a + {j}u]")
        };
        let a = if e.variant.vec > 1 {
            format!("{vt}({a})")
        } else {
            a
        };
        let _ = writeln!(e.out, "            s{j} = fma({a}, x, s{j});");
    }
    e.out += "        }\n";
    let _ = writeln!(e.out, "        let row = blk * {r}u;");
    for j in 0..r {
        let c = format!("c0[(P.c_row0 + row + {j}u) * P.ldc + col]");
        let stmt = match e.layout.beta {
            Beta::Zero => format!("{c} = s{j};"),
            Beta::One => format!("{c} = s{j} + {c};"),
            Beta::Other(b) => format!("{c} = fma({c}, {}, s{j});", e.lit(b)),
        };
        if j == 0 {
            // A block always has its first row.
            let _ = writeln!(e.out, "        {stmt}");
        } else {
            let _ = writeln!(e.out, "        if (row + {j}u < P.rows) {{ {stmt} }}");
        }
    }
    e.out += "    }\n}\n";
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::variant::Beta;

    #[test]
    fn blocks_list_the_union_of_columns_with_zero_fill() {
        // 3×6, rows in blocks of 2: block 0 = rows 0, 1 (row 1 empty), block 1 = row 2 alone.
        let rows: Vec<RowTerms> = vec![vec![(0, 1.0), (5, 2.0)], vec![(5, 3.0)], vec![(3, -1.0)]];
        let l = Layout::single(&rows, 6, Beta::Zero, 8, 8, 8).unwrap();
        let t = rolled_table(&rows, &l, 2);
        assert_eq!(t.blocks, 2);
        assert_eq!(t.tab, vec![0, 2, 3, 0, 5, 3]);
        assert_eq!(t.coef, vec![1.0, 0.0, 2.0, 3.0, -1.0, 0.0]);
    }
}
