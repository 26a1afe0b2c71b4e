//! A read replica's own requests: where it stands, and reads that wait for a position the primary reached; and the
//! primary's wait for object storage to hold what it committed.

use std::time::{Duration, Instant};

use rusqlite::Connection;

use crate::cost::Site;
use crate::replica::{self, Position, ReplicaStatus, VFS_POLL_INTERVAL};
use crate::request::Deadline;
use crate::{Database, Error, Result};

/// How long a read waiting for a position sleeps between looks, as a share of the replica's poll interval.
const LOOKS_PER_POLL: u32 = 10;

impl Database {
    /// Waits until object storage holds every transaction committed on this database so far — every write a
    /// read here can see now — and returns the position it reached, which a replica's reads can wait for
    /// ([`Database::read_at_least`]). Under [`Acknowledge::Replicated`](crate::Acknowledge::Replicated) only; else
    /// fails with [`Error::InvalidConfig`].
    ///
    /// A service's output gate: reads see a write from its local commit on, before object storage has it and its
    /// writer is answered. A response built from what was read, a message relayed from the change feed, or a
    /// notification acted on can wait for this first, so that nothing leaves the service that a lost machine
    /// could take back. The wait has the deadline of a write ([`Builder::write_timeout`](crate::Builder::write_timeout),
    /// [`Database::with_timeout`]); past it, fails with [`Error::NotReplicated`].
    pub async fn until_replicated(&self) -> Result<Position> {
        let Some(gate) = &self.inner.shared.gate else {
            return Err(Error::InvalidConfig(
                "until_replicated needs Builder::acknowledge(Acknowledge::Replicated(…))".into(),
            ));
        };
        let deadline = Deadline::shortest([self.timeout, self.inner.config.write_timeout]);
        // Every commit a read made now could see: one under way too, once its `COMMIT` has returned (the gate's
        // uploads carry only what has).
        let shared = &self.inner.shared;
        let seen = shared.visible_seq();
        while shared.commit_seq() < seen && shared.visible_seq() >= seen {
            tokio::task::yield_now().await;
        }
        let rx = gate.wait_for(shared.commit_seq().min(seen), deadline);
        rx.await.map_err(|_| Error::Closed)?
    }

    /// Where a read replica ([`Builder::replica`](crate::Builder::replica)) stands: the last transaction its
    /// connection has, and how long since it last heard from object storage. Fails with [`Error::InvalidConfig`] on
    /// a database that is not a replica.
    pub async fn replica_status(&self) -> Result<ReplicaStatus> {
        self.replica()?;
        self.queue_read(
            self.read_deadline(None),
            true,
            true,
            Site::of::<fn()>(None),
            replica::status,
        )
        .await
    }

    /// Runs `f` on the replica once it has every transaction up to `position` (the position the primary's Litestream
    /// reached after a write, [`Litestream::sync`](crate::litestream::Litestream::sync)): the primary's write is then
    /// visible to `f`. Until then the read waits, looking again a tenth of a poll interval later; when the next look
    /// would come after `timeout`, it fails with [`Error::ReplicaBehind`] without running `f`. On a database that is
    /// not a replica, fails with [`Error::InvalidConfig`].
    pub async fn read_at_least<T, F>(
        &self,
        position: Position,
        timeout: Duration,
        mut f: F,
    ) -> Result<T>
    where
        F: FnOnce(&Connection) -> rusqlite::Result<T> + Send + 'static,
        T: Send + 'static,
    {
        let pause = self.replica()?.poll_interval_or(VFS_POLL_INTERVAL) / LOOKS_PER_POLL;
        let started = Instant::now();
        // The position the last look found, if one was made.
        let mut last_reached = None;
        loop {
            let waited = started.elapsed();
            let left = timeout.saturating_sub(waited);
            let caller_bound = [self.timeout, self.inner.config.read_timeout]
                .into_iter()
                .flatten()
                .min();
            let deadline = Deadline::shortest([Some(left), caller_bound]);
            // The position is looked at before the read transaction takes its snapshot (the look reads no table),
            // and a connection's snapshot is never older than the position it reported then.
            let attempt = self
                .queue_read(deadline, false, true, Site::of::<F>(None), move |conn| {
                    let reached = replica::status(conn)?.position;
                    if reached < position {
                        return Ok(Err((f, reached)));
                    }
                    f(conn).map(Ok)
                })
                .await;
            let attempt = match (attempt, last_reached) {
                // Out of the time left to wait for the position, not of the caller's own timeouts: the replica is
                // behind.
                (Err(Error::Timeout { .. }), Some(reached))
                    if caller_bound.is_none_or(|bound| left < bound) =>
                {
                    return Err(Error::ReplicaBehind {
                        wanted: position,
                        reached,
                        waited: started.elapsed(),
                    });
                }
                (attempt, _) => attempt?,
            };
            match attempt {
                Ok(value) => return Ok(value),
                Err((back, reached)) => {
                    last_reached = Some(reached);
                    let waited = started.elapsed();
                    if waited + pause > timeout {
                        return Err(Error::ReplicaBehind {
                            wanted: position,
                            reached,
                            waited,
                        });
                    }
                    f = back;
                    sleep(pause).await?;
                }
            }
        }
    }

    /// The replica this database reads, or the error of a request only a replica serves.
    fn replica(&self) -> Result<&replica::Replica> {
        self.inner.config.replica.as_ref().ok_or_else(|| {
            Error::InvalidConfig("this database is not a read replica (Builder::replica)".into())
        })
    }
}

/// Waits `pause` without a runtime's timer (the library runs on any runtime): a thread of its own sleeps and wakes
/// the caller.
async fn sleep(pause: Duration) -> Result<()> {
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    std::thread::Builder::new()
        .name("quicklite-replica-wait".into())
        .spawn(move || {
            std::thread::sleep(pause);
            let _ = tx.send(());
        })?;
    let _ = rx.await;
    Ok(())
}
