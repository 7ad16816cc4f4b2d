//! Tiling parameters of the dense GEMM and the legal space a device allows.

use bespoke_gpu::Gpu;

use crate::dtype::DType;

/// One point of the tiling space.
///
/// A workgroup of `wgn × wgm` invocations computes a `bm × bn` tile of C (`bm = wgm·tm`, `bn = wgn·tn`); each
/// invocation holds a `tm × tn` register tile (rows strided by `wgm`, columns by `wgn` vectors so that neighbouring
/// invocations touch neighbouring columns). A and B are staged through workgroup memory `kc` deep. `vec` is the
/// width of B/C loads and stores (1 or 4; needs N, ldb, ldc multiples of 4). `split_k > 1` splits K across
/// workgroups and sums the partial tiles in a second kernel. `lanes` lays the invocations on the register tiles.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
pub struct DenseParams {
    pub tm: u32,
    pub tn: u32,
    pub wgm: u32,
    pub wgn: u32,
    pub kc: u32,
    pub vec: u32,
    pub split_k: u32,
    /// Workgroup-memory buffers of the K staging: 1 loads a tile, waits, computes; 2 loads the next tile into
    /// registers while this one's FMAs run and stores it into the other buffer (one barrier per tile).
    #[serde(default = "one_stage")]
    pub stages: u32,
    /// The K tile's `kc` steps spelled out one after another in the source (key suffix `-u`) instead of a loop.
    /// naga writes every WGSL loop as `loop { if !cond { break; } … }`, which a driver's compiler may leave rolled
    /// (a counter, a compare, a branch and computed workgroup-memory addresses per step; CUDA SGEMMs unroll this
    /// loop). Not in the model's space: the checked pick times each shortlisted tiling's unrolled twin on GPUs
    /// (`choose::check_list`), and lavapipe, whose compile time grows with the spelled-out loads, keeps
    /// the loop.
    #[serde(default)]
    pub unroll: bool,
    /// Which invocation takes which register tile ([`Lanes`]; key suffix `-r` for [`Lanes::Rows`]).
    #[serde(default)]
    pub lanes: Lanes,
}

fn one_stage() -> u32 {
    1
}

/// How a workgroup's invocations are laid on its `wgm × wgn` register tiles, 32 consecutive invocations
/// (`local_invocation_index`; a subgroup on NVIDIA) at a time. Which tile an invocation takes changes no result;
/// it changes which invocations load the same workgroup-memory word at a k step: one row of tiles loads the same
/// A, one column the same B.
///
/// Why: an NVIDIA multiprocessor returns 128 bytes of workgroup memory a cycle, one 32-bit register per lane, so a
/// vec4 load costs a subgroup 4 cycles whatever its addresses, and 2 where lanes l and l ^ 1 (or l and l ^ 2) load
/// the same address, whose two registers then travel packed (NVIDIA's forums for Volta and Turing; CUTLASS's SIMT
/// GEMMs lay their lanes so for that reason). Laid in rows, neighbouring lanes share A but never B, and a k step
/// of a `tm × tn` tile costs `tm/2 + tn` cycles for `tm·tn/4` cycles of FMAs: more than the FMAs at 4×16 and as
/// much at 8×8, the tiles that ran fastest on the H200 at 0.62 of its FMA peak. Paired, both loads are shared:
/// `(tm + tn)/2` cycles. Which layout the model's space takes is measured (`Machine::lanes`): paired where pairs of
/// lanes on one address load measurably faster, else in rows (lavapipe). A key without `-r` is paired.
#[derive(
    Clone,
    Copy,
    Debug,
    Default,
    PartialEq,
    Eq,
    Hash,
    PartialOrd,
    Ord,
    serde::Serialize,
    serde::Deserialize,
)]
pub enum Lanes {
    /// Each 32 invocations cover `32/W` rows × `W` columns of tiles (`W = min(wgn, 16)`), lanes l and l ^ 1 in
    /// one column (one B address), l and l ^ 2 in one row (one A address). Workgroups whose shape cannot be cut
    /// so (fewer than 32 invocations, one column, or fewer rows than a group covers: none in the legal space)
    /// are laid in rows.
    #[default]
    Paired,
    /// The workgroup's rows as `local_invocation_id` gives them (x the column): 32 invocations cover `32/wgn` rows
    /// of `wgn` columns (key suffix `-r`; until 2026-12-03 the only layout).
    Rows,
}

/// What a device allows, as the generator and the model see it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TileLimits {
    pub max_invocations: u32,
    pub max_wg_x: u32,
    pub max_wg_y: u32,
    pub shared_bytes: u32,
}

