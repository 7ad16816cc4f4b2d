//! The analytical tile model (BLIS-style): measured machine inputs, a predicted time per configuration, the pick.
//!
//! Every constant the model uses is measured on the device by [`microbench`](super::microbench) and cached on
//! disk per adapter; the formulas are in `docs/dense-model.md`.

use std::path::PathBuf;

use bespoke_gpu::{DiskCache, Gpu, ProbeOptions};
use serde::{Deserialize, Serialize};

use super::microbench::{Measured, Op, measure};
use super::params::TileLimits;
use super::run::{DenseGemm, GemmShape};
use crate::dtype::DType;
use crate::error::Result;

mod predict;
mod rates;
#[cfg(test)]
mod tests;

pub use predict::{Prediction, widest_vec};
pub use rates::PAIRING_GAIN;

/// Bumped whenever the micro-benchmarks change, so stale caches are re-measured.
/// 12 (2026-12-03): workgroup-memory rates with neighbouring lanes in pairs on one address.
pub(crate) const MACHINE_VERSION: u32 = 12;

/// The measured inputs of the model for one adapter and precision.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct Machine {
    pub version: u32,
    pub adapter: String,
    pub dtype: String,
    /// (scalar accumulators per invocation, GFLOP/s) with the device full: the latency-hiding ramp and, past
    /// the register file, the spill cliff.
    pub fma_by_accumulators: Vec<(u32, f64)>,
    /// The same curve at larger workgroups, (invocations per workgroup, [(accumulators, GFLOP/s)]): registers are
    /// one file per multiprocessor, so where a larger workgroup's curve falls off its invocations run out of
    /// registers sooner (an H200 gives 255 registers to each of 256 invocations, 64 to each of 1024). The curve
    /// above is at `microbench::WG` invocations. Empty in older caches (version < 8).
    #[serde(default)]
    pub fma_by_accumulators_at: Vec<(u32, Vec<(u32, f64)>)>,
    /// One dependent FMA, nanoseconds.
    pub fma_latency_ns: f64,
    /// (invocations per workgroup, workgroups, GFLOP/s) at 16 accumulators each: how many workgroups of each
    /// size fill the device.
    pub fma_by_groups: Vec<(u32, u64, f64)>,
    /// Workgroup-memory loads, 10⁹ elements per second, scalar and through vec4 loads, every invocation at an
    /// address of its own.
    pub smem_scalar_gwords: f64,
    pub smem_vec4_gwords: f64,
    /// The same where invocations 2i and 2i + 1 load one address (as paired lanes do, `Lanes::Paired`): an NVIDIA
    /// multiprocessor packs such a pair's registers. Since version 12.
    #[serde(default)]
    pub smem_scalar_paired_gwords: f64,
    #[serde(default)]
    pub smem_vec4_paired_gwords: f64,
    /// The copy probe's figure (bytes read + written per second).
    pub copy_gbps: f64,
    /// One empty dispatch, microseconds.
    pub launch_us: f64,
    /// How much of the shorter of FMA and workgroup-memory time adds to the longer: 0 = full overlap (separate
    /// pipes, as on GPUs), 1 = none (one instruction stream, as on a CPU adapter).
    pub overlap_penalty: f64,
    /// Device time per invocation and workgroup barrier at a full device, nanoseconds: small on a GPU; on a CPU
    /// adapter, which runs a workgroup's invocations in turn, each barrier switches between them. Since version 9.
    #[serde(default)]
    pub barrier_ns: f64,
}

/// Where the model's inputs came from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum MachineSource {
    Cache(PathBuf),
    /// Measured now; saved to the path if it is `Some`.
    Measured(Option<PathBuf>),
}

