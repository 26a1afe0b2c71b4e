//! A connection that keeps its snapshot from one read to the next, for reads run on their callers' threads: a
//! read-only connection of the database's own, or the writer's connection lent while the writer waits for work
//! ([`seat`](crate::engine::seat)).
//!
//! A read transaction costs more to begin and end than a point read costs to run (docs/design.md), so the
//! connection keeps one open between reads, for as long as it may serve them: until the commit sequence moves past
//! it (a read made after a commit must see it), until it is [`Config::read_snapshot_max_age`] old, or until it has
//! stood unused that long (ended from outside, so that it does not hold the WAL back from checkpoints).

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use crate::Result;
use crate::config::Config;
use crate::engine::busy::BusyLimit;
use crate::engine::guard::GuardedConnection;
use crate::engine::map::ReaderMap;
use crate::engine::{Shared, open};

/// A connection for reads and the snapshot it keeps.
pub(crate) struct KeptSnapshot {
    conn: GuardedConnection,
    /// A reader's map; `None` on the writer's connection, which keeps its own.
    map: Option<ReaderMap>,
    /// Whether this is the writer's connection, lent.
    lent: bool,
    /// The open snapshot: the commit sequence it contains, and when it began; `None` when none is open.
    open: Option<(u64, Instant)>,
    /// The commit sequence of the last snapshot begun: a snapshot begun while it is still the sequence finds the
    /// connection's cache as the last one left it.
    last_seq: u64,
    /// Whether the last snapshot began after a commit, with the cache thrown away: it is being filled again.
    refilling: bool,
    /// Reads served since the counts were last added to the shared metrics.
    reads: u64,
    read_errors: u64,
    panics: u64,
}

/// Why a snapshot could not be had.
#[derive(Debug)]
pub(crate) struct NoSnapshot;

impl KeptSnapshot {
    /// Opens a read-only connection to `path`. Its busy handler gives up at once: a read on a caller's thread must
    /// not sleep there waiting for a lock; it goes to the reader threads instead ([`KeptSnapshot::current`]).
    pub(crate) fn open(path: &Path, config: &Config, shared: &Arc<Shared>) -> Result<KeptSnapshot> {
        let mut conn = open::open_read_only(path, config)?;
        let busy = BusyLimit::new(Duration::ZERO);
        open::instrument(conn.conn_mut(), config, shared, "reader", &busy)?;
        let commit_seq = shared.commit_seq();
        Ok(KeptSnapshot {
            map: Some(ReaderMap::new(&conn, commit_seq, Instant::now())),
            ..KeptSnapshot::over(conn, commit_seq)
        })
    }

    /// The writer's connection, lent for reads: it is read-write, so each read on it is checked
    /// ([`KeptSnapshot::undo_write`]).
    pub(crate) fn lent(conn: GuardedConnection, commit_seq: u64) -> KeptSnapshot {
        KeptSnapshot {
            lent: true,
            ..KeptSnapshot::over(conn, commit_seq)
        }
    }

    fn over(conn: GuardedConnection, commit_seq: u64) -> KeptSnapshot {
        KeptSnapshot {
            conn,
            map: None,
            lent: false,
            open: None,
            last_seq: commit_seq,
            refilling: false,
            reads: 0,
            read_errors: 0,
            panics: 0,
        }
    }

    /// Whether a read made now, at `commit_seq`, would find this connection's page cache warm: no commit since its
    /// last snapshot began, and none just before it (SQLite throws a connection's cache away when a read transaction
    /// begins after another connection committed, and the reads that follow fill it again).
    pub(crate) fn warm(&self, commit_seq: u64) -> bool {
        self.last_seq >= commit_seq && !self.refilling
    }

