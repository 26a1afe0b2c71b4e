//! Writing a file so that a reader (or a crash) never sees half of it: write a temporary file beside it, then
//! rename it over the target. A rename within one directory is atomic on POSIX file systems.

use std::io::Write;
use std::path::Path;

use crate::error::{LabError, Result};

/// Replaces `path` with `bytes` atomically.
pub fn write_atomically(path: &Path, bytes: &[u8]) -> Result<()> {
    let io = |source| LabError::Io {
        action: "writing",
        path: path.to_owned(),
        source,
    };
    let dir = match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir,
        _ => Path::new("."),
    };
    let mut file = tempfile::Builder::new()
        .prefix(".quicklite-")
        .suffix(".tmp")
        .tempfile_in(dir)
        .map_err(io)?;
    file.write_all(bytes).map_err(io)?;
    // Temporary files are created private (0600); results are meant to be read like any other file.
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::Permissions::from_mode(0o644);
        file.as_file().set_permissions(mode).map_err(io)?;
    }
    file.as_file().sync_all().map_err(io)?;
    file.persist(path).map_err(|e| io(e.error))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replaces_the_file_and_leaves_no_temporary_behind() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("results.csv");
        write_atomically(&path, b"one").unwrap();
        write_atomically(&path, b"two").unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"two");
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
    }
}
