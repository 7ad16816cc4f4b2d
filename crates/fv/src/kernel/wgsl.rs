//! The step kernels' WGSL: gather and block-cached, every layout but the four-tet ones ([`super::x4`]).

use std::fmt::Write as _;

use bespoke_gpu::GRID_WGSL;

use super::{D16_FAR, DType, KernelKind, Layout, Shape, texture_width};

/// Bindings, slot-major: 0–3 values of slots 0–3, 4–7 indices, 8 x (n + 1 entries, ghost last), 9 y.
/// Tet-major: 0 values (vec4 per tet), 1 indices (`vec4<u32>`), 2 x, 3 y. Texture: as tet-major, 0 and 1 being
/// textures of [`texture_width`] texels per row.
pub fn step_wgsl(kind: KernelKind, layout: Layout, dtype: DType, n: usize, dt: f64) -> String {
    step_rows_wgsl(kind, layout, dtype, n, dt, 0..n, Shape::default(), false)
}

/// `step_wgsl` updating only the tets `rows` (the gather kernel; other kernels update all): a rank of a
/// distributed run updates its interior tets while the ghost values travel, then the rest. Where `descending`, the
/// workgroups take their blocks in descending order (workgroup 0 the last; within a block the lanes ascending):
/// the second launch of a step pair whose shape alternates ([`Shape::alternate`]). The same update of every tet.
#[allow(clippy::too_many_arguments)]
pub fn step_rows_wgsl(
    kind: KernelKind,
    layout: Layout,
    dtype: DType,
    n: usize,
    dt: f64,
    rows: std::ops::Range<usize>,
    shape: Shape,
    descending: bool,
) -> String {
    if layout.four_tets() {
        return super::x4::gather_x4_wgsl(layout, dtype, n, dt, &rows, shape, descending);
    }
    let wg = shape.workgroup;
    let t = dtype.wgsl();
    let mut s = String::from(GRID_WGSL);
    let _ = writeln!(
        s,
        "// bespoke-fv {} step, {t}, {n} tets, {} ELLPACK.",
        kind.name(),
        layout.name()
    );
    let _ = writeln!(
        s,
        "const N: u32 = {n}u;\nconst DT: {t} = {};",
        dtype.literal(dt)
    );
    let (xb, yb) = match layout {
        // (The four-tet layouts returned above.)
        Layout::SlotMajor | Layout::SlotMajorX4 | Layout::SlotMajorX4D16 => {
            for k in 0..4 {
                let _ = writeln!(
                    s,
                    "@group(0) @binding({k}) var<storage, read> v{k}: array<{t}>;"
                );
            }
            for k in 0..4 {
                let _ = writeln!(
                    s,
                    "@group(0) @binding({}) var<storage, read> i{k}: array<u32>;",
                    k + 4
                );
            }
            (8, 9)
        }
        Layout::TetMajor => {
            let _ = writeln!(
                s,
                "@group(0) @binding(0) var<storage, read> vv: array<vec4<{t}>>;"
            );
            let _ = writeln!(
                s,
                "@group(0) @binding(1) var<storage, read> iv: array<vec4<u32>>;"
            );
            (2, 3)
        }
        Layout::TetMajorD16 => {
            let _ = writeln!(
                s,
                "@group(0) @binding(0) var<storage, read> vv: array<vec4<{t}>>;
@group(0) @binding(1) var<storage, read> dv: array<vec2<u32>>;
@group(0) @binding(2) var<storage, read> far: array<vec4<u32>>;

// Tet i's neighbours from its two words of 16-bit offsets, or its row of full indices.
fn d16(i: u32) -> vec4<u32> {{
    let d = dv[i];
    if d.x == {D16_FAR:#x}u {{ return far[d.y]; }}
    let h = vec4<i32>(bitcast<i32>(d.x << 16u), bitcast<i32>(d.x), bitcast<i32>(d.y << 16u), bitcast<i32>(d.y));
    return bitcast<vec4<u32>>(vec4<i32>(bitcast<i32>(i)) + (h >> vec4<u32>(16u)));
}}"
            );
            (3, 4)
        }
        Layout::Texture => {
            let w = texture_width(n).unwrap_or(1 << 13);
            let _ = writeln!(
                s,
                "const W_LOG: u32 = {}u;
@group(0) @binding(0) var vt: texture_2d<{t}>;
@group(0) @binding(1) var it: texture_2d<u32>;",
                w.trailing_zeros()
            );
            (2, 3)
        }
    };
    let _ = writeln!(
        s,
        "@group(0) @binding({xb}) var<storage, read> x: array<{t}>;"
    );
    let _ = writeln!(
        s,
        "@group(0) @binding({yb}) var<storage, read_write> y: array<{t}>;"
    );
    // The four (value, neighbour) pairs of tet i.
    let (fetch, v, j) = match layout {
        Layout::SlotMajor | Layout::SlotMajorX4 | Layout::SlotMajorX4D16 => (
            String::new(),
            ["v0[i]", "v1[i]", "v2[i]", "v3[i]"],
            ["i0[i]", "i1[i]", "i2[i]", "i3[i]"],
        ),
        Layout::TetMajor => (
            "let vi = vv[i];\n    let ji = iv[i];\n".into(),
            ["vi.x", "vi.y", "vi.z", "vi.w"],
            ["ji.x", "ji.y", "ji.z", "ji.w"],
        ),
        Layout::TetMajorD16 => (
            "let vi = vv[i];\n    let ji = d16(i);\n    ".into(),
            ["vi.x", "vi.y", "vi.z", "vi.w"],
            ["ji.x", "ji.y", "ji.z", "ji.w"],
        ),
        Layout::Texture => (
            "let c = vec2<u32>(i & ((1u << W_LOG) - 1u), i >> W_LOG);
    let vi = textureLoad(vt, c, 0);
    let ji = textureLoad(it, c, 0);
    "
            .into(),
            ["vi.x", "vi.y", "vi.z", "vi.w"],
            ["ji.x", "ji.y", "ji.z", "ji.w"],
        ),
    };
    let [v0, v1, v2, v3] = v;
    // The no-index ablation: neighbour k of tet i is min(i + k + 1, N) (N: the ghost), each index binding read
    // once at 0 and masked out, so it stays bound; the layout's own index loads are gone.
    let (fetch, j) = if shape.no_index {
        let touch = match layout {
            Layout::TetMajor => ["(iv[0].x & 0u)"; 4].map(String::from),
            Layout::TetMajorD16 => ["(dv[0].x & far[0].x & 0u)"; 4].map(String::from),
            Layout::Texture => {
                ["(textureLoad(it, vec2<u32>(0u, 0u), 0).x & 0u)"; 4].map(String::from)
            }
            _ => std::array::from_fn(|k| format!("(i{k}[0] & 0u)")),
        };
        let fetch = match layout {
            Layout::Texture => {
                "let c = vec2<u32>(i & ((1u << W_LOG) - 1u), i >> W_LOG);\n    let vi = textureLoad(vt, c, 0);\n    "
                    .to_string()
            }
            Layout::TetMajor | Layout::TetMajorD16 => "let vi = vv[i];\n    ".to_string(),
            _ => fetch,
        };
        let j: [String; 4] =
            std::array::from_fn(|k| format!("(min(i + {}u, N) | {})", k + 1, touch[k]));
        (fetch, j)
    } else {
        (fetch, j.map(String::from))
    };
    let [j0, j1, j2, j3] = [&j[0], &j[1], &j[2], &j[3]];
    // The ablation reads no neighbour: x[j] becomes a value made from j alone (so the index load stays).
    let gx = |j: &str| {
        if shape.no_gather {
            format!("{t}({j} & 1u)")
        } else {
            format!("x[{j}]")
        }
    };
    let (x0, x1, x2, x3) = (gx(j0), gx(j1), gx(j2), gx(j3));
    let block = |blocks: usize| bespoke_gpu::workgroup_block(descending, blocks);
    let entry = if rows == (0..n) {
        let (pre, w) = block(n.div_ceil(wg as usize));
        format!("{pre}let i = {w} * {wg}u + lid;\n    if i >= N {{ return; }}")
    } else {
        let (pre, w) = block(rows.len().div_ceil(wg as usize));
        format!(
            "// Tets {}..{} only.\n    {pre}let i = {}u + {w} * {wg}u + lid;\n    if i >= {}u {{ return; }}",
            rows.start, rows.end, rows.start, rows.end
        )
    };
    match kind {
        KernelKind::Gather if shape.tets > 1 => {
            // Several tets per invocation: the same lane of `tets` consecutive blocks of the workgroup size.
            let (start, end) = (rows.start, rows.end);
            let tets = shape.tets;
            let (pre, w) = block(rows.len().div_ceil((wg * tets) as usize));
            let _ = write!(
                s,
                "
@compute @workgroup_size({wg})
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {{
    // Tets {start}..{end}, {tets} per invocation.
    {pre}let first = {w} * {tets}u;
    for (var b = 0u; b < {tets}u; b++) {{
        let i = {start}u + (first + b) * {wg}u + lid;
        if i >= {end}u {{ return; }}
        update(i);
    }}
}}

fn update(i: u32) {{
    let xi = x[i];
    {fetch}let acc = {v0} * ({x0} - xi) + {v1} * ({x1} - xi) + {v2} * ({x2} - xi) + {v3} * ({x3} - xi);
    y[i] = xi + DT * acc;
}}
"
            );
        }
        KernelKind::Gather => {
            let _ = write!(
                s,
                "
@compute @workgroup_size({wg})
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {{
    {entry}
    let xi = x[i];
    {fetch}let acc = {v0} * ({x0} - xi) + {v1} * ({x1} - xi) + {v2} * ({x2} - xi) + {v3} * ({x3} - xi);
    y[i] = xi + DT * acc;
}}
"
            );
        }
        KernelKind::BlockCached { block } => {
            let per = block / wg;
            let (pre, w) = bespoke_gpu::workgroup_block(descending, n.div_ceil(block as usize));
            let _ = write!(
                s,
                "const B: u32 = {block}u;
var<workgroup> xs: array<{t}, {block}>;

fn nb(j: u32, start: u32) -> {t} {{
    let r = j - start;
    if r < B {{ return xs[r]; }}
    return x[j];
}}

@compute @workgroup_size({wg})
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {{
    {pre}let start = {w} * B;
    // The block's x, ghost included when it falls inside; loads stay coalesced (stride {wg}).
    for (var k = 0u; k < {per}u; k++) {{
        let t = start + k * {wg}u + lid;
        if t <= N {{ xs[k * {wg}u + lid] = x[t]; }}
    }}
    workgroupBarrier();
    for (var k = 0u; k < {per}u; k++) {{
        let i = start + k * {wg}u + lid;
        if i < N {{
            let xi = xs[k * {wg}u + lid];
            {fetch}let acc = {v0} * (nb({j0}, start) - xi) + {v1} * (nb({j1}, start) - xi)
                + {v2} * (nb({j2}, start) - xi) + {v3} * (nb({j3}, start) - xi);
            y[i] = xi + DT * acc;
        }}
    }}
}}
"
            );
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use bespoke_gpu::{caps_for, resource_use, validate_everywhere};

    #[test]
    fn kernels_validate() {
        for dtype in [DType::F32, DType::F64] {
            for kind in [
                KernelKind::Gather,
                KernelKind::BlockCached { block: 256 },
                KernelKind::BlockCached { block: 2048 },
            ] {
                for layout in Layout::ALL {
                    if layout == Layout::Texture && dtype == DType::F64 {
                        continue;
                    }
                    // The whole range, and the rows a rank of a distributed run updates after its exchange.
                    for rows in [0..12345, 1000..12345] {
                        // The default shape, another workgroup size, and the lab's ablation.
                        for shape in [
                            Shape::default(),
                            Shape {
                                workgroup: 64,
                                no_gather: false,
                                ..Default::default()
                            },
                            Shape {
                                workgroup: 512,
                                no_gather: true,
                                ..Default::default()
                            },
                            // Several tets per invocation (the gather kernel; others ignore it).
                            Shape {
                                tets: 4,
                                ..Default::default()
                            },
                            Shape {
                                workgroup: 128,
                                tets: 2,
                                no_gather: true,
                                ..Default::default()
                            },
                            // The no-index ablation, alone and with no-gather.
                            Shape {
                                no_index: true,
                                ..Default::default()
                            },
                            Shape {
                                tets: 2,
                                no_gather: true,
                                no_index: true,
                                ..Default::default()
                            },
                        ] {
                            // Blocks in descending order (an alternating pair's second launch) with the
                            // shapes of one and several tets.
                            let descending = shape.no_index;
                            let src = step_rows_wgsl(
                                kind,
                                layout,
                                dtype,
                                12345,
                                0.01,
                                rows.clone(),
                                shape,
                                descending,
                            );
                            let caps = caps_for(dtype == DType::F64, false);
                            validate_everywhere(&src, caps).unwrap_or_else(|e| {
                                panic!("{} {dtype:?} {layout:?} {shape:?}: {e}", kind.name())
                            });
                            let used = resource_use(&src, caps).unwrap_or_else(|e| {
                                panic!("{} {dtype:?} {layout:?} {shape:?}: {e}\n{src}", kind.name())
                            });
                            // What the layout choice holds against the adapter's limit is what it binds.
                            assert_eq!(
                                used.storage_buffers,
                                layout.storage_buffers(),
                                "{} {layout:?} {shape:?}",
                                kind.name()
                            );
                            // The ablation reads no tet's indices (each binding once, at 0).
                            let loads = [
                                "i0[i]",
                                "i3[i]",
                                "iv[i]",
                                "textureLoad(it, c",
                                "i0[q]",
                                "i3[q]",
                                "d16(i)",
                                "dq[2u * q]",
                            ];
                            assert_eq!(
                                loads.iter().any(|l| src.contains(l)),
                                !shape.no_index,
                                "{} {layout:?} {shape:?}\n{src}",
                                kind.name()
                            );
                        }
                    }
                }
            }
        }
    }

    /// The 16-bit offsets decode (as the kernel's `d16` does: shift, arithmetic shift, wrapping add) to every
    /// tet's neighbours, near and far, the ghost included; a near tet never reads as far; offsets of ±32 767 are
    /// near, ±32 768 far.
    #[test]
    fn literals_are_exact() {
        assert_eq!(DType::F32.literal(1.0), "1.0");
        assert_eq!(DType::F32.literal(0.1), "0.1");
        assert_eq!(DType::F64.literal(0.1).parse::<f64>().ok(), None);
        let s = DType::F64.literal(0.1);
        assert_eq!(s.trim_end_matches("lf").parse::<f64>().ok(), Some(0.1));
    }
}
