//! A reader connection's memory map: kept while the database is not being written, dropped while it is.
//!
//! With `mmap_size` set, SQLite drops a connection's whole map whenever a read transaction begins after another
//! connection committed (`pagerBeginReadTransaction` calls `sqlite3OsUnfetch(fd, 0, 0)` when the WAL changed): beside
//! a writer, every read batch pays an `munmap` with its TLB shootdowns, then the page faults of mapping again — more
//! than the `pread` per page it reads without a map. On a database nobody writes, the map is what makes reads of a
//! file larger than the page cache cheap. So a reader keeps the map while the commit sequence stands still and turns
//! it off as soon as it moves; it maps again after [`QUIET`] without a commit. docs/design.md has the figures.
//!
//! The writer's connection keeps its map: its own commits do not count as a change of the WAL for it.

use std::time::{Duration, Instant};

use crate::engine::guard::GuardedConnection;

/// How long the commit sequence must stand still (the database quiet: not written) before a reader maps the file
/// again.
pub(crate) const QUIET: Duration = Duration::from_secs(1);

/// The memory map of one reader connection.
pub(crate) struct ReaderMap {
    /// The configured `mmap_size`, in bytes; 0 when the connection has no map to manage.
    size: i64,
    /// Whether the connection's `mmap_size` is `size` now (rather than 0).
    mapped: bool,
    /// The last commit sequence number seen.
    seen: u64,
    /// When it was first seen.
    since: Instant,
}

impl ReaderMap {
    /// The map of `conn` as opened (its configured `mmap_size`), with `commit_seq` the database's commit sequence now.
    pub(crate) fn new(conn: &GuardedConnection, commit_seq: u64, now: Instant) -> ReaderMap {
        let size = conn
            .conn()
            .query_row("PRAGMA mmap_size", [], |row| row.get::<_, i64>(0))
            .unwrap_or(0);
        ReaderMap {
            size,
            mapped: size > 0,
            seen: commit_seq,
            since: now,
        }
    }

    /// Called before a batch of reads, outside any read transaction: drops the map if the database was written
    /// since the last call, maps again after [`QUIET`] without a write.
    pub(crate) fn before_reads(&mut self, conn: &GuardedConnection, commit_seq: u64, now: Instant) {
        if self.size == 0 {
            return;
        }
        if commit_seq != self.seen {
            self.seen = commit_seq;
            self.since = now;
            if self.mapped {
                self.set(conn, 0);
            }
        } else if !self.mapped && now.duration_since(self.since) >= QUIET {
            self.set(conn, self.size);
        }
    }

    fn set(&mut self, conn: &GuardedConnection, size: i64) {
        match conn.conn().pragma_update(None, "mmap_size", size) {
            Ok(()) => self.mapped = size > 0,
            // Harmless either way: the reads go on with the map as it is, and the next batch tries again.
            Err(e) => tracing::warn!(error = %e, size, "reader could not change its mmap_size"),
        }
    }
}

#[cfg(test)]
mod tests {
    use rusqlite::Connection;

    use super::*;

    fn mmap_size(conn: &GuardedConnection) -> i64 {
        conn.conn()
            .query_row("PRAGMA mmap_size", [], |row| row.get(0))
            .unwrap()
    }

    fn connection(dir: &tempfile::TempDir, mmap_size: i64) -> GuardedConnection {
        let conn = Connection::open(dir.path().join("map.db")).unwrap();
        conn.pragma_update(None, "mmap_size", mmap_size).unwrap();
        GuardedConnection::new(conn).unwrap()
    }

    #[test]
    fn the_map_goes_while_commits_come_and_returns_after_a_quiet_spell() {
        let dir = tempfile::tempdir().unwrap();
        let conn = connection(&dir, 1 << 20);
        let start = Instant::now();
        let mut map = ReaderMap::new(&conn, 7, start);
        map.before_reads(&conn, 7, start + QUIET * 5);
        assert_eq!(mmap_size(&conn), 1 << 20, "nothing was written");
        map.before_reads(&conn, 8, start + QUIET * 5);
        assert_eq!(mmap_size(&conn), 0, "a commit drops the map");
        map.before_reads(&conn, 9, start + QUIET * 6);
        map.before_reads(&conn, 9, start + QUIET * 6 + QUIET / 2);
        assert_eq!(mmap_size(&conn), 0, "the last commit is too recent");
        map.before_reads(&conn, 9, start + QUIET * 7);
        assert_eq!(
            mmap_size(&conn),
            1 << 20,
            "mapped again after a quiet spell"
        );
    }

    #[test]
    fn a_connection_without_a_map_is_left_alone() {
        let dir = tempfile::tempdir().unwrap();
        let conn = connection(&dir, 0);
        let start = Instant::now();
        let mut map = ReaderMap::new(&conn, 0, start);
        map.before_reads(&conn, 1, start);
        map.before_reads(&conn, 1, start + QUIET * 2);
        assert_eq!(mmap_size(&conn), 0);
    }
}
