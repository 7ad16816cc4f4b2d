//! The four-tets-per-invocation gather kernel ([`Layout::SlotMajorX4`](super::Layout::SlotMajorX4)).

use std::fmt::Write as _;

use bespoke_gpu::GRID_WGSL;

use super::{DType, Shape, padded4};

/// Gather with four tets per invocation. Bindings: 0–3 values (vec4 = slot s of 4 tets), 4–7 indices, 8 x as
/// scalars (for the gathers), 9 the same x as vec4s, 10 y as vec4s. x holds padded4(n) + 4 entries, the ghost
/// at padded4(n).
pub(super) fn gather_x4_wgsl(dtype: DType, n: usize, dt: f64, shape: Shape) -> String {
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
    let idx = |k: usize| {
        if shape.no_index {
            format!("nbr(q, {}u, i{k}[0])", k + 1)
        } else {
            format!("i{k}[q]")
        }
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
    let mut s = String::from(GRID_WGSL);
    let _ = writeln!(
        s,
        "// bespoke-fv gather step, {t}, {n} tets, slot-major ELLPACK, 4 tets per invocation."
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
    for k in 0..4 {
        let _ = writeln!(
            s,
            "@group(0) @binding({}) var<storage, read> i{k}: array<vec4<u32>>;",
            k + 4
        );
    }
    let _ = write!(
        s,
        "@group(0) @binding(8) var<storage, read> x: array<{t}>;
@group(0) @binding(9) var<storage, read> x4: array<vec4<{t}>>;
@group(0) @binding(10) var<storage, read_write> y4: array<vec4<{t}>>;

fn gx(j: vec4<u32>) -> vec4<{t}> {{
    return {gather};
}}
{nbr}
@compute @workgroup_size({wg})
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {{
    let q = bespoke_workgroup_linear(wid) * {wg}u + lid;
    if q >= G {{ return; }}
    let xi = x4[q];
    let acc = v0[q] * (gx({i0}) - xi) + v1[q] * (gx({i1}) - xi) + v2[q] * (gx({i2}) - xi) + v3[q] * (gx({i3}) - xi);
    y4[q] = xi + DT * acc;
}}
"
    );
    s
}
