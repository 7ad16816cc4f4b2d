//! Shared test devices (one per test binary on a GPU; on a CPU adapter one per test running at once). With
//! `BESPOKE_REQUIRE_GPU=1` a missing adapter fails the test instead of skipping it, so CI can never mistake a
//! missing driver for a pass.
//!
//! A test whose name ends in [`DEVICE_FREE`] (`…_without_a_device`) promises to open no device: it checks what the
//! CPU alone can (naga's validation of generated WGSL, host-side layouts). A GPU session skips those tests (they
//! say nothing about the GPU, and the slowest took 90 of the suite's CPU seconds); CI runs them. The promise is
//! kept here: such a test that asks for a device through this module panics.

use std::sync::{LazyLock, Mutex, PoisonError};

use crate::context::{Gpu, GpuOptions};

/// True when `BESPOKE_REQUIRE_GPU` is set to anything but `0` or empty.
pub fn gpu_required() -> bool {
    crate::env_flag("BESPOKE_REQUIRE_GPU")
}

/// The shared test devices' options. Timings on them skip the GPU's clock warm-up: the suite checks results, and
/// on an H200 it tunes hundreds of kernels, each cold timing of which would first spend 0.5–2 s raising the
/// clocks. Devices [`emulating`] a condition on its adapter skip it too; tests of the warm-up itself open theirs
/// with [`emulating_with_warm_up`].
fn shared_options(adapter_name: Option<String>) -> GpuOptions {
    GpuOptions {
        skip_warm_up: true,
        adapter_name,
        ..GpuOptions::default()
    }
}

/// The test binary's shared devices: one on a GPU; on a CPU adapter one for each test the harness runs at once,
/// opened as tests come to need them. lavapipe compiles a kernel at its first dispatch on the device's queue
/// thread, one thread a device, so the tests sharing one device compiled their kernels one at a time: two tests
/// of bespoke-mm's `dense` binary took 25 and 36 s alone and 49 s side by side on one device (2026-12-04, this
/// 2-core VM; one core idle while the other compiled). A GPU compiles in the thread that creates the pipeline and
/// gets no second device (its memory, and its start-up, are not free).
struct Pool {
    /// Every device opened so far, with the number of running tests that hold it.
    devices: Mutex<Vec<(&'static Gpu, usize)>>,
    /// How many devices there may be.
    most: usize,
}

static POOL: LazyLock<Result<Pool, String>> = LazyLock::new(|| {
    let first: &'static Gpu = Box::leak(Box::new(
        Gpu::with_options(shared_options(None)).map_err(|e| e.to_string())?,
    ));
    Ok(Pool {
        devices: Mutex::new(vec![(first, 0)]),
        most: if first.is_cpu() { test_threads() } else { 1 },
    })
});

/// The number of tests the harness runs at once: `RUST_TEST_THREADS` where set, else the available parallelism
/// (libtest's rule; `--test-threads` is not visible here, and fewer threads than this only leave a device idle).
fn test_threads() -> usize {
    std::env::var("RUST_TEST_THREADS")
        .ok()
        .and_then(|v| v.parse().ok())
        .or_else(|| std::thread::available_parallelism().ok().map(|n| n.get()))
        .unwrap_or(1)
        .clamp(1, MOST_TEST_DEVICES)
}

/// At most this many shared devices (each a lavapipe device's worker threads and its queue's).
const MOST_TEST_DEVICES: usize = 8;

/// A running test's hold on one of the pool's devices, given back when its thread ends.
struct Lease {
    index: usize,
    gpu: &'static Gpu,
}

impl Drop for Lease {
    fn drop(&mut self) {
        if let Ok(pool) = &*POOL
            && let Ok(mut devices) = pool.devices.lock()
        {
            devices[self.index].1 -= 1;
        }
    }
}

thread_local! {
    static LEASE: std::cell::OnceCell<Lease> = const { std::cell::OnceCell::new() };
}

impl Pool {
    /// The device the calling thread holds, or the least held one (a new one where every device is held and
    /// there may be more).
    fn lease(&self) -> &'static Gpu {
        let take = || {
            let mut devices = self.devices.lock().unwrap_or_else(PoisonError::into_inner);
            let (mut index, held) = devices
                .iter()
                .enumerate()
                .min_by_key(|(_, (_, held))| *held)
                .map(|(i, (_, held))| (i, *held))
                .expect("the pool opens its first device");
            if held > 0 && devices.len() < self.most {
                let adapter = devices[0].0.adapter_name().to_owned();
                // A device that does not open leaves the tests on the ones that did.
                if let Ok(g) = Gpu::with_options(shared_options(Some(adapter))) {
                    devices.push((Box::leak(Box::new(g)), 0));
                    index = devices.len() - 1;
                }
            }
            devices[index].1 += 1;
            Lease {
                index,
                gpu: devices[index].0,
            }
        };
        LEASE
            .try_with(|l| l.get_or_init(take).gpu)
            // The thread is ending (a test's thread-local destructor asking): a device, unheld.
            .unwrap_or_else(|_| self.devices.lock().unwrap_or_else(PoisonError::into_inner)[0].0)
    }
}

