//! Errors of the matrix-multiply crate.

use bespoke_gpu::{GpuBuffer, GpuError};

#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum MmError {
    #[error(transparent)]
    Gpu(#[from] GpuError),
    /// Shapes, leading dimensions or buffer lengths that do not fit together.
    #[error("{0}")]
    Shape(String),
    /// Kernel parameters outside the legal space (with the reason).
    #[error("illegal kernel parameters {params}: {reason}")]
    Params { params: String, reason: String },
    /// A malformed or unsupported matrix input (file, line when known, what is wrong).
    #[error("{source_name}{}: {reason}", line.map(|l| format!(", line {l}")).unwrap_or_default())]
    Matrix {
        source_name: String,
        line: Option<usize>,
        reason: String,
    },
    /// Reading an input file failed.
    #[error("{path}: {err}")]
    Io { path: String, err: std::io::Error },
    /// A kernel variant that does not apply to this operator or shape (with the reason).
    #[error("variant {variant} does not apply: {reason}")]
    NotApplicable { variant: String, reason: String },
    /// A scalar that must be finite is not.
    #[error("{what} must be finite, got {value}")]
    NonFinite { what: &'static str, value: f64 },
    /// A finite value past the kernel's precision (f32: |v| > 3.4e38), which would be ±∞ on the device.
    #[error("{what} = {value:e} is past {dtype}'s range: use f64")]
    Range {
        what: String,
        value: f64,
        dtype: &'static str,
    },
}

pub type Result<T, E = MmError> = std::result::Result<T, E>;

/// Refuses an output that is also one of the inputs: a kernel cannot read a buffer it writes (wgpu refuses the
/// dispatch, in its own words: "conflicting usages … STORAGE_READ_WRITE is an exclusive usage").
pub(crate) fn check_apart<T: bespoke_gpu::bytemuck::Pod>(
    out: (&str, &GpuBuffer<T>),
    inputs: &[(&str, &GpuBuffer<T>)],
) -> Result<()> {
    match inputs.iter().find(|(_, b)| b.is(out.1)) {
        Some((name, _)) => Err(MmError::Shape(format!(
            "{} and {name} are the same buffer: the kernel writes {} while it reads {name}; give {} a buffer of its \
             own",
            out.0, out.0, out.0
        ))),
        None => Ok(()),
    }
}
