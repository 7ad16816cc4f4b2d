//! WGSL for one explicit Euler step of the ELLPACK operator, `y = x + Δt·Σ_s v_s (x[idx_s] − x)`: the gather kernel
//! (one invocation per tet, x from global memory) and the block-cached kernel (a workgroup loads its block of x
//! into workgroup memory and reads in-block neighbours from there).

use std::fmt::Write as _;

use bespoke_gpu::GRID_WGSL;

pub use bespoke_gpu::DType;

/// The two kernels of the study.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum KernelKind {
    Gather,
    /// Workgroups own `block` consecutive tets (a multiple of the workgroup size).
    BlockCached {
        block: u32,
    },
}

impl KernelKind {
    pub fn name(&self) -> &'static str {
        match self {
            Self::Gather => "gather",
            Self::BlockCached { .. } => "block-cached",
        }
    }
}

/// How the four slots are stored.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub enum Layout {
    /// value[s·n + i]: neighbouring invocations read neighbouring words (coalesced); one binding per slot.
    SlotMajor,
    /// value[4i + s] as one vec4 per tet: one 16-byte load per tet, strided across invocations.
    TetMajor,
    /// Slot-major with four consecutive tets per invocation: vec4 loads of values, indices, x and a vec4 store
    /// (tets padded to a multiple of 4; gather kernel only).
    SlotMajorX4,
    /// Tet-major values, and each neighbour as its signed 16-bit offset from the tet (`vec2<u32>` a tet: 8 bytes of
    /// indices where tet-major reads 16; the Dirichlet ghost at n is an offset like any other). A tet with any
    /// neighbour past ±32 767 holds [`D16_FAR`] in its first word and, in its second, its row in a table of full
    /// indices read instead. On a METIS-ordered mesh about 9 in 10 tets need no row there (docs/fv.md).
    TetMajorD16,
    /// Tet-major, with the operator in two read-only 2-D textures (rgba32float values, rgba32uint indices)
    /// read with `textureLoad`; x and y stay storage buffers. f32 only (textures hold no f64).
    Texture,
}

/// The first word of a [`Layout::TetMajorD16`] tet whose neighbours are in the table of full indices: two offsets
/// of −32 768, which no near neighbour has.
pub const D16_FAR: u32 = 0x8000_8000;

/// The [`Layout::TetMajorD16`] form of `indices` (tet i's four neighbours, n the ghost, an offset like any other):
/// each tet's two words of offsets, and the far tets' full indices (one row each, at least one row so the binding
/// is never empty).
pub fn d16_indices(indices: &[[u32; 4]]) -> (Vec<[u32; 2]>, Vec<[u32; 4]>) {
    let mut far = Vec::new();
    let near = indices
        .iter()
        .enumerate()
        .map(|(i, row)| {
            let d = row.map(|j| j as i64 - i as i64);
            if d.iter().all(|d| (-32_767..=32_767).contains(d)) {
                let h = d.map(|d| (d as i16) as u16 as u32);
                [h[0] | h[1] << 16, h[2] | h[3] << 16]
            } else {
                far.push(*row);
                [D16_FAR, far.len() as u32 - 1]
            }
        })
        .collect();
    if far.is_empty() {
        far.push([0; 4]);
    }
    (near, far)
}

/// Texels per row of the [`Layout::Texture`] operator for `n` tets: the smallest power of two (≥ 64) that keeps
/// the rows within 8192, the 2-D texture side every WebGPU adapter offers, so the source does not depend on the
/// adapter. Past 8192² tets there is none.
pub fn texture_width(n: usize) -> Option<u32> {
    const SIDE: u64 = 8192;
    (6..=13)
        .map(|p| 1u32 << p)
        .find(|&w| (n as u64).div_ceil(u64::from(w)) <= SIDE)
}

impl Layout {
    pub fn name(&self) -> &'static str {
        match self {
            Self::SlotMajor => "slot-major",
            Self::TetMajor => "tet-major",
            Self::TetMajorD16 => "tet-major-d16",
            Self::SlotMajorX4 => "slot-major-x4",
            Self::Texture => "texture",
        }
    }

    /// Bytes of the largest storage binding a step of `n` tets with `size`-byte values binds in this layout
    /// (values, indices, x), to hold against the adapter's binding limit before anything is uploaded. The
    /// texture layout's operator is in textures; its x is the largest buffer.
    pub fn largest_binding(&self, n: usize, size: usize) -> u64 {
        let n = n as u64;
        let size = size as u64;
        let x = (n + 1) * size;
        match self {
            Self::SlotMajor => x.max(n * 4),
            Self::TetMajor => (4 * n * size).max(4 * n * 4),
            // Values; the offsets (8 B a tet) and the far rows (16 B each, at most n) are no larger.
            Self::TetMajorD16 => (4 * n * size).max(x),
            Self::SlotMajorX4 => {
                let np = padded4(n as usize) as u64;
                ((np + 4) * size).max(np * 4)
            }
            Self::Texture => x,
        }
    }

    pub const ALL: [Layout; 5] = [
        Self::SlotMajor,
        Self::TetMajor,
        Self::TetMajorD16,
        Self::SlotMajorX4,
        Self::Texture,
    ];

    /// A layout by its CLI/JSON name.
    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|l| l.name() == s)
    }

    /// The fastest measured layout for `dtype` on a CPU adapter (`cpu`) or a GPU (docs/perf.md): on lavapipe the
    /// texture layout in f32, slot-major in f64; on a GPU tet-major (the H200, 2026-11-28, 16.5 M METIS-ordered
    /// tets: tet-major 431 µs, slot-major-x4 449, slot-major 460, texture 837; f64 not measured there).
    pub fn default_for(dtype: DType, cpu: bool) -> Self {
        match (dtype, cpu) {
            (_, false) => Self::TetMajor,
            (DType::F32, true) => Self::Texture,
            (_, true) => Self::SlotMajor,
        }
    }
}

