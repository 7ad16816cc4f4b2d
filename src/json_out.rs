//! JSON report files for the subcommands: the path is checked before the work, so a bad one fails early, and the
//! report is written at the end, atomically, so a run that fails keeps the older report of the same name and a
//! crash never leaves half a file.

use std::path::{Path, PathBuf};

use bespoke::Error;
use serde_json::Value;

/// Where the JSON report goes (None: not asked for), its path already checked.
pub(crate) type JsonOut = Option<PathBuf>;

/// Checks now that the report can be written at the end (not a folder, its folder exists and can be written),
/// without creating or truncating it.
pub(crate) fn open_json(path: Option<&Path>) -> Result<JsonOut, Error> {
    path.map(|p| {
        bespoke_gpu::check_writable(p)
            .map(|()| p.to_path_buf())
            .map_err(|e| format!("cannot write the JSON report to {}: {e}", p.display()).into())
    })
    .transpose()
}

/// Writes the report whole, in place of any older one (`bespoke_gpu::write_atomic`).
pub(crate) fn write_json(out: JsonOut, v: &Value) -> Result<(), Error> {
    if let Some(p) = out {
        let text = format!("{}\n", serde_json::to_string_pretty(v)?);
        bespoke_gpu::write_atomic(&p, text.as_bytes())
            .map_err(|e| format!("writing {}: {e}", p.display()))?;
    }
    Ok(())
}