impl TileLimits {
    pub fn of(gpu: &Gpu) -> Self {
        let l = gpu.limits();
        Self {
            max_invocations: l.max_compute_invocations_per_workgroup,
            max_wg_x: l.max_compute_workgroup_size_x,
            max_wg_y: l.max_compute_workgroup_size_y,
            shared_bytes: l.max_compute_workgroup_storage_size,
        }
    }
    /// WebGPU's default limits: what every adapter grants at least.
    pub const WEBGPU_DEFAULT: Self = Self {
        max_invocations: 256,
        max_wg_x: 256,
        max_wg_y: 256,
        shared_bytes: 16384,
    };
}

/// Accumulator bytes per invocation the legal space stops at (1024 f32 / 512 f64): the end of the measured
/// accumulator curve (`microbench::ACC_COUNTS`). Below it the model charges what spilling costs on the device from
/// that curve instead of forbidding it: GPUs spill past ~64–128 f32 and the curve there sends the model elsewhere.
pub const MAX_ACC_BYTES: u32 = 4096;

/// The largest value of each parameter a key may give (well past the legal space's: tm, tn ≤ 32, workgroups of
/// 4–32 a side, kc ≤ 32, split-K ≤ 16), so that no product of them wraps in u32: a register tile side, a workgroup
/// side, a K step and a split of K.
const MAX_TILE: u32 = 256;
const MAX_WORKGROUP_SIDE: u32 = 1024;
const MAX_KC: u32 = 256;
const MAX_SPLIT_K: u32 = 1 << 16;

impl DenseParams {
    pub fn bm(&self) -> u32 {
        self.wgm * self.tm
    }
    pub fn bn(&self) -> u32 {
        self.wgn * self.tn
    }
    /// Workgroups one launch of an m × n product has: its tiles, each split in K.
    pub fn groups(&self, m: usize, n: usize) -> usize {
        debug_assert!(self.split_k >= 1);
        m.div_ceil(self.bm() as usize) * n.div_ceil(self.bn() as usize) * self.split_k as usize
    }
    /// Whether the kernel loads A from workgroup memory as vec4 of 4 consecutive rows (register tiles of 4+ rows).
    pub fn a_vec4(&self) -> bool {
        self.tm.is_multiple_of(4)
    }
    pub fn threads(&self) -> u32 {
        self.wgm * self.wgn
    }
    /// The columns (`W`) and rows (`H`) of tiles 32 consecutive invocations cover when their lanes are paired,
    /// or None where they are laid in rows ([`Lanes`]: asked for, or the workgroup cannot be cut in such groups).
    pub fn paired_group(&self) -> Option<(u32, u32)> {
        let w = self.wgn.min(16);
        let h = 32 / w;
        (self.lanes == Lanes::Paired
            && self.threads().is_multiple_of(32)
            && w >= 2
            && self.wgm.is_multiple_of(h))
        .then_some((w, h))
    }
    /// The (column, row) of the register tile invocation `lid` (its `local_invocation_index`) takes: what the
    /// kernels' `tx` and `ty` are (`lane_ids` in `wgsl.rs` writes the same arithmetic in WGSL).
    pub fn lane_position(&self, lid: u32) -> (u32, u32) {
        match self.paired_group() {
            None => (lid % self.wgn, lid / self.wgn),
            Some((w, h)) => {
                let (lane, group) = (lid % 32, lid / 32);
                let across = self.wgn / w;
                (
                    (group % across) * w + (lane >> 1) % w,
                    (group / across) * h + (lane & 1) + 2 * ((lane >> 1) / w),
                )
            }
        }
    }
    /// Elements of one staged A row (one k): `bm` plus one vec4 (or one scalar) of padding, so the staging
    /// stores of consecutive k, a row apart, fall in different banks.
    pub fn a_row(&self) -> u32 {
        self.bm() + if self.a_vec4() { 4 } else { 1 }
    }
    pub fn shared_bytes(&self, dtype: DType) -> u32 {
        self.stages * self.kc * (self.a_row() + self.bn()) * dtype.size() as u32
    }
    /// Staged values (`at` vec4s or scalars of A, `vt` vectors of B) each invocation carries in registers
    /// between loading the next tile and storing it (double-buffered only).
    pub fn prefetch_slots(&self) -> (u32, u32) {
        if self.stages < 2 {
            return (0, 0);
        }
        let a_len = if self.a_vec4() {
            self.kc * self.bm() / 4
        } else {
            self.kc * self.bm()
        };
        let b_len = self.kc * self.wgn * (self.tn / self.vec);
        (
            a_len.div_ceil(self.threads()),
            b_len.div_ceil(self.threads()),
        )
    }
    /// Elements each invocation holds besides its accumulators: the `tm + tn` operands of a k step and, when
    /// double-buffered, the prefetched staging values.
    pub fn operand_registers(&self) -> u32 {
        let (a, b) = self.prefetch_slots();
        let a_width = if self.a_vec4() { 4 } else { 1 };
        self.tm + self.tn + a * a_width + b * self.vec
    }
    /// The loads and stores the kernel's source spells out (what its compile grows with on lavapipe, where each
    /// is a loop over SIMD lanes; the staging loops are not unrolled and do not count): per k step the register
    /// tile's A loads (`tm/4` vec4 or `tm` scalars) and `tn/vec` B loads from workgroup memory (`kc` times over
    /// when the steps are unrolled, `-u`), and the epilogue's
    /// `tm·tn/vec` stores of C plus as many loads when it reads C (β ≠ 0 without split-K; a split-K kernel writes
    /// partial sums only). Mesa 25.0.7 compiled 74, 140 and 268 of them in 2.3, 8.5 and 29.5 s whatever the
    /// tiling and β (docs/perf.md).
    pub fn spelled_accesses(&self, reads_c: bool) -> usize {
        let nv = (self.tn / self.vec) as usize;
        let a = if self.a_vec4() { self.tm / 4 } else { self.tm } as usize;
        let c = self.tm as usize * nv;
        let reads = usize::from(reads_c && self.split_k == 1);
        let steps = if self.unroll { self.kc as usize } else { 1 };
        (a + nv) * steps + c * (1 + reads)
    }

