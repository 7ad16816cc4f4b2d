//! Running a dense GEMM on device buffers: planning row blocks that fit the binding limit, split-K, launches.

use bespoke_gpu::{Arg, Gpu, GpuBuffer, Grid, Kernel, Launch, bytemuck::Pod};

use super::params::{DenseParams, TileLimits};
use super::wgsl::{Ablation, Epilogue, ablated_wgsl, splitk_reduce_wgsl};
use crate::dtype::DType;
use crate::error::{MmError, Result};
use crate::reference::Shape;

/// Element types the kernels run on: the device layer's one element trait.
pub use bespoke_gpu::Element;

/// Sizes of C = α·A·B + β·C with row-major A (m×k), B (k×n), C (m×n) and leading dimensions.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct GemmShape {
    pub m: usize,
    pub n: usize,
    pub k: usize,
    pub lda: usize,
    pub ldb: usize,
    pub ldc: usize,
}

impl GemmShape {
    /// Packed storage: lda = k, ldb = ldc = n.
    pub fn packed(m: usize, n: usize, k: usize) -> Self {
        Self {
            m,
            n,
            k,
            lda: k,
            ldb: n,
            ldc: n,
        }
    }
    pub fn a(&self) -> Shape {
        Shape::new(self.m, self.k, self.lda)
    }
    pub fn b(&self) -> Shape {
        Shape::new(self.k, self.n, self.ldb)
    }
    pub fn c(&self) -> Shape {
        Shape::new(self.m, self.n, self.ldc)
    }
    pub fn flops(&self) -> f64 {
        2.0 * self.m as f64 * self.n as f64 * self.k as f64
    }
    pub fn check(&self) -> Result<()> {
        if self.m == 0 || self.n == 0 || self.k == 0 {
            return Err(MmError::Shape(format!(
                "empty GEMM {}×{}×{}",
                self.m, self.n, self.k
            )));
        }
        for (name, ld, cols) in [
            ("lda", self.lda, self.k),
            ("ldb", self.ldb, self.n),
            ("ldc", self.ldc, self.n),
        ] {
            if ld < cols {
                return Err(MmError::Shape(format!(
                    "{name} = {ld} is less than the {cols} columns it strides"
                )));
            }
        }
        let dims = [
            ("M", self.m),
            ("N", self.n),
            ("K", self.k),
            ("lda", self.lda),
            ("ldb", self.ldb),
            ("ldc", self.ldc),
        ];
        if let Some((name, v)) = dims.iter().find(|(_, v)| *v > u32::MAX as usize / 2) {
            return Err(MmError::Shape(format!(
                "GEMM {self}: {name} = {v} exceeds the kernels' 32-bit indexing (at most {})",
                u32::MAX / 2
            )));
        }
        Ok(())
    }
}

/// `M×N×K`, and the leading dimensions where they are not the packed ones.
impl std::fmt::Display for GemmShape {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}×{}×{}", self.m, self.n, self.k)?;
        if (self.lda, self.ldb, self.ldc) != (self.k, self.n, self.n) {
            write!(f, " (lda {}, ldb {}, ldc {})", self.lda, self.ldb, self.ldc)?;
        }
        Ok(())
    }
}

/// A dense GEMM configuration: shape, precision, tiling, α and β.
#[derive(Clone, Debug)]
pub struct DenseGemm {
    pub shape: GemmShape,
    pub dtype: DType,
    pub params: DenseParams,
    pub alpha: f64,
    pub beta: f64,
    /// Keep the runtime bounds checks naga adds to every access (off by default: every index is in range by
    /// construction, see `plan`; on to measure what the checks cost, `mm dense-bench --bounds-checks`).
    pub bounds_checked: bool,
    /// A cost taken out of the tiled kernel to measure it (`mm dense-bench --ablate`): the result is then not
    /// A·B ([`super::wgsl::ablated_reference`]). `Ablation::None` but for such measurements.
    pub ablation: Ablation,
}

/// The launches of one GEMM, ready to run or time; holds the split-K workspace alive.
#[derive(Debug)]
pub struct GemmPlan<T: Element> {
    launches: Vec<Launch>,
    _workspace: Option<GpuBuffer<T>>,
}

impl<T: Element> GemmPlan<T> {
    pub fn launches(&self) -> Vec<&Launch> {
        self.launches.iter().collect()
    }
}

