//! Errors of the lattice Boltzmann crate.

use bespoke_gpu::GpuError;

#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LbmError {
    #[error(transparent)]
    Gpu(#[from] GpuError),
    /// A physical or numerical parameter outside its legal range (name, value, why).
    #[error("{what} = {value}: {why}")]
    Param {
        what: &'static str,
        value: String,
        why: String,
    },
    /// Sizes or arrays that do not fit together.
    #[error("{0}")]
    Shape(String),
    /// Cell flags that cannot be used (e.g. an inlet that is not on the domain's edge).
    #[error("cell ({x}, {y}): {why}")]
    Flag { x: usize, y: usize, why: String },
    /// The adapter lacks something the configuration needs.
    #[error("{0}")]
    Unsupported(String),
    /// The run produced non-finite values: it went unstable.
    #[error(
        "the simulation diverged by step {step} ({what} is not finite at cell ({x}, {y})): lower the Reynolds \
             number or the velocity, raise the resolution, use TRT, or add a Smagorinsky subgrid model \
             (`Config::smagorinsky`, `--smagorinsky 0.1`–`0.2`)"
    )]
    Diverged {
        step: u64,
        what: &'static str,
        x: usize,
        y: usize,
    },
    /// Operations that do not apply to the lattice's current state.
    #[error("{0}")]
    State(String),
    /// A malformed input or checkpoint file.
    #[error("{path}: {why}")]
    File { path: String, why: String },
    /// A checkpoint not written: the state holds a non-finite population (`at`: where, on the rank that saw it),
    /// the run has diverged. The previous file, if any, is kept. Returned on every rank of a distributed lattice.
    #[error(
        "{path}: not written: the state holds a non-finite population{at}, the run has diverged; the previous \
         checkpoint, if any, is kept"
    )]
    DivergedCheckpoint { path: String, at: String },
    #[error("{path}: {err}")]
    Io { path: String, err: std::io::Error },
    /// A stop was asked for (a signal); the state was saved where `saved` says, if anywhere.
    #[error("interrupted at step {step}{}", match saved {
        Some(p) => format!("; the state is saved in {p} (resume with --resume {p})"),
        None => "; nothing was saved (give --checkpoint FILE to keep the state)".to_owned(),
    })]
    Interrupted { step: u64, saved: Option<String> },
    /// Another rank of a distributed lattice failed, or the ranks disagree.
    #[error("{0}")]
    Ranks(String),
    #[error(transparent)]
    Comm(#[from] bespoke_comm::CommError),
}

pub type Result<T, E = LbmError> = std::result::Result<T, E>;

impl LbmError {
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
    pub(crate) fn io(path: &std::path::Path, err: std::io::Error) -> Self {
        Self::Io {
            path: path.display().to_string(),
            err,
        }
    }
    pub(crate) fn file(path: &std::path::Path, why: impl Into<String>) -> Self {
        Self::File {
            path: path.display().to_string(),
            why: why.into(),
        }
    }
}
