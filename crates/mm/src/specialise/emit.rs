//! Pieces every specialised kernel is written from: bindings, B and C addressing, exact literals, dot products
//! (plain or with repeated coefficients folded) and the β epilogue.

use std::fmt::Write;

use bespoke_gpu::GRID_WGSL;

use super::layout::Layout;
use super::variant::{Beta, Variant};
use crate::dtype::DType;

/// How a dot product meets its accumulator.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Acc {
    /// `var acc = ...` (a fresh variable).
    Declare,
    /// `acc = ...` (a declared variable, first contribution).
    Assign,
    /// `acc = fma(..., acc)`.
    Add,
}

/// Accumulator bytes per invocation the scatter kernels may keep live (128 f32, 64 f64): past it, spills.
pub(crate) const REG_BUDGET_BYTES: usize = 512;

/// The rows one launch writes, each with its terms inside the launch's K slice.
pub(crate) type Work = Vec<(usize, Vec<(usize, f64)>)>;

/// Writes one kernel for one layout.
pub(crate) struct Emit<'a> {
    pub dtype: DType,
    pub variant: Variant,
    pub layout: &'a Layout,
    pub out: String,
}

impl<'a> Emit<'a> {
    pub fn new(dtype: DType, variant: Variant, layout: &'a Layout) -> Self {
        Self {
            dtype,
            variant,
            layout,
            out: String::new(),
        }
    }

    /// `f32`, `vec4<f64>`, ...
    pub fn vt(&self) -> String {
        match self.variant.vec {
            1 => self.dtype.wgsl().to_owned(),
            v => format!("vec{v}<{}>", self.dtype.wgsl()),
        }
    }

    /// An exact literal of the element type, splat to the vector width.
    pub fn lit(&self, v: f64) -> String {
        let l = self.dtype.literal(v);
        match self.variant.vec {
            1 => l,
            _ => format!("{}({l})", self.vt()),
        }
    }

    fn vec(&self) -> usize {
        self.variant.vec as usize
    }

    /// Columns of C in vector units.
    pub fn nv(&self) -> usize {
        self.layout.n / self.vec()
    }

    /// B[p][col] where `col` is a WGSL expression in vector units.
    pub fn b_at(&self, p: usize, col: &str) -> String {
        let (j, blk) = self
            .layout
            .b_blocks
            .iter()
            .enumerate()
            .find(|(_, b)| b.contains(&p))
            .unwrap_or_else(|| unreachable!("row {p} of B is in no bound block"));
        let off = (p - blk.start) * self.layout.ldb / self.vec();
        format!("b{j}[{col} + {off}u]")
    }

    /// C[i][col].
    pub fn c_at(&self, i: usize, col: &str) -> String {
        let (j, blk) = self
            .layout
            .c_blocks
            .iter()
            .enumerate()
            .find(|(_, b)| b.contains(&i))
            .unwrap_or_else(|| unreachable!("row {i} of C is in no bound block"));
        let off = (i - blk.start) * self.layout.ldc / self.vec();
        format!("c{j}[{col} + {off}u]")
    }

    /// Grid prelude, bindings and the `NV` constant.
    pub fn header(&mut self, what: &str) {
        self.header_named(&format!("{} {}", self.variant.name(), self.dtype), what);
    }

    /// [`header`](Self::header) under another kernel's title (`bespoke-mm <title>: rows …`).
    pub fn header_named(&mut self, title: &str, what: &str) {
        let vt = self.vt();
        let l = self.layout;
        let _ = writeln!(
            self.out,
            "// bespoke-mm {title}: rows {} of C, K slice {}..{}, N = {}, ldb = {}, ldc = {}, beta = {}",
            l.rows,
            l.ks.start,
            l.ks.end,
            l.n,
            l.ldb,
            l.ldc,
            l.beta.value()
        );
        let _ = writeln!(self.out, "// {what}");
        self.out.push_str(GRID_WGSL);
        for j in 0..l.b_blocks.len() {
            let _ = writeln!(
                self.out,
                "@group(0) @binding({j}) var<storage, read> b{j}: array<{vt}>;"
            );
        }
        for j in 0..l.c_blocks.len() {
            let _ = writeln!(
                self.out,
                "@group(0) @binding({}) var<storage, read_write> c{j}: array<{vt}>;",
                l.b_blocks.len() + j
            );
        }
        let _ = writeln!(self.out, "const NV: u32 = {}u;", self.nv());
    }

    /// The entry point's opening: `col` (this invocation's column group).
    pub fn open_main(&mut self) {
        let (x, y) = self.variant.workgroup();
        let _ = writeln!(
            self.out,
            "\n@compute @workgroup_size({x}, {y}, 1)\nfn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {{"
        );
        let _ = writeln!(
            self.out,
            "    let col = bespoke_workgroup(wid).x * {x}u + lid.x;"
        );
    }

