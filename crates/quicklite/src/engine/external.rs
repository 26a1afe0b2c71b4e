//! Commits made to the file from outside the database — by other processes, or by connections it does not own —
//! found by its writer ([`Builder::notice_external_commits`](crate::Builder::notice_external_commits)).
//!
//! `PRAGMA data_version` on a connection changes whenever a commit other than the connection's own reached the
//! file, and only then; on the writer's connection, which makes every commit of the database, any change is a
//! commit from outside. The number is the connection's own, so it means nothing across a close and reopen.
//!
//! A read replica's commits all come from outside, through Litestream's VFS, which changes the file-change counter
//! at every read of the header, so that `data_version` changes at every look: its writer looks at the replica's
//! position instead (Litestream's TXID), and records it in the metrics.

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use crate::engine::Shared;
use crate::engine::guard::GuardedConnection;
use crate::replica;

/// The writer's looks for commits from outside.
pub(crate) struct ExternalCommits {
    every: Duration,
    next_look: Instant,
    /// Whether the database is a read replica: the version looked at is its position.
    replica: bool,
    /// `PRAGMA data_version` (a replica: its TXID) at the last look; `None` until a look succeeds.
    version: Option<i64>,
}

impl ExternalCommits {
    /// Looks every `every`, from the writer connection `conn` just opened (the first look, now, sets where the
    /// database stands).
    pub(crate) fn new(
        every: Duration,
        replica: bool,
        conn: &GuardedConnection,
        shared: &Shared,
    ) -> ExternalCommits {
        let mut external = ExternalCommits {
            every,
            next_look: Instant::now(),
            replica,
            version: None,
        };
        external.look(conn, shared);
        external
    }

    /// When the next look is due.
    pub(crate) fn next_look(&self) -> Instant {
        self.next_look
    }

    /// Looks if the interval has passed since the last look, or will have within an eighth of it: a turn that comes
    /// just before the look is due (a registry's housekeeping runs on a clock of its own) looks now rather than a
    /// whole interval later.
    pub(crate) fn look_if_due(&mut self, conn: &GuardedConnection, shared: &Shared) {
        if Instant::now() + self.every / 8 >= self.next_look {
            self.look(conn, shared);
        }
    }

    /// The writer writes on `conn`, its other connection, from now on: that one's data version moved with the first
    /// one's commits too, so the looks start over from it, and subscribers are told to read afresh, as a commit from
    /// outside may have come since the last look.
    pub(crate) fn switched(&mut self, conn: &GuardedConnection, shared: &Shared) {
        self.version = None;
        self.look(conn, shared);
        if !self.replica {
            shared.changes.external();
        }
    }

    /// Reads the connection's data version and tells the subscribers if it changed since the last look. Outside a
    /// transaction only: inside one, the version is that of the transaction's snapshot.
    fn look(&mut self, conn: &GuardedConnection, shared: &Shared) {
        self.next_look = Instant::now() + self.every;
        if !conn.conn().is_autocommit() {
            return;
        }
        let version = if self.replica {
            replica::status(conn.conn()).map(|status| {
                let metrics = &shared.metrics;
                let since_poll = status.since_poll.map_or(u64::MAX, |d| d.as_secs());
                metrics
                    .replica_since_poll_s
                    .store(since_poll, Ordering::Relaxed);
                metrics
                    .replica_txid
                    .store(status.position.txid(), Ordering::Relaxed);
                status.position.txid() as i64
            })
        } else {
            conn.conn()
                .prepare_cached("PRAGMA data_version")
                .and_then(|mut statement| statement.query_row([], |row| row.get::<_, i64>(0)))
        };
        match version {
            Ok(version) => {
                if self.version.is_some_and(|last| last != version) {
                    shared
                        .metrics
                        .external_commits
                        .fetch_add(1, Ordering::Relaxed);
                    shared.changes.external();
                }
                self.version = Some(version);
            }
            Err(e) => tracing::debug!(error = %e, "could not look for commits from outside"),
        }
    }
}
