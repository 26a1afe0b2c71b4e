//! A reader thread: one read-only connection, many queued reads per read transaction.
//!
//! Beginning and ending a read transaction costs more than a point read itself (on the project's 2-core machine:
//! ~3.3 µs per autocommit point read vs ~0.5 µs inside an open transaction), and concurrent read transactions on
//! one file contend on SQLite's shared-lock mutex. So a reader drains what is queued and serves it all inside one
//! snapshot, bounded by a batch size and a maximum snapshot age. At low load a batch holds one request: the cost
//! is then exactly one read transaction per read, as with any other crate.
//!
//! Answers are handed back together at the end of a batch (or every [`REPLY_EVERY`]), not one by one: each answer
//! wakes a task, and a tokio worker woken for one task goes back to sleep before the next answer arrives, so
//! answering one at a time costs a context switch per read — more than the read itself.

use std::cell::Cell;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use async_channel::Receiver;
use rusqlite::Connection;

use crate::builder::Config;
use crate::connection::TxGuard;
use crate::database::State;
use crate::request::{ReadJob, ReadRequest};

/// Longest time an answer waits for the rest of its batch before the reader hands over what it has.
const REPLY_EVERY: Duration = Duration::from_micros(100);

/// Number of answers handed over together: large enough that one wake-up of the runtime serves many tasks, small
/// enough that the tasks send their next requests while the reader is still serving this batch (so reader and
/// runtime work in parallel instead of taking turns).
const REPLY_BATCH: usize = 16;

/// A reader thread's state.
pub(crate) struct Reader {
    pub(crate) conn: Connection,
    pub(crate) guard: TxGuard,
    pub(crate) rx: Receiver<ReadRequest>,
    pub(crate) state: Arc<State>,
    pub(crate) config: Config,
    /// When the open read transaction began.
    pub(crate) began: Cell<Option<Instant>>,
}

impl Reader {
    /// Serves requests until the queue is closed and drained (a thread of its own).
    pub(crate) fn run(self) {
        let mut answers: Vec<Box<dyn ReadJob>> = Vec::with_capacity(REPLY_BATCH);
        while let Ok(first) = self.rx.recv_blocking() {
            self.serve_batch(first, &mut answers);
        }
    }

    /// Serves what is queued now, one batch, without waiting for more; returns whether there was anything to
    /// serve (a turn on a shared pool thread).
    pub(crate) fn step(&self, answers: &mut Vec<Box<dyn ReadJob>>) -> bool {
        match self.rx.try_recv() {
            Ok(first) => {
                self.serve_batch(first, answers);
                true
            }
            Err(_) => false,
        }
    }

    /// Serves `first` and the requests queued behind it, up to the batch limits, in one read transaction.
    fn serve_batch(&self, first: ReadRequest, answers: &mut Vec<Box<dyn ReadJob>>) {
        let metrics = &self.state.metrics;
        {
            let Ok(second) = self.rx.try_recv() else {
                // Nothing else is queued: serve the request in autocommit mode. Its statement takes a fresh
                // snapshot by itself, so the explicit BEGIN/COMMIT pair would only add two statements of latency.
                metrics.read_transactions.fetch_add(1, Ordering::Relaxed);
                self.serve(first, Instant::now(), answers);
                flush(answers);
                metrics.read_batch.record(1);
                return;
            };
            // Every commit numbered up to `snapshot` had returned before the transaction begins, so the snapshot
            // (taken lazily, at the first read) contains it.
            let _span = tracing::debug_span!("quicklite.read_batch").entered();
            let mut snapshot = self.state.commit_seq.load(Ordering::Acquire);
            self.begin();
            let started = Instant::now();
            let mut held_since = started;
            let mut served = 0_usize;
            let mut next = Some(first);
            let mut queued = Some(second);
            while let Some(req) = next.take() {
                if req.min_seq > snapshot {
                    // Read-your-writes: this request was made after a commit our snapshot may predate.
                    if served > 0 {
                        metrics.read_batch.record(served as u64);
                    }
                    self.end();
                    snapshot = self.state.commit_seq.load(Ordering::Acquire);
                    self.begin();
                    served = 0;
                }
                let now = Instant::now();
                self.serve(req, now, answers);
                served += 1;
                if answers.len() >= REPLY_BATCH || now - held_since >= REPLY_EVERY {
                    flush(answers);
                    held_since = now;
                }
                if served >= self.config.read_batch_max
                    || now - started >= self.config.read_snapshot_max_age
                {
                    break;
                }
                next = queued.take().or_else(|| self.rx.try_recv().ok());
            }
            if let Some(left) = queued {
                // The batch ended before reaching the request taken to decide on a transaction: serve it alone.
                self.end();
                self.serve(left, Instant::now(), answers);
            }
            metrics.read_batch.record(served as u64);
            self.end();
            flush(answers);
        }
    }

    /// Runs one request, keeping its answer in `answers` until the next flush.
    fn serve(&self, mut req: ReadRequest, now: Instant, answers: &mut Vec<Box<dyn ReadJob>>) {
        let metrics = &self.state.metrics;
        metrics.read_wait_us.record_duration(now - req.enqueued);
        let (ok, panicked) = {
            let _span = tracing::debug_span!(parent: &req.span, "quicklite.read").entered();
            req.job.run(&self.conn)
        };
        metrics.reads.fetch_add(1, Ordering::Relaxed);
        if !ok {
            metrics.read_errors.fetch_add(1, Ordering::Relaxed);
        }
        if panicked {
            metrics.panics.fetch_add(1, Ordering::Relaxed);
        }
        answers.push(req.job);
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
        self.began.set(Some(Instant::now()));
        if let Err(e) = r {
            // Requests are still served, each in its own autocommit snapshot.
            tracing::warn!(error = %e, "reader could not begin a read transaction");
        }
    }

    fn end(&self) {
        if let Some(began) = self.began.take() {
            self.state
                .metrics
                .read_txn_us
                .record_duration(began.elapsed());
        }
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

/// Hands every held answer to its caller.
pub(crate) fn flush(answers: &mut Vec<Box<dyn ReadJob>>) {
    for job in answers.drain(..) {
        job.reply();
    }
}
