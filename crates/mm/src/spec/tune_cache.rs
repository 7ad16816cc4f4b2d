//! The tuner's decisions on disk: one JSON file per adapter under the cache folder, keyed by
//! (A's hash, precision, β, N bucket, vector alignment).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use super::operator::Operator;
use super::run::Panel;
use crate::dtype::DType;

const VERSION: u32 = 1;

/// One remembered decision.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Decision {
    /// The winner: a variant name or `dense:<params key>`.
    pub choice: String,
    /// Its median time when tuned.
    pub seconds: f64,
    /// The dense kernel's median time when tuned (if it was a candidate).
    pub dense_seconds: Option<f64>,
    /// The N it was tuned at.
    pub n: usize,
}

#[derive(Debug, Default, serde::Serialize, serde::Deserialize)]
struct File {
    version: u32,
    entries: BTreeMap<String, Decision>,
}

/// The key of a decision. N is bucketed by powers of two: the winner rarely changes within a factor of two.
pub fn key(op: &Operator, dtype: DType, beta: f64, panel: Panel) -> String {
    format!(
        "{:016x}-{}x{}-{dtype}-beta{beta:e}-n{}-align{}",
        op.hash(),
        op.m,
        op.k,
        panel.n.next_power_of_two(),
        panel.alignment()
    )
}

/// The decision file for `adapter_key` under `dir`.
pub fn path(dir: &Path, adapter_key: &str) -> PathBuf {
    dir.join("mm-tune")
        .join(format!("{adapter_key}-v{VERSION}.json"))
}

fn read(path: &Path) -> File {
    std::fs::read_to_string(path)
        .ok()
        .and_then(|t| serde_json::from_str::<File>(&t).ok())
        .filter(|f| f.version == VERSION)
        .unwrap_or(File {
            version: VERSION,
            entries: BTreeMap::new(),
        })
}

pub fn load(path: &Path, key: &str) -> Option<Decision> {
    read(path).entries.remove(key)
}

/// Adds a decision (read, modify, write to a temporary file, rename). A failed write only costs a re-tune.
pub fn store(path: &Path, key: &str, d: Decision) -> bool {
    let mut f = read(path);
    f.entries.insert(key.to_owned(), d);
    let tmp = path.with_extension(format!("tmp{}", std::process::id()));
    path.parent()
        .is_some_and(|p| std::fs::create_dir_all(p).is_ok())
        && serde_json::to_string_pretty(&f)
            .ok()
            .is_some_and(|s| std::fs::write(&tmp, s).is_ok())
        && std::fs::rename(&tmp, path).is_ok()
}
