//! A reader thread: one read-only connection, many queued reads per read transaction.
//!
//! Beginning and ending a read transaction costs more than a point read itself (on the project's 2-core machine:
//! ~3.3 µs per autocommit point read vs ~0.5 µs inside an open transaction), and concurrent read transactions on
//! one file contend on SQLite's shared-lock mutex. So a reader drains what is queued and serves it all inside one
//! snapshot, bounded by a batch size and a maximum snapshot age. At low load a batch holds one request: the cost
//! is then exactly one read transaction per read, as with any other crate.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Instant;

use async_channel::Receiver;
use rusqlite::Connection;

use crate::builder::Config;
use crate::connection::TxGuard;
use crate::database::State;
use crate::request::ReadRequest;

/// A reader thread's state.
pub(crate) struct Reader {
    pub(crate) conn: Connection,
    pub(crate) guard: TxGuard,
    pub(crate) rx: Receiver<ReadRequest>,
    pub(crate) state: Arc<State>,
    pub(crate) config: Config,
}

impl Reader {
    /// Serves requests until the queue is closed and drained.
    pub(crate) fn run(self) {
        let metrics = &self.state.metrics;
        while let Ok(first) = self.rx.recv_blocking() {
            // Every commit numbered up to `snapshot` had returned before the transaction begins, so the snapshot
            // (taken lazily, at the first read) contains it.
            let mut snapshot = self.state.commit_seq.load(Ordering::Acquire);
            self.begin();
            let started = Instant::now();
            let mut served = 0_u64;
            let mut next = Some(first);
            while let Some(req) = next.take() {
                if req.min_seq > snapshot {
                    // Read-your-writes: this request was made after a commit our snapshot may predate.
                    if served > 0 {
                        metrics.read_batch.record(served);
                    }
                    self.end();
                    snapshot = self.state.commit_seq.load(Ordering::Acquire);
                    self.begin();
                    served = 0;
                }
                let now = Instant::now();
                metrics.read_wait_us.record_duration(now - req.enqueued);
                if !req.job.abandoned() {
                    let (ok, panicked) = req.job.run(&self.conn);
                    metrics.reads.fetch_add(1, Ordering::Relaxed);
                    if !ok {
                        metrics.read_errors.fetch_add(1, Ordering::Relaxed);
                    }
                    if panicked {
                        metrics.panics.fetch_add(1, Ordering::Relaxed);
                    }
                    served += 1;
                }
                if served as usize >= self.config.read_batch_max
                    || started.elapsed() >= self.config.read_snapshot_max_age
                {
                    break;
                }
                next = self.rx.try_recv().ok();
            }
            metrics.read_batch.record(served);
            self.end();
        }
    }

    fn begin(&self) {
        self.state
            .metrics
            .read_transactions
            .fetch_add(1, Ordering::Relaxed);
        let r = self.guard.internal(|| {
            if !self.conn.is_autocommit() {
                self.conn.prepare_cached("ROLLBACK")?.execute([])?;
            }
            self.conn.prepare_cached("BEGIN")?.execute([])
        });
        if let Err(e) = r {
            // Requests are still served, each in its own autocommit snapshot.
            tracing::warn!(error = %e, "reader could not begin a read transaction");
        }
    }

    fn end(&self) {
        if self.conn.is_autocommit() {
            return;
        }
        let r = self
            .guard
            .internal(|| self.conn.prepare_cached("COMMIT")?.execute([]));
        if let Err(e) = r {
            tracing::warn!(error = %e, "reader could not end its read transaction");
        }
    }
}
