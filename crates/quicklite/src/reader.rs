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

use std::borrow::Borrow;
use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use rusqlite::Connection;

use crate::builder::Config;
use crate::connection::TxGuard;
use crate::database::State;
use crate::metrics::LocalHistogram;
use crate::queue::{Receiver, Spun};
use crate::request::{Answers, RELAY_GRACE, ReadRequest, Relays};

/// Longest time an answer waits for the rest of its batch before the reader hands over what it has.
const REPLY_EVERY: Duration = Duration::from_micros(100);

/// Number of answers handed over together: large enough that one wake-up of the runtime serves many tasks, small
/// enough that the tasks send their next requests while the reader is still serving this batch (so reader and
/// runtime work in parallel instead of taking turns).
const REPLY_BATCH: usize = 16;

/// Requests a reader takes from the shared queue at once: one lock for several requests, few enough that the
/// other readers find work too (a request taken waits for those before it on this reader, not for any reader).
const TAKE: usize = 8;

/// A reader thread's state. The connection is its own ([`Connection`]), or, for a registry's database with no
/// reader connection open, the writer's, lent for one batch (`&Connection`).
pub(crate) struct Reader<C: Borrow<Connection> = Connection> {
    pub(crate) conn: C,
    pub(crate) guard: TxGuard,
    pub(crate) rx: Receiver<ReadRequest>,
    /// Requests taken from the queue, not served yet (empty between batches).
    pub(crate) taken: RefCell<VecDeque<ReadRequest>>,
    pub(crate) state: Arc<State>,
    pub(crate) config: Config,
    /// When the open read transaction began.
    pub(crate) began: Cell<Option<Instant>>,
    /// Answers and counts not handed over yet.
    pub(crate) held: RefCell<Held>,
    /// Answers handed to callers to pass on, delivered from here if they are not passed on in time.
    pub(crate) relays: RefCell<Relays>,
}

/// What a reader keeps between hand-overs: answers not sent yet, and counts not yet added to the shared metrics
/// (readers adding to the same counters for every read would bounce their cache lines between cores).
#[derive(Default)]
pub(crate) struct Held {
    /// Each answer with the thread its request came from.
    answers: Answers,
    reads: u64,
    errors: u64,
    panics: u64,
    wait_us: LocalHistogram,
}

impl<C: Borrow<Connection>> Reader<C> {
    /// Serves requests until the queue is closed and drained (a thread of its own).
    pub(crate) fn run(self) {
        loop {
            let mut next = self.rx.spin_take(TAKE, &mut self.taken.borrow_mut());
            if matches!(next, Spun::Empty) && self.relays.borrow().pending() {
                // Callers carrying answers for others have that long to pass them on; then they go from here.
                next = self
                    .rx
                    .take_timeout(TAKE, &mut self.taken.borrow_mut(), Some(RELAY_GRACE));
                if matches!(next, Spun::Empty) {
                    self.relays.borrow_mut().deliver_all();
                }
            }
            if matches!(next, Spun::Empty) {
                next = self
                    .rx
                    .take_timeout(TAKE, &mut self.taken.borrow_mut(), None);
            }
            if matches!(next, Spun::Closed) {
                return;
            }
            self.serve_taken();
        }
    }

    /// Serves what is queued now, one batch, without waiting for more; returns whether there was anything to
    /// serve (a turn on a shared pool thread).
    pub(crate) fn step(&self) -> bool {
        if self
            .rx
            .try_take(TAKE, &mut self.taken.borrow_mut())
            .is_err()
        {
            return false;
        }
        self.serve_taken();
        // Nothing here waits to deliver late relays: deliver them now (callers already passing them on get there
        // first).
        self.relays.borrow_mut().deliver_all();
        true
    }

    /// Serves the requests taken from the queue, and the ones queued behind them up to the batch limits; returns
    /// with none left taken. Requests taken past the limits of a batch open the next one, which takes no more.
    fn serve_taken(&self) {
        let mut take_more = true;
        loop {
            let Some(first) = self.taken.borrow_mut().pop_front() else {
                return;
            };
            self.serve_batch(first, take_more);
            take_more = false;
        }
    }