impl DenseGemm {
    /// Checks the configuration; the vector width needs N, ldb and ldc to be multiples of it.
    pub fn new(
        shape: GemmShape,
        dtype: DType,
        params: DenseParams,
        alpha: f64,
        beta: f64,
    ) -> Result<Self> {
        shape.check()?;
        for (what, v) in [("alpha", alpha), ("beta", beta)] {
            if !v.is_finite() {
                return Err(MmError::NonFinite { what, value: v });
            }
        }
        let v = params.vec as usize;
        if v > 1
            && [shape.n, shape.ldb, shape.ldc]
                .iter()
                .any(|d| !d.is_multiple_of(v))
        {
            return Err(MmError::Params {
                params: params.key(),
                reason: format!(
                    "vector width {v} needs N, ldb and ldc to be multiples of {v} ({shape})"
                ),
            });
        }
        if params.split_k == 0 || !params.split_k.is_power_of_two() {
            return Err(MmError::Params {
                params: params.key(),
                reason: "split_k must be a power of two".into(),
            });
        }
        Ok(Self {
            shape,
            dtype,
            params,
            alpha,
            beta,
            bounds_checked: false,
            ablation: Ablation::None,
        })
    }

    /// Binds the GEMM on `gpu` to the given buffers, splitting rows of A/C and of B into blocks that each fit
    /// one binding (K blocks after the first accumulate with β = 1).
    pub fn plan<T: Element>(
        &self,
        gpu: &Gpu,
        a: &GpuBuffer<T>,
        b: &GpuBuffer<T>,
        c: &GpuBuffer<T>,
    ) -> Result<GemmPlan<T>> {
        let s = &self.shape;
        let p = &self.params;
        if T::DTYPE != self.dtype {
            return Err(MmError::Shape(format!(
                "buffers hold {} but the GEMM is {}",
                T::DTYPE,
                self.dtype
            )));
        }
        p.check(self.dtype, &TileLimits::of(gpu))
            .map_err(|reason| MmError::Params {
                params: p.key(),
                reason,
            })?;
        crate::error::check_apart(("C", c), &[("A", a), ("B", b)])?;
        for (name, buf, sh) in [("A", a, s.a()), ("B", b, s.b()), ("C", c, s.c())] {
            if buf.len() < sh.min_len() {
                return Err(MmError::Shape(format!(
                    "{name} holds {} elements, a {}×{} matrix with leading dimension {} needs {}",
                    buf.len(),
                    sh.rows,
                    sh.cols,
                    sh.ld,
                    sh.min_len()
                )));
            }
        }
        let split = p.split_k as usize;
        let c_blocks = gpu.row_blocks::<T>(s.m, &[s.lda, s.ldc, s.ldc], &[1, 1, split])?;
        let k_blocks = gpu.row_blocks::<T>(s.k, &[s.ldb], &[1])?;
        let max_rows = c_blocks.iter().map(|r| r.len()).max().unwrap_or(0);
        let workspace = if split > 1 {
            Some(gpu.alloc::<T>(split * max_rows * s.ldc)?)
        } else {
            None
        };

        let vec = p.vec as usize;
        let user_epi = Epilogue::for_beta(self.beta);
        let nv = (s.n / vec) as u32;
        // Each kernel's text once per plan, not once per block: K blocks after the first use β = 1.
        let first = self.kernel_pair(user_epi);
        let rest = if k_blocks.len() > 1 {
            Some(self.kernel_pair(Epilogue::BetaOne))
        } else {
            None
        };
        let mut launches = Vec::new();
        for rows in &c_blocks {
            for (kb, ks) in k_blocks.iter().enumerate() {
                let ((main, reduce), beta) = match (&rest, kb) {
                    (Some(r), 1..) => (r, 1.0),
                    _ => (&first, self.beta),
                };
                let kn = ks.len();
                let k_per_split = kn.div_ceil(split).div_ceil(p.kc as usize) * p.kc as usize;
                let uniform = Arg::Uniform(params_bytes::<T>(
                    [
                        rows.len() as u32,
                        s.n as u32,
                        kn as u32,
                        s.lda as u32,
                        (s.ldb / vec) as u32,
                        (s.ldc / vec) as u32,
                        k_per_split as u32,
                        ks.start as u32,
                    ],
                    self.alpha,
                    beta,
                ));
                let grid = Grid::d3(
                    nv.div_ceil(p.wgn * p.tn / p.vec),
                    (rows.len() as u32).div_ceil(p.bm()),
                    p.split_k,
                );
                let a_arg = a.rows_arg(rows.clone(), s.lda);
                let b_arg = b.rows_arg(ks.clone(), s.ldb);
                if let (Some(ws), Some(reduce)) = (&workspace, reduce) {
                    launches.push(gpu.prepare(
                        main,
                        &[a_arg, b_arg, ws.arg(), uniform.clone()],
                        grid,
                    )?);
                    let total = rows.len() as u64 * u64::from(nv);
                    launches.push(gpu.prepare(
                        reduce,
                        &[ws.arg(), c.rows_arg(rows.clone(), s.ldc), uniform],
                        Grid::cover(total, 256)?,
                    )?);
                } else {
                    launches.push(gpu.prepare(
                        main,
                        &[a_arg, b_arg, c.rows_arg(rows.clone(), s.ldc), uniform],
                        grid,
                    )?);
                }
            }
        }
        Ok(GemmPlan {
            launches,
            _workspace: workspace,
        })
    }