    /// Statements that put the dot product of `terms` with the values `load(p)` into `acc` (declaring it,
    /// assigning it or adding to it, per `mode`). With `fold`, terms sharing a coefficient magnitude are summed first
    /// (a·b₁ − a·b₂ → a·(b₁ − b₂)), one multiply per distinct magnitude.
    pub fn dot(
        &self,
        indent: &str,
        acc: &str,
        mode: Acc,
        terms: &[(usize, f64)],
        load: &dyn Fn(usize) -> String,
    ) -> String {
        let mut s = String::new();
        let groups: Vec<(f64, Vec<(usize, bool)>)> = if self.variant.fold {
            let mut g: Vec<(f64, Vec<(usize, bool)>)> = Vec::new();
            for &(p, a) in terms {
                match g.iter_mut().find(|(c, _)| c.abs() == a.abs()) {
                    Some((c, list)) => list.push((p, *c == a)),
                    None => g.push((a, vec![(p, true)])),
                }
            }
            g
        } else {
            terms.iter().map(|&(p, a)| (a, vec![(p, true)])).collect()
        };
        for (gi, (coef, list)) in groups.iter().enumerate() {
            let mut sum = String::new();
            for (t, (p, plus)) in list.iter().enumerate() {
                match (t, plus) {
                    (0, _) => sum += &load(*p),
                    (_, true) => sum += &format!(" + {}", load(*p)),
                    (_, false) => sum += &format!(" - {}", load(*p)),
                }
            }
            if list.len() > 1 {
                sum = format!("({sum})");
            }
            let c = self.lit(*coef);
            let line = match (gi, mode) {
                (0, Acc::Declare) => format!("var {acc} = {sum} * {c};"),
                (0, Acc::Assign) => format!("{acc} = {sum} * {c};"),
                _ => format!("{acc} = fma({sum}, {c}, {acc});"),
            };
            let _ = writeln!(s, "{indent}{line}");
        }
        s
    }

    /// The store of row `i` at column `col`: `value` is the row's A·B (None: no terms), combined with β.
    pub fn store(&self, indent: &str, i: usize, col: &str, value: Option<&str>) -> String {
        match self.store_to(&self.c_at(i, col), value) {
            Some(stmt) => format!("{indent}{stmt}\n"),
            None => String::new(),
        }
    }

    /// The statement storing `value` (None: no terms) into the element of C that `c` names, combined with β;
    /// None where there is nothing to store (β = 1, no terms).
    pub fn store_to(&self, c: &str, value: Option<&str>) -> Option<String> {
        let zero = self.lit(0.0);
        if self.variant.touch && self.layout.beta == Beta::Zero {
            // `-touch`: C's old value is read and kept out of the result. The select's condition is false on
            // every launch (the grid has at least one workgroup along z) but no compiler can know it, and it
            // depends on the value read, so the load is neither dropped nor moved past the store.
            let x = if self.vec() > 1 { "t.x" } else { "t" };
            let v = value.unwrap_or(&zero);
            return Some(format!(
                "{{ let t = {c}; {c} = select({v}, t, (bespoke_grid.size.z == 0u) & ({x} == {})); }}",
                self.dtype.literal(0.0)
            ));
        }
        Some(match (self.layout.beta, value) {
            (Beta::Zero, Some(v)) => format!("{c} = {v};"),
            (Beta::Zero, None) => format!("{c} = {zero};"),
            (Beta::One, Some(v)) => format!("{c} = {v} + {c};"),
            (Beta::One, None) => return None,
            (Beta::Other(b), Some(v)) => format!("{c} = fma({c}, {}, {v});", self.lit(b)),
            (Beta::Other(b), None) => format!("{c} = {c} * {};", self.lit(b)),
        })
    }
}

/// The rows of B the work reads, ascending, each with how many terms use it.
pub(crate) fn used_rows(work: &Work) -> Vec<(usize, usize)> {
    let mut ps: Vec<usize> = work
        .iter()
        .flat_map(|(_, t)| t.iter().map(|(p, _)| *p))
        .collect();
    ps.sort_unstable();
    let mut out: Vec<(usize, usize)> = Vec::new();
    for p in ps {
        match out.last_mut() {
            Some((q, n)) if *q == p => *n += 1,
            _ => out.push((p, 1)),
        }
    }
    out
}

/// Balanced partition of `weights` into `parts` bins by longest-processing-time: bins of item indices, each in
/// ascending order.
pub(crate) fn deal(weights: &[usize], parts: usize) -> Vec<Vec<usize>> {
    let mut order: Vec<usize> = (0..weights.len()).collect();
    order.sort_by_key(|&i| std::cmp::Reverse(weights[i].max(1)));
    let mut bins: Vec<(usize, Vec<usize>)> = vec![(0, Vec::new()); parts];
    for i in order {
        let b = bins
            .iter_mut()
            .min_by_key(|(load, items)| (*load, items.len()))
            .unwrap_or_else(|| unreachable!("parts > 0"));
        b.0 += weights[i].max(1);
        b.1.push(i);
    }
    bins.into_iter()
        .map(|(_, mut v)| {
            v.sort_unstable();
            v
        })
        .collect()
}

/// Contiguous partition of `weights` into at most `parts` slices of about equal total weight.
pub(crate) fn slices(weights: &[usize], parts: usize) -> Vec<std::ops::Range<usize>> {
    let total: usize = weights.iter().sum();
    let mut out = Vec::new();
    let (mut start, mut acc) = (0, 0);
    for (i, w) in weights.iter().enumerate() {
        acc += w;
        // Close a slice once it reaches its share of the total.
        if acc * parts >= total * (out.len() + 1) && out.len() + 1 < parts {
            out.push(start..i + 1);
            start = i + 1;
        }
    }
    if start < weights.len() {
        out.push(start..weights.len());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deal_balances_and_slices_cover() {
        let bins = deal(&[5, 1, 1, 1, 1, 1], 2);
        assert_eq!(bins, vec![vec![0], vec![1, 2, 3, 4, 5]]);
        let s = slices(&[1, 1, 1, 1, 4], 2);
        assert_eq!(s, vec![0..4, 4..5]);
        assert_eq!(slices(&[3], 4), vec![0..1]);
        let s = slices(&[1; 10], 4);
        assert_eq!(s.iter().map(|r| r.len()).sum::<usize>(), 10);
        assert_eq!(s.len(), 4);
    }
}
