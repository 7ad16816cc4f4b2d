//! WGSL text of the dense GEMM kernels.

use std::fmt::Write;

use bespoke_gpu::GRID_WGSL;

use super::params::DenseParams;
use crate::dtype::DType;

/// How the result is combined with C.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Epilogue {
    /// C = α·AB (C is never read).
    BetaZero,
    /// C = α·AB + C.
    BetaOne,
    /// C = α·AB + β·C.
    Beta,
    /// Write α-free partial sums into a split-K workspace, slice `z` at `z·m·ldc`.
    Partial,
}

impl Epilogue {
    pub fn for_beta(beta: f64) -> Self {
        if beta == 0.0 {
            Self::BetaZero
        } else if beta == 1.0 {
            Self::BetaOne
        } else {
            Self::Beta
        }
    }
}

/// The uniform block every dense kernel reads (u32 fields first, so f32 and f64 share one layout rule).
/// `ldb`, `ldc` are in vectors of `vec` elements. `a_col0` offsets A's columns (K blocks).
pub(crate) fn params_struct(t: &str) -> String {
    format!(
        "struct Params {{
    m: u32, n: u32, k: u32, lda: u32,
    ldb: u32, ldc: u32, k_per_split: u32, a_col0: u32,
    alpha: {t}, beta: {t},
}}
"
    )
}

