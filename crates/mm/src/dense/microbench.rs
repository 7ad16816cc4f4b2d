//! Micro-benchmarks that measure the tile model's inputs on the device: FMA throughput by accumulators per
//! invocation (latency hiding and the spill point), dependent-FMA latency, how many invocations fill the device,
//! workgroup-memory load rates and launch overhead.

use std::fmt::Write;

use bespoke_gpu::{Gpu, GpuBuffer, Grid, Kernel, Launch};

use crate::dtype::DType;
use crate::error::Result;

/// The inner-loop operation a model is measured for: an FMA (dense GEMM) or an AND-popcount-add (popcount GEMM).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Op {
    Fma(DType),
    Popcount,
}

impl Op {
    /// The WGSL element type.
    pub fn ty(self) -> &'static str {
        match self {
            Self::Fma(d) => d.wgsl(),
            Self::Popcount => "u32",
        }
    }
    /// Bytes per element.
    pub fn size(self) -> usize {
        match self {
            Self::Fma(d) => d.size(),
            Self::Popcount => 4,
        }
    }
    /// Name used in cache files and reports: f32, f64, popcount.
    pub fn name(self) -> &'static str {
        match self {
            Self::Fma(d) => d.wgsl(),
            Self::Popcount => "popcount",
        }
    }
    /// One dependent step of a chain on accumulator `a` with operands `m`, `c`.
    fn step(self, a: &str) -> String {
        match self {
            Self::Fma(_) => format!("fma({a}, m, c)"),
            Self::Popcount => format!("{a} + countOneBits({a} & m)"),
        }
    }
    /// A value no run produces, compared against so that results count as used.
    fn magic(self) -> &'static str {
        match self {
            Self::Fma(_) => "12345.678",
            Self::Popcount => "12345u",
        }
    }
    pub fn caps(self) -> bespoke_gpu::Capabilities {
        match self {
            Self::Fma(d) => d.caps(),
            Self::Popcount => DType::F32.caps(),
        }
    }
}

pub(crate) const WG: u32 = 256;
/// FMAs per invocation in the throughput kernels, whatever the number of accumulators.
const FMA_PER_INVOCATION: u32 = 8192;
/// How much longer a small grid's chains may get: llvmpipe silently ends any loop after 65535 iterations, and at
/// 64 × 8192 FMAs over 16 chains unrolled 8× the loop runs 4096 times.
const MAX_SCALE: u64 = 64;
/// Accumulator counts of the throughput curve: below ~8 latency shows, past the register file spilling does.
/// It goes on to 1024 because what a spill costs differs by orders of magnitude between devices: a GPU falls off a
/// cliff past its register file, a CPU adapter spills to its L1 at a few percent (and there the extra
/// accumulators buy fewer workgroup-memory loads per FMA, its real bottleneck: docs/dense-model.md).
pub const ACC_COUNTS: [u32; 11] = [1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024];
/// Steps of the dependent chain in the latency kernel (two lengths; the difference cancels launch overhead).
const LATENCY_STEPS: u32 = 1 << 14;
/// Element words of workgroup memory the load-rate kernel cycles through.
const SMEM_WORDS: u32 = 2048;
/// Independent loads per loop iteration in the load-rate kernel.
const SMEM_CHAINS: u32 = 8;
const SMEM_ITERS: u32 = 256;

