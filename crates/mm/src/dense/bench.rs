//! Timing a dense GEMM on the device: what `bespoke mm dense-bench` and the benches call.

use bespoke_gpu::{Gpu, GpuBuffer};

use super::params::{DenseParams, TileLimits};
use super::run::{DenseGemm, Element, GemmShape};
use super::wgsl::Ablation;
use crate::dtype::DType;
use crate::error::Result;

/// One timed GEMM.
#[derive(Clone, Debug)]
pub struct DenseTiming {
    pub params: DenseParams,
    pub seconds: f64,
    pub gflops: f64,
}

/// Times `C = A·B` (β = 0) for `shape` with `params` on synthetic data: warm-up, then the median of `reps`.
pub fn time_dense(
    gpu: &Gpu,
    dtype: DType,
    shape: GemmShape,
    params: DenseParams,
    reps: usize,
) -> Result<DenseTiming> {
    DenseTimer::new(gpu, dtype, shape)?.time(gpu, params, reps)
}

/// Deterministic values in [-1, 1) from seed `salt` (the data does not change the timing).
pub(crate) fn fill<T: Element>(n: usize, salt: u64) -> Vec<T> {
    use bespoke_gpu::rng::{Rng, seeded};
    let mut r = seeded(salt);
    (0..n)
        .map(|_| T::from_f64(r.random::<f64>() * 2.0 - 1.0))
        .collect()
}

/// Synthetic A, B, C on the device for one shape, reused across configurations.
struct TypedTimer<T: Element> {
    shape: GemmShape,
    /// Keep naga's runtime bounds checks in the kernels (`DenseGemm::bounds_checked`).
    bounds_checked: bool,
    /// A cost taken out of the kernels (`DenseGemm::ablation`).
    ablation: Ablation,
    a: GpuBuffer<T>,
    b: GpuBuffer<T>,
    c: GpuBuffer<T>,
}

impl<T: Element> TypedTimer<T> {
    fn new(gpu: &Gpu, shape: GemmShape) -> Result<Self> {
        shape.check()?;
        // A shape past the adapter's limits is an error before host memory is filled.
        gpu.check_len::<T>(shape.a().min_len(), "A (M × K)")?;
        gpu.check_len::<T>(shape.b().min_len(), "B (K × N)")?;
        gpu.check_len::<T>(shape.c().min_len(), "C (M × N)")?;
        Ok(Self {
            shape,
            bounds_checked: false,
            ablation: Ablation::None,
            a: gpu.upload(&fill::<T>(shape.a().min_len(), 1))?,
            b: gpu.upload(&fill::<T>(shape.b().min_len(), 2))?,
            c: gpu.alloc::<T>(shape.c().min_len())?,
        })
    }

    /// Times `sub` (within the operands' shape) after a warm-up on one tile with one K step: the pipelines are
    /// the same for every shape, so that warm-up compiles them without costing a full run.
    fn time(
        &self,
        gpu: &Gpu,
        params: DenseParams,
        sub: GemmShape,
        reps: usize,
    ) -> Result<DenseTiming> {
        let full = &self.shape;
        if sub.m > full.m
            || sub.n > full.n
            || sub.k > full.k
            || (sub.lda, sub.ldb, sub.ldc) != (full.lda, full.ldb, full.ldc)
        {
            return Err(crate::error::MmError::Shape(format!(
                "{sub:?} is not a block of the timer's {full:?}"
            )));
        }
        // The parameters first: the warm-up's shape below is made of them.
        params
            .check(T::DTYPE, &TileLimits::of(gpu))
            .map_err(|reason| crate::error::MmError::Params {
                params: params.key(),
                reason,
            })?;
        let tiny = GemmShape {
            m: sub.m.min(params.bm() as usize),
            n: sub.n.min(params.bn() as usize),
            k: sub.k.min((params.kc * params.split_k) as usize),
            ..sub
        };
        let gemm = |shape| {
            DenseGemm::new(shape, T::DTYPE, params, 1.0, 0.0).map(|g| DenseGemm {
                bounds_checked: self.bounds_checked,
                ablation: self.ablation,
                ..g
            })
        };
        gpu.run(&gemm(tiny)?.plan(gpu, &self.a, &self.b, &self.c)?.launches())?;
        let plan = gemm(sub)?.plan(gpu, &self.a, &self.b, &self.c)?;
        let seconds = gpu.time(&plan.launches(), 0, reps)?.median();
        Ok(DenseTiming {
            params,
            seconds,
            gflops: sub.flops() / seconds / 1e9,
        })
    }
}

