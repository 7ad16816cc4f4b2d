//! The one on-disk cache of bespoke (its files written through [`crate::atomic`]).
//!
//! Every cache the project keeps (the driver's pipeline cache, the tuner's decisions, the dense model's
//! micro-benchmark figures) goes through [`DiskCache`]: one file per entry under
//! `<cache folder>/<namespace>-v<version>/`, each written to a temporary file in the same folder, synced and
//! renamed over the old one ([`crate::write_atomic`]). So:
//! - concurrent writers never tear a file: each rename replaces a whole entry, the last one wins, and writers of
//!   different keys never touch each other's files (no read-modify-write of a shared file, so no lock is needed);
//! - concurrent readers see either the old or the new entry, never half of one;
//! - an entry carries its key and a CRC-32 of everything before it: a truncated, corrupted or colliding file is
//!   a [`Lookup::Corrupt`] (the caller re-measures and reports it), never a wrong value.
//!
//! A bumped `version` opens a fresh folder: old entries are ignored, not misread.

use std::path::{Path, PathBuf};

use crate::atomic::write_atomic;
use crate::error::{GpuError, Result};
use crate::kernel::stable_hash;

const MAGIC: &[u8; 8] = b"BSPKCACH";
/// The layout of one entry file (not the namespace's version).
const ENTRY_FORMAT: u32 = 1;
/// Longest readable key prefix kept in a file name.
const NAME_CHARS: usize = 60;

/// Per-user cache folder for this project (`BESPOKE_CACHE_DIR`, else `$XDG_CACHE_HOME/bespoke`, else
/// `~/.cache/bespoke`).
pub fn user_cache_dir() -> Option<PathBuf> {
    if let Some(d) = std::env::var_os("BESPOKE_CACHE_DIR") {
        return Some(PathBuf::from(d));
    }
    if let Some(d) = std::env::var_os("XDG_CACHE_HOME") {
        return Some(PathBuf::from(d).join("bespoke"));
    }
    std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache").join("bespoke"))
}

/// One lock per cache entry path, so threads of one process that want the same entry (the ranks of a
/// distributed run, each on its own device, all tuning the same launch shape at once) make it once.
fn entry_lock(path: PathBuf) -> std::sync::Arc<std::sync::Mutex<()>> {
    use std::collections::HashMap;
    use std::sync::{Arc, Mutex, OnceLock};
    static LOCKS: OnceLock<Mutex<HashMap<PathBuf, Arc<Mutex<()>>>>> = OnceLock::new();
    let mut locks = LOCKS
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    locks.entry(path).or_default().clone()
}

/// The JSON entry `key` of `cache` when there is one that `usable` accepts, else `make()`'s value, kept in the
/// cache for next time (a write that fails is reported on stderr naming `what`: it costs a redo next time,
/// nothing else). Returns the value and whether it came from the cache. Without a cache, `make()` every time.
/// Threads of one process asking for the same entry wait for the first one's `make()` and then read its entry
/// (processes do not wait for each other: each may make it, and the last write stands).
pub fn remembered_json<T, E>(
    cache: Option<&DiskCache>,
    key: &str,
    what: &str,
    usable: impl Fn(&T) -> bool,
    make: impl FnOnce() -> std::result::Result<T, E>,
) -> std::result::Result<(T, bool), E>
where
    T: serde::Serialize + serde::de::DeserializeOwned,
{
    let lock = cache.map(|c| entry_lock(c.entry_path(key)));
    // A thread that panicked in `make()` leaves nothing behind but the lock's poison: the next one makes it.
    let _held = lock
        .as_ref()
        .map(|l| l.lock().unwrap_or_else(std::sync::PoisonError::into_inner));
    if let Some(v) = cache
        .and_then(|c| c.get_json::<T>(key))
        .filter(|v| usable(v))
    {
        return Ok((v, true));
    }
    let v = make()?;
    if let Some(c) = cache
        && let Err(e) = c.put_json(key, &v)
    {
        eprintln!("bespoke: could not remember {what}: {e}");
    }
    Ok((v, false))
}

