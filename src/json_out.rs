//! Outputs written at the end of a command's work (JSON reports, VTU, PNG, VTK files): each path is checked before
//! the work, so a bad one fails early; a JSON report is written at the end, atomically, so a run that fails keeps
//! the older report of the same name and a crash never leaves half a file. And the flag SIGINT and SIGTERM raise,
//! which the long-running commands read between batches of steps.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use bespoke::Error;
use serde_json::Value;

/// Where the JSON report goes (None: not asked for), its path already checked.
pub(crate) type JsonOut = Option<PathBuf>;

/// Checks now that the report can be written at the end (not a folder, its folder exists and can be written),
/// without creating or truncating it.
pub(crate) fn open_json(path: Option<&Path>) -> Result<JsonOut, Error> {
    check_output("JSON report", path)?;
    Ok(path.map(Path::to_path_buf))
}

/// Checks now that an output written at the end of the work could be written (`bespoke_gpu::check_writable`:
/// not a folder, its folder exists and can be written), naming `what` and the path where it could not.
pub(crate) fn check_output(what: &str, path: Option<&Path>) -> Result<(), Error> {
    match path {
        Some(p) => bespoke_gpu::check_writable(p)
            .map_err(|e| format!("cannot write the {what} to {}: {e}", p.display()).into()),
        None => Ok(()),
    }
}

/// Has SIGINT and SIGTERM raise `stop` from now on: a run reads it between batches, stops after the batch in
/// flight and keeps what it reached (a checkpoint, the fields written).
pub(crate) fn stop_on_signals(stop: &Arc<AtomicBool>) -> Result<(), Error> {
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(sig, stop.clone())
            .map_err(|e| format!("installing a signal handler: {e}"))?;
    }
    Ok(())
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