    /// Makes sure the open snapshot contains every commit up to `commit_seq` (the sequence that must be visible now,
    /// [`Shared::visible_seq`]) and is younger than `max_age`, beginning a new one if not (then returns `true`);
    /// `Err` if none could be begun (a lock held elsewhere), with no snapshot open.
    pub(crate) fn current(
        &mut self,
        shared: &Shared,
        commit_seq: u64,
        now: Instant,
        max_age: Duration,
    ) -> std::result::Result<bool, NoSnapshot> {
        if let Some((seq, began)) = self.open {
            if seq >= commit_seq && now.duration_since(began) < max_age {
                return Ok(false);
            }
            self.end(shared);
        }
        // What the new snapshot is sure to contain: the commits published before it begins (one under way may be
        // in it too, or not).
        let commit_seq = shared.commit_seq();
        if let Some(map) = &mut self.map {
            map.before_reads(&self.conn, commit_seq, now);
        }
        // `BEGIN` is deferred: the snapshot is taken by the first read, here, so that a lock held elsewhere is met
        // before any closure runs (and the read can still go to the threads).
        let begun = self.conn.control("BEGIN").and_then(|()| {
            self.conn
                .conn()
                .prepare_cached("PRAGMA schema_version")?
                .query_row([], |_| Ok(()))
        });
        match begun {
            Ok(()) => {
                shared
                    .metrics
                    .read_transactions
                    .fetch_add(1, Ordering::Relaxed);
                // Every commit numbered up to `commit_seq` had returned before the snapshot was taken.
                self.open = Some((commit_seq, now));
                self.refilling = commit_seq != self.last_seq;
                self.last_seq = commit_seq;
                Ok(true)
            }
            Err(e) => {
                tracing::debug!(error = %e, "no snapshot for a read on its caller's thread");
                self.rollback();
                Err(NoSnapshot)
            }
        }
    }

    /// The connection, for a read inside the snapshot.
    pub(crate) fn conn(&self) -> &GuardedConnection {
        &self.conn
    }

    /// Counts one read served (added to the shared metrics when the snapshot ends).
    pub(crate) fn count(&mut self, failed: bool, panicked: bool) {
        self.reads += 1;
        self.read_errors += u64::from(failed);
        self.panics += u64::from(panicked);
    }

    /// When the open snapshot began, if one is open.
    pub(crate) fn began(&self) -> Option<Instant> {
        self.open.map(|(_, began)| began)
    }

    /// Ends the open snapshot, if any, and adds the counts to the shared metrics.
    pub(crate) fn end(&mut self, shared: &Shared) {
        if let Some((_, began)) = self.open.take() {
            shared
                .metrics
                .read_transaction_us
                .record_duration(began.elapsed());
            if !self.conn.conn().is_autocommit()
                && let Err(e) = self.conn.control("COMMIT")
            {
                tracing::warn!(error = %e, "could not end a kept snapshot");
                self.rollback();
            }
        }
        self.flush(shared);
    }

    /// Adds the counts to the shared metrics.
    pub(crate) fn flush(&mut self, shared: &Shared) {
        let metrics = &shared.metrics;
        let reads = std::mem::take(&mut self.reads);
        for (count, total) in [
            (reads, &metrics.reads),
            (reads, &metrics.inline_reads),
            (
                if self.lent { reads } else { 0 },
                &metrics.inline_reads_on_writer,
            ),
            (std::mem::take(&mut self.read_errors), &metrics.read_errors),
            (std::mem::take(&mut self.panics), &metrics.panics),
        ] {
            if count > 0 {
                total.fetch_add(count, Ordering::Relaxed);
            }
        }
    }

    /// Rolls back what a read wrote on a read-write connection (the writer's, lent), ending the snapshot; returns
    /// whether there was anything to roll back. A read closure gets a [`Connection`](rusqlite::Connection) and
    /// could run any statement: on a reader's connection `query_only` refuses writes; on the writer's, a write
    /// made inside the read's snapshot is undone before anyone can see it, and the read fails.
    pub(crate) fn undo_write(&mut self, shared: &Shared) -> bool {
        // A read-only connection cannot have written: no call into SQLite for it.
        if !self.lent || !self.conn.writing() {
            return false;
        }
        self.rollback();
        self.flush(shared);
        true
    }

    /// Ends the snapshot and gives the connection back (the writer's, lent).
    pub(crate) fn into_conn(mut self, shared: &Shared) -> GuardedConnection {
        self.end(shared);
        self.conn
    }

    /// Rolls back whatever transaction is open, after a failure.
    fn rollback(&mut self) {
        self.open = None;
        if !self.conn.conn().is_autocommit()
            && let Err(e) = self.conn.control("ROLLBACK")
        {
            tracing::warn!(error = %e, "could not roll back a kept snapshot");
        }
    }

    /// Ends the snapshot and closes the connection.
    pub(crate) fn close(mut self, shared: &Shared) {
        self.end(shared);
        if let Err(e) = self.conn.close() {
            tracing::warn!(error = %e, "could not close a connection for reads on callers' threads");
        }
    }
}