    /// The same tiling with its lanes laid in rows (`-r`, [`Lanes::Rows`]).
    pub fn in_rows(&self) -> Self {
        Self {
            lanes: Lanes::Rows,
            ..*self
        }
    }
    /// The same tiling with its K tile's steps spelled out (`-u`).
    pub fn unrolled(&self) -> Self {
        Self {
            unroll: true,
            ..*self
        }
    }
    /// [`spelled_accesses`](Self::spelled_accesses) of each distinct kernel a GEMM with this tiling compiles: the
    /// one with β's epilogue, and where K is bound in several blocks (`k_blocked`: B past the binding limit) the
    /// β = 1 kernel the blocks after the first accumulate with (the same kernel when β is 1 or K is split).
    pub fn compiled_accesses(&self, beta: f64, k_blocked: bool) -> Vec<usize> {
        let mut v = vec![self.spelled_accesses(beta != 0.0)];
        if k_blocked && self.split_k == 1 && beta != 1.0 {
            v.push(self.spelled_accesses(true));
        }
        v
    }
    /// A short name, e.g. `t4x4v4-w16x16-k8-s1` (single-buffered), `t4x4v4-w16x16-k8-s1-b2` (double-buffered),
    /// `t4x4v4-w16x16-k8-s1-b2-r` (lanes laid in rows), `t4x4v4-w16x16-k8-s1-b2-u` (K steps unrolled).
    pub fn key(&self) -> String {
        let stages = if self.stages == 1 {
            String::new()
        } else {
            format!("-b{}", self.stages)
        };
        let rows = if self.lanes == Lanes::Rows { "-r" } else { "" };
        let unroll = if self.unroll { "-u" } else { "" };
        format!(
            "t{}x{}v{}-w{}x{}-k{}-s{}{stages}{rows}{unroll}",
            self.tm, self.tn, self.vec, self.wgm, self.wgn, self.kc, self.split_k
        )
    }

    /// Parses a [`key`](Self::key), e.g. `t8x8v4-w16x16-k8-s1`.
    pub fn parse(key: &str) -> Option<Self> {
        let (rest, unroll) = match key.strip_suffix("-u") {
            Some(rest) => (rest, true),
            None => (key, false),
        };
        let (digits, lanes) = match rest.strip_suffix("-r") {
            Some(rest) => (rest, Lanes::Rows),
            None => (rest, Lanes::Paired),
        };
        let nums: Vec<u32> = digits
            .split(|c: char| !c.is_ascii_digit())
            .filter(|s| !s.is_empty())
            .map(|s| s.parse().ok())
            .collect::<Option<_>>()?;
        let (nums, stages) = match nums.len() {
            8 => (&nums[..7], nums[7]),
            _ => (&nums[..], 1),
        };
        let [tm, tn, vec, wgm, wgn, kc, split_k] = nums[..] else {
            return None;
        };
        let p = Self {
            tm,
            tn,
            wgm,
            wgn,
            kc,
            vec,
            split_k,
            stages,
            unroll,
            lanes,
        };
        (p.key() == key).then_some(p)
    }

