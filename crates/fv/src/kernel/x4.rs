//! The four-tets-per-invocation gather kernel: [`Layout::SlotMajorX4`] (full indices) and
//! [`Layout::SlotMajorX4D16`] (16-bit offsets).

use std::fmt::Write as _;

use bespoke_gpu::GRID_WGSL;

use super::{D16_FAR_HALF, DType, Layout, Shape, padded4, quads_of};

/// Gather with four tets per invocation. Bindings: 0–3 values (vec4 = slot s of 4 tets); slot-major-x4: 4–7
/// indices (vec4 = slot s of 4 tets), slot-major-x4-d16: 4 the offsets (two vec4 for 4 tets,
/// [`super::d16_quads`]), 5 the far rows; then x as scalars (for the gathers), the same x as vec4s, y as vec4s.
/// x holds padded4(n) + 4 entries, the ghost at padded4(n). Only the groups of four that update `rows`
/// ([`quads_of`]) run: a rank's interior before its exchange, the rest after.
pub(super) fn gather_x4_wgsl(
    layout: Layout,
    dtype: DType,
    n: usize,
    dt: f64,
    rows: &std::ops::Range<usize>,
    shape: Shape,
    descending: bool,
) -> String {
    let d16 = layout == Layout::SlotMajorX4D16;
    let t = dtype.wgsl();
    let wg = shape.workgroup;
    let gather = if shape.no_gather {
        // The ablation: no neighbour read, the index still used (x[0], one address for all, keeps x bound).
        format!("vec4<{t}>(j & vec4<u32>(1u)) * x[0]")
    } else {
        format!("vec4<{t}>(x[j.x], x[j.y], x[j.z], x[j.w])")
    };
    let groups = padded4(n) / 4;
    // Slot k's neighbours of the invocation's four tets: their indices, or (the no-index ablation) tets
    // 4q + lane + k + 1, past n the ghost (at padded4(n), as the upload puts it), the binding read once at 0.
    let idx = |k: usize| match (shape.no_index, d16) {
        (true, false) => format!("nbr(q, {}u, i{k}[0])", k + 1),
        (true, true) => format!("nbr(q, {}u, dq[0] & far[0])", k + 1),
        (false, false) => format!("i{k}[q]"),
        (false, true) => format!("j{k}"),
    };
    // The offsets' decoding: every tet's four neighbours from its sign-extended halves, then the rare far tets'
    // rows, each lane spelled out (no dynamic index into a vector).
    let fetch = if d16 && !shape.no_index {
        let lanes: String = ["x", "y", "z", "w"]
            .map(|c| {
                format!(
                    "
        if h0.{c} == -32768 {{
            let r = far[(bitcast<u32>(h1.{c}) & 0xffffu) | (bitcast<u32>(h2.{c}) << 16u)];
            j0.{c} = r.x; j1.{c} = r.y; j2.{c} = r.z; j3.{c} = r.w;
        }}"
                )
            })
            .concat();
        format!(
            "let a = dq[2u * q];
    let b = dq[2u * q + 1u];
    let h0 = h16(a.x, a.y);
    let h1 = h16(a.z, a.w);
    let h2 = h16(b.x, b.y);
    let h3 = h16(b.z, b.w);
    let base = vec4<i32>(bitcast<i32>(4u * q)) + vec4<i32>(0, 1, 2, 3);
    var j0 = bitcast<vec4<u32>>(base + h0);
    var j1 = bitcast<vec4<u32>>(base + h1);
    var j2 = bitcast<vec4<u32>>(base + h2);
    var j3 = bitcast<vec4<u32>>(base + h3);
    if any(h0 == vec4<i32>(-32768)) {{{lanes}
    }}
    "
        )
    } else {
        String::new()
    };
    let (i0, i1, i2, i3) = (idx(0), idx(1), idx(2), idx(3));
    let nbr = if shape.no_index {
        format!(
            "
fn nbr(q: u32, k: u32, touch: vec4<u32>) -> vec4<u32> {{
    let j = min(vec4<u32>(4u * q + k) + vec4<u32>(0u, 1u, 2u, 3u), vec4<u32>({n}u));
    return select(j, vec4<u32>({}u), j == vec4<u32>({n}u)) | (touch & vec4<u32>(0u));
}}
",
            padded4(n)
        )
    } else {
        String::new()
    };
    let quads = quads_of(rows, n);
    let (pre, w) = bespoke_gpu::workgroup_block(descending, quads.len().div_ceil(wg as usize));
    let entry = if quads == (0..groups) {
        format!("{pre}let q = {w} * {wg}u + lid;\n    if q >= G {{ return; }}")
    } else {
        format!(
            "// Groups of four {}..{} only (tets {}..{}).\n    {pre}let q = {}u + {w} * {wg}u + lid;\n    if q >= {}u {{ return; }}",
            quads.start, quads.end, rows.start, rows.end, quads.start, quads.end
        )
    };
    let mut s = String::from(GRID_WGSL);
    let _ = writeln!(
        s,
        "// bespoke-fv gather step, {t}, {n} tets, {} ELLPACK, 4 tets per invocation.",
        layout.name()
    );
    let _ = writeln!(
        s,
        "const G: u32 = {groups}u;\nconst DT: {t} = {};",
        dtype.literal(dt)
    );
    for k in 0..4 {
        let _ = writeln!(
            s,
            "@group(0) @binding({k}) var<storage, read> v{k}: array<vec4<{t}>>;"
        );
    }
    let xb = if d16 {
        let _ = writeln!(
            s,
            "@group(0) @binding(4) var<storage, read> dq: array<vec4<u32>>;
@group(0) @binding(5) var<storage, read> far: array<vec4<u32>>;

// Four tets' offsets in one slot, from two words of two 16-bit halves each (a far tet's slot 0: {D16_FAR_HALF:#x}).
fn h16(a: u32, b: u32) -> vec4<i32> {{
    return vec4<i32>(bitcast<i32>(a << 16u), bitcast<i32>(a), bitcast<i32>(b << 16u), bitcast<i32>(b)) >> vec4<u32>(16u);
}}"
        );
        6
    } else {
        for k in 0..4 {
            let _ = writeln!(
                s,
                "@group(0) @binding({}) var<storage, read> i{k}: array<vec4<u32>>;",
                k + 4
            );
        }
        8
    };
    let _ = write!(
        s,
        "@group(0) @binding({xb}) var<storage, read> x: array<{t}>;
@group(0) @binding({}) var<storage, read> x4: array<vec4<{t}>>;
@group(0) @binding({}) var<storage, read_write> y4: array<vec4<{t}>>;

fn gx(j: vec4<u32>) -> vec4<{t}> {{
    return {gather};
}}
{nbr}
@compute @workgroup_size({wg})
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {{
    {entry}
    let xi = x4[q];
    {fetch}let acc = v0[q] * (gx({i0}) - xi) + v1[q] * (gx({i1}) - xi) + v2[q] * (gx({i2}) - xi) + v3[q] * (gx({i3}) - xi);
    y4[q] = xi + DT * acc;
}}
",
        xb + 1,
        xb + 2
    );
    s
}
