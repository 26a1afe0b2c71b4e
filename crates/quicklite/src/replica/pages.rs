//! A replica's pages read one at a time through Litestream's VFS, to compare a tenant's copy here with its replica
//! without downloading the tenant ([`Restore::vfs`](super::Restore::vfs)): the VFS fetches the page index of the
//! replica's LTX files, then each page asked for (a ranged read of the file that holds it).

use std::ffi::{c_int, c_void};
use std::path::Path;
use std::time::Duration;

use rusqlite::{Connection, OpenFlags, ffi};

use super::state::PageSource;
use super::{Position, Replica, status};

/// How often the comparison's connection would poll object storage: never, in practice. The comparison reads the
/// replica as the connection opened it, and a poll meanwhile would only move what it reads.
const NO_POLL: Duration = Duration::from_secs(24 * 3600);

/// The replica at `url` opened through the VFS of the extension at `extension` (loaded into the process if it is
/// not yet), in a read transaction: its pages are read as of one transaction of the replica, [`Pages::position`].
pub(crate) struct Pages {
    /// The connection through the VFS; its read transaction holds the VFS's page index still.
    conn: Connection,
    /// The VFS's file of the replica, read directly.
    file: *mut ffi::sqlite3_file,
    /// The replica's last transaction, as the connection opened it.
    position: Position,
}

impl Pages {
    /// Opens the replica at `url` (a Litestream replica URL) through the VFS in the shared library at `extension`,
    /// labelled `label` (nothing is written there).
    pub(crate) fn open(extension: &Path, url: &str, label: &Path) -> Result<Pages, String> {
        let replica = Replica::litestream(extension, url).poll_interval(NO_POLL);
        replica.load_vfs()?;
        let failed =
            |e: rusqlite::Error| format!("the replica at {url}, through Litestream's VFS: {e}");
        let conn = Connection::open_with_flags(
            replica.uri(label),
            OpenFlags::SQLITE_OPEN_READ_ONLY
                | OpenFlags::SQLITE_OPEN_URI
                | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )
        .map_err(failed)?;
        let before = status(&conn).map_err(failed)?.position;
        // A read transaction: the VFS keeps its page index as it is until the transaction ends.
        conn.execute_batch("BEGIN; SELECT count(*) FROM sqlite_schema")
            .map_err(failed)?;
        let position = status(&conn).map_err(failed)?.position;
        if position != before {
            // A poll came between the two (none is asked for): the index read may be either's.
            return Err(format!(
                "the replica at {url} moved from {before} to {position} while its pages were being read"
            ));
        }
        let mut file: *mut ffi::sqlite3_file = std::ptr::null_mut();
        // SAFETY: the handle is `conn`'s, open; SQLite writes the main database's file pointer into `file`, which
        // stays valid while the connection is open and its file is (the read transaction keeps it).
        let rc = unsafe {
            ffi::sqlite3_file_control(
                conn.handle(),
                c"main".as_ptr(),
                ffi::SQLITE_FCNTL_FILE_POINTER,
                (&raw mut file).cast::<c_void>(),
            )
        };
        // SAFETY: `file` was checked non-null; SQLite filled it with its open file, whose methods it points at.
        if rc != ffi::SQLITE_OK || file.is_null() || unsafe { (*file).pMethods.is_null() } {
            return Err(format!(
                "the replica at {url}: Litestream's VFS gave no file to read (SQLite code {rc})"
            ));
        }
        Ok(Pages {
            conn,
            file,
            position,
        })
    }

    /// The replica's last transaction, whose state the pages read are.
    pub(crate) fn position(&self) -> Position {
        self.position
    }

    /// The file's methods, and the file.
    fn methods(&self) -> (&ffi::sqlite3_io_methods, *mut ffi::sqlite3_file) {
        // SAFETY: `file` and its methods were checked non-null at open and live as long as `conn`, which `self` holds.
        (unsafe { &*(*self.file).pMethods }, self.file)
    }
}

impl PageSource for Pages {
    fn other_size(&mut self, bytes: u64) -> Result<bool, String> {
        let (methods, file) = self.methods();
        let size = methods
            .xFileSize
            .ok_or("Litestream's VFS does not give a file's size")?;
        let mut len: ffi::sqlite3_int64 = 0;
        // SAFETY: the file is open (see `methods`); SQLite's contract for `xFileSize`, called on this thread only.
        let rc = unsafe { size(file, &mut len) };
        if rc != ffi::SQLITE_OK {
            return Err(format!(
                "the replica's size, through Litestream's VFS: SQLite code {rc}"
            ));
        }
        // The VFS counts every page its index names, pages a shrinking transaction let go included: a replica
        // smaller than the copy here holds another database; a larger one may not.
        Ok(u64::try_from(len).unwrap_or(0) < bytes)
    }

    fn read_page(&mut self, pgno: u32, page: &mut [u8]) -> Result<(), String> {
        let (methods, file) = self.methods();
        let read = methods
            .xRead
            .ok_or("Litestream's VFS does not read files")?;
        let len = c_int::try_from(page.len()).map_err(|e| e.to_string())?;
        let offset = i64::from(pgno - 1) * i64::from(len);
        // SAFETY: the file is open (see `methods`) and `page` is `len` bytes long, all writable.
        let rc = unsafe { read(file, page.as_mut_ptr().cast::<c_void>(), len, offset) };
        if rc != ffi::SQLITE_OK {
            return Err(format!(
                "page {pgno} of the replica, through Litestream's VFS: SQLite code {rc}"
            ));
        }
        Ok(())
    }
}

impl Drop for Pages {
    fn drop(&mut self) {
        // The file pointer dies with the connection, dropped after this.
        let _ = self.conn.execute_batch("COMMIT");
    }
}
