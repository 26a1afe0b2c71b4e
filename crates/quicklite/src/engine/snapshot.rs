//! A read-only connection that keeps its snapshot from one read to the next, for reads run on their callers'
//! threads.
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

/// A read-only connection and the snapshot it keeps.
pub(crate) struct KeptSnapshot {
    conn: GuardedConnection,
    map: ReaderMap,
    /// The open snapshot: the commit sequence it contains, and when it began; `None` when none is open.
    open: Option<(u64, Instant)>,
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
        Ok(KeptSnapshot {
            map: ReaderMap::new(&conn, shared.commit_seq(), Instant::now()),
            conn,
            open: None,
            reads: 0,
            read_errors: 0,
            panics: 0,
        })
    }

    /// Makes sure the open snapshot contains every commit up to `commit_seq` (the sequence loaded now) and is
    /// younger than `max_age`, beginning a new one if not (then returns `true`); `Err` if none could be begun (a lock
    /// held elsewhere), with no snapshot open.
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
        self.map.before_reads(&self.conn, commit_seq, now);
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
            (std::mem::take(&mut self.read_errors), &metrics.read_errors),
            (std::mem::take(&mut self.panics), &metrics.panics),
        ] {
            if count > 0 {
                total.fetch_add(count, Ordering::Relaxed);
            }
        }
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