/// How many shared test devices [`test_gpu`] may open: 1 on a GPU (or without one), on a CPU adapter one for
/// each test the harness runs at once.
pub fn test_devices() -> usize {
    POOL.as_ref().map_or(1, |p| p.most)
}

/// A shared test device, or `None` (with a printed reason) when there is none and it is not required. A test
/// keeps the same device however often it asks (the thread's); tests running at once get different ones on a
/// CPU adapter (`Pool`).
///
/// # Panics
/// When no adapter exists and `BESPOKE_REQUIRE_GPU=1`.
pub fn test_gpu() -> Option<&'static Gpu> {
    refuse_device_free();
    match &*POOL {
        Ok(pool) => Some(pool.lease()),
        Err(e) if gpu_required() => panic!("BESPOKE_REQUIRE_GPU=1 but no GPU could be opened: {e}"),
        Err(e) => {
            skipped(&format!(
                "no GPU (set BESPOKE_REQUIRE_GPU=1 to make this fail): {e}"
            ));
            None
        }
    }
}

/// A second device on the shared test device's adapter with `opts` (a lowered limit, another adapter class, a
/// driver quirk): how a test makes a GPU's condition happen on lavapipe. `opts.adapter_name` is set to the
/// shared device's adapter, and its timings skip the warm-up where the shared device's do (an emulated GPU
/// class on lavapipe, and every emulation on a GPU, would otherwise spend 0.5–2 s on each cold timing).
///
/// # Panics
/// When the device cannot be opened (the shared one could).
pub fn emulating(shared: &Gpu, opts: GpuOptions) -> Gpu {
    emulating_with_warm_up(
        shared,
        GpuOptions {
            skip_warm_up: opts.skip_warm_up || shared.skips_warm_up(),
            ..opts
        },
    )
}

/// A second device on `shared`'s adapter whose driver refuses the pipeline of every kernel whose name holds
/// `pattern` ([`GpuOptions::refuse_pipelines`]): how a test makes a driver's refusal happen on lavapipe.
///
/// # Panics
/// When the device cannot be opened (the shared one could).
pub fn refusing(shared: &Gpu, pattern: &str) -> Gpu {
    emulating(
        shared,
        GpuOptions {
            refuse_pipelines: Some(pattern.into()),
            ..Default::default()
        },
    )
}

/// [`emulating`] with the warm-up as `opts` says, whatever the shared device's: for the tests of the warm-up.
///
/// # Panics
/// When the device cannot be opened (the shared one could).
pub fn emulating_with_warm_up(shared: &Gpu, opts: GpuOptions) -> Gpu {
    refuse_device_free();
    Gpu::with_options(GpuOptions {
        adapter_name: Some(shared.adapter_name().to_owned()),
        ..opts
    })
    .unwrap_or_else(|e| panic!("a second device on {}: {e}", shared.adapter_name()))
}

/// The end of the names of tests that open no device (`cargo test … -- --skip _without_a_device` leaves them
/// out; `benches/gpu/session.sh` does so on a GPU).
pub const DEVICE_FREE: &str = "_without_a_device";

/// Panics where the running test's name (libtest names each test's thread after it) ends in [`DEVICE_FREE`].
fn refuse_device_free() {
    let thread = std::thread::current();
    if let Some(name) = thread.name().filter(|n| n.ends_with(DEVICE_FREE)) {
        panic!(
            "{name} asks for a device, but its name promises none: a GPU session skips tests named \
             `…{DEVICE_FREE}`; rename it or drop the device"
        );
    }
}