impl Machine {
    /// Measures every input on `gpu` for `op` (a minute or two on a CPU adapter).
    pub fn measure(gpu: &Gpu, op: Op, quick: bool) -> Result<Self> {
        let m: Measured = measure(gpu, op, quick)?;
        let probe = gpu.copy_bandwidth(&ProbeOptions {
            bytes: if quick { 32 << 20 } else { 128 << 20 },
            warmup: 1,
            reps: 5,
        })?;
        Ok(Self {
            version: MACHINE_VERSION,
            adapter: gpu.adapter_name().to_string(),
            dtype: op.name().to_string(),
            fma_by_accumulators: m.fma_by_accumulators,
            fma_by_accumulators_at: m.fma_by_accumulators_at,
            fma_latency_ns: m.fma_latency_s * 1e9,
            fma_by_groups: m.fma_by_groups,
            smem_scalar_gwords: m.smem_scalar_words_per_s / 1e9,
            smem_vec4_gwords: m.smem_vec4_words_per_s / 1e9,
            smem_scalar_paired_gwords: m.smem_scalar_paired_words_per_s / 1e9,
            smem_vec4_paired_gwords: m.smem_vec4_paired_words_per_s / 1e9,
            copy_gbps: probe.gbps,
            launch_us: m.launch_s * 1e6,
            overlap_penalty: m.overlap_penalty,
            barrier_ns: m.barrier_s * 1e9,
        })
    }

    /// The cache entry's key for this adapter and operation.
    fn cache_key(gpu: &Gpu, op: Op) -> String {
        format!("{}-{}", gpu.adapter_key(), op.name())
    }

    /// The namespace of the model's inputs in the user's cache folder, if there is one.
    pub fn cache() -> Option<DiskCache> {
        DiskCache::user("dense-model", MACHINE_VERSION)
    }

    /// The cached inputs for this adapter and operation, if a sane, current entry exists (a corrupt one is
    /// reported and read as a miss).
    pub fn load_cached(gpu: &Gpu, op: Op) -> Option<Self> {
        Self::cache()?
            .get_json::<Self>(&Self::cache_key(gpu, op))
            .filter(|m| m.version == MACHINE_VERSION && m.is_sane())
    }

    /// The cached inputs for this adapter, or measures and caches them. `remeasure` ignores the cache.
    pub fn load_or_measure(gpu: &Gpu, op: Op, remeasure: bool) -> Result<(Self, MachineSource)> {
        let cache = Self::cache();
        let key = Self::cache_key(gpu, op);
        if !remeasure
            && let Some(c) = &cache
            && let Some(m) = Self::load_cached(gpu, op)
        {
            return Ok((m, MachineSource::Cache(c.entry_path(&key))));
        }
        let m = Self::measure(gpu, op, false)?;
        // A cache that cannot be written costs a re-measurement next time, nothing else.
        let saved = cache
            .filter(|c| c.put_json(&key, &m).is_ok())
            .map(|c| c.entry_path(&key));
        Ok((m, MachineSource::Measured(saved)))
    }

    /// A dense GEMM of `shape` with the tiling this model picks (the model's inputs are `self`: measured or
    /// loaded by the caller, never by the GEMM).
    pub fn gemm(
        &self,
        gpu: &Gpu,
        shape: GemmShape,
        dtype: DType,
        alpha: f64,
        beta: f64,
    ) -> Result<DenseGemm> {
        shape.check()?;
        let (p, _) = self.pick(dtype, &TileLimits::of(gpu), &shape, beta != 0.0)?;
        DenseGemm::new(shape, dtype, p, alpha, beta)
    }

    /// Every figure positive and finite (a corrupt or hand-edited cache is re-measured).
    pub(crate) fn is_sane(&self) -> bool {
        let pos = |v: f64| v.is_finite() && v > 0.0;
        !self.fma_by_accumulators.is_empty()
            && !self.fma_by_groups.is_empty()
            && self.fma_by_accumulators.iter().all(|(_, g)| pos(*g))
            && self.fma_by_groups.iter().all(|(_, _, g)| pos(*g))
            && [
                self.fma_latency_ns,
                self.smem_scalar_gwords,
                self.smem_vec4_gwords,
                self.smem_scalar_paired_gwords,
                self.smem_vec4_paired_gwords,
                self.copy_gbps,
                self.launch_us,
            ]
            .into_iter()
            .all(pos)
            && (0.0..=1.0).contains(&self.overlap_penalty)
            && self.barrier_ns.is_finite()
            && self.barrier_ns >= 0.0
    }
}
