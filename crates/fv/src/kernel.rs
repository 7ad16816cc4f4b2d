//! WGSL for one explicit Euler step of the ELLPACK operator, y = x + Δt·Σ_s v_s (x[idx_s] − x): the gather kernel
//! (one invocation per tet, x from global memory) and the block-cached kernel (a workgroup loads its block of x
//! into workgroup memory and reads in-block neighbours from there).

use std::fmt::Write as _;

/// Element type of values and x.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Dtype {
    F32,
    F64,
}

impl Dtype {
    pub fn wgsl(self) -> &'static str {
        match self {
            Self::F32 => "f32",
            Self::F64 => "f64",
        }
    }
    pub fn size(self) -> usize {
        match self {
            Self::F32 => 4,
            Self::F64 => 8,
        }
    }
    pub fn parse(s: &str) -> crate::Result<Self> {
        match s {
            "f32" => Ok(Self::F32),
            "f64" => Ok(Self::F64),
            _ => Err(crate::FvError::param("dtype", s, "expected f32 or f64")),
        }
    }
    /// An exact literal of `v` in this type.
    pub fn lit(self, v: f64) -> String {
        match self {
            Self::F32 => {
                let s = format!("{:?}", v as f32);
                if s.contains(['.', 'e']) {
                    s
                } else {
                    format!("{s}.0")
                }
            }
            Self::F64 => format!("{v:.17e}lf"),
        }
    }
}

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

/// Invocations per workgroup.
pub const WG: u32 = 256;

/// Bindings: 0–3 values of slots 0–3, 4–7 indices of slots 0–3, 8 x (n + 1 entries, ghost last), 9 y.
pub fn step_wgsl(kind: KernelKind, dtype: Dtype, n: usize, dt: f64) -> String {
    let t = dtype.wgsl();
    let mut s = String::new();
    let _ = writeln!(
        s,
        "// bespoke-fv {} step, {t}, {n} tets, slot-major ELLPACK.",
        kind.name()
    );
    let _ = writeln!(
        s,
        "const N: u32 = {n}u;\nconst DT: {t} = {};",
        dtype.lit(dt)
    );
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
    let _ = writeln!(s, "@group(0) @binding(8) var<storage, read> x: array<{t}>;");
    let _ = writeln!(
        s,
        "@group(0) @binding(9) var<storage, read_write> y: array<{t}>;"
    );
    match kind {
        KernelKind::Gather => {
            let _ = write!(
                s,
                "
@compute @workgroup_size({WG})
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {{
    let i = (wid.x + wid.y * nwg.x) * {WG}u + lid;
    if i >= N {{ return; }}
    let xi = x[i];
    let acc = v0[i] * (x[i0[i]] - xi) + v1[i] * (x[i1[i]] - xi) + v2[i] * (x[i2[i]] - xi) + v3[i] * (x[i3[i]] - xi);
    y[i] = xi + DT * acc;
}}
"
            );
        }
        KernelKind::BlockCached { block } => {
            let per = block / WG;
            let _ = write!(
                s,
                "const B: u32 = {block}u;
var<workgroup> xs: array<{t}, {block}>;

fn nb(j: u32, start: u32) -> {t} {{
    let r = j - start;
    if r < B {{ return xs[r]; }}
    return x[j];
}}

@compute @workgroup_size({WG})
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {{
    let start = (wid.x + wid.y * nwg.x) * B;
    // The block's x, ghost included when it falls inside; loads stay coalesced (stride {WG}).
    for (var k = 0u; k < {per}u; k++) {{
        let t = start + k * {WG}u + lid;
        if t <= N {{ xs[k * {WG}u + lid] = x[t]; }}
    }}
    workgroupBarrier();
    for (var k = 0u; k < {per}u; k++) {{
        let i = start + k * {WG}u + lid;
        if i < N {{
            let xi = xs[k * {WG}u + lid];
            let acc = v0[i] * (nb(i0[i], start) - xi) + v1[i] * (nb(i1[i], start) - xi)
                + v2[i] * (nb(i2[i], start) - xi) + v3[i] * (nb(i3[i], start) - xi);
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
    use bespoke_gpu::{caps_for, validate_wgsl};

    #[test]
    fn kernels_validate() {
        for dtype in [Dtype::F32, Dtype::F64] {
            for kind in [
                KernelKind::Gather,
                KernelKind::BlockCached { block: 256 },
                KernelKind::BlockCached { block: 2048 },
            ] {
                let src = step_wgsl(kind, dtype, 12345, 0.01);
                validate_wgsl(&src, caps_for(dtype == Dtype::F64, false))
                    .unwrap_or_else(|e| panic!("{} {dtype:?}: {e}\n{src}", kind.name()));
            }
        }
    }

    #[test]
    fn literals_are_exact() {
        assert_eq!(Dtype::F32.lit(1.0), "1.0");
        assert_eq!(Dtype::F32.lit(0.1), "0.1");
        assert_eq!(Dtype::F64.lit(0.1).parse::<f64>().ok(), None);
        let s = Dtype::F64.lit(0.1);
        assert_eq!(s.trim_end_matches("lf").parse::<f64>().ok(), Some(0.1));
    }
}