/// What a cache lookup found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Lookup {
    /// The entry, whole and checked.
    Hit(Vec<u8>),
    /// No entry for this key.
    Miss,
    /// A file is there but is not a whole, matching entry, or the entry cannot be read (a folder in the path that
    /// is not one, no permission); the message says why and where.
    Corrupt(String),
}

/// One namespace of the on-disk cache: versioned, one file per entry, safe under concurrent processes.
#[derive(Debug, Clone)]
pub struct DiskCache {
    dir: PathBuf,
    version: u32,
}

impl DiskCache {
    /// The namespace under the user's cache folder ([`user_cache_dir`]); `None` where there is no such folder.
    pub fn user(namespace: &str, version: u32) -> Option<Self> {
        user_cache_dir().map(|root| Self::at(&root, namespace, version))
    }

    /// The namespace under `root`.
    pub fn at(root: &Path, namespace: &str, version: u32) -> Self {
        Self {
            dir: root.join(format!("{namespace}-v{version}")),
            version,
        }
    }

    /// The folder that holds this namespace's entries.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The file that holds `key`'s entry: a readable prefix of the key plus its hash.
    pub fn entry_path(&self, key: &str) -> PathBuf {
        let readable: String = key
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '-' || c == '.' {
                    c
                } else {
                    '_'
                }
            })
            .take(NAME_CHARS)
            .collect();
        self.dir.join(format!(
            "{readable}-{:016x}.entry",
            stable_hash(&[key.as_bytes()])
        ))
    }

    /// Looks `key` up. Never fails: an unreadable file is [`Lookup::Corrupt`] and the caller treats it as a miss.
    pub fn get(&self, key: &str) -> Lookup {
        let path = self.entry_path(key);
        let bytes = match std::fs::read(&path) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Lookup::Miss,
            Err(e) => return Lookup::Corrupt(format!("{}: not readable ({e})", path.display())),
        };
        match self.decode(key, &bytes) {
            Ok(payload) => Lookup::Hit(payload),
            Err(why) => Lookup::Corrupt(format!("{}: {why}", path.display())),
        }
    }

    /// Stores `payload` under `key`, replacing any previous entry atomically.
    pub fn put(&self, key: &str, payload: &[u8]) -> Result<()> {
        let path = self.entry_path(key);
        let io = |source, what: &str| GpuError::Io {
            context: format!("{what} cache entry {}", path.display()),
            source,
        };
        std::fs::create_dir_all(&self.dir).map_err(|e| io(e, "creating the folder of"))?;
        write_atomic(&path, &self.encode(key, payload)).map_err(|e| io(e, "writing"))
    }

    /// Removes `key`'s entry (absent is fine).
    pub fn remove(&self, key: &str) -> Result<()> {
        let path = self.entry_path(key);
        match std::fs::remove_file(&path) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(GpuError::Io {
                context: format!("removing cache entry {}", path.display()),
                source: e,
            }),
            _ => Ok(()),
        }
    }

    /// A JSON value under `key`; a corrupt entry, or one that does not parse as `T`, is reported on stderr
    /// (once per lookup) and read as a miss.
    pub fn get_json<T: serde::de::DeserializeOwned>(&self, key: &str) -> Option<T> {
        match self.get(key) {
            Lookup::Hit(bytes) => match serde_json::from_slice(&bytes) {
                Ok(v) => Some(v),
                Err(e) => {
                    report(&format!(
                        "{}: not the expected JSON ({e})",
                        self.entry_path(key).display()
                    ));
                    None
                }
            },
            Lookup::Miss => None,
            Lookup::Corrupt(why) => {
                report(&why);
                None
            }
        }
    }

    /// Stores `value` as JSON under `key`.
    pub fn put_json<T: serde::Serialize>(&self, key: &str, value: &T) -> Result<()> {
        let text = serde_json::to_vec_pretty(value)
            .map_err(|e| GpuError::InvalidArgument(format!("cache entry `{key}`: {e}")))?;
        self.put(key, &text)
    }

    fn encode(&self, key: &str, payload: &[u8]) -> Vec<u8> {
        let mut out = Vec::with_capacity(40 + key.len() + payload.len());
        out.extend_from_slice(MAGIC);
        out.extend_from_slice(&ENTRY_FORMAT.to_le_bytes());
        out.extend_from_slice(&self.version.to_le_bytes());
        out.extend_from_slice(&(key.len() as u64).to_le_bytes());
        out.extend_from_slice(key.as_bytes());
        out.extend_from_slice(&(payload.len() as u64).to_le_bytes());
        out.extend_from_slice(payload);
        let crc = crc32fast::hash(&out);
        out.extend_from_slice(&crc.to_le_bytes());
        out
    }

    fn decode(&self, key: &str, bytes: &[u8]) -> std::result::Result<Vec<u8>, String> {
        let n = bytes.len();
        if n < MAGIC.len() + 4 + 4 + 8 + 8 + 4 || &bytes[..8] != MAGIC {
            return Err(format!("not a bespoke cache entry ({n} bytes, no header)"));
        }
        let (body, tail) = bytes.split_at(n - 4);
        let stored = u32::from_le_bytes([tail[0], tail[1], tail[2], tail[3]]);
        if crc32fast::hash(body) != stored {
            return Err("checksum mismatch: the entry is corrupted or truncated".into());
        }
        let u32_at =
            |at: usize| u32::from_le_bytes([body[at], body[at + 1], body[at + 2], body[at + 3]]);
        let u64_at = |at: usize| -> Option<usize> {
            let b: [u8; 8] = body.get(at..at + 8)?.try_into().ok()?;
            usize::try_from(u64::from_le_bytes(b)).ok()
        };
        if u32_at(8) != ENTRY_FORMAT || u32_at(12) != self.version {
            return Err(format!(
                "entry format {} version {}, expected {ENTRY_FORMAT} and {}",
                u32_at(8),
                u32_at(12),
                self.version
            ));
        }
        let bad = || "lengths do not add up".to_string();
        let key_len = u64_at(16).ok_or_else(bad)?;
        let key_end = 24usize.checked_add(key_len).ok_or_else(bad)?;
        let stored_key = body.get(24..key_end).ok_or_else(bad)?;
        if stored_key != key.as_bytes() {
            return Err(format!(
                "holds another key (`{}`), a hash collision",
                String::from_utf8_lossy(stored_key)
            ));
        }
        let len = u64_at(key_end).ok_or_else(bad)?;
        let start = key_end + 8;
        if start.checked_add(len) != Some(body.len()) {
            return Err(bad());
        }
        Ok(body[start..].to_vec())
    }
}

