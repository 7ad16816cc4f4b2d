//! The tuner's decisions on disk: entries of the `mm-tune` namespace of bespoke-gpu's [`DiskCache`] (one file
//! per decision, written atomically, checksummed), keyed by (adapter, A's hash, precision, β, N bucket, vector
//! alignment). Two processes tuning at once never tear a file; the last decision for a key wins.

use std::path::Path;

use bespoke_gpu::DiskCache;

use super::operator::Operator;
use super::run::Panel;
use super::variant::Variant;
use crate::dtype::DType;

/// Bumped when [`Decision`] or the key changes, so old decisions are ignored, not misread; and when the tuner's
/// rules change so that decisions made under the old ones can be far from what it now takes, so that they are
/// tuned again rather than kept for good. v4 (2026-11-26): the compile timed apart from the first run and the
/// compile laws' probes off the operator's budget; under the old rules a law's miss had cut a 10 ms bstream
/// kernel and kept the dense one (pyr-p3-m0, ×4.5 slower), and probes had left hex-p3-m3 on Mesa 25.0.7 a rolled
/// kernel at ×4.1 its access floor where it now takes bstream-v2 at ×2.3 (docs/perf.md). v5 (2026-11-28): GPUs
/// also try long twins of the operators past one default launch, and a decision among a caller's own list of
/// variants is keyed by that list (it had been stored, and read, as the decision among all of them). v6
/// (2026-12-03): the dense kernel's lanes paired (`Lanes`): a decision against the dense candidate was made
/// against another kernel. v7 (2026-12-05): an unrolled family's launches group rows that share rows of B
/// (`partition.rs`: hex-p6-m460 at a GPU's 2048 terms a launch reads 586 rows of B a column, not 1330), so
/// a decision against a variant in several launches was made against kernels that read more.
const VERSION: u32 = 7;

/// One remembered decision.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Decision {
    /// The winner: a variant name or `dense:<params key>`.
    pub choice: String,
    /// Its median time when tuned (none where it was not timed).
    pub seconds: Option<f64>,
    /// The dense kernel's median time when tuned (if it was a candidate).
    pub dense_seconds: Option<f64>,
    /// The N it was tuned at.
    pub n: usize,
}

/// The key of a decision. N is bucketed by powers of two: the winner rarely changes within a factor of two. A
/// decision among a caller's own `variants` (`TuneOptions::variants`, `mm bench --variants`) is keyed by them: it
/// is not the decision among every candidate, nor one among another list.
pub fn key(
    adapter_key: &str,
    op: &Operator,
    dtype: DType,
    beta: f64,
    panel: Panel,
    variants: Option<&[Variant]>,
) -> String {
    let mut key = format!(
        "{adapter_key}-{:016x}-{}x{}-{dtype}-beta{beta:e}-n{}-align{}",
        op.hash(),
        op.m,
        op.k,
        panel.n.next_power_of_two(),
        panel.alignment()
    );
    if let Some(v) = variants {
        let mut names: Vec<String> = v.iter().map(Variant::name).collect();
        names.sort_unstable();
        names.dedup();
        key += &format!("-only-{}", names.join("+"));
    }
    key
}

/// The decisions under `root` (a cache folder).
pub fn cache(root: &Path) -> DiskCache {
    DiskCache::at(root, "mm-tune", VERSION)
}
