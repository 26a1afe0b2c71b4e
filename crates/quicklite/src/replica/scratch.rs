//! The directories a tenant is restored into before its file is whole (`.restoring-*`) or compared in
//! (`.comparing-*`), beside the tenants: each is locked while in use (`flock` on the directory), so that the ones a
//! process that died left behind — a whole download each — are told from those another registry on the same
//! directory is using, and removed when a registry opens.

use std::fs::{File, TryLockError};
use std::io;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

/// The prefix of a directory a missing tenant is restored into.
pub(crate) const RESTORING: &str = ".restoring-";

/// The prefix of a directory a tenant's replica is restored into to be compared with the copy here.
pub(crate) const COMPARING: &str = ".comparing-";

/// A directory of its own, locked while it lives and removed with its content when dropped.
#[derive(Debug)]
pub(crate) struct Scratch {
    // Declared first: removed before the lock goes, so that no registry opening meanwhile finds it unlocked.
    dir: tempfile::TempDir,
    /// The directory, open and locked (exclusively) for as long as it is used.
    _lock: File,
}

impl Scratch {
    /// A new directory in `parent`, named `prefix` and random characters, locked.
    pub(crate) fn new(parent: &Path, prefix: &str) -> io::Result<Scratch> {
        loop {
            let dir = tempfile::Builder::new().prefix(prefix).tempdir_in(parent)?;
            let lock = File::open(dir.path())?;
            // Waits while a registry opening holds it: it took the lock between the directory's creation and this
            // line, and is removing it.
            lock.lock()?;
            // Removed meanwhile (that registry found it unlocked): another, then.
            if same_file(&lock, dir.path()) {
                return Ok(Scratch { dir, _lock: lock });
            }
        }
    }

    /// The directory.
    pub(crate) fn path(&self) -> &Path {
        self.dir.path()
    }
}

/// Removes the scratch directories in `dir` that no process is using: left by one that died while it restored or
/// compared a tenant. Returns how many it removed; one it could not remove is logged and left.
pub(crate) fn remove_stale(dir: &Path) -> io::Result<usize> {
    let mut removed = 0;
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let name = entry.file_name();
        let Some(name) = name.to_str() else { continue };
        // A symbolic link is not ours, whatever its name; `file_type` does not follow it.
        if !(name.starts_with(RESTORING) || name.starts_with(COMPARING))
            || !entry.file_type()?.is_dir()
        {
            continue;
        }
        let path = entry.path();
        let lock = match File::open(&path) {
            Ok(lock) => lock,
            Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
            Err(e) => {
                tracing::warn!(dir = %path.display(), error = %e, "could not open a restore's scratch directory");
                continue;
            }
        };
        match lock.try_lock() {
            // Its restore holds it: in use.
            Err(TryLockError::WouldBlock) => continue,
            Err(TryLockError::Error(e)) => {
                tracing::warn!(dir = %path.display(), error = %e, "could not lock a restore's scratch directory");
                continue;
            }
            Ok(()) => {}
        }
        match std::fs::remove_dir_all(&path) {
            Ok(()) => removed += 1,
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => {
                tracing::warn!(dir = %path.display(), error = %e, "could not remove a restore's scratch directory")
            }
        }
    }
    if removed > 0 {
        tracing::info!(
            dir = %dir.display(),
            removed,
            "removed the scratch directories of restores a process did not finish"
        );
    }
    Ok(removed)
}

/// Whether `path` is the file `open` is.
fn same_file(open: &File, path: &Path) -> bool {
    match (open.metadata(), std::fs::symlink_metadata(path)) {
        (Ok(a), Ok(b)) => (a.dev(), a.ino()) == (b.dev(), b.ino()),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_scratch_directory_in_use_is_kept_and_one_left_behind_is_removed() {
        let dir = tempfile::tempdir().unwrap();
        let in_use = Scratch::new(dir.path(), RESTORING).unwrap();
        std::fs::write(in_use.path().join("restored.db"), b"pages").unwrap();
        // Left by a process that died: nobody holds their lock.
        let left = [
            dir.path().join(".restoring-abc123"),
            dir.path().join(".comparing-def456"),
        ];
        for left in &left {
            std::fs::create_dir(left).unwrap();
            std::fs::write(left.join("replica.db"), b"pages").unwrap();
        }
        // Not a scratch directory: a tenant's file, a directory of another name, a link named like one.
        std::fs::write(dir.path().join("acme.db"), b"tenant").unwrap();
        std::fs::create_dir(dir.path().join("restoring-not-ours")).unwrap();
        std::os::unix::fs::symlink(&left[0], dir.path().join(".restoring-link")).unwrap();

        assert_eq!(remove_stale(dir.path()).unwrap(), 2);
        assert!(left.iter().all(|left| !left.exists()));
        assert!(in_use.path().join("restored.db").exists());
        assert!(dir.path().join("acme.db").exists());
        assert!(dir.path().join("restoring-not-ours").exists());
        assert!(std::fs::symlink_metadata(dir.path().join(".restoring-link")).is_ok());

        let path = in_use.path().to_owned();
        drop(in_use);
        assert!(!path.exists());
    }
}
