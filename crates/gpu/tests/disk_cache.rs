//! Several processes writing and reading the same cache keys at once leave a valid cache: every read is a whole
//! entry some writer stored (or a miss before any write), never a torn or corrupt one.

use bespoke_gpu::{DiskCache, Lookup};

const WORKER_ENV: &str = "BESPOKE_DISK_CACHE_WORKER";
const KEYS: usize = 6;
const ROUNDS: usize = 150;

/// The payload writer `w` stores for `key` in round `r`: sizes differ by writer, and the content says whose it is.
fn payload(key: usize, w: usize, r: usize) -> Vec<u8> {
    let head = format!("key={key};writer={w};round={r};");
    let mut out = head.into_bytes();
    out.extend(std::iter::repeat_n(b'a' + (w % 26) as u8, 512 + 4096 * w));
    out
}

fn check(key: usize, bytes: &[u8]) {
    let text = String::from_utf8_lossy(bytes);
    let mut fields = text.splitn(4, ';');
    assert_eq!(
        fields.next(),
        Some(format!("key={key}").as_str()),
        "entry of another key"
    );
    let w: usize = fields
        .next()
        .and_then(|f| f.strip_prefix("writer="))
        .and_then(|v| v.parse().ok())
        .expect("writer field");
    let r: usize = fields
        .next()
        .and_then(|f| f.strip_prefix("round="))
        .and_then(|v| v.parse().ok())
        .expect("round field");
    assert_eq!(bytes, payload(key, w, r).as_slice(), "torn entry");
}

/// Run by the processes the test below starts; does nothing in a normal test run.
#[test]
fn worker() {
    let Ok(spec) = std::env::var(WORKER_ENV) else {
        return;
    };
    let (dir, w) = spec.rsplit_once('|').expect("dir|writer");
    let w: usize = w.parse().expect("writer number");
    let cache = DiskCache::at(std::path::Path::new(dir), "stress", 1);
    for r in 0..ROUNDS {
        for k in 0..KEYS {
            let key = format!("shared key {k}");
            if (k + r + w).is_multiple_of(2) {
                cache.put(&key, &payload(k, w, r)).expect("put");
            }
            match cache.get(&key) {
                Lookup::Hit(bytes) => check(k, &bytes),
                Lookup::Miss => {}
                Lookup::Corrupt(why) => panic!("writer {w} round {r}: {why}"),
            }
        }
    }
}

#[test]
fn concurrent_processes_leave_a_valid_cache() {
    if std::env::var_os(WORKER_ENV).is_some() {
        return;
    }
    let dir = tempfile::tempdir().expect("temp dir");
    let exe = std::env::current_exe().expect("test binary");
    let children: Vec<_> = (0..6)
        .map(|w| {
            std::process::Command::new(&exe)
                .args(["--exact", "worker", "--nocapture", "--test-threads=1"])
                .env(WORKER_ENV, format!("{}|{w}", dir.path().display()))
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .expect("start a worker process")
        })
        .collect();
    for (w, child) in children.into_iter().enumerate() {
        let out = child.wait_with_output().expect("worker output");
        assert!(
            out.status.success(),
            "worker {w} failed:\n{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        // The worker must really have run (not matched zero tests).
        assert!(
            String::from_utf8_lossy(&out.stdout).contains("1 passed"),
            "worker {w} did not run: {}",
            String::from_utf8_lossy(&out.stdout)
        );
    }
    let cache = DiskCache::at(dir.path(), "stress", 1);
    for k in 0..KEYS {
        match cache.get(&format!("shared key {k}")) {
            Lookup::Hit(bytes) => check(k, &bytes),
            other => panic!("key {k} after the run: {other:?}"),
        }
    }
    let stray: Vec<_> = std::fs::read_dir(cache.dir())
        .expect("list")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .filter(|n| !n.ends_with(".entry"))
        .collect();
    assert!(stray.is_empty(), "temporary files left: {stray:?}");
}
