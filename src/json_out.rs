//! JSON report files for the subcommands: opened before the work so a bad path fails early.

use std::io::Write;
use std::path::{Path, PathBuf};

use bespoke::Error;
use serde_json::Value;

/// An opened JSON report (None: not asked for).
pub(crate) type JsonOut = Option<(std::fs::File, PathBuf)>;

/// Creates the JSON output now, so a bad path fails before minutes of timing.
pub(crate) fn open_json(path: Option<&Path>) -> Result<JsonOut, Error> {
    path.map(|p| {
        std::fs::File::create(p)
            .map(|f| (f, p.to_path_buf()))
            .map_err(|e| format!("cannot write the JSON report to {}: {e}", p.display()).into())
    })
    .transpose()
}

pub(crate) fn write_json(out: JsonOut, v: &Value) -> Result<(), Error> {
    if let Some((mut f, p)) = out {
        writeln!(f, "{}", serde_json::to_string_pretty(v)?)
            .map_err(|e| format!("writing {}: {e}", p.display()))?;
    }
    Ok(())
}
