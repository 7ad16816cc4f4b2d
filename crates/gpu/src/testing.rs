//! One shared device per test binary. With `BESPOKE_REQUIRE_GPU=1` a missing adapter fails the test instead of
//! skipping it, so CI can never mistake a missing driver for a pass.

use std::sync::LazyLock;

use crate::context::Gpu;

/// True when `BESPOKE_REQUIRE_GPU` is set to anything but `0` or empty.
pub fn gpu_required() -> bool {
    std::env::var("BESPOKE_REQUIRE_GPU").is_ok_and(|v| !v.is_empty() && v != "0")
}

static SHARED: LazyLock<Result<Gpu, String>> =
    LazyLock::new(|| Gpu::new().map_err(|e| e.to_string()));

/// The shared test device, or `None` (with a printed reason) when there is none and it is not required.
///
/// # Panics
/// When no adapter exists and `BESPOKE_REQUIRE_GPU=1`.
pub fn test_gpu() -> Option<&'static Gpu> {
    match &*SHARED {
        Ok(g) => Some(g),
        Err(e) if gpu_required() => panic!("BESPOKE_REQUIRE_GPU=1 but no GPU could be opened: {e}"),
        Err(e) => {
            eprintln!("SKIPPED (no GPU; set BESPOKE_REQUIRE_GPU=1 to make this fail): {e}");
            None
        }
    }
}

/// A fresh random seed for a test's inputs, printed so a failure can be replayed with `BESPOKE_TEST_SEED=<seed>`.
pub fn fresh_seed() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let seed = std::env::var("BESPOKE_TEST_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        // std keys each RandomState randomly, which is all the randomness a seed needs.
        .unwrap_or_else(|| {
            std::collections::hash_map::RandomState::new()
                .build_hasher()
                .finish()
        });
    eprintln!("seed = {seed} (replay with BESPOKE_TEST_SEED={seed})");
    seed
}
