//! The one atomic file write: a file appears at its path whole or not at all (a temporary file in the same
//! folder, synced and renamed over it, the folder synced after), whether written at once ([`write_atomic`]) or in
//! pieces ([`AtomicFile`]); and the check that a path could be written so, made before a long run.

use std::io::Write;
use std::path::{Path, PathBuf};

/// Writes `bytes` to `path` so that `path` holds either its old content or all of `bytes`, never a mix: a
/// temporary file in the same folder, flushed and synced, renamed over `path`, then the folder synced.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    write_atomic_impl(path, bytes, None)
}

/// [`write_atomic`] that fails after writing `after` bytes, for tests of what a failed write leaves.
#[doc(hidden)]
pub fn write_atomic_failing(path: &Path, bytes: &[u8], after: usize) -> std::io::Result<()> {
    write_atomic_impl(path, bytes, Some(after))
}

/// Checks now, without touching `path`, that [`write_atomic`] could write it later: `path` is not a folder, its
/// folder exists and a file can be made in it (one is made and removed). The error says which of these failed,
/// so a long run can refuse an output path before its first step instead of failing at its end.
pub fn check_writable(path: &Path) -> std::io::Result<()> {
    use std::io::{Error, ErrorKind};
    if path.as_os_str().is_empty() || path.is_dir() {
        return Err(Error::new(
            ErrorKind::InvalidInput,
            "it is a folder, not a file",
        ));
    }
    let dir = folder_of(path);
    if !dir.is_dir() {
        return Err(Error::new(
            ErrorKind::NotFound,
            format!("its folder {} does not exist", dir.display()),
        ));
    }
    temporary_beside(path).map(drop).map_err(|e| {
        Error::new(
            e.kind(),
            format!("its folder {} cannot be written: {e}", dir.display()),
        )
    })
}

/// The folder `path` is in (`.` for a bare file name).
pub fn folder_of(path: &Path) -> &Path {
    match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    }
}

/// A new temporary file in `path`'s folder, named after it (removed when dropped).
fn temporary_beside(path: &Path) -> std::io::Result<tempfile::NamedTempFile> {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let prefix = format!(".{name}.");
    let mut b = tempfile::Builder::new();
    b.prefix(&prefix).suffix(".tmp");
    // A temporary file is the owner's alone (0600); the file it becomes is an ordinary one, readable as the
    // user's umask allows, as `File::create` would make it (0666 less the umask: until 2026-11-29 every report,
    // checkpoint and VTK file was 0600).
    #[cfg(unix)]
    b.permissions(std::os::unix::fs::PermissionsExt::from_mode(0o666));
    b.tempfile_in(folder_of(path))
}

fn write_atomic_impl(path: &Path, bytes: &[u8], fail_after: Option<usize>) -> std::io::Result<()> {
    let mut file = AtomicFile::create(path)?;
    file.fail_after = fail_after;
    file.write_all(bytes)?;
    file.commit()
}

/// A file written in pieces that appears at its path whole or not at all ([`write_atomic`]'s temporary file in
/// the same folder, synced and renamed by [`commit`](Self::commit)), for content too large to hold in memory at
/// once (a lattice's checkpoint: 37 GB at 32 000² in f32). Dropped without a commit, the temporary file is
/// removed and the path keeps what it held.
#[derive(Debug)]
pub struct AtomicFile {
    path: PathBuf,
    tmp: std::io::BufWriter<tempfile::NamedTempFile>,
    written: usize,
    /// Fail once this many bytes were written, as a full disk would (tests).
    fail_after: Option<usize>,
}

impl AtomicFile {
    /// A temporary file beside `path`, to be renamed over it by [`commit`](Self::commit).
    /// A folder at `path` is an error now, not at the commit's rename after the whole file was written.
    pub fn create(path: &Path) -> std::io::Result<Self> {
        if path.is_dir() {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                "it is a folder, not a file",
            ));
        }
        Ok(Self {
            path: path.to_owned(),
            tmp: std::io::BufWriter::with_capacity(1 << 20, temporary_beside(path)?),
            written: 0,
            fail_after: None,
        })
    }

    /// [`create`](Self::create) for a file whose writes fail after `after` bytes, for tests of what a failed
    /// write leaves.
    #[doc(hidden)]
    pub fn create_failing(path: &Path, after: usize) -> std::io::Result<Self> {
        let mut f = Self::create(path)?;
        f.fail_after = Some(after);
        Ok(f)
    }

    /// Flushes and syncs what was written and renames it over the path, then syncs the folder.
    pub fn commit(self) -> std::io::Result<()> {
        let tmp = self.tmp.into_inner().map_err(|e| e.into_error())?;
        tmp.as_file().sync_all()?;
        tmp.persist(&self.path).map_err(|e| e.error)?;
        // The rename is durable once the folder is synced (not every platform lets a folder be opened).
        if let Ok(d) = std::fs::File::open(folder_of(&self.path)) {
            let _ = d.sync_all();
        }
        Ok(())
    }
}

impl Write for AtomicFile {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if let Some(n) = self.fail_after {
            let room = n.saturating_sub(self.written);
            if room == 0 {
                return Err(std::io::Error::other(
                    "simulated failure half-way through the write",
                ));
            }
            let wrote = self.tmp.write(&buf[..room.min(buf.len())])?;
            self.written += wrote;
            return Ok(wrote);
        }
        let wrote = self.tmp.write(buf)?;
        self.written += wrote;
        Ok(wrote)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        self.tmp.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn atomic_files_get_ordinary_permissions() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let plain = dir.path().join("plain");
        std::fs::File::create(&plain).unwrap();
        let atomic = dir.path().join("atomic");
        write_atomic(&atomic, b"x").unwrap();
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&atomic), mode(&plain));
    }

    #[test]
    fn writable_paths_are_checked_without_touching_them() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("report.json");
        check_writable(&file).expect("a new file in a folder that exists");
        assert!(!file.exists(), "the check made the file");
        std::fs::write(&file, b"old").unwrap();
        check_writable(&file).expect("an existing file");
        assert_eq!(
            std::fs::read(&file).unwrap(),
            b"old",
            "the check changed the file"
        );
        let folder = check_writable(dir.path()).unwrap_err().to_string();
        assert!(folder.contains("folder, not a file"), "{folder}");
        let missing = check_writable(&dir.path().join("no/such/report.json"))
            .unwrap_err()
            .to_string();
        assert!(missing.contains("does not exist"), "{missing}");
        let left: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
        assert_eq!(left.len(), 1, "the check left a file behind: {left:?}");
        // A file to be written at a folder's path is refused when it is created, not at its rename.
        let sub = dir.path().join("sub");
        std::fs::create_dir(&sub).unwrap();
        let Err(e) = AtomicFile::create(&sub) else {
            panic!("a folder's path was accepted")
        };
        let e = e.to_string();
        assert!(e.contains("folder, not a file"), "{e}");
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 2);
    }

    #[test]
    fn a_failed_write_leaves_the_old_file_and_no_temporary() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("state.bin");
        write_atomic(&path, b"old").expect("first write");
        write_atomic_failing(&path, &[7u8; 4096], 1000).expect_err("simulated failure");
        assert_eq!(std::fs::read(&path).expect("read"), b"old");
        let names: Vec<_> = std::fs::read_dir(dir.path())
            .expect("list")
            .map(|e| e.expect("entry").file_name())
            .collect();
        assert_eq!(names.len(), 1, "left behind: {names:?}");
    }
}
