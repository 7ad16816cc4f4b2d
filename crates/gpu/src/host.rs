//! Host-side preparation shared by the crates: filling large arrays on every core (a 4096² lattice's initial
//! populations, a 10 M-tet mesh's operator), so set-up keeps pace with a GPU host's cores; the memory the host
//! can still give, for work that checks it first.

/// Bytes of memory the host can still give (Linux's `MemAvailable`); None where it is not known.
pub fn available_memory() -> Option<u64> {
    std::fs::read_to_string("/proc/meminfo")
        .ok()?
        .lines()
        .find(|l| l.starts_with("MemAvailable:"))
        .and_then(|l| l.split_whitespace().nth(1)?.parse::<u64>().ok())
        .map(|kib| kib << 10)
}

/// Elements per thread's chunk when `len` are shared among the cores: at least 16 384, so small arrays stay on one.
fn chunk_len(len: usize) -> usize {
    let threads = std::thread::available_parallelism().map_or(1, usize::from);
    len.div_ceil(threads).max(1 << 14)
}

/// Sets `out[i]` by `f(i, &mut out[i])` on every core, in chunks of at least 16 384 elements. Each element is
/// computed on its own, so the result does not depend on the number of threads.
pub fn par_fill<T: Send>(out: &mut [T], f: impl Fn(usize, &mut T) + Sync) {
    let chunk = chunk_len(out.len());
    let f = &f;
    std::thread::scope(|s| {
        for (c, part) in out.chunks_mut(chunk).enumerate() {
            s.spawn(move || {
                for (i, o) in part.iter_mut().enumerate() {
                    f(c * chunk + i, o);
                }
            });
        }
    });
}

/// The first index in `0..len` where `bad(i)` holds, looked for on every core (the validation pass over a large
/// array's elements, which reports the first offender as a sequential loop would).
pub fn par_first(len: usize, bad: impl Fn(usize) -> bool + Sync) -> Option<usize> {
    let chunk = chunk_len(len);
    let bad = &bad;
    std::thread::scope(|s| {
        let parts: Vec<_> = (0..len.div_ceil(chunk))
            .map(|c| s.spawn(move || (c * chunk..len.min((c + 1) * chunk)).find(|&i| bad(i))))
            .collect();
        // Chunks in order: the first chunk with an offender holds the first one.
        parts
            .into_iter()
            .map(|p| p.join().unwrap_or_else(|e| std::panic::resume_unwind(e)))
            .find_map(|found| found)
    })
}

/// Asks the cache for the line holding `p`, where the target has such a hint (a hint: it never faults, any
/// address will do, and nothing waits for it).
#[inline(always)]
pub fn prefetch<T>(p: *const T) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: PREFETCHT0 reads nothing architecturally and cannot fault, whatever the address.
    unsafe {
        std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(p.cast())
    };
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}

#[cfg(test)]
mod tests {
    use super::{par_fill, par_first};

    #[test]
    fn the_first_offender_is_found_whatever_the_chunks() {
        for n in [0usize, 1, 5, (1 << 14) + 3, 100_000, 300_001] {
            for bad in [None, Some(0), Some(n / 2), Some(n.saturating_sub(1))] {
                let bad = bad.filter(|&b| b < n);
                // Offenders at `bad` and every later multiple of 7 past it: the first is `bad`.
                let found = par_first(n, |i| bad.is_some_and(|b| i == b || (i > b && i % 7 == 0)));
                assert_eq!(found, bad, "n {n}");
            }
        }
    }

    #[test]
    fn every_element_gets_its_own_index() {
        for n in [0, 1, 5, (1 << 14) + 3, 100_000] {
            let mut v = vec![usize::MAX; n];
            par_fill(&mut v, |i, o| *o = i * 3);
            assert!(v.iter().enumerate().all(|(i, &x)| x == i * 3), "n = {n}");
        }
    }
}