/// The tiled GEMM kernel for `p`, `dtype` and `epi`.
pub fn dense_wgsl(p: &DenseParams, dtype: DType, epi: Epilogue) -> String {
    let t = dtype.wgsl();
    let vt = vector_type(p, dtype);
    let (bm, nv, bnv, kc, nt) = (
        p.bm(),
        p.tn / p.vec,
        p.wgn * (p.tn / p.vec),
        p.kc,
        p.threads(),
    );
    let (wgm, wgn) = (p.wgm, p.wgn);
    // Staged A row length and element count, in `at` units.
    let (arow, alen) = if p.a_vec4() {
        (p.a_row() / 4, kc * bm / 4)
    } else {
        (p.a_row(), kc * bm)
    };
    // Register tiles of 4+ rows take their A column as vec4 loads of 4 consecutive rows (the invocation's rows are
    // then contiguous, ty·tm + i); narrower tiles load scalars from rows strided by wgm.
    let a4 = p.a_vec4();
    let at = if a4 {
        format!("vec4<{t}>")
    } else {
        t.to_string()
    };
    let row_of = |i: u32| {
        if a4 {
            format!("ty * {}u + {i}u", p.tm)
        } else {
            format!("ty + {}u", i * wgm)
        }
    };
    let mut s = String::with_capacity(8192);
    let _ = writeln!(
        s,
        "// bespoke dense GEMM {} {t} {epi:?}: C = alpha*A*B + beta*C",
        p.key()
    );
    s += GRID_WGSL;
    s += &params_struct(t);
    let _ = write!(
        s,
        "
@group(0) @binding(0) var<storage, read> a: array<{t}>;
@group(0) @binding(1) var<storage, read> b: array<{vt}>;
@group(0) @binding(2) var<storage, read_write> c: array<{vt}>;
@group(0) @binding(3) var<uniform> p: Params;

const BM: u32 = {bm}u;
const BNV: u32 = {bnv}u;
const KC: u32 = {kc}u;
const NT: u32 = {nt}u;
// Staged A, k-major: row kk holds the block's rows (as vec4 of 4 rows, or scalars), padded by one.
const AROW: u32 = {arow}u;
const ALEN: u32 = {alen}u;
const ALEN_PADDED: u32 = {alen_padded}u;
const BLEN: u32 = {blen}u;
var<workgroup> As: array<{at}, {as_len}>;
var<workgroup> Bs: array<{vt}, {bs_len}>;

@compute @workgroup_size({wgn}, {wgm}, 1)
fn main(@builtin(workgroup_id) wid: vec3<u32>,
        @builtin(local_invocation_id) lid3: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {{
    let w = bespoke_workgroup(wid);
    let tx = lid3.x;
    let ty = lid3.y;
    let row0 = w.y * BM;
    let colv0 = w.x * BNV;
    let nv = p.n / {vec}u;
    let kbeg = w.z * p.k_per_split;
    let kend = min(p.k, kbeg + p.k_per_split);
",
        arow = arow,
        alen = alen,
        alen_padded = kc * arow,
        blen = kc * bnv,
        as_len = p.stages * kc * arow,
        bs_len = p.stages * kc * bnv,
        vec = p.vec,
    );
    s += &accumulators(p, dtype);
    // One staged element `e` of the tile at k0 = `kt`: A (vec4 of 4 rows, or a scalar) and B (a vector), loaded into
    // `v`, and stored at buffer offset `off`.
    let load_a = |kt: &str| {
        if a4 {
            format!(
                "let mm4 = e / KC; let kk = e % KC; let r = row0 + mm4 * 4u; let kg = {kt} + kk;
            v = vec4<{t}>();
            if kg < kend {{
                for (var q = 0u; q < 4u; q++) {{
                    if r + q < p.m {{ v[q] = a[(r + q) * p.lda + p.a_col0 + kg]; }}
                }}
            }}"
            )
        } else {
            format!(
                "let mm = e / KC; let kk = e % KC; let r = row0 + mm; let kg = {kt} + kk;
            v = {t}();
            if r < p.m && kg < kend {{ v = a[r * p.lda + p.a_col0 + kg]; }}"
            )
        }
    };
    // Element e is (row group e / KC, k e % KC) in both layouts.
    let store_a = |off: &str| format!("As[{off} + (e % KC) * AROW + e / KC] = v;");
    let load_b = |kt: &str| {
        format!(
            "let kk = e / BNV; let nn = e % BNV; let kg = {kt} + kk; let cv = colv0 + nn;
            v = {vt}();
            if kg < kend && cv < nv {{ v = b[kg * p.ldb + cv]; }}"
        )
    };
    let store_b = |off: &str| format!("Bs[{off} + e] = v;");
    let steps = k_steps(p.kc, p.unroll, &register_step(p, dtype));
    // The tile at k0 staged straight into buffer 0 (every tile when single-buffered, the first when double).
    let direct = format!(
        "        for (var e = lid; e < ALEN; e += NT) {{
            var v: {at};
            {la}
            {sa}
        }}
        for (var e = lid; e < BLEN; e += NT) {{
            var v: {vt};
            {lb}
            {sb}
        }}
",
        la = load_a("k0"),
        sa = store_a("0u"),
        lb = load_b("k0"),
        sb = store_b("0u"),
    );
    if p.stages < 2 {
        let _ = write!(
            s,
            "    for (var k0 = kbeg; k0 < kend; k0 += KC) {{
{direct}        workgroupBarrier();
        let ao = 0u;
        let bo = 0u;
{steps}        workgroupBarrier();
    }}
",
        );
    } else {
        // Double-buffered: the first tile is staged directly; then each tile's FMAs run while the next tile's
        // values travel into registers, stored into the other buffer after the FMAs, one barrier per tile.
        let (la_slots, lb_slots) = p.prefetch_slots();
        let mut prefetch = String::new();
        let mut commit = String::new();
        // Per operand: its slots, register name, type, staged length, and its load and store at the next tile.
        let operands = [
            (la_slots, "pa", &at, "ALEN", load_a("kn"), store_a("nao")),
            (lb_slots, "pb", &vt, "BLEN", load_b("kn"), store_b("nbo")),
        ];
        for (slots, reg, ty, len, load, store) in operands {
            for q in 0..slots {
                let o = q * nt;
                let _ = writeln!(s, "    var {reg}_{q}: {ty};");
                let _ = writeln!(
                    prefetch,
                    "            {{ let e = lid + {o}u; if e < {len} {{ var v: {ty}; {load} {reg}_{q} = v; }} }}"
                );
                let _ = writeln!(
                    commit,
                    "            {{ let e = lid + {o}u; if e < {len} {{ let v = {reg}_{q}; {store} }} }}"
                );
            }
        }
        let _ = write!(
            s,
            "    if kbeg < kend {{
        let k0 = kbeg;
{direct}    }}
    workgroupBarrier();
    var buf = 0u;
    for (var k0 = kbeg; k0 < kend; k0 += KC) {{
        let kn = k0 + KC;
        let more = kn < kend;
        if more {{
{prefetch}        }}
        let ao = buf * ALEN_PADDED;
        let bo = buf * BLEN;
{steps}        if more {{
            let nao = (1u - buf) * ALEN_PADDED;
            let nbo = (1u - buf) * BLEN;
{commit}        }}
        workgroupBarrier();
        buf = 1u - buf;
    }}
",
        );
    }
    for i in 0..p.tm {
        for j in 0..nv {
            let _ = writeln!(
                s,
                "    {{
        let r = row0 + {ri};
        let cv = colv0 + tx + {cj}u;
        if r < p.m && cv < nv {{
            let idx = r * p.ldc + cv;
            {store}
        }}
    }}",
                ri = row_of(i),
                cj = j * wgn,
                store = match epi {
                    Epilogue::BetaZero => format!("c[idx] = p.alpha * acc_{i}_{j};"),
                    Epilogue::BetaOne =>
                        format!("c[idx] = fma({vt}(p.alpha), acc_{i}_{j}, c[idx]);"),
                    Epilogue::Beta =>
                        format!("c[idx] = fma({vt}(p.alpha), acc_{i}_{j}, p.beta * c[idx]);"),
                    Epilogue::Partial => format!("c[w.z * p.m * p.ldc + idx] = acc_{i}_{j};"),
                }
            );
        }
    }
    s += "}\n";
    s
}

