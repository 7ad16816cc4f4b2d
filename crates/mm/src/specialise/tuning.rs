//! What the tuner is told ([`TuneOptions`]) and what it reports ([`TuneReport`], one [`Candidate`] per kernel it
//! considered), with the constants of its screening.

use std::path::PathBuf;

use super::variant::Variant;
use crate::dense::DenseParams;

/// Where the dense candidate's tiling comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DenseSource {
    /// The analytical model's pick (its inputs are measured once per adapter and cached).
    Model,
    /// A given tiling (tests use this to avoid measuring the model's inputs).
    Fixed(DenseParams),
    /// No dense candidate.
    Off,
}

/// How to tune.
#[derive(Clone, Debug)]
pub struct TuneOptions {
    /// Specialised variants to try; `None`: `default_variants` for the adapter.
    pub variants: Option<Vec<Variant>>,
    pub dense: DenseSource,
    /// Timed repetitions of each finalist (median kept).
    pub reps: usize,
    /// Candidates re-timed with `reps` after one screening run each.
    pub finalists: usize,
    /// Read and write decisions in the cache.
    pub use_cache: bool,
    /// Tune even where the cache holds a decision, and replace it (`mm bench --retune`); the compile laws
    /// measured on the adapter are still read, they are facts, not decisions.
    pub refresh: bool,
    /// Cache folder; `None`: `Gpu::cache_dir`.
    pub cache_dir: Option<PathBuf>,
    /// Seconds one operator's tuning may spend (`None`: no bound). Candidates are compiled cheapest first
    /// (the dense kernel, then by generated source size); each unrolled candidate's compile is predicted from
    /// its family's law on this adapter (docs/mm.md, "Tuning budget"), and one whose prediction would end past
    /// the budget is skipped, not compiled — a bstream one giving way first to the cheapest-to-compile link of
    /// its [`Variant::cheaper_compile`] chain that fits. The dense and rolled kernels are always tried, and the
    /// smallest unrolled one while nothing is known. A compile cannot be abandoned once started.
    pub budget_seconds: Option<f64>,
    /// Workers that compile the candidates at once before they are timed one by one (docs/mm.md, "Compiling
    /// at once"); `None`: every core on a GPU, none on a CPU adapter (llvmpipe compiles at a kernel's first
    /// dispatch, on its queue's one thread, whatever thread created the pipeline). 0 or 1: one by one.
    pub compile_threads: Option<usize>,
}

impl Default for TuneOptions {
    fn default() -> Self {
        Self {
            variants: None,
            dense: DenseSource::Model,
            reps: 5,
            finalists: 3,
            use_cache: true,
            refresh: false,
            cache_dir: None,
            budget_seconds: Some(DEFAULT_TUNE_BUDGET),
            compile_threads: None,
        }
    }
}

/// Default bound on one operator's tuning (`TuneOptions::budget_seconds`), seconds.
pub const DEFAULT_TUNE_BUDGET: f64 = 30.0;

/// A screening run shorter than this is repeated [`SHORT_SCREEN_REPS`] times (median): one run of a sub-ms kernel
/// on llvmpipe varied 2–5× and once kept bstream-v2 out of the finalists of quad-p3-m3, where it runs 5× faster
/// than the cstream-v2 that was kept (docs/perf.md). Costs at most 50 ms per candidate.
pub const SHORT_SCREEN_SECONDS: f64 = 0.01;
/// Screening runs of a candidate whose first screening run was short.
pub const SHORT_SCREEN_REPS: usize = 5;

/// Screening ratio past which the dense candidate is not re-timed (see `MatMul::tuned`).
pub const DENSE_RETIME: f64 = 2.0;

/// The status of a finalist whose screening run stands as its time: a long run, and the budget spent.
pub const FINALIST_ON_SCREEN: &str = "finalist: its screening run stands, the budget spent";

/// A first run of the dense kernel longer than this defers its screening run until the others are screened.
pub const DEFER_DENSE_SCREEN_SECONDS: f64 = 1.0;

/// One candidate as the tuner saw it.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Candidate {
    pub name: String,
    /// Median of the finalist timing, else the screening run.
    pub seconds: Option<f64>,
    /// The screening run (a median of several where it was short): what the choice of finalists compared,
    /// kept after a finalist's own timing replaces `seconds`.
    pub screen_seconds: Option<f64>,
    /// Binding the candidate and a one-workgroup launch of each of its launches: the driver's compile, whether
    /// it compiles at pipeline creation or, as llvmpipe does, at the first dispatch.
    pub compile_seconds: Option<f64>,
    /// What the compile law predicted for its compile beforehand, where the family had a law (before the
    /// margin: docs/mm.md).
    pub predicted_compile_seconds: Option<f64>,
    /// `finalist`, [`FINALIST_ON_SCREEN`], `screened`, `screened out: <reason>` or `skipped: <reason>`.
    pub status: String,
    /// The part of `compile_seconds` its kernels took on the workers that compiled the candidates at once
    /// ([`ParallelCompile`]), where they did; the rest is binding and the first one-workgroup launches.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub precompiled_seconds: Option<f64>,
}

impl Candidate {
    /// A candidate that was not compiled, for `status` (`skipped: …`), with its prediction where it had one.
    pub fn skipped(name: String, predicted: Option<f64>, status: String) -> Self {
        Self {
            name,
            seconds: None,
            screen_seconds: None,
            compile_seconds: None,
            predicted_compile_seconds: predicted,
            status,
            precompiled_seconds: None,
        }
    }
}

/// What tuning did (or that the decision came from the cache).
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct TuneReport {
    pub from_cache: bool,
    /// This operator's tuning, from after the dense model's inputs were at hand and less `probe_seconds`: what
    /// the tuning budget bounds.
    pub tune_seconds: f64,
    /// Measuring the dense model's inputs for this adapter and precision before tuning could start: once per
    /// adapter and precision (then read from the user's cache), 0 when they were cached; outside the budget.
    pub model_seconds: f64,
    /// Probing the compile laws of the families this operator met first on this adapter (two compiles each,
    /// then cached): once per family and adapter, outside the budget; 0 when every law was known.
    pub probe_seconds: f64,
    pub candidates: Vec<Candidate>,
    /// The chosen kernel's median time when tuned.
    pub seconds: Option<f64>,
    /// The dense kernel's time when tuned: the median of the finalist runs, or its one screening run when it
    /// lost the screening by more than [`DENSE_RETIME`]×.
    pub dense_seconds: Option<f64>,
    /// The candidates compiled at once before the timings, where they were.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub parallel_compile: Option<ParallelCompile>,
}

/// The candidates the tuner compiled at once on several workers before timing them one by one: those the
/// budget admits with every earlier one's predicted compile charged as if compiled one after another.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct ParallelCompile {
    pub threads: usize,
    pub candidates: usize,
    pub kernels: usize,
    /// Seconds from the first compile's start to the last one's end.
    pub wall_seconds: f64,
    /// The kernels' compile seconds on their workers, summed: what one worker would have taken (where the
    /// driver serialises compiles internally, each also holds its wait).
    pub kernel_seconds: f64,
}