/// WGSL of a throughput kernel: `chains` independent accumulators per invocation, `iters` rounds of `unroll`
/// dependent steps of `op` each, one guarded store so nothing is optimised away. Operands come from the buffer so
/// no compiler can fold them.
pub fn chain_wgsl(op: Op, chains: u32, iters: u32, unroll: u32, wg: u32) -> String {
    let t = op.ty();
    let mut s = format!(
        "// bespoke micro-benchmark: {chains} FMA chains x {iters} x {unroll}, {t}
@group(0) @binding(0) var<storage, read_write> x: array<{t}>;
@compute @workgroup_size({wg})
fn main(@builtin(global_invocation_id) g: vec3<u32>, @builtin(num_workgroups) nw: vec3<u32>) {{
    let i = g.x + g.y * nw.x * {wg}u;
    let m = x[0];
    let c = x[1];
"
    );
    for j in 0..chains {
        let _ = writeln!(s, "    var a{j} = {t}(i + {j}u);");
    }
    let _ = writeln!(s, "    for (var it = 0u; it < {iters}u; it++) {{");
    for _ in 0..unroll {
        for j in 0..chains {
            let _ = writeln!(s, "        a{j} = {};", op.step(&format!("a{j}")));
        }
    }
    // One statement a chain: `a0 + a1 + … + a1023` as one expression is 1023 levels deep, past what naga's GLSL
    // writer (wgpu's GL backend) recurses through on a 16 MiB stack in a debug build.
    s += "    }\n    var sum = a0;\n";
    for j in 1..chains {
        let _ = writeln!(s, "    sum += a{j};");
    }
    let _ = write!(s, "    if sum == {} {{ x[2] = sum; }}\n}}\n", op.magic());
    s
}

/// WGSL of the workgroup-memory load-rate kernel: each invocation issues `SMEM_CHAINS` independent loads per
/// iteration at consecutive addresses across the workgroup (no bank conflicts), `width` elements per load; `paired`,
/// invocations 2i and 2i + 1 load the same address (what the dense kernels' paired lanes do, `Lanes::Paired`; an
/// NVIDIA multiprocessor packs such a pair's registers and returns a vec4 load in half the cycles).
pub fn smem_wgsl(op: Op, width: u32, paired: bool) -> String {
    let t = op.ty();
    let vt = if width == 1 {
        t.to_string()
    } else {
        format!("vec{width}<{t}>")
    };
    let n = SMEM_WORDS / width;
    let base = if paired { "lid >> 1u" } else { "lid" };
    let pairs = if paired { ", lanes in pairs" } else { "" };
    let mut s = format!(
        "// bespoke micro-benchmark: workgroup-memory loads of {vt}{pairs}
@group(0) @binding(0) var<storage, read_write> x: array<{t}>;
var<workgroup> sm: array<{vt}, {n}>;
@compute @workgroup_size({WG})
fn main(@builtin(local_invocation_index) lid: u32) {{
    for (var e = lid; e < {n}u; e += {WG}u) {{ sm[e] = {vt}({t}(e) * x[0]); }}
    workgroupBarrier();
    var base = {base};
"
    );
    for j in 0..SMEM_CHAINS {
        let _ = writeln!(s, "    var a{j} = {vt}();");
    }
    let _ = writeln!(s, "    for (var it = 0u; it < {SMEM_ITERS}u; it++) {{");
    for j in 0..SMEM_CHAINS {
        let _ = writeln!(
            s,
            "        a{j} += sm[(base + {}u) & {}u];",
            j * (n / SMEM_CHAINS),
            n - 1
        );
    }
    s += "        base += 1u;\n    }\n    var sum = a0";
    for j in 1..SMEM_CHAINS {
        let _ = write!(s, " + a{j}");
    }
    let any = if width == 1 { "sum" } else { "sum.x" };
    let _ = write!(
        s,
        ";\n    if {any} == {} {{ x[2] = {any}; }}\n}}\n",
        op.magic()
    );
    s
}

/// WGSL of the overlap kernel: per iteration `loads` workgroup-memory loads feeding one sum and `fmas` FMAs on
/// independent accumulators (either may be 0). Comparing t(loads, 0), t(0, fmas) and t(loads, fmas) shows whether
/// the device overlaps the two (a GPU's separate pipes) or runs them back to back (a CPU's one stream).
pub fn mixed_wgsl(op: Op, loads: u32, fmas: u32) -> String {
    let t = op.ty();
    let n = SMEM_WORDS;
    let mut s = format!(
        "// bespoke micro-benchmark: {loads} workgroup loads + {fmas} FMAs per iteration, {t}
@group(0) @binding(0) var<storage, read_write> x: array<{t}>;
var<workgroup> sm: array<{t}, {n}>;
@compute @workgroup_size({WG})
fn main(@builtin(local_invocation_index) lid: u32) {{
    for (var e = lid; e < {n}u; e += {WG}u) {{ sm[e] = {t}(e) * x[0]; }}
    workgroupBarrier();
    let m = x[0];
    let c = x[1];
    var base = lid;
    var acc = {t}();
"
    );
    let chains = fmas.min(16);
    for j in 0..chains {
        let _ = writeln!(s, "    var f{j} = {t}(lid + {j}u);");
    }
    let _ = writeln!(s, "    for (var it = 0u; it < {SMEM_ITERS}u; it++) {{");
    for j in 0..loads {
        let _ = writeln!(
            s,
            "        acc += sm[(base + {}u) & {}u];",
            j * (n / loads.max(1)),
            n - 1
        );
    }
    for j in 0..fmas {
        let f = format!("f{}", j % chains.max(1));
        let _ = writeln!(s, "        {f} = {};", op.step(&f));
    }
    s += "        base += 1u;\n    }\n    var sum = acc";
    for j in 0..chains {
        let _ = write!(s, " + f{j}");
    }
    let _ = write!(s, ";\n    if sum == {} {{ x[2] = sum; }}\n}}\n", op.magic());
    s
}

/// Rounds of the overlap and barrier measurements, each kernel timed once a round, in turn.
const OVERLAP_ROUNDS: usize = 7;

/// Barrier rounds per invocation in the barrier-cost kernel.
const BARRIER_ITERS: u32 = 64;

/// WGSL of the barrier-cost kernel: `BARRIER_ITERS` rounds of one workgroup-memory read and write per invocation,
/// each followed by a workgroup barrier when `barrier` (without, the same work races harmlessly: timing only).
/// The difference of the two is what a tiled kernel pays per barrier: little on a GPU, a switch between the
/// workgroup's invocations on a CPU adapter, which runs them in turn.
pub fn barrier_wgsl(op: Op, barrier: bool) -> String {
    let t = op.ty();
    let sync = if barrier { "workgroupBarrier();" } else { "" };
    format!(
        "// bespoke micro-benchmark: {BARRIER_ITERS} rounds of workgroup-memory traffic{}, {t}
@group(0) @binding(0) var<storage, read_write> x: array<{t}>;
var<workgroup> sm: array<{t}, {WG}>;
@compute @workgroup_size({WG})
fn main(@builtin(local_invocation_index) lid: u32) {{
    sm[lid] = {t}(lid) * x[0];
    workgroupBarrier();
    var acc = {t}();
    for (var it = 0u; it < {BARRIER_ITERS}u; it++) {{
        acc += sm[(lid + it + 1u) & {}u];
        sm[lid] = acc;
        {sync}
    }}
    if acc == {} {{ x[2] = acc; }}
}}
",
        if barrier { " and a barrier" } else { "" },
        WG - 1,
        op.magic()
    )
}

/// An empty kernel, for launch overhead.
fn empty_wgsl(op: Op) -> String {
    format!(
        "@group(0) @binding(0) var<storage, read_write> x: array<{}>;
@compute @workgroup_size(1)
fn main() {{ if x[0] == {} {{ x[2] = x[1]; }} }}
",
        op.ty(),
        op.magic()
    )
}

/// Everything the micro-benchmarks measured for one precision.
#[derive(Clone, Debug)]
pub struct Measured {
    /// (accumulators per invocation, GFLOP/s) at a full device, launch overhead taken out.
    pub fma_by_accumulators: Vec<(u32, f64)>,
    /// The same from 8 accumulators up at the largest workgroup the adapter allows (up to 1024) when it is larger
    /// than `WG`, as many invocations in all: where registers run out at that size.
    pub fma_by_accumulators_at: Vec<(u32, Vec<(u32, f64)>)>,
    /// Seconds per FMA along one dependent chain.
    pub fma_latency_s: f64,
    /// (invocations per workgroup, workgroups, GFLOP/s) with 16 accumulators each, launch overhead taken out:
    /// how many workgroups of each size fill the device.
    pub fma_by_groups: Vec<(u32, u64, f64)>,
    /// Element loads per second from workgroup memory, scalar and as vec4 (counted in elements).
    pub smem_scalar_words_per_s: f64,
    pub smem_vec4_words_per_s: f64,
    /// The same with neighbouring invocations in pairs loading one address (`smem_wgsl`'s `paired`).
    pub smem_scalar_paired_words_per_s: f64,
    pub smem_vec4_paired_words_per_s: f64,
    /// Seconds for one dispatch that does nothing.
    pub launch_s: f64,
    /// 0 when workgroup-memory loads and FMAs overlap perfectly, 1 when their times add.
    pub overlap_penalty: f64,
    /// Device seconds per invocation and workgroup barrier at a full device (0 where too small to measure).
    pub barrier_s: f64,
}

/// The scratch buffer every micro-benchmark reads its operands from: m = 1 − 1e-6, c = 1e-7 keep FMA chains
/// bounded; popcount chains take m = 0x5555_5555.
enum Scratch {
    F32(GpuBuffer<f32>),
    F64(GpuBuffer<f64>),
    U32(GpuBuffer<u32>),
}

impl Scratch {
    fn new(gpu: &Gpu, op: Op) -> Result<Self> {
        let init = [0.999_999, 1e-7, 0.0, 0.0];
        Ok(match op {
            Op::Fma(DType::F32) => Self::F32(gpu.upload(&init.map(|v| v as f32))?),
            Op::Fma(DType::F64) => Self::F64(gpu.upload(&init)?),
            Op::Popcount => Self::U32(gpu.upload(&[0x5555_5555u32, 7, 0, 0])?),
        })
    }
    fn launch(&self, gpu: &Gpu, kernel: &Kernel, grid: Grid) -> Result<Launch> {
        let arg = match self {
            Self::F32(b) => b.arg(),
            Self::F64(b) => b.arg(),
            Self::U32(b) => b.arg(),
        };
        Ok(gpu.prepare(kernel, &[arg], grid)?)
    }
}

/// Median seconds of `launch` after one warm-up.
fn seconds(gpu: &Gpu, launch: &Launch, reps: usize) -> Result<f64> {
    Ok(gpu.time(&[launch], 1, reps)?.median())
}

/// Runs every micro-benchmark for `op` (a minute or two on a CPU adapter; `quick` trims the grids).
pub fn measure(gpu: &Gpu, op: Op, quick: bool) -> Result<Measured> {
    if let Op::Fma(d) = op {
        d.require(gpu, "micro-benchmarks")?;
    }
    let dtype = op.name();
    let scratch = Scratch::new(gpu, op)?;
    let reps = if quick { 3 } else { 5 };
    let full_groups: u32 = if quick { 256 } else { 1024 };
    let empty = Kernel::new(format!("mb_empty_{dtype}"), empty_wgsl(op));
    let launch_s = seconds(gpu, &scratch.launch(gpu, &empty, Grid::d1(1))?, reps.max(5))?;
    // GFLOP/s of `groups` workgroups with `chains` accumulators each, launch overhead taken out (the model adds
    // it back once per dispatch), so small grids show only their lack of parallelism.
    // Small grids get proportionally longer chains (the same total work as the full grid), so every point runs
    // long enough that it shows the lack of parallelism and not timer or wake-up noise.
    let full = u64::from(full_groups) * u64::from(WG);
    // A point's launch and its FMAs.
    let fma_point = |chains: u32, groups: u32, wg: u32| -> Result<(Launch, f64)> {
        let scale = (full / (u64::from(groups) * u64::from(wg))).clamp(1, MAX_SCALE);
        let per_invocation = FMA_PER_INVOCATION * scale as u32;
        // At most ~1024 steps in the loop body, so the widest curve points stay quick to compile.
        let unroll = 8.min(per_invocation / chains).min((1024 / chains).max(1));
        let iters = per_invocation / (chains * unroll);
        let k = Kernel::new(
            format!("mb_fma_{dtype}_{chains}x{iters}x{unroll}_wg{wg}"),
            chain_wgsl(op, chains, iters, unroll, wg),
        );
        let l = scratch.launch(gpu, &k, Grid::d1(groups))?;
        let fmas = f64::from(groups) * f64::from(wg) * f64::from(per_invocation);
        Ok((l, fmas))
    };
    let gflops = |fmas: f64, s: f64| 2.0 * fmas / (s - launch_s).max(0.5 * s) / 1e9;
    let fma_rate = |chains: u32, groups: u32, wg: u32| -> Result<f64> {
        let (l, fmas) = fma_point(chains, groups, wg)?;
        Ok(gflops(fmas, seconds(gpu, &l, reps)?))
    };
    let mut fma_by_accumulators = Vec::new();
    for a in ACC_COUNTS {
        fma_by_accumulators.push((a, fma_rate(a, full_groups, WG)?));
    }
    let max_wg = gpu.limits().max_compute_invocations_per_workgroup;
    let mut fma_by_accumulators_at = Vec::new();
    let big = max_wg.min(1024);
    if big > WG {
        let groups = (full_groups * WG / big).max(1);
        let mut curve = Vec::new();
        for a in ACC_COUNTS.into_iter().filter(|a| *a >= 8) {
            curve.push((a, fma_rate(a, groups, big)?));
        }
        fma_by_accumulators_at.push((big, curve));
    }
    // The group curves' points are timed in turn, one run of each per round, `reps` rounds, each point's median
    // counting: timed one after the other, a few seconds of a faster VM lifted one or two neighbouring points by
    // 20–30 % (lavapipe, 2026-11-28: 128 invocations read 47.9 GFLOP/s at 256 workgroups and 36–38 at 4 to 1024),
    // and as the curve's best such a point said 256 workgroups were needed to fill the device, which made the model
    // split 1024³ in K 8 ways (0.79 of the best known tiling there).
    let mut points = Vec::new();
    for wg in [32, 64, 128, 256, 512, 1024]
        .into_iter()
        .filter(|w| *w <= max_wg)
    {
        let mut g = 1u32;
        loop {
            points.push((wg, g, fma_point(16, g, wg)?));
            if u64::from(g) * u64::from(wg) >= full {
                break;
            }
            g *= 4;
        }
    }
    let turns: Vec<[&Launch; 1]> = points.iter().map(|(_, _, (l, _))| [l]).collect();
    let turns: Vec<&[&Launch]> = turns.iter().map(|t| t.as_slice()).collect();
    let rounds = gpu.time_in_turn(&turns, 1, reps)?;
    let fma_by_groups = points
        .iter()
        .enumerate()
        .map(|(i, (wg, g, (_, fmas)))| {
            let runs: Vec<f64> = rounds.iter().map(|r| r[i]).collect();
            (
                *wg,
                u64::from(*g),
                gflops(*fmas, bespoke_gpu::median(&runs)),
            )
        })
        .collect();

    // Latency: one invocation, one chain, two lengths.
    let chain = |steps: u32| -> Result<f64> {
        let k = Kernel::new(
            format!("mb_latency_{dtype}_{steps}"),
            chain_wgsl(op, 1, steps / 8, 8, 1),
        );
        seconds(gpu, &scratch.launch(gpu, &k, Grid::d1(1))?, reps)
    };
    let (t1, t2) = (chain(LATENCY_STEPS)?, chain(2 * LATENCY_STEPS)?);
    let fma_latency_s = ((t2 - t1) / f64::from(LATENCY_STEPS)).max(1e-12);

    // Scalar and vec4, each with lanes apart and in pairs, timed in turn (one run of each a round, each one's
    // median): the model weighs the pairs' rates against the others', which back-to-back timings on a drifting
    // VM would rank by the drift.
    let smem_kinds = [(1, false), (4, false), (1, true), (4, true)];
    let smem_launches = smem_kinds
        .iter()
        .map(|&(width, paired)| {
            let pairs = if paired { "_pairs" } else { "" };
            let k = Kernel::new(
                format!("mb_smem_{dtype}_x{width}{pairs}"),
                smem_wgsl(op, width, paired),
            );
            scratch.launch(gpu, &k, Grid::d1(full_groups))
        })
        .collect::<Result<Vec<Launch>>>()?;
    let turns: Vec<[&Launch; 1]> = smem_launches.iter().map(|l| [l]).collect();
    let turns: Vec<&[&Launch]> = turns.iter().map(|t| t.as_slice()).collect();
    let smem_rounds = gpu.time_in_turn(&turns, 1, reps)?;
    let loads = f64::from(full_groups) * f64::from(WG * SMEM_ITERS * SMEM_CHAINS);
    let [
        smem_scalar_words_per_s,
        smem_vec4_words_per_s,
        smem_scalar_paired_words_per_s,
        smem_vec4_paired_words_per_s,
    ] = std::array::from_fn(|i| {
        let runs: Vec<f64> = smem_rounds.iter().map(|r| r[i]).collect();
        loads * f64::from(smem_kinds[i].0) / bespoke_gpu::median(&runs)
    });

    // Overlap: balance the two halves with the rates just measured, then time each alone and both together.
    let loads = 2;
    let fmas = ((fma_by_accumulators
        .iter()
        .map(|(_, g)| *g)
        .fold(0.0, f64::max)
        / 2.0
        * 1e9
        / smem_scalar_words_per_s
        * f64::from(loads))
    .round() as u32)
        .clamp(1, 512);
    // Each derived from timings taken in turn, round by round (the median of the rounds' values): timed one
    // after the other, the overlap read 0.05–1.0 and the barrier 0–4.9 ns on a loaded 2-core VM.
    let full = |k: Kernel| scratch.launch(gpu, &k, Grid::d1(full_groups));
    let mixed = |l: u32, f: u32| {
        full(Kernel::new(
            format!("mb_mixed_{dtype}_{l}_{f}"),
            mixed_wgsl(op, l, f),
        ))
    };
    let (ls, lf, lb) = (mixed(loads, 0)?, mixed(0, fmas)?, mixed(loads, fmas)?);
    let rounds = gpu.time_in_turn(&[&[&ls], &[&lf], &[&lb]], 1, OVERLAP_ROUNDS)?;
    let overlaps: Vec<f64> = rounds
        .iter()
        .map(|t| {
            let [ts, tf, tb] = [t[0], t[1], t[2]].map(|s| (s - launch_s).max(0.5 * s));
            ((tb - ts.max(tf)) / ts.min(tf)).clamp(0.0, 1.0)
        })
        .collect();
    let overlap_penalty = bespoke_gpu::median(&overlaps);

    // Barriers: the same rounds of workgroup-memory traffic with and without one after each.
    let barrier = |on: bool| {
        full(Kernel::new(
            format!("mb_barrier_{dtype}_{on}"),
            barrier_wgsl(op, on),
        ))
    };
    let (with, without) = (barrier(true)?, barrier(false)?);
    let barriers = f64::from(full_groups) * f64::from(WG * BARRIER_ITERS);
    let per_round: Vec<f64> = gpu
        .time_in_turn(&[&[&with], &[&without]], 1, OVERLAP_ROUNDS)?
        .iter()
        .map(|t| ((t[0] - t[1]) / barriers).max(0.0))
        .collect();
    let barrier_s = bespoke_gpu::median(&per_round);

    Ok(Measured {
        barrier_s,
        overlap_penalty,
        fma_by_accumulators,
        fma_by_accumulators_at,
        fma_latency_s,
        fma_by_groups,
        smem_scalar_words_per_s,
        smem_vec4_words_per_s,
        smem_scalar_paired_words_per_s,
        smem_vec4_paired_words_per_s,
        launch_s,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn micro_kernels_validate_without_a_device() {
        for op in [Op::Fma(DType::F32), Op::Fma(DType::F64), Op::Popcount] {
            let v = |src: String| {
                if let Err(e) = bespoke_gpu::validate_everywhere(&src, op.caps()) {
                    panic!("{op:?}: {e}\n{src}");
                }
            };
            for a in ACC_COUNTS {
                v(chain_wgsl(op, a, 4, 8, WG));
                // The register-file curve at the largest workgroup.
                v(chain_wgsl(op, a, 4, 8, 1024));
            }
            for w in [1, 4] {
                for paired in [false, true] {
                    v(smem_wgsl(op, w, paired));
                }
            }
            v(empty_wgsl(op));
            for (l, f) in [(2, 0), (0, 7), (2, 300)] {
                v(mixed_wgsl(op, l, f));
            }
            for b in [false, true] {
                v(barrier_wgsl(op, b));
            }
        }
    }
}
