//! Popcount GEMM: `C[i][j] = Σ_w countOneBits(A[i][w] & B[j][w])` for bit-packed u32 rows, with the dense GEMM's
//! tiling (register tile × workgroup tile × k-depth staged in workgroup memory) and its model, measured for the
//! AND-popcount-add step instead of the FMA.

use std::fmt::Write;

use bespoke_gpu::{Arg, GRID_WGSL, Gpu, GpuBuffer, Grid, Kernel, Launch};

use crate::dense::model::{Machine, Prediction};
use crate::dense::params::{DenseParams, TileLimits, legal_space};
use crate::dense::run::GemmShape;
use crate::dense::wgsl::k_steps;
use crate::dtype::DType;
use crate::error::{MmError, Result};

/// Sizes: A is `m × words` (row stride `lda`), B is `n × words` (row stride `ldb`), C is `m × n` (row stride `ldc`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct PopShape {
    pub m: usize,
    pub n: usize,
    pub words: usize,
    pub lda: usize,
    pub ldb: usize,
    pub ldc: usize,
}

impl PopShape {
    pub fn packed(m: usize, n: usize, words: usize) -> Self {
        Self {
            m,
            n,
            words,
            lda: words,
            ldb: words,
            ldc: n,
        }
    }
    /// Word operations (one AND-popcount-add each).
    pub fn word_ops(&self) -> f64 {
        self.m as f64 * self.n as f64 * self.words as f64
    }
    pub fn check(&self) -> Result<()> {
        if self.m == 0 || self.n == 0 || self.words == 0 {
            return Err(MmError::Shape(format!(
                "empty popcount GEMM {}×{}×{} words",
                self.m, self.n, self.words
            )));
        }
        for (name, ld, cols) in [
            ("lda", self.lda, self.words),
            ("ldb", self.ldb, self.words),
            ("ldc", self.ldc, self.n),
        ] {
            if ld < cols {
                return Err(MmError::Shape(format!(
                    "{name} = {ld} is less than the {cols} columns it strides"
                )));
            }
        }
        if [self.m, self.n, self.words, self.lda, self.ldb, self.ldc]
            .iter()
            .any(|&v| v > u32::MAX as usize / 2)
            || self.words.saturating_mul(32) > u32::MAX as usize
        {
            return Err(MmError::Shape(format!(
                "{self:?}: a dimension exceeds 32-bit indexing or counts"
            )));
        }
        Ok(())
    }
    /// The model sees C = A·Bᵀ as a GEMM with K = words.
    fn as_gemm(&self) -> GemmShape {
        GemmShape {
            m: self.m,
            n: self.n,
            k: self.words,
            lda: self.lda,
            ldb: self.ldb,
            ldc: self.ldc,
        }
    }
}

/// The tilings a popcount GEMM may use: the dense space for 4-byte elements, scalar loads (B is read by rows, not
/// by columns, so there is no vec4 B load), one K pass, one staging buffer (the popcount kernel has no double
/// buffering: until 2026-11-28 the space held `-b2` points, which the model priced as double-buffered and the
/// kernel ran single-buffered under their name).
pub fn popcount_space(limits: &TileLimits) -> Vec<DenseParams> {
    legal_space(DType::F32, limits)
        .into_iter()
        .filter(|p| p.vec == 1 && p.split_k == 1 && p.stages == 1)
        .collect()
}

/// The model's pick for `shape`, from a machine measured for [`Op::Popcount`](crate::dense::microbench::Op).
pub fn popcount_pick(
    machine: &Machine,
    limits: &TileLimits,
    shape: &PopShape,
) -> Result<(DenseParams, Prediction)> {
    // Scalar loads: lanes paired where the machine's scalar rates say pairing pays.
    let space: Vec<DenseParams> = popcount_space(limits)
        .into_iter()
        .map(|p| DenseParams {
            lanes: machine.lanes(false),
            ..p
        })
        .collect();
    machine.pick_in(&space, 4, &shape.as_gemm(), false)
}

