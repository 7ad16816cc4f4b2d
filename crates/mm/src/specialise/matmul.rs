//! `MatMul`: C = A·B + β·C for a constant A with a chosen kernel, a specialised variant or the dense GEMM, and
//! its plan bound to buffers. Choosing the kernel by timing is the tuner's (tune.rs).

use bespoke_gpu::{Gpu, GpuBuffer, Kernel, Launch};

use super::operator::Operator;
use super::run::{Panel, SpecKernel, check_panels};
use super::tuning::TuneReport;
use super::variant::Variant;
use crate::dense::{DenseGemm, DenseParams, Element, GemmPlan, GemmShape};
use crate::dtype::DType;
use crate::error::Result;

/// Which kernel computes the product.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Choice {
    Spec(Variant),
    Dense(DenseParams),
}

impl Choice {
    /// A variant name, or `dense:<params key>`.
    pub fn name(&self) -> String {
        match self {
            Self::Spec(v) => v.name(),
            Self::Dense(p) => format!("dense:{}", p.key()),
        }
    }
    pub fn parse(s: &str) -> Option<Self> {
        match s.strip_prefix("dense:") {
            Some(k) => DenseParams::parse(k).map(Self::Dense),
            None => Variant::parse(s).map(Self::Spec),
        }
    }
    pub fn is_dense(&self) -> bool {
        matches!(self, Self::Dense(_))
    }
    /// The specialised variant, if this is one.
    pub fn variant(&self) -> Option<Variant> {
        match self {
            Self::Spec(v) => Some(*v),
            Self::Dense(_) => None,
        }
    }
}

enum Imp<T: Element> {
    Spec(SpecKernel),
    Dense(DenseGemm, GpuBuffer<T>),
}

/// C = A·B + β·C for one operator, precision, β and panel, with its kernel chosen.
pub struct MatMul<T: Element> {
    pub op: Operator,
    pub beta: f64,
    pub panel: Panel,
    pub choice: Choice,
    pub report: TuneReport,
    imp: Imp<T>,
}

impl<T: Element> std::fmt::Debug for MatMul<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "MatMul({} {}×{} {} β={} {:?})",
            self.op.name,
            self.op.m,
            self.op.k,
            self.choice.name(),
            self.beta,
            self.panel
        )
    }
}

/// Launches bound to buffers, plus what they keep alive.
#[derive(Debug)]
pub struct MatMulPlan<T: Element> {
    spec: Vec<Launch>,
    dense: Option<GemmPlan<T>>,
}

impl<T: Element> MatMulPlan<T> {
    pub fn launches(&self) -> Vec<&Launch> {
        match &self.dense {
            Some(p) => p.launches(),
            None => self.spec.iter().collect(),
        }
    }
}

impl<T: Element> MatMul<T> {
    /// The product with a given kernel (no tuning).
    pub fn with_choice(
        gpu: &Gpu,
        op: &Operator,
        beta: f64,
        panel: Panel,
        choice: Choice,
    ) -> Result<Self> {
        super::run::check_args(gpu, T::DTYPE, beta, panel, "specialised matmul")?;
        op.check_precision(T::DTYPE)?;
        let imp = match choice {
            Choice::Spec(v) => Imp::Spec(SpecKernel::new(gpu, op, v, T::DTYPE, beta, panel)?),
            Choice::Dense(p) => {
                let shape = dense_shape(op, panel);
                let a: Vec<T> = op.values().iter().map(|&v| T::from_f64(v)).collect();
                Imp::Dense(
                    DenseGemm::new(shape, T::DTYPE, p, 1.0, beta)?,
                    gpu.upload(&a)?,
                )
            }
        };
        Ok(Self {
            op: op.clone(),
            beta,
            panel,
            choice,
            report: TuneReport::default(),
            imp,
        })
    }

    /// Binds the product to `b` (K×N, ldb) and `c` (M×N, ldc).
    pub fn plan(&self, gpu: &Gpu, b: &GpuBuffer<T>, c: &GpuBuffer<T>) -> Result<MatMulPlan<T>> {
        check_panels(self.op.m, self.op.k, self.panel, b.len(), c.len())?;
        crate::error::check_apart(("C", c), &[("B", b)])?;
        Ok(match &self.imp {
            Imp::Spec(k) => MatMulPlan {
                spec: k.plan(gpu, b, c)?,
                dense: None,
            },
            Imp::Dense(g, a) => MatMulPlan {
                spec: Vec::new(),
                dense: Some(g.plan(gpu, a, b, c)?),
            },
        })
    }

    /// Runs C = A·B + β·C once.
    pub fn run(&self, gpu: &Gpu, b: &GpuBuffer<T>, c: &GpuBuffer<T>) -> Result<()> {
        let plan = self.plan(gpu, b, c)?;
        Ok(gpu.run(&plan.launches())?)
    }

    /// The generated sources (empty for the dense kernel).
    pub fn sources(&self) -> Vec<&str> {
        match &self.imp {
            Imp::Spec(k) => k.sources(),
            Imp::Dense(..) => Vec::new(),
        }
    }

    /// The kernels its plan compiles (the dense GEMM's where B fits one binding: [`DenseGemm::kernels`]), to
    /// compile many candidates at once before timing them.
    pub fn kernels(&self) -> Vec<Kernel> {
        match &self.imp {
            Imp::Spec(k) => k.kernels(),
            Imp::Dense(g, _) => g.kernels(),
        }
    }

    pub fn dtype(&self) -> DType {
        T::DTYPE
    }

    /// The specialised kernel, if that is the choice.
    pub fn spec_kernel(&self) -> Option<&SpecKernel> {
        match &self.imp {
            Imp::Spec(k) => Some(k),
            Imp::Dense(..) => None,
        }
    }
}

/// The dense GEMM's shape for A (lda = K) against a panel.
pub(crate) fn dense_shape(op: &Operator, p: Panel) -> GemmShape {
    GemmShape {
        m: op.m,
        n: p.n,
        k: op.k,
        lda: op.k,
        ldb: p.ldb,
        ldc: p.ldc,
    }
}
