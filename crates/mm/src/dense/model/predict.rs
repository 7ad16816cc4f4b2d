//! The predicted time of one configuration, the space worth predicting for a shape, and the pick.

use super::Machine;
use crate::dense::params::{DenseParams, TileLimits, legal_space};
use crate::dense::run::GemmShape;
use crate::dtype::DType;
use crate::error::{MmError, Result};

impl Machine {
    /// Predicted time of `p` on `shape` with `size`-byte elements (β = 0 when `reads_c` is false).
    pub fn predict(
        &self,
        p: &DenseParams,
        size: usize,
        shape: &GemmShape,
        reads_c: bool,
    ) -> Prediction {
        let (m, n) = (shape.m as f64, shape.n as f64);
        let size = size as f64;
        let (bm, bn, kc) = (f64::from(p.bm()), f64::from(p.bn()), p.kc as usize);
        let split = f64::from(p.split_k);
        let k_per_split = (shape.k.div_ceil(p.split_k as usize).div_ceil(kc) * kc) as f64;
        let groups = p.groups(shape.m, shape.n) as f64;
        let invocations = groups * f64::from(p.threads());
        let acc = f64::from(p.tm * p.tn);

        // Parallelism: enough invocations to occupy the device, and enough independent FMAs to hide latency.
        let occupancy = self.occupancy(p.threads(), groups);
        let latency = (invocations * acc / self.fmas_in_flight()).min(1.0);
        let fma_rate = self.gflops_at_accumulators(p.tm * p.tn) / 2.0 * 1e9;
        let fmas = groups * bm * bn * k_per_split;
        let fma_s = fmas / (fma_rate * occupancy.min(latency));

        // Workgroup memory: per k step each invocation loads tm A words (vec4 loads when tm is a multiple of 4) and
        // tn B words (vec4 loads when vec = 4); each workgroup stores its bm + bn staged words. Neighbouring lanes
        // load one A address in either layout (one row of tiles), one B address only when paired (`Lanes`): those
        // loads go at the paired rates; the stores, every invocation to its own address, at the others.
        let rate = |vec4: bool, shared: bool| {
            1e9 * match (vec4, shared) {
                (false, false) => self.smem_scalar_gwords,
                (true, false) => self.smem_vec4_gwords,
                (_, true) => self.shared_gwords(vec4),
            }
        };
        let paired_b = p.paired_group().is_some();
        let per_step = invocations
            * (f64::from(p.tm) / rate(p.a_vec4(), true)
                + f64::from(p.tn) / rate(p.vec == 4, paired_b))
            + groups * (bm / rate(p.a_vec4(), false) + bn / rate(p.vec == 4, false));
        let smem_s = per_step * k_per_split / occupancy;

        // Device memory: every workgroup streams its A and B panels; C is written (and read when β ≠ 0). Split-K
        // writes its partial slices instead, and a second launch, after the first has finished, reads them (and C
        // when β ≠ 0) and writes C: its time adds to the product's, it cannot hide under its FMAs (until
        // 2026-11-28 its bytes were counted inside the product's, and on lavapipe the model then preferred a 512³
        // tiling split 16 ways that ran at 0.6 of the same tile unsplit).
        let c_passes = if reads_c { 2.0 } else { 1.0 };
        let streams = size * groups * k_per_split * (bm + bn);
        let (bytes, reduce_bytes, launches) = if p.split_k > 1 {
            (
                streams + size * split * m * n,
                size * m * n * (split + c_passes),
                2.0,
            )
        } else {
            (streams + size * m * n * c_passes, 0.0, 1.0)
        };
        let global_s = bytes / (self.copy_gbps * 1e9);
        let reduce_s = reduce_bytes / (self.copy_gbps * 1e9);
        let launch_s = launches * self.launch_us * 1e-6;

        // Barriers, every invocation waiting at each: two per K tile with one staging buffer (the tile visible,
        // then the buffer free again); with two, one after the first tile's staging and one per tile.
        let tiles = k_per_split / kc as f64;
        let per_invocation = if p.stages < 2 {
            2.0 * tiles
        } else {
            1.0 + tiles
        };
        let barrier_s = invocations * per_invocation * self.barrier_ns * 1e-9 / occupancy;

        // FMAs and workgroup-memory loads issue from the same invocations: θ of the shorter adds to the longer
        // (θ is measured as exactly that: t(both) = max + θ·min for a balanced mix); the barriers stop both.
        let compute = fma_s.max(smem_s) + self.overlap_penalty * fma_s.min(smem_s) + barrier_s;
        let (bound, mut body) = if global_s > compute {
            ("device memory", global_s)
        } else if smem_s > fma_s {
            ("workgroup memory", compute)
        } else {
            ("fma", compute)
        };
        // One staging buffer: a workgroup waits for its tile's loads, then computes, so where loads and FMAs
        // could run on separate pipes (θ < 1, GPUs) the shorter of the two phases adds to the longer by (1 − θ);
        // double buffering overlaps them. Where one instruction stream does both (θ = 1, CPU adapters) nothing
        // overlaps either way and the two tie (the single buffer comes first in the space, and wins the tie).
        if p.stages < 2 {
            body += (1.0 - self.overlap_penalty) * global_s.min(compute);
        }
        Prediction {
            seconds: body + reduce_s + launch_s,
            fma_s,
            smem_s,
            barrier_s,
            global_s,
            reduce_s,
            launch_s,
            bound,
        }
    }

