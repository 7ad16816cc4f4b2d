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
        as_len = if a4 { kc * bm / 4 } else { kc * bm },
        bs_len = kc * bnv,
        vec = p.vec,
    );
    s += &accumulators(p, dtype);
    let stage_a = if a4 {
        format!(
            "        for (var e = lid; e < BM / 4u * KC; e += NT) {{
            let mm4 = e / KC;
            let kk = e % KC;
            let r = row0 + mm4 * 4u;
            let kg = k0 + kk;
            var v = vec4<{t}>();
            if kg < kend {{
                for (var q = 0u; q < 4u; q++) {{
                    if r + q < p.m {{ v[q] = a[(r + q) * p.lda + p.a_col0 + kg]; }}
                }}
            }}
            As[kk * (BM / 4u) + mm4] = v;
        }}
"
        )
    } else {
        format!(
            "        for (var e = lid; e < BM * KC; e += NT) {{
            let mm = e / KC;
            let kk = e % KC;
            let r = row0 + mm;
            let kg = k0 + kk;
            var v = {t}();
            if r < p.m && kg < kend {{ v = a[r * p.lda + p.a_col0 + kg]; }}
            As[kk * BM + mm] = v;
        }}
"
        )
    };
    let _ = write!(
        s,
        "    for (var k0 = kbeg; k0 < kend; k0 += KC) {{
{stage_a}        for (var e = lid; e < KC * BNV; e += NT) {{
            let kk = e / BNV;
            let nn = e % BNV;
            let kg = k0 + kk;
            let cv = colv0 + nn;
            var v = {vt}();
            if kg < kend && cv < nv {{ v = b[kg * p.ldb + cv]; }}
            Bs[kk * BNV + nn] = v;
        }}
        workgroupBarrier();
        for (var kk = 0u; kk < KC; kk++) {{
"
    );
    s += &register_step(p, dtype);
    s += "        }\n        workgroupBarrier();\n    }\n";
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
                "            let a4_{i4} = As[kk * (BM / 4u) + ty * {}u + {i4}u];",
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
                "            let a_{i} = {vt}(As[kk * BM + ty + {}u]);",
                i * p.wgm
            );
        }
    }
    for j in 0..nv {
        let _ = writeln!(
            s,
            "            let b_{j} = Bs[kk * BNV + tx + {}u];",
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
