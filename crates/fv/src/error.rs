//! Errors of the finite-volume crate.

use bespoke_gpu::GpuError;

#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum FvError {
    #[error(transparent)]
    Gpu(#[from] GpuError),
    /// A malformed, truncated or inconsistent mesh (file, where, what).
    #[error("{path}{}: {why}", at.as_ref().map(|a| format!(" ({a})")).unwrap_or_default())]
    Mesh {
        path: String,
        at: Option<String>,
        why: String,
    },
    #[error("{path}: {err}")]
    Io { path: String, err: std::io::Error },
    /// A parameter outside its legal range (name, value, why).
    #[error("{what} = {value}: {why}")]
    Param {
        what: &'static str,
        value: String,
        why: String,
    },
    /// A checkpoint that cannot be read or does not belong to the run (file, what is wrong).
    #[error("{path}: {why}")]
    Checkpoint { path: String, why: String },
    /// Sizes that do not fit together.
    #[error("{0}")]
    Shape(String),
    /// METIS refused or failed.
    #[error("METIS: {0}")]
    Metis(String),
    /// The adapter lacks something the request needs.
    #[error("{0}")]
    Unsupported(String),
    /// The rank layer failed (another rank failed, the ranks disagree).
    #[error(transparent)]
    Comm(#[from] bespoke_comm::CommError),
}

pub type Result<T, E = FvError> = std::result::Result<T, E>;

impl FvError {
    /// An I/O error on the file at `path`.
    pub(crate) fn io(path: &std::path::Path, err: std::io::Error) -> Self {
        Self::Io {
            path: path.display().to_string(),
            err,
        }
    }

    pub(crate) fn param(
        what: &'static str,
        value: impl std::fmt::Display,
        why: impl Into<String>,
    ) -> Self {
        Self::Param {
            what,
            value: value.to_string(),
            why: why.into(),
        }
    }
}
