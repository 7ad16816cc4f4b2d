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

/// A cost taken out of the tiled kernel, to measure what it costs (`mm dense-bench --ablate`; docs/dense-model.md).
/// An ablated kernel computes something else than A·B, by design: [`ablated_reference`] is what.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Ablation {
    /// The kernel itself.
    #[default]
    None,
    /// The first K tile staged into workgroup memory, then every K tile's FMAs on it: no loads from A and B after
    /// the first tile (nor double buffering's prefetch), one barrier per tile. What the FMAs, the fragment loads
    /// from workgroup memory and the loop cost alone.
    StageOnce,
    /// Every k step of a tile reads the fragments of the tile's first step (the loads loop-invariant within a
    /// tile): the staging as in the kernel, the fragment loads from workgroup memory once per tile, not per step.
    FragmentsOnce,
}

impl Ablation {
    /// The name `--ablate` takes and kernel ids carry.
    pub fn name(self) -> &'static str {
        match self {
            Self::None => "none",
            Self::StageOnce => "stage-once",
            Self::FragmentsOnce => "fragments-once",
        }
    }
}

impl std::str::FromStr for Ablation {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        [Self::None, Self::StageOnce, Self::FragmentsOnce]
            .into_iter()
            .find(|a| a.name() == s)
            .ok_or_else(|| format!("unknown ablation {s:?}: none, stage-once or fragments-once"))
    }
}

/// What a kernel ablated by `ablation` writes to C (β = 0, α = 1, one K pass) for row-major A (m × k) and B
/// (k × n): for the plain kernel A·B; `StageOnce`, every K tile's product taken with the first tile's A and B;
/// `FragmentsOnce`, each tile's first k step counted `kc` times. Padding past K counts as zeros, as the kernel
/// stages it.
pub fn ablated_reference(
    ablation: Ablation,
    kc: usize,
    a: &[f64],
    b: &[f64],
    (m, n, k): (usize, usize, usize),
) -> Vec<f64> {
    let tiles = k.div_ceil(kc);
    let at = |i: usize, kk: usize| if kk < k { a[i * k + kk] } else { 0.0 };
    let bt = |kk: usize, j: usize| if kk < k { b[kk * n + j] } else { 0.0 };
    let mut c = vec![0.0; m * n];
    for i in 0..m {
        for j in 0..n {
            let mut s = 0.0;
            for t in 0..tiles {
                for kk in 0..kc {
                    let src = match ablation {
                        Ablation::None => t * kc + kk,
                        Ablation::StageOnce => kk,
                        Ablation::FragmentsOnce => t * kc,
                    };
                    s += at(i, src) * bt(src, j);
                }
            }
            c[i * n + j] = s;
        }
    }
    c
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
    ablated_wgsl(p, dtype, epi, Ablation::None)
}

/// The tiled kernel with `ablation`'s cost taken out ([`Ablation::None`]: [`dense_wgsl`]).
pub fn ablated_wgsl(p: &DenseParams, dtype: DType, epi: Epilogue, ablation: Ablation) -> String {
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
        "// bespoke dense GEMM {} {t} {epi:?}: C = alpha*A*B + beta*C{}",
        p.key(),
        match ablation {
            Ablation::None => String::new(),
            a => format!(" (ablated: {}, not A*B)", a.name()),
        }
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
{lanes}    let row0 = w.y * BM;
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
        lanes = lane_ids(p),
    );
    s += &accumulators(p, dtype);
    // One staged element `e` of the tile at k0 = `kt`: A (vec4 of 4 rows, or a scalar) and B (a vector), loaded into
    // `v`, and stored at buffer offset `off`.
    let load_a = |kt: &str| {
        if a4 {
            // The four rows spelled out, each into a constant component: no loop, no dynamic index into `v`
            // (which a driver that does not unroll the loop first keeps in memory).
            let rows: String = ["x", "y", "z", "w"]
                .iter()
                .enumerate()
                .map(|(q, c)| {
                    let (row, at) = match q {
                        0 => ("r".to_string(), "ai".to_string()),
                        1 => ("r + 1u".into(), "ai + p.lda".into()),
                        _ => (format!("r + {q}u"), format!("ai + {q}u * p.lda")),
                    };
                    format!(
                        "
                if {row} < p.m {{ v.{c} = a[{at}]; }}"
                    )
                })
                .collect();
            format!(
                "let mm4 = e / KC; let kk = e % KC; let r = row0 + mm4 * 4u; let kg = {kt} + kk;
            v = vec4<{t}>();
            if kg < kend {{
                let ai = r * p.lda + p.a_col0 + kg;{rows}
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
    let step_k = if ablation == Ablation::FragmentsOnce {
        "0u"
    } else {
        "kk"
    };
    let steps = k_steps(p.kc, p.unroll, &register_step(p, dtype, step_k));
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
    if ablation == Ablation::StageOnce {
        // The first tile staged as the kernel stages it, then every tile's steps on it.
        let _ = write!(
            s,
            "    if kbeg < kend {{
        let k0 = kbeg;
{direct}    }}
    workgroupBarrier();
    for (var k0 = kbeg; k0 < kend; k0 += KC) {{
        let ao = 0u;
        let bo = 0u;
{steps}        workgroupBarrier();
    }}
",
        );
    } else if p.stages < 2 {
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

/// WGSL binding `tx` and `ty`, the column and row of the register tile this invocation takes in its workgroup, as
/// `p.lanes` lays them ([`DenseParams::lane_position`] is the same arithmetic in Rust).
pub fn lane_ids(p: &DenseParams) -> String {
    let Some((w, h)) = p.paired_group() else {
        return "    let tx = lid3.x;\n    let ty = lid3.y;\n".into();
    };
    let across = p.wgn / w;
    let (col, row) = if across == 1 {
        (String::new(), format!("group * {h}u + "))
    } else {
        (
            format!("(group % {across}u) * {w}u + "),
            format!("(group / {across}u) * {h}u + "),
        )
    };
    let deeper = if h == 2 {
        String::new()
    } else {
        format!(" + 2u * ((lane >> 1u) / {w}u)")
    };
    format!(
        "    // Lanes paired (DenseParams::lanes): 32 invocations cover {h} rows × {w} columns of tiles, lanes l and l ^ 1
    // in one column (one B address a k step), l and l ^ 2 in one row (one A address).
    let lane = lid % 32u;
    let group = lid / 32u;
    let tx = {col}(lane >> 1u) % {w}u;
    let ty = {row}(lane & 1u){deeper};
"
    )
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

/// One k step of the register tile: its A and B values from workgroup memory (`As`, `Bs`, at step `k`: `kk`, or
/// a constant for an ablation; constants `BM`, `BNV`; invocation `tx`, `ty`) and tm × tn/vec FMAs.
fn register_step(p: &DenseParams, dtype: DType, k: &str) -> String {
    let vt = vector_type(p, dtype);
    let nv = p.tn / p.vec;
    let mut s = String::new();
    if p.a_vec4() {
        for i4 in 0..p.tm / 4 {
            let _ = writeln!(
                s,
                "            let a4_{i4} = As[ao + {k} * AROW + ty * {}u + {i4}u];",
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
                "            let a_{i} = {vt}(As[ao + {k} * AROW + ty + {}u]);",
                i * p.wgm
            );
        }
    }
    for j in 0..nv {
        let _ = writeln!(
            s,
            "            let b_{j} = Bs[bo + {k} * BNV + tx + {}u];",
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

/// Sums the split-K slices: `C = α·Σ_z W[z] + β·C`, one invocation per vector of C.
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