/// WGSL of the tiled popcount GEMM for `p` (vec must be 1).
pub fn popcount_wgsl(p: &DenseParams) -> String {
    let (bm, bn, kc, nt, wgm, wgn) = (p.bm(), p.bn(), p.kc, p.threads(), p.wgm, p.wgn);
    let mut s = format!(
        "// bespoke popcount GEMM {}: C[i][j] = sum_w popcount(A[i][w] & B[j][w])\n",
        p.key()
    );
    s += GRID_WGSL;
    let _ = write!(
        s,
        "struct Params {{ m: u32, n: u32, words: u32, lda: u32, ldb: u32, ldc: u32, pad0: u32, pad1: u32, }}
@group(0) @binding(0) var<storage, read> a: array<u32>;
@group(0) @binding(1) var<storage, read> b: array<u32>;
@group(0) @binding(2) var<storage, read_write> c: array<u32>;
@group(0) @binding(3) var<uniform> p: Params;

const BM: u32 = {bm}u;
const BN: u32 = {bn}u;
const KC: u32 = {kc}u;
const NT: u32 = {nt}u;
var<workgroup> As: array<u32, {as_len}>;
var<workgroup> Bs: array<u32, {bs_len}>;

@compute @workgroup_size({wgn}, {wgm}, 1)
fn main(@builtin(workgroup_id) wid: vec3<u32>,
        @builtin(local_invocation_id) lid3: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {{
    let w = bespoke_workgroup(wid);
{lanes}    let row0 = w.y * BM;
    let col0 = w.x * BN;
",
        as_len = kc * bm,
        bs_len = kc * bn,
        lanes = crate::dense::wgsl::lane_ids(p),
    );
    for i in 0..p.tm {
        for j in 0..p.tn {
            let _ = writeln!(s, "    var acc_{i}_{j} = 0u;");
        }
    }
    let _ = write!(
        s,
        "    for (var k0 = 0u; k0 < p.words; k0 += KC) {{
        for (var e = lid; e < BM * KC; e += NT) {{
            let mm = e / KC;
            let kk = e % KC;
            let r = row0 + mm;
            let kg = k0 + kk;
            var v = 0u;
            if r < p.m && kg < p.words {{ v = a[r * p.lda + kg]; }}
            As[kk * BM + mm] = v;
        }}
        for (var e = lid; e < BN * KC; e += NT) {{
            let nn = e / KC;
            let kk = e % KC;
            let cg = col0 + nn;
            let kg = k0 + kk;
            var v = 0u;
            if cg < p.n && kg < p.words {{ v = b[cg * p.ldb + kg]; }}
            Bs[kk * BN + nn] = v;
        }}
        workgroupBarrier();
"
    );
    let mut step = String::new();
    for i in 0..p.tm {
        let _ = writeln!(
            step,
            "            let a_{i} = As[kk * BM + ty + {}u];",
            i * wgm
        );
    }
    for j in 0..p.tn {
        let _ = writeln!(
            step,
            "            let b_{j} = Bs[kk * BN + tx + {}u];",
            j * wgn
        );
    }
    for i in 0..p.tm {
        for j in 0..p.tn {
            let _ = writeln!(
                step,
                "            acc_{i}_{j} += countOneBits(a_{i} & b_{j});"
            );
        }
    }
    s += &k_steps(kc, p.unroll, &step);
    s += "        workgroupBarrier();\n    }\n";
    for i in 0..p.tm {
        for j in 0..p.tn {
            let _ = writeln!(
                s,
                "    {{
        let r = row0 + ty + {}u;
        let cc = col0 + tx + {}u;
        if r < p.m && cc < p.n {{ c[r * p.ldc + cc] = acc_{i}_{j}; }}
    }}",
                i * wgm,
                j * wgn
            );
        }
    }
    s += "}\n";
    s
}

/// A popcount GEMM bound to device buffers.
#[derive(Debug)]
pub struct PopcountPlan {
    launches: Vec<Launch>,
}

impl PopcountPlan {
    pub fn launches(&self) -> Vec<&Launch> {
        self.launches.iter().collect()
    }
}

/// Binds C = popcount(A & Bᵀ) to `a`, `b`, `c` with tiling `p`; rows of A and C are cut into blocks that fit one
/// binding, B must fit one binding.
pub fn popcount_plan(
    gpu: &Gpu,
    shape: &PopShape,
    p: &DenseParams,
    a: &GpuBuffer<u32>,
    b: &GpuBuffer<u32>,
    c: &GpuBuffer<u32>,
) -> Result<PopcountPlan> {
    shape.check()?;
    p.check(DType::F32, &TileLimits::of(gpu))
        .and_then(|()| {
            if p.vec == 1 && p.split_k == 1 && p.stages == 1 {
                Ok(())
            } else {
                Err("popcount tilings use vec = 1, split_k = 1 and one staging buffer".into())
            }
        })
        .map_err(|reason| MmError::Params {
            params: p.key(),
            reason,
        })?;
    crate::error::check_apart(("C", c), &[("A", a), ("B", b)])?;
    let len = |rows: usize, cols: usize, ld: usize| (rows - 1) * ld + cols;
    for (name, buf, need) in [
        ("A", a, len(shape.m, shape.words, shape.lda)),
        ("B", b, len(shape.n, shape.words, shape.ldb)),
        ("C", c, len(shape.m, shape.n, shape.ldc)),
    ] {
        if buf.len() < need {
            return Err(MmError::Shape(format!(
                "{name} holds {} words, the popcount GEMM {shape:?} needs {need}",
                buf.len()
            )));
        }
    }
    let kernel = Kernel::new(format!("popcount_{}", p.key()), popcount_wgsl(p));
    let blocks = gpu.row_blocks::<u32>(shape.m, &[shape.lda, shape.ldc], &[1, 1])?;
    let mut launches = Vec::with_capacity(blocks.len());
    for rows in blocks {
        let words: [u32; 8] = [
            rows.len() as u32,
            shape.n as u32,
            shape.words as u32,
            shape.lda as u32,
            shape.ldb as u32,
            shape.ldc as u32,
            0,
            0,
        ];
        launches.push(gpu.prepare(
            &kernel,
            &[
                a.rows_arg(rows.clone(), shape.lda),
                b.arg(),
                c.rows_arg(rows.clone(), shape.ldc),
                Arg::uniform(&words),
            ],
            Grid::d2(
                (shape.n as u32).div_ceil(p.bn()),
                (rows.len() as u32).div_ceil(p.bm()),
            ),
        )?);
    }
    Ok(PopcountPlan { launches })
}

/// CPU reference: `C[i][j] = Σ_w popcount(A[i][w] & B[j][w])`.
pub fn popcount_ref(shape: &PopShape, a: &[u32], b: &[u32]) -> Vec<u32> {
    let mut c = vec![0u32; shape.m * shape.n];
    for i in 0..shape.m {
        let ra = &a[i * shape.lda..i * shape.lda + shape.words];
        for j in 0..shape.n {
            let rb = &b[j * shape.ldb..j * shape.ldb + shape.words];
            c[i * shape.n + j] = ra.iter().zip(rb).map(|(x, y)| (x & y).count_ones()).sum();
        }
    }
    c
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_popcount_tiling_validates_without_a_device() {
        let lim = TileLimits {
            max_invocations: 1024,
            max_wg_x: 1024,
            max_wg_y: 1024,
            shared_bytes: 32768,
        };
        let space = popcount_space(&lim);
        assert!(space.len() > 100, "{}", space.len());
        for p in space {
            if let Err(e) = bespoke_gpu::validate_everywhere(&popcount_wgsl(&p), DType::F32.caps())
            {
                panic!("{}: {e}", p.key());
            }
        }
    }

    #[test]
    fn reference_by_hand() {
        let s = PopShape::packed(2, 1, 2);
        let a = [0b1011, 0xFFFF_FFFF, 0, 1];
        let b = [0b0011, 0x0000_00F0];
        assert_eq!(popcount_ref(&s, &a, &b), vec![2 + 4, 0]);
    }
}