    /// The next request of a batch: one already taken, else (if `take_more`) one taken from the queue now.
    fn next_request(&self, take_more: bool) -> Option<ReadRequest> {
        let mut taken = self.taken.borrow_mut();
        if taken.is_empty() && take_more {
            let _ = self.rx.try_take(TAKE, &mut taken);
        }
        taken.pop_front()
    }

    /// Serves `first` and the requests queued behind it, up to the batch limits, in one read transaction.
    fn serve_batch(&self, first: ReadRequest, take_more: bool) {
        let metrics = &self.state.metrics;
        {
            let Some(second) = self.next_request(take_more) else {
                // Nothing else is queued: serve the request in autocommit mode. Its statement takes a fresh
                // snapshot by itself, so the explicit BEGIN/COMMIT pair would only add two statements of latency.
                metrics.read_transactions.fetch_add(1, Ordering::Relaxed);
                self.serve(first, Instant::now());
                metrics.read_batch.record(1);
                self.hand_over();
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
                let held = self.serve(req, now);
                served += 1;
                if served >= self.config.read_batch_max
                    || now - started >= self.config.read_snapshot_max_age
                {
                    break;
                }
                next = queued.take().or_else(|| self.next_request(take_more));
                // Answers go out during the batch only while more requests follow, so the batch's last answers
                // leave after its metrics are recorded: a caller holding every answer of a batch sees it counted.
                if next.is_some() && (held >= REPLY_BATCH || now - held_since >= REPLY_EVERY) {
                    self.hand_over();
                    held_since = now;
                }
            }
            if let Some(left) = queued {
                // The batch ended before reaching the request taken to decide on a transaction: it opens the next.
                self.taken.borrow_mut().push_front(left);
            }
            metrics.read_batch.record(served as u64);
            self.end();
            self.hand_over();
        }
    }

    /// Runs one request, keeping its answer until the next hand-over; returns the number of answers held.
    fn serve(&self, mut req: ReadRequest, now: Instant) -> usize {
        let (ok, panicked) = {
            let _span = tracing::debug_span!(parent: &req.span, "quicklite.read").entered();
            req.job.run(self.conn.borrow())
        };
        let mut held = self.held.borrow_mut();
        held.wait_us.record_duration(now - req.enqueued);
        held.reads += 1;
        held.errors += u64::from(!ok);
        held.panics += u64::from(panicked);
        held.answers.push((req.origin, req.job));
        held.answers.len()
    }

    /// Adds the held counts to the shared metrics, then answers every held request (in that order: a caller that
    /// has its answer finds its read counted).
    fn hand_over(&self) {
        let mut answers = {
            let held = &mut *self.held.borrow_mut();
            let metrics = &self.state.metrics;
            for (count, total) in [
                (&mut held.reads, &metrics.reads),
                (&mut held.errors, &metrics.read_errors),
                (&mut held.panics, &metrics.panics),
            ] {
                if *count > 0 {
                    total.fetch_add(std::mem::take(count), Ordering::Relaxed);
                }
            }
            held.wait_us.drain_into(&metrics.read_wait_us);
            // The answers leave with the relay; the next ones need a vector of their own.
            std::mem::replace(&mut held.answers, Vec::with_capacity(REPLY_BATCH))
        };
        self.relays.borrow_mut().answer_all(&mut answers);
    }

    fn begin(&self) {
        self.state
            .metrics
            .read_transactions
            .fetch_add(1, Ordering::Relaxed);
        let r = self.guard.internal(|| {
            let conn = self.conn.borrow();
            if !conn.is_autocommit() {
                conn.prepare_cached("ROLLBACK")?.execute([])?;
            }
            conn.prepare_cached("BEGIN")?.execute([])
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
        let conn = self.conn.borrow();
        if conn.is_autocommit() {
            return;
        }
        let r = self
            .guard
            .internal(|| conn.prepare_cached("COMMIT")?.execute([]));
        if let Err(e) = r {
            tracing::warn!(error = %e, "reader could not end its read transaction");
        }
    }
}