/// Times many configurations of one shape (β = 0) on the same synthetic operands.
pub struct DenseTimer(Typed);

enum Typed {
    F32(TypedTimer<f32>),
    F64(TypedTimer<f64>),
}

impl std::fmt::Debug for DenseTimer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "DenseTimer({:?})", self.shape())
    }
}

impl DenseTimer {
    pub fn new(gpu: &Gpu, dtype: DType, shape: GemmShape) -> Result<Self> {
        Ok(Self(match dtype {
            DType::F32 => Typed::F32(TypedTimer::new(gpu, shape)?),
            DType::F64 => {
                DType::F64.require(gpu, "dense GEMM")?;
                Typed::F64(TypedTimer::new(gpu, shape)?)
            }
        }))
    }

    /// The same timer with naga's runtime bounds checks kept in the kernels (to measure what they cost; the
    /// kernels run without them otherwise).
    pub fn with_bounds_checks(mut self, on: bool) -> Self {
        match &mut self.0 {
            Typed::F32(t) => t.bounds_checked = on,
            Typed::F64(t) => t.bounds_checked = on,
        }
        self
    }

    /// The same timer with `ablation`'s cost taken out of the kernels (what it costs: the time against the plain
    /// kernel's; the GFLOP/s count the plain kernel's FMAs, which the ablated kernel still does).
    pub fn with_ablation(mut self, ablation: Ablation) -> Self {
        match &mut self.0 {
            Typed::F32(t) => t.ablation = ablation,
            Typed::F64(t) => t.ablation = ablation,
        }
        self
    }

    /// Times the full shape: a warm-up on one tile, then the median of `reps` runs.
    pub fn time(&self, gpu: &Gpu, params: DenseParams, reps: usize) -> Result<DenseTiming> {
        self.time_sub(gpu, params, self.shape(), reps)
    }

    /// Times the block `sub` of the timer's shape (same K range start, same strides).
    pub fn time_sub(
        &self,
        gpu: &Gpu,
        params: DenseParams,
        sub: GemmShape,
        reps: usize,
    ) -> Result<DenseTiming> {
        match &self.0 {
            Typed::F32(t) => t.time(gpu, params, sub, reps),
            Typed::F64(t) => t.time(gpu, params, sub, reps),
        }
    }

    /// Compiles the kernels of every configuration of `space` for the timer's shape on every core, so the timings
    /// that follow find them compiled (on a GPU the driver's compiler is what many candidates wait for).
    pub fn compile(&self, gpu: &Gpu, dtype: DType, space: &[DenseParams]) {
        let kernels: Vec<_> = space
            .iter()
            .filter_map(|p| DenseGemm::new(self.shape(), dtype, *p, 1.0, 0.0).ok())
            .flat_map(|g| g.kernels())
            .collect();
        gpu.compile_all(&kernels);
    }

    /// [`time_sub`](Self::time_sub)'s GFLOP/s, or why the device refused this configuration; an error only where
    /// the device was lost (nothing after it can run).
    pub fn try_time_sub(
        &self,
        gpu: &Gpu,
        params: DenseParams,
        sub: GemmShape,
        reps: usize,
    ) -> Result<std::result::Result<f64, String>> {
        match self.time_sub(gpu, params, sub, reps) {
            Ok(t) => Ok(Ok(t.gflops)),
            Err(crate::error::MmError::Gpu(e @ bespoke_gpu::GpuError::DeviceLost(_))) => {
                Err(e.into())
            }
            Err(e) => Ok(Err(e.to_string())),
        }
    }

    pub fn dtype(&self) -> DType {
        match &self.0 {
            Typed::F32(_) => DType::F32,
            Typed::F64(_) => DType::F64,
        }
    }

    pub fn shape(&self) -> GemmShape {
        match &self.0 {
            Typed::F32(t) => t.shape,
            Typed::F64(t) => t.shape,
        }
    }
}
