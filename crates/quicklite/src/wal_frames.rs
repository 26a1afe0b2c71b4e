//! The WAL's size in frames, read with SQLite's no-op checkpoint.
//!
//! `sqlite3_wal_checkpoint_v2` in mode `SQLITE_CHECKPOINT_NOOP` (SQLite 3.51 and later) copies nothing and takes no
//! lock: it reads the WAL index's header and reports the frames in the WAL, whoever wrote them — this connection,
//! another one, another process — and whoever checkpointed it since. rusqlite exposes the mode from 0.43 on
//! (`Connection::wal_checkpoint_v2`); quicklite accepts older releases, so it calls SQLite's C API, which every
//! rusqlite it accepts links. An older SQLite refuses the mode as misuse, and the count is unknown.

use std::ffi::c_int;

use rusqlite::{Connection, ffi};

/// `SQLITE_CHECKPOINT_NOOP`: not in every libsqlite3-sys's bindings that quicklite builds with.
const SQLITE_CHECKPOINT_NOOP: c_int = -1;

/// The frames (pages) in `conn`'s main database's WAL now, read with a no-op checkpoint that copies nothing and
/// takes no lock: `Some(0)` for a WAL that is empty or was just truncated; `None` when the database is not in WAL
/// mode, when `conn` has not read the database yet (SQLite opens a connection's WAL at its first read), when `conn`
/// is inside a transaction (SQLite runs no checkpoint there, not even this one), or when the linked SQLite predates
/// the no-op mode (3.51). After a `RESTART` checkpoint the frames stay counted until the next write starts the WAL
/// over.
///
/// ```
/// # let dir = tempfile::tempdir().unwrap();
/// let conn = quicklite::rusqlite::Connection::open(dir.path().join("app.db"))?;
/// assert_eq!(quicklite::wal_frames(&conn), None); // a rollback journal
/// conn.pragma_update(None, "journal_mode", "wal")?;
/// conn.execute_batch("CREATE TABLE t (x)")?;
/// assert!(quicklite::wal_frames(&conn) > Some(0));
/// conn.execute_batch("PRAGMA wal_checkpoint(TRUNCATE)")?;
/// assert_eq!(quicklite::wal_frames(&conn), Some(0));
/// # Ok::<(), quicklite::rusqlite::Error>(())
/// ```
pub fn wal_frames(conn: &Connection) -> Option<u64> {
    wal_counts(conn).map(|(frames, _)| frames)
}

/// The WAL's frames and how many of them checkpoints have copied back, from the WAL index's header (as
/// [`wal_frames`]); `None` outside WAL mode or inside a transaction.
pub(crate) fn wal_counts(conn: &Connection) -> Option<(u64, u64)> {
    let mut log_frames: c_int = -1;
    let mut checkpointed: c_int = -1;
    // SAFETY: the handle is `conn`'s open connection, used on this thread for the call's length; the name is a
    // C string literal; SQLite writes the two counts through the pointers, which outlive the call.
    let rc = unsafe {
        ffi::sqlite3_wal_checkpoint_v2(
            conn.handle(),
            c"main".as_ptr(),
            SQLITE_CHECKPOINT_NOOP,
            &raw mut log_frames,
            &raw mut checkpointed,
        )
    };
    if rc != ffi::SQLITE_OK {
        return None;
    }
    // -1 when the database is not in WAL mode.
    Some((
        u64::try_from(log_frames).ok()?,
        u64::try_from(checkpointed).ok()?,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_count_grows_with_writes_and_a_truncate_checkpoint_resets_it() {
        let dir = tempfile::tempdir().unwrap();
        let conn = Connection::open(dir.path().join("wal.db")).unwrap();
        assert_eq!(wal_frames(&conn), None, "not in WAL mode yet");
        conn.pragma_update(None, "journal_mode", "wal").unwrap();
        conn.pragma_update(None, "wal_autocheckpoint", 0).unwrap();
        assert_eq!(wal_frames(&conn), Some(0));
        conn.execute_batch("CREATE TABLE t (x BLOB)").unwrap();
        let mut last = wal_frames(&conn).unwrap();
        assert!(last > 0);
        for _ in 0..3 {
            conn.execute("INSERT INTO t VALUES (zeroblob(10000))", [])
                .unwrap();
            let now = wal_frames(&conn).unwrap();
            assert!(now > last, "{now} frames after {last}");
            last = now;
        }
        // Another connection's view, once it has read the database (until then SQLite has not opened its WAL):
        // the same WAL, read from the shared index.
        let other = Connection::open(dir.path().join("wal.db")).unwrap();
        other
            .query_row("SELECT count(*) FROM t", [], |r| r.get::<_, i64>(0))
            .unwrap();
        assert_eq!(wal_frames(&other), Some(last));
        // Inside a transaction SQLite runs no checkpoint at all.
        conn.execute_batch("BEGIN; SELECT count(*) FROM t;")
            .unwrap();
        assert_eq!(wal_frames(&conn), None);
        conn.execute_batch("COMMIT").unwrap();
        other
            .execute_batch("PRAGMA wal_checkpoint(TRUNCATE)")
            .unwrap();
        assert_eq!(wal_frames(&conn), Some(0));
        assert_eq!(wal_frames(&other), Some(0));
    }
}
