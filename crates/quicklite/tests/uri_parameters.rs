//! A database opened with a `file:` URI: its parameters — `vfs=` above all — hold for every connection the handle
//! opens, the checkpoint thread's included. (A registry opens its databases by path, so this is standalone only.)
//!
//! Regression: the checkpoint thread opened the file SQLite had resolved, without the URI's parameters, so its
//! checkpoints wrote through the default VFS while the writer and readers used the one the URI named (found by the
//! power-loss suite, whose database was synced behind its VFS's back).

use std::ffi::{c_char, c_int};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicUsize, Ordering};

use quicklite::rusqlite::ffi;
use quicklite::{Checkpointing, Database};

/// A VFS that passes everything to the default one and counts the main database files opened through it.
mod counting {
    use super::*;

    pub const NAME: &std::ffi::CStr = c"counting";

    /// Main database files opened through this VFS.
    pub static MAIN_DB_OPENS: AtomicUsize = AtomicUsize::new(0);

    /// The default VFS, as an address.
    static REAL: OnceLock<usize> = OnceLock::new();

    unsafe extern "C" fn open(
        _vfs: *mut ffi::sqlite3_vfs,
        name: *const c_char,
        file: *mut ffi::sqlite3_file,
        flags: c_int,
        out_flags: *mut c_int,
    ) -> c_int {
        if flags & ffi::SQLITE_OPEN_MAIN_DB != 0 {
            MAIN_DB_OPENS.fetch_add(1, Ordering::SeqCst);
        }
        let real = *REAL.get().expect("registered") as *mut ffi::sqlite3_vfs;
        // SAFETY: `real` is SQLite's default VFS, which lives as long as the process; the file object has the
        // size it asks for (`szOsFile` is copied from it).
        unsafe { ((*real).xOpen.expect("xOpen"))(real, name, file, flags, out_flags) }
    }

    /// Registers the VFS (not as the default), once.
    pub fn register() {
        REAL.get_or_init(|| {
            // SAFETY: the default VFS is found after SQLite initialized itself; the copy gets its own name and
            // `xOpen` and is leaked, as a registered VFS must outlive every connection using it.
            unsafe {
                let real = ffi::sqlite3_vfs_find(std::ptr::null());
                assert!(!real.is_null());
                let mut vfs: ffi::sqlite3_vfs = *real;
                vfs.zName = NAME.as_ptr();
                vfs.xOpen = Some(open);
                vfs.pNext = std::ptr::null_mut();
                let vfs = Box::leak(Box::new(vfs));
                assert_eq!(ffi::sqlite3_vfs_register(vfs, 0), ffi::SQLITE_OK);
                real as usize
            }
        });
    }
}

#[tokio::test]
async fn every_connection_opens_through_the_vfs_the_uri_names() {
    quicklite::setup::sqlite_setup();
    counting::register();
    let dir = tempfile::tempdir().unwrap();
    let uri = format!(
        "file:{}?vfs={}",
        dir.path().join("uri.db").display(),
        counting::NAME.to_str().unwrap()
    );
    let readers = 2;
    let db = Database::builder(&uri)
        .readers(readers)
        .checkpointing(Checkpointing::managed())
        .open()
        .await
        .unwrap();
    db.execute_batch("CREATE TABLE t (a)").await.unwrap();
    db.execute("INSERT INTO t VALUES (1)", ()).await.unwrap();
    let n: i64 = db
        .query_row("SELECT count(*) FROM t", [], |r| r.get(0))
        .await
        .unwrap();
    assert_eq!(n, 1);
    db.close().await.unwrap();
    // The writer, each reader, and the checkpoint thread's connection (opened as the writer starts).
    assert_eq!(
        counting::MAIN_DB_OPENS.load(Ordering::SeqCst),
        1 + readers + 1,
        "every connection went through the URI's VFS"
    );
}