    /// Why these parameters are illegal on a device with `limits`, if they are.
    pub fn check(&self, dtype: DType, limits: &TileLimits) -> Result<(), String> {
        self.check_key()?;
        if self.threads() > limits.max_invocations
            || self.wgn > limits.max_wg_x
            || self.wgm > limits.max_wg_y
        {
            return Err(format!(
                "{}×{} invocations exceed the device's workgroup limits",
                self.wgn, self.wgm
            ));
        }
        if self.shared_bytes(dtype) > limits.shared_bytes {
            return Err(format!(
                "{} B of workgroup memory exceed the device's {} B",
                self.shared_bytes(dtype),
                limits.shared_bytes
            ));
        }
        let acc = self.tm * self.tn * dtype.size() as u32;
        if acc > MAX_ACC_BYTES {
            return Err(format!(
                "{acc} B of accumulators per invocation exceed the {MAX_ACC_BYTES} B register budget"
            ));
        }
        Ok(())
    }

    /// Why these parameters are illegal on any device, if they are (no device needed: a key given on the command
    /// line is refused by this before one is opened).
    pub fn check_key(&self) -> Result<(), String> {
        if ![self.tm, self.tn, self.wgm, self.wgn, self.kc, self.split_k]
            .into_iter()
            .all(u32::is_power_of_two)
        {
            return Err("every parameter must be a power of two".into());
        }
        // Bounds before any product: a key may spell any u32, and t1073741824x1 with 4 rows of invocations made
        // a block of 2³² rows, which wrapped to 0 (every size and budget check then passed).
        for (name, v, max) in [
            ("tm", self.tm, MAX_TILE),
            ("tn", self.tn, MAX_TILE),
            ("wgm", self.wgm, MAX_WORKGROUP_SIDE),
            ("wgn", self.wgn, MAX_WORKGROUP_SIDE),
            ("kc", self.kc, MAX_KC),
            ("split_k", self.split_k, MAX_SPLIT_K),
        ] {
            if v > max {
                return Err(format!("{name} = {v} is past {max}"));
            }
        }
        if self.stages != 1 && self.stages != 2 {
            return Err(format!("{} staging buffers: 1 or 2", self.stages));
        }
        if self.vec != 1 && self.vec != 4 {
            return Err(format!("vector width {} is not 1 or 4", self.vec));
        }
        if !self.tn.is_multiple_of(self.vec) {
            return Err(format!(
                "thread tile width {} is not a multiple of the vector width {}",
                self.tn, self.vec
            ));
        }
        Ok(())
    }
}

/// Every legal tiling for `dtype` on a device with `limits` (split_k = 1; split-K is chosen per shape), single-
/// and double-buffered, K steps in a loop (unrolled twins are [`DenseParams::unrolled`]).
pub fn legal_space(dtype: DType, limits: &TileLimits) -> Vec<DenseParams> {
    let mut out = Vec::new();
    for stages in [1, 2] {
        for tm in [1, 2, 4, 8, 16, 32] {
            for tn in [1, 2, 4, 8, 16, 32] {
                for vec in [1, 4] {
                    for wgm in [4, 8, 16, 32] {
                        for wgn in [4, 8, 16, 32] {
                            for kc in [4, 8, 16, 32] {
                                let p = DenseParams {
                                    tm,
                                    tn,
                                    wgm,
                                    wgn,
                                    kc,
                                    vec,
                                    split_k: 1,
                                    stages,
                                    unroll: false,
                                    lanes: Lanes::Paired,
                                };
                                // Fewer than 32 invocations leave SIMD lanes idle on every GPU we know.
                                if p.threads() >= 32 && p.check(dtype, limits).is_ok() {
                                    out.push(p);
                                }
                            }
                        }
                    }
                }
            }
        }
    }
    out
}

impl std::str::FromStr for DenseParams {
    type Err = String;
    /// A key that names parameters illegal on any device ([`DenseParams::check_key`]) is refused too.
    fn from_str(s: &str) -> Result<Self, String> {
        let p = Self::parse(s)
            .ok_or_else(|| format!("`{s}` is not a tiling key like t8x8v4-w16x16-k8-s1"))?;
        p.check_key().map_err(|why| format!("`{s}`: {why}"))?;
        Ok(p)
    }
}

impl std::fmt::Display for DenseParams {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.key())
    }
}

#[cfg(test)]
mod tests;
