//! Facts about the host the CLI and the benches check work against before they start it.

use crate::Error;

pub use crate::gpu::available_memory;

/// Refuses work that needs more host memory than the host has available (`what` names it, e.g. `--box 400:
/// 384 M tets`), instead of letting the kernel's OOM killer end the process half-way. Passes where the
/// available memory is not known.
pub fn check_memory(what: &str, bytes: u64) -> Result<(), Error> {
    check_memory_within(what, bytes, available_memory())
}

/// [`check_memory`] against `available` bytes.
pub fn check_memory_within(what: &str, bytes: u64, available: Option<u64>) -> Result<(), Error> {
    match available {
        Some(have) if bytes > have => Err(format!(
            "{what} needs about {:.1} GB of host memory, and this host has {:.1} GB available; ask for less",
            bytes as f64 / 1e9,
            have as f64 / 1e9
        )
        .into()),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn more_than_the_host_has_is_refused_by_name() {
        let e = check_memory_within("--box 400", 120_000_000_000, Some(22_000_000_000))
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("--box 400 needs about 120.0 GB") && e.contains("22.0 GB"),
            "{e}"
        );
        assert!(check_memory_within("--box 4", 1 << 20, Some(22_000_000_000)).is_ok());
        assert!(check_memory_within("--box 4", u64::MAX, None).is_ok());
        // This machine reports its memory, and has some.
        assert!(available_memory().is_some_and(|b| b > 0));
    }
}