    /// The configurations worth timing for `shape`: the legal space at the widest vector width the shape's
    /// alignment allows, plus split-K variants when one K pass reaches less than 90 % of the device's rate.
    pub fn shape_space(
        &self,
        dtype: DType,
        limits: &TileLimits,
        shape: &GemmShape,
    ) -> Vec<DenseParams> {
        let vec = widest_vec(shape);
        let mut out = Vec::new();
        // A tiling whose block would still cover the shape's M (or N) with half its rows (columns) per invocation
        // only adds wasted work to that narrower tiling: dropped, which keeps small shapes' spaces small.
        let dominated = |p: &DenseParams| {
            (p.tm > 1 && (p.bm() / 2) as usize >= shape.m)
                || (p.tn > p.vec && (p.bn() / 2) as usize >= shape.n)
        };
        // Lanes paired where the measured rates say pairing pays ([`Machine::lanes`]), else in rows.
        let legal: Vec<DenseParams> = legal_space(dtype, limits)
            .into_iter()
            .filter(|p| p.vec == vec && !dominated(p))
            .map(|p| DenseParams {
                lanes: self.lanes(p.vec == 4),
                ..p
            })
            .collect();
        // Never past the register file (the pick that ran at 0.005 of peak on an H200 asked 1024 invocations for
        // 64 f64 accumulators each: it spilled); where nothing fits, the tiles with the fewest accumulators.
        let fewest = legal.iter().map(|p| p.tm * p.tn).min().unwrap_or(1);
        let fitting: Vec<DenseParams> = legal
            .iter()
            .copied()
            .filter(|p| self.fits_registers(p))
            .collect();
        let kept = if fitting.is_empty() {
            legal
                .into_iter()
                .filter(|p| p.tm * p.tn == fewest)
                .collect()
        } else {
            fitting
        };
        for p in kept {
            out.push(p);
            let groups = shape.m.div_ceil(p.bm() as usize) * shape.n.div_ceil(p.bn() as usize);
            if self.occupancy(p.threads(), groups as f64) < 0.9 {
                for split_k in [2, 4, 8, 16] {
                    if shape.k >= split_k as usize * 4 * p.kc as usize {
                        out.push(DenseParams { split_k, ..p });
                    }
                }
            }
        }
        out
    }

    /// The model's pick for `shape`: the configuration with the least predicted time.
    pub fn pick(
        &self,
        dtype: DType,
        limits: &TileLimits,
        shape: &GemmShape,
        reads_c: bool,
    ) -> Result<(DenseParams, Prediction)> {
        self.pick_in(
            &self.shape_space(dtype, limits, shape),
            dtype.size(),
            shape,
            reads_c,
        )
    }

    /// The point of `space` with the least predicted time for `shape` with `size`-byte elements.
    pub fn pick_in(
        &self,
        space: &[DenseParams],
        size: usize,
        shape: &GemmShape,
        reads_c: bool,
    ) -> Result<(DenseParams, Prediction)> {
        space
            .iter()
            .map(|p| (*p, self.predict(p, size, shape, reads_c)))
            .min_by(|a, b| a.1.seconds.total_cmp(&b.1.seconds))
            .ok_or_else(|| MmError::Shape(format!("no legal tiling for {shape} on this device")))
    }
}

/// The model's breakdown for one configuration.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Prediction {
    pub seconds: f64,
    pub fma_s: f64,
    pub smem_s: f64,
    /// Time the invocations spend at workgroup barriers (part of the compute time).
    pub barrier_s: f64,
    /// The product's own device-memory time (its panels, and C or, split in K, its partial slices).
    pub global_s: f64,
    /// Split-K's reduction launch: the slices read, C read when β ≠ 0 and written, after the product (0 unsplit).
    pub reduce_s: f64,
    pub launch_s: f64,
    /// Which of fma, workgroup memory, device memory bounds it.
    pub bound: &'static str,
}

/// 4 when N, ldb and ldc allow vec4 loads, else 1.
pub fn widest_vec(shape: &GemmShape) -> u32 {
    if [shape.n, shape.ldb, shape.ldc]
        .iter()
        .all(|d| d.is_multiple_of(4))
    {
        4
    } else {
        1
    }
}