/// Says that a test (or part of one) did not run and why: a `SKIPPED: …` line on stderr (shown with
/// `--nocapture`), and a line in the file `BESPOKE_SKIP_LOG` names when set, which CI prints as a summary after
/// the tests (cargo hides the stderr of passing tests).
pub fn skipped(what: &str) {
    eprintln!("SKIPPED: {what}");
    if let Some(path) = std::env::var_os("BESPOKE_SKIP_LOG").filter(|p| !p.is_empty()) {
        use std::io::Write;
        let test = std::thread::current().name().unwrap_or("?").to_owned();
        // One short line per write with O_APPEND: concurrent tests do not interleave within a line.
        if let Ok(mut f) = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
        {
            let _ = f.write_all(format!("{test}: {what}\n").as_bytes());
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

/// The launches of a copy of `n` vec4s of ones into a fresh buffer (the probe's first walk): a known, cheap
/// amount of device work for timing tests. The launches keep their buffers alive.
///
/// # Panics
/// When the buffers cannot be allocated or the copy prepared.
pub fn copy_of_ones(gpu: &Gpu, n: usize) -> Vec<crate::Launch> {
    let (src, dst) = (
        gpu.alloc_filled::<[f32; 4]>(n, [1.0; 4])
            .unwrap_or_else(|e| panic!("{n} vec4s: {e}")),
        gpu.alloc::<[f32; 4]>(n)
            .unwrap_or_else(|e| panic!("{n} vec4s: {e}")),
    );
    gpu.copy_launches(&src, &dst, crate::CopyVariant::CANDIDATES[0])
        .unwrap_or_else(|e| panic!("a copy of {n} vec4s: {e}"))
}

/// How many entries of `a` and `b` differ in their bits (NaN against the same NaN is equal; -0 against 0 is not):
/// what a bit-for-bit comparison of two results counts. Entries past the shorter are not counted.
pub fn differing_bits<T: bytemuck::Pod>(a: &[T], b: &[T]) -> usize {
    a.iter()
        .zip(b)
        .filter(|(x, y)| bytemuck::bytes_of(*x) != bytemuck::bytes_of(*y))
        .count()
}

/// Replacements for a number in a damaged text file: too large for any count, past 32 bits, negative, zero, not a
/// number, past f32's range, a fraction where an integer belongs.
const NUMBERS: [&str; 7] = [
    "99999999999999999999",
    "4294967296",
    "-1",
    "0",
    "nan",
    "1e308",
    "2.5",
];

/// `bytes` (a file's contents) damaged at random, and how: a few bytes overwritten, cut short, a stretch deleted or
/// repeated, or (in text) a number replaced by a huge, negative, zero or non-numeric one. For tests that a reader
/// gives an error or a sound result for every damaged file, never a panic.
pub fn damage(bytes: &[u8], rng: &mut impl rand::Rng) -> (String, Vec<u8>) {
    let mut b = bytes.to_vec();
    let len = b.len();
    if len == 0 {
        return ("nothing (empty)".into(), b);
    }
    let at = rng.random_range(0..len);
    match rng.random_range(0..5) {
        0 => {
            let n = rng.random_range(1..=8);
            for _ in 0..n {
                let i = rng.random_range(0..len);
                b[i] = rng.random();
            }
            (format!("{n} bytes overwritten from about {at}"), b)
        }
        1 => {
            b.truncate(at);
            (format!("cut at {at}"), b)
        }
        2 => {
            let end = (at + rng.random_range(1..200)).min(len);
            b.drain(at..end);
            (format!("bytes {at}..{end} deleted"), b)
        }
        3 => {
            let end = (at + rng.random_range(1..200)).min(len);
            let piece = b[at..end].to_vec();
            b.splice(at..at, piece);
            (format!("bytes {at}..{end} repeated"), b)
        }
        _ => {
            // The number (a run of ASCII digits) at or after `at`.
            let Some(start) = (at..len).find(|&i| b[i].is_ascii_digit()) else {
                return ("nothing (no number after the point chosen)".into(), b);
            };
            let end = (start..len)
                .find(|&i| !b[i].is_ascii_digit())
                .unwrap_or(len);
            let with = NUMBERS[rng.random_range(0..NUMBERS.len())];
            b.splice(start..end, with.bytes());
            (format!("the number at byte {start} replaced by {with}"), b)
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_test_named_device_free_cannot_open_the_shared_device() {
        // The check comes before the device is opened: it holds on a machine with no adapter too.
        let run = |name: &str| {
            std::thread::Builder::new()
                .name(name.into())
                .spawn(|| {
                    let _ = super::test_gpu();
                })
                .unwrap()
                .join()
        };
        let refused = run("kernels_validate_without_a_device").unwrap_err();
        let msg = refused.downcast_ref::<String>().unwrap();
        assert!(
            msg.contains("kernels_validate_without_a_device asks for a device"),
            "{msg}"
        );
        // Only the end of the name counts (this opens the shared device, or skips as any test does without one).
        assert!(run("without_a_device_is_not_the_end").is_ok());
    }

    #[test]
    fn damage_changes_the_bytes_and_says_how() {
        let text = b"%%MatrixMarket matrix coordinate real general\n3 3 2\n1 1 0.5\n2 3 -1\n";
        let mut rng = crate::rng::seeded(1);
        let mut changed = 0;
        for _ in 0..200 {
            let (what, d) = super::damage(text, &mut rng);
            assert!(!what.is_empty());
            changed += usize::from(d != text);
        }
        // Overwritten bytes may repeat the old ones, and a number may be replaced by itself ("0"): most change.
        assert!(changed > 180, "{changed} of 200 changed");
        assert_eq!(super::damage(b"", &mut rng).1, b"");
    }

    #[test]
    fn differing_bits_counts_bits_not_values() {
        let nan = f64::NAN;
        let a = [1.0, nan, 0.0, 2.0, 5.0];
        let b = [1.0, nan, -0.0, 2.0 + f64::EPSILON * 2.0];
        // The same NaN is equal; -0 is not 0; one ulp is a difference; the longer's tail is not counted.
        assert_eq!(super::differing_bits(&a, &b), 2);
        assert_eq!(super::differing_bits(&[1.0f32, 2.0], &[1.0f32, 2.0]), 0);
    }
}