/// The `kc` steps of a K tile, each `step` (which reads the step's index as `kk`): a loop to the shader's constant
/// `KC` (= `kc`), or (`unroll`) the steps spelled out one after another, `kk` a constant in each.
pub(crate) fn k_steps(kc: u32, unroll: bool, step: &str) -> String {
    if !unroll {
        return format!("        for (var kk = 0u; kk < KC; kk++) {{\n{step}        }}\n");
    }
    let mut s = String::new();
    for k in 0..kc {
        let _ = write!(
            s,
            "        {{\n            let kk = {k}u;\n{step}        }}\n"
        );
    }
    s
}

/// The `vt` of a register tile's B loads and accumulators.
fn vector_type(p: &DenseParams, dtype: DType) -> String {
    let t = dtype.wgsl();
    if p.vec == 1 {
        t.to_string()
    } else {
        format!("vec{}<{t}>", p.vec)
    }
}

/// The register tile's accumulators `acc_i_j`, zeroed.
fn accumulators(p: &DenseParams, dtype: DType) -> String {
    let vt = vector_type(p, dtype);
    let mut s = String::new();
    for i in 0..p.tm {
        for j in 0..p.tn / p.vec {
            let _ = writeln!(s, "    var acc_{i}_{j} = {vt}();");
        }
    }
    s
}

/// One k step of the register tile: its A and B values from workgroup memory (`As`, `Bs`, at `kk`; constants
/// `BM`, `BNV`; invocation `tx`, `ty`) and tm × tn/vec FMAs.
fn register_step(p: &DenseParams, dtype: DType) -> String {
    let vt = vector_type(p, dtype);
    let nv = p.tn / p.vec;
    let mut s = String::new();
    if p.a_vec4() {
        for i4 in 0..p.tm / 4 {
            let _ = writeln!(
                s,
                "            let a4_{i4} = As[ao + kk * AROW + ty * {}u + {i4}u];",
                p.tm / 4
            );
            for (q, c) in ["x", "y", "z", "w"].into_iter().enumerate() {
                let _ = writeln!(
                    s,
                    "            let a_{} = {vt}(a4_{i4}.{c});",
                    i4 * 4 + q as u32
                );
            }
        }
    } else {
        for i in 0..p.tm {
            let _ = writeln!(
                s,
                "            let a_{i} = {vt}(As[ao + kk * AROW + ty + {}u]);",
                i * p.wgm
            );
        }
    }
    for j in 0..nv {
        let _ = writeln!(
            s,
            "            let b_{j} = Bs[bo + kk * BNV + tx + {}u];",
            j * p.wgn
        );
    }
    for i in 0..p.tm {
        for j in 0..nv {
            let _ = writeln!(
                s,
                "            acc_{i}_{j} = fma(a_{i}, b_{j}, acc_{i}_{j});"
            );
        }
    }
    s
}

/// Sums the split-K slices: C = α·Σ_z W[z] + β·C, one invocation per vector of C.
pub fn splitk_reduce_wgsl(dtype: DType, vec: u32, splits: u32, epi: Epilogue) -> String {
    let t = dtype.wgsl();
    let vt = if vec == 1 {
        t.to_string()
    } else {
        format!("vec{vec}<{t}>")
    };
    let mut s = format!("// bespoke split-K reduction, {splits} slices, {t} x{vec}, {epi:?}\n");
    s += GRID_WGSL;
    s += &params_struct(t);
    let _ = write!(
        s,
        "
@group(0) @binding(0) var<storage, read> ws: array<{vt}>;
@group(0) @binding(1) var<storage, read_write> c: array<{vt}>;
@group(0) @binding(2) var<uniform> p: Params;

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {{
    let nv = p.n / {vec}u;
    let i = bespoke_workgroup_linear(wid) * 256u + lid;
    if i >= p.m * nv {{ return; }}
    let r = i / nv;
    let idx = r * p.ldc + i % nv;
    var acc = {vt}();
    for (var z = 0u; z < {splits}u; z++) {{
        acc += ws[z * p.m * p.ldc + idx];
    }}
    {store}
}}
",
        store = match epi {
            Epilogue::BetaZero | Epilogue::Partial => "c[idx] = p.alpha * acc;".to_string(),
            Epilogue::BetaOne => format!("c[idx] = fma({vt}(p.alpha), acc, c[idx]);"),
            Epilogue::Beta => format!("c[idx] = fma({vt}(p.alpha), acc, p.beta * c[idx]);"),
        }
    );
    s
}