/// Says on stderr that a cache entry was unreadable and will be rebuilt.
pub fn report(why: &str) {
    eprintln!("bespoke: ignoring a cache entry it cannot use, it will be rebuilt: {why}");
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cache() -> (tempfile::TempDir, DiskCache) {
        let dir = tempfile::tempdir().expect("temp dir");
        let c = DiskCache::at(dir.path(), "test", 3);
        (dir, c)
    }

    /// A cache folder whose path runs through a file (`BESPOKE_CACHE_DIR=/dev/null`): every lookup says the entry
    /// is not readable, and why (it was reported as "a corrupt cache entry"), and a store fails naming the folder.
    #[test]
    fn a_cache_under_a_file_is_unreadable_not_corrupt() {
        let dir = tempfile::tempdir().expect("temp dir");
        let file = dir.path().join("plain-file");
        std::fs::write(&file, b"not a folder").expect("write");
        let c = DiskCache::at(&file, "test", 3);
        match c.get("k") {
            Lookup::Corrupt(why) => assert!(why.contains("not readable ("), "{why}"),
            other => panic!("{other:?}"),
        }
        let e = c
            .put("k", b"v")
            .expect_err("stored under a file")
            .to_string();
        assert!(e.contains("creating the folder of cache entry"), "{e}");
    }

    #[test]
    fn threads_wanting_one_entry_make_it_once() {
        let (_d, c) = cache();
        let made = std::sync::atomic::AtomicUsize::new(0);
        let cached: Vec<bool> = std::thread::scope(|s| {
            let workers: Vec<_> = (0..4)
                .map(|_| {
                    s.spawn(|| {
                        remembered_json::<u32, std::io::Error>(
                            Some(&c),
                            "shape",
                            "a test entry",
                            |_| true,
                            || {
                                made.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                                std::thread::sleep(std::time::Duration::from_millis(50));
                                Ok(7)
                            },
                        )
                        .expect("remembered")
                    })
                })
                .collect();
            workers
                .into_iter()
                .map(|w| {
                    let (v, cached) = w.join().expect("worker");
                    assert_eq!(v, 7);
                    cached
                })
                .collect()
        });
        assert_eq!(made.into_inner(), 1, "made more than once");
        assert_eq!(cached.iter().filter(|&&c| !c).count(), 1, "{cached:?}");
    }

    #[test]
    fn round_trip_and_miss() {
        let (_d, c) = cache();
        assert_eq!(c.get("a key / with: odd chars"), Lookup::Miss);
        c.put("a key / with: odd chars", b"payload").expect("put");
        assert_eq!(
            c.get("a key / with: odd chars"),
            Lookup::Hit(b"payload".to_vec())
        );
        c.put("a key / with: odd chars", b"").expect("put empty");
        assert_eq!(c.get("a key / with: odd chars"), Lookup::Hit(vec![]));
        c.remove("a key / with: odd chars").expect("remove");
        assert_eq!(c.get("a key / with: odd chars"), Lookup::Miss);
        c.remove("never stored").expect("removing nothing is fine");
    }

    #[test]
    fn every_flipped_bit_and_every_truncation_is_corrupt() {
        let (_d, c) = cache();
        c.put("k", b"{\"x\": 1.5}").expect("put");
        let path = c.entry_path("k");
        let good = std::fs::read(&path).expect("read");
        for byte in 0..good.len() {
            for bit in 0..8 {
                let mut bad = good.clone();
                bad[byte] ^= 1 << bit;
                std::fs::write(&path, &bad).expect("write");
                assert!(
                    matches!(c.get("k"), Lookup::Corrupt(_)),
                    "bit {bit} of byte {byte} flipped was read as whole"
                );
            }
        }
        for len in 0..good.len() {
            std::fs::write(&path, &good[..len]).expect("write");
            assert!(
                matches!(c.get("k"), Lookup::Corrupt(_)),
                "{len} bytes read as whole"
            );
            assert_eq!(c.get_json::<serde_json::Value>("k"), None);
        }
    }

    #[test]
    fn versions_and_keys_do_not_mix() {
        let (d, c) = cache();
        c.put("k", b"v3").expect("put");
        let v4 = DiskCache::at(d.path(), "test", 4);
        assert_eq!(v4.get("k"), Lookup::Miss, "a new version is a fresh folder");
        // The same file read under another key (as a hash collision would) is refused, not misread.
        std::fs::copy(c.entry_path("k"), c.entry_path("other")).expect("copy");
        match c.get("other") {
            Lookup::Corrupt(why) => assert!(why.contains("another key"), "{why}"),
            other => panic!("expected a collision report, got {other:?}"),
        }
    }

    #[test]
    fn json_entries() {
        let (_d, c) = cache();
        c.put_json("j", &vec![1.0f64, 2.5]).expect("put");
        assert_eq!(c.get_json::<Vec<f64>>("j"), Some(vec![1.0, 2.5]));
        assert_eq!(c.get_json::<String>("j"), None, "wrong shape is a miss");
    }

    /// A file written atomically has the permissions `File::create` gives (the umask's), not the temporary
    /// file's owner-only 0600.
    #[cfg(unix)]
    #[test]
    fn remembered_values_are_made_once_and_refused_ones_again() {
        let (_dir, c) = cache();
        let mut made = 0;
        let mut get = |usable: fn(&u32) -> bool, value: u32| {
            remembered_json::<u32, ()>(Some(&c), "k", "a test value", usable, || {
                made += 1;
                Ok(value)
            })
            .unwrap()
        };
        assert_eq!(get(|_| true, 7), (7, false));
        assert_eq!(
            get(|_| true, 8),
            (7, true),
            "the remembered value comes back"
        );
        assert_eq!(
            get(|v| *v != 7, 9),
            (9, false),
            "a refused entry is made again"
        );
        assert_eq!(made, 2);
        let fresh = remembered_json::<u32, ()>(None, "k", "a test value", |_| true, || Ok(3));
        assert_eq!(fresh, Ok((3, false)));
    }
}