/// Invocations per workgroup (the default launch shape).
pub const WG: u32 = 256;

/// How a step kernel is launched: invocations per workgroup, and for the lab a cost taken out.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub struct Shape {
    /// Invocations per workgroup (the block-cached kernel's block must be a multiple of it).
    pub workgroup: u32,
    /// The lab's ablation: neighbours' x not read (each neighbour index still loaded and used), so the step
    /// streams its values, indices, x and y without the gather. Not the physics.
    #[serde(default)]
    pub no_gather: bool,
    /// The lab's other ablation: no neighbour index read (each index binding touched once, at 0), tet i's k-th
    /// neighbour taken as min(i + k + 1, n) instead, so the step streams its values, x and y and gathers near i
    /// without the 16 B a tet of indices: what the indices cost (what storing them in fewer bytes could save).
    /// The step of the operator whose indices are those (tested bit for bit), not this operator's physics.
    #[serde(default)]
    pub no_index: bool,
    /// How the workgroups are laid out: rows of the per-dimension limit, one dispatch at any size (the
    /// default), or the split 1-D grid of before (the lab's comparison).
    #[serde(default)]
    pub grid: bespoke_gpu::GridLayout,
    /// Tets per invocation of the gather kernel (not the four-tet layout, not the block-cached kernel): a
    /// workgroup takes that many consecutive blocks of its size, an invocation the same lane of each.
    #[serde(default = "one_tet")]
    pub tets: u32,
}

fn one_tet() -> u32 {
    1
}

/// The most tets per invocation a shape may ask.
pub const MAX_TETS: u32 = 8;

impl Default for Shape {
    fn default() -> Self {
        Self {
            workgroup: WG,
            no_gather: false,
            no_index: false,
            grid: bespoke_gpu::GridLayout::Rows,
            tets: 1,
        }
    }
}

impl Shape {
    /// `wg<N>`, with ` no-gather` for the ablation and the grid where it is not the default.
    pub fn name(&self) -> String {
        let grid = match self.grid {
            bespoke_gpu::GridLayout::Rows => String::new(),
            bespoke_gpu::GridLayout::Split => " split-grid".into(),
            bespoke_gpu::GridLayout::RowsOf(r) => format!(" rows-of-{r}"),
        };
        format!(
            "wg{}{}{}{}{grid}",
            self.workgroup,
            if self.tets == 1 {
                String::new()
            } else {
                format!(" {}-tets", self.tets)
            },
            if self.no_gather { " no-gather" } else { "" },
            if self.no_index { " no-index" } else { "" }
        )
    }

    /// Tets one workgroup updates with `kind` in `layout`.
    pub fn per_group(&self, kind: KernelKind, layout: Layout) -> u32 {
        match kind {
            KernelKind::Gather if layout == Layout::SlotMajorX4 => 4 * self.workgroup,
            KernelKind::Gather => self.tets * self.workgroup,
            KernelKind::BlockCached { block } => block,
        }
    }
}

/// Bindings, slot-major: 0–3 values of slots 0–3, 4–7 indices, 8 x (n + 1 entries, ghost last), 9 y.
/// Tet-major: 0 values (vec4 per tet), 1 indices (`vec4<u32>`), 2 x, 3 y. Texture: as tet-major, 0 and 1 being
/// textures of [`texture_width`] texels per row.
pub fn step_wgsl(kind: KernelKind, layout: Layout, dtype: DType, n: usize, dt: f64) -> String {
    step_rows_wgsl(kind, layout, dtype, n, dt, 0..n, Shape::default())
}