    /// The kernels a plan of this GEMM compiles where B fits one binding: the tiled kernel and, with split-K, its
    /// reduction (a B bound in K blocks adds their β = 1 twins, compiled when planned). For compiling many
    /// configurations at once before timing them ([`Gpu::compile_all`]).
    pub fn kernels(&self) -> Vec<Kernel> {
        let (main, reduce) = self.kernel_pair(Epilogue::for_beta(self.beta));
        std::iter::once(main).chain(reduce).collect()
    }

    /// The tiled kernel for epilogue `epi`, and split-K's reduction. SAFETY (the kernels without runtime bounds
    /// checks): `plan` checks every buffer to hold its matrix (`min_len`: (rows − 1)·ld + cols) and binds each by
    /// rows (`rows_arg`), so within a block the kernel's global indices r·ld + col, r < the block's rows (p.m) and
    /// col < cols (a_col0 + kg < K ≤ lda; cv < N/vec ≤ ldb/vec, ldc/vec), stay below the bound length; split-K
    /// writes slice w.z < split of a workspace of split · max_rows · ldc; the workgroup arrays are indexed by
    /// kk < KC, row and column groups below BM/4 (or BM) and BNV, as `dense_wgsl` forms them from the
    /// workgroup's own invocation ids.
    fn kernel_pair(&self, epi: Epilogue) -> (Kernel, Option<Kernel>) {
        let p = &self.params;
        let unchecked = |k: Kernel| {
            if self.bounds_checked {
                k
            } else {
                // SAFETY: every index in range, as the function's comment shows.
                unsafe { k.without_bounds_checks() }
            }
        };
        let checks = format!(
            "{}{}",
            if self.bounds_checked { "_checked" } else { "" },
            match self.ablation {
                Ablation::None => String::new(),
                a => format!("_ablated_{}", a.name()),
            }
        );
        if p.split_k > 1 {
            let main = Kernel::new(
                format!("dense_{}_{}_partial{checks}", p.key(), self.dtype),
                ablated_wgsl(p, self.dtype, Epilogue::Partial, self.ablation),
            );
            let reduce = Kernel::new(
                format!(
                    "splitk_reduce_{}x{}_{}_{epi:?}{checks}",
                    p.split_k, p.vec, self.dtype
                ),
                splitk_reduce_wgsl(self.dtype, p.vec, p.split_k, epi),
            );
            (unchecked(main), Some(unchecked(reduce)))
        } else {
            let main = Kernel::new(
                format!("dense_{}_{}_{epi:?}{checks}", p.key(), self.dtype),
                ablated_wgsl(p, self.dtype, epi, self.ablation),
            );
            (unchecked(main), None)
        }
    }
}

/// The `Params` uniform: eight u32 then α and β in the element type.
fn params_bytes<T: Element>(words: [u32; 8], alpha: f64, beta: f64) -> Vec<u8> {
    let mut out: Vec<u8> = bytemuck_bytes(&words).to_vec();
    out.extend_from_slice(bytemuck_bytes(&[T::from_f64(alpha), T::from_f64(beta)]));
    out
}

fn bytemuck_bytes<P: Pod>(v: &[P]) -> &[u8] {
    bespoke_gpu::bytemuck::cast_slice(v)
}

#[cfg(test)]
mod tests {
    use super::GemmShape;

    #[test]
    fn a_shape_reads_as_m_n_k_and_its_errors_name_the_dimension() {
        assert_eq!(
            GemmShape::packed(96, 100_000, 64).to_string(),
            "96×100000×64"
        );
        let s = GemmShape {
            lda: 70,
            ..GemmShape::packed(4, 8, 64)
        };
        assert_eq!(s.to_string(), "4×8×64 (lda 70, ldb 8, ldc 8)");
        let e = GemmShape {
            ldc: 1 << 40,
            ..GemmShape::packed(4, 8, 64)
        }
        .check()
        .unwrap_err()
        .to_string();
        assert!(e.contains("ldc = 1099511627776 exceeds"), "{e}");
    }
}