/// `step_wgsl` updating only the tets `rows` (the gather kernel; other kernels update all): a rank of a
/// distributed run updates its interior tets while the ghost values travel, then the rest.
pub fn step_rows_wgsl(
    kind: KernelKind,
    layout: Layout,
    dtype: DType,
    n: usize,
    dt: f64,
    rows: std::ops::Range<usize>,
    shape: Shape,
) -> String {
    if layout == Layout::SlotMajorX4 {
        return gather_x4_wgsl(dtype, n, dt, shape);
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
        // (SlotMajorX4 returned above.)
        Layout::SlotMajor | Layout::SlotMajorX4 => {
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
        Layout::SlotMajor | Layout::SlotMajorX4 => (
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
    let entry = if rows == (0..n) {
        format!("let i = bespoke_workgroup_linear(wid) * {wg}u + lid;\n    if i >= N {{ return; }}")
    } else {
        format!(
            "// Tets {}..{} only.\n    let i = {}u + bespoke_workgroup_linear(wid) * {wg}u + lid;\n    if i >= {}u {{ return; }}",
            rows.start, rows.end, rows.start, rows.end
        )
    };
    match kind {
        KernelKind::Gather if shape.tets > 1 => {
            // Several tets per invocation: the same lane of `tets` consecutive blocks of the workgroup size.
            let (start, end) = (rows.start, rows.end);
            let tets = shape.tets;
            let _ = write!(
                s,
                "
@compute @workgroup_size({wg})
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {{
    // Tets {start}..{end}, {tets} per invocation.
    let first = bespoke_workgroup_linear(wid) * {tets}u;
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
    let start = bespoke_workgroup_linear(wid) * B;
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

/// Tets padded to a multiple of 4 for [`Layout::SlotMajorX4`].
pub fn padded4(n: usize) -> usize {
    n.div_ceil(4) * 4
}

/// Gather with four tets per invocation. Bindings: 0–3 values (vec4 = slot s of 4 tets), 4–7 indices, 8 x as
/// scalars (for the gathers), 9 the same x as vec4s, 10 y as vec4s. x holds padded4(n) + 4 entries, the ghost
/// at padded4(n).
fn gather_x4_wgsl(dtype: DType, n: usize, dt: f64, shape: Shape) -> String {
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

impl std::str::FromStr for Layout {
    type Err = crate::error::FvError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::parse(s).ok_or_else(|| {
            crate::error::FvError::param(
                "layout",
                s,
                format!("expected one of {}", Self::ALL.map(|l| l.name()).join(", ")),
            )
        })
    }
}

impl std::fmt::Display for Layout {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bespoke_gpu::{caps_for, validate_wgsl};

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
                            let src = step_rows_wgsl(
                                kind,
                                layout,
                                dtype,
                                12345,
                                0.01,
                                rows.clone(),
                                shape,
                            );
                            validate_wgsl(&src, caps_for(dtype == DType::F64, false))
                                .unwrap_or_else(|e| {
                                    panic!(
                                        "{} {dtype:?} {layout:?} {shape:?}: {e}\n{src}",
                                        kind.name()
                                    )
                                });
                            // The ablation reads no tet's indices (each binding once, at 0).
                            let loads = [
                                "i0[i]",
                                "i3[i]",
                                "iv[i]",
                                "textureLoad(it, c",
                                "i0[q]",
                                "i3[q]",
                                "d16(i)",
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
    fn d16_offsets_decode_to_the_neighbours() {
        use bespoke_gpu::rng::Rng;
        let mut rng = bespoke_gpu::rng::seeded(bespoke_gpu::testing::fresh_seed());
        let n = 100_000usize;
        let mut indices: Vec<[u32; 4]> = (0..n)
            .map(|i| {
                std::array::from_fn(|_| match rng.random_range(0..4) {
                    0 => rng.random_range(0..=n) as u32,
                    _ => {
                        (i as i64 + rng.random_range(-40_000i64..40_000)).clamp(0, n as i64) as u32
                    }
                })
            })
            .collect();
        indices[50_000] = [50_000 + 32_767, 50_000 - 32_767, 50_000, 50_001];
        indices[50_001] = [50_001 + 32_768, 50_001, 50_001, 50_001];
        let (near, far) = d16_indices(&indices);
        assert_eq!(near.len(), n);
        let decode = |i: usize, d: [u32; 2]| -> [u32; 4] {
            if d[0] == D16_FAR {
                return far[d[1] as usize];
            }
            let h = [d[0] << 16, d[0], d[1] << 16, d[1]].map(|w| (w as i32) >> 16);
            h.map(|o| (i as i32).wrapping_add(o) as u32)
        };
        for (i, (&d, row)) in near.iter().zip(&indices).enumerate() {
            assert_eq!(decode(i, d), *row, "tet {i}");
        }
        assert_ne!(near[50_000][0], D16_FAR, "offsets of ±32 767 fit");
        assert_eq!(near[50_001][0], D16_FAR, "an offset of 32 768 does not");
        let far_tets = near.iter().filter(|d| d[0] == D16_FAR).count();
        assert_eq!(far.len(), far_tets.max(1));
        assert!(far_tets > 1000 && far_tets < n, "{far_tets} far tets");
        // No tet, no far row: one row all the same, so the binding is never empty.
        let (near, far) = d16_indices(&[[0, 1, 0, 1], [0, 1, 1, 2]]);
        assert!(near.iter().all(|d| d[0] != D16_FAR));
        assert_eq!(far, vec![[0; 4]]);
    }

    #[test]
    fn literals_are_exact() {
        assert_eq!(DType::F32.literal(1.0), "1.0");
        assert_eq!(DType::F32.literal(0.1), "0.1");
        assert_eq!(DType::F64.literal(0.1).parse::<f64>().ok(), None);
        let s = DType::F64.literal(0.1);
        assert_eq!(s.trim_end_matches("lf").parse::<f64>().ok(), Some(0.1));
    }
}
