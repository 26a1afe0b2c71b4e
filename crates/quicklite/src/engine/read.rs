//! Reads: many queued reads served in one read transaction, on a reader's connection or one lent to it.
//!
//! Beginning and ending a read transaction costs several times more than a point read itself (docs/design.md,
//! "Facts measured here"), and concurrent read transactions on one file contend on SQLite's shared-lock mutex. So a reader drains what is queued and serves it all inside one
//! snapshot, bounded by a batch size and a maximum snapshot age. At low load a batch holds one request: the cost
//! is then exactly one read transaction per read, as with any other crate.
//!
//! Answers are handed back together at the end of a batch (or every [`REPLY_EVERY`]), not one by one: each answer
//! wakes a task, and a tokio worker woken for one task goes back to sleep before the next answer arrives, so
//! answering one at a time costs a context switch per read — more than the read itself.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use crate::config::Config;
use crate::cost::RanOn;
use crate::engine::bound::{self, Bound};
use crate::engine::busy::BusyLimit;
use crate::engine::guard::{Control, GuardedConnection};
use crate::engine::map::ReaderMap;
use crate::engine::{Shared, open};
use crate::inbox::Inbox;
use crate::metrics::LocalHistogram;
use crate::queue::Receiver;
use crate::reply::{Answers, Relays};
use crate::request::{Ran, ReadRequest};
use crate::{RequestKind, Result};

/// Longest time an answer waits for the rest of its batch before the reader hands over what it has.
const REPLY_EVERY: Duration = Duration::from_micros(100);

/// Number of answers handed over together: large enough that one wake-up of the runtime serves many tasks, small
/// enough that the tasks send their next requests while the reader is still serving this batch (so reader and
/// runtime work in parallel instead of taking turns).
const REPLY_BATCH: usize = 16;

/// Requests a reader takes from the shared queue at once: one lock for several requests, few enough that the
/// other readers find work too (a request taken waits for those before it on this reader, not for any reader).
const TAKE: usize = 8;

/// A reader: a read-only connection of its own, serving the readers' shared queue.
pub(crate) struct Reader {
    conn: GuardedConnection,
    map: ReaderMap,
    reads: BatchedReads,
}

impl Reader {
    /// Opens a read-only connection of `path` for a reader serving `rx`.
    pub(crate) fn open(
        path: &Path,
        config: &Config,
        shared: &Arc<Shared>,
        rx: Receiver<ReadRequest>,
    ) -> Result<Reader> {
        let mut conn = open::open_read_only(path, config)?;
        let busy = BusyLimit::new(config.busy_timeout);
        open::instrument(&mut conn, config, shared, "reader", &busy)?;
        Ok(Reader {
            map: ReaderMap::new(&conn, shared.commit_seq(), Instant::now()),
            conn,
            reads: BatchedReads::new(rx, config, shared),
        })
    }

    /// The reads this reader serves (its queue, what it took, its relays).
    pub(crate) fn reads(&mut self) -> &mut BatchedReads {
        &mut self.reads
    }

    /// Serves the requests taken from the queue, and the ones queued behind them up to the batch limits.
    pub(crate) fn serve_taken(&mut self) {
        self.adjust_map();
        self.reads.serve_taken(&self.conn);
    }

    /// Serves what is queued now, one batch, without waiting ([`BatchedReads::serve_turn`]).
    pub(crate) fn serve_turn(&mut self) -> bool {
        self.adjust_map();
        self.reads.serve_turn(&self.conn)
    }

    /// Drops or restores the connection's memory map before a batch ([`ReaderMap`]).
    fn adjust_map(&mut self) {
        let seq = self.reads.shared.commit_seq();
        self.map.before_reads(&self.conn, seq, Instant::now());
    }
}

/// A queue of reads, served in batches on whatever connection is given: a reader's own, or (for a registry's
/// database with no reader connection) the writer's, lent for one batch.
pub(crate) struct BatchedReads {
    inbox: Inbox<ReadRequest>,
    shared: Arc<Shared>,
    /// Most reads served in one read transaction.
    batch_max: usize,
    /// Longest a read transaction serves queued reads before it ends.
    snapshot_max_age: Duration,
    /// The bound on the cost of reads on callers' threads ([`crate::cost`]).
    inline_read_max: Duration,
    /// When the open read transaction began.
    began: Option<Instant>,
    /// Answers and counts not handed over yet.
    pending: Pending,
    /// Answers handed to callers to pass on, delivered from here if they are not passed on in time.
    relays: Relays,
}

/// What a reader keeps between hand-overs: answers not sent yet, and counts not yet added to the shared metrics
/// (readers adding to the same counters for every read would bounce their cache lines between cores).
#[derive(Default)]
struct Pending {
    /// Each answer with the thread its request came from.
    answers: Answers,
    reads: u64,
    errors: u64,
    panics: u64,
    /// Requests dropped, or interrupted, because their caller had stopped waiting.
    abandoned: u64,
    wait_us: LocalHistogram,
}

impl BatchedReads {
    /// Reads served from `rx`.
    pub(crate) fn new(
        rx: Receiver<ReadRequest>,
        config: &Config,
        shared: &Arc<Shared>,
    ) -> BatchedReads {
        BatchedReads {
            inbox: Inbox::new(rx, TAKE),
            shared: shared.clone(),
            batch_max: config.read_batch_max,
            snapshot_max_age: config.read_snapshot_max_age,
            inline_read_max: config.inline_read_max,
            began: None,
            pending: Pending::default(),
            relays: Relays::default(),
        }
    }

    /// The queue and the requests taken from it.
    pub(crate) fn inbox(&mut self) -> &mut Inbox<ReadRequest> {
        &mut self.inbox
    }

    /// The relays issued.
    pub(crate) fn relays(&mut self) -> &mut Relays {
        &mut self.relays
    }

    /// Serves what is queued now, one batch, without waiting for more, and delivers the relays issued; returns
    /// whether there was anything to serve (a turn on a pool's thread).
    pub(crate) fn serve_turn(&mut self, conn: &GuardedConnection) -> bool {
        if !self.inbox.take_now() {
            return false;
        }
        self.serve_taken(conn);
        // Nothing here waits to deliver late relays: deliver them now (callers already passing them on get there
        // first).
        self.relays.deliver_all();
        true
    }

    /// Serves the requests taken from the queue, and the ones queued behind them up to the batch limits; returns
    /// with none left taken. Requests taken past the limits of a batch open the next one, which takes no more.
    pub(crate) fn serve_taken(&mut self, conn: &GuardedConnection) {
        let mut take_more = true;
        while let Some(first) = self.inbox.pop_taken() {
            self.serve_batch(conn, first, take_more);
            take_more = false;
        }
    }

    /// The next request of a batch: one already taken, else (if `take_more`) one taken from the queue now.
    fn next_request(&mut self, take_more: bool) -> Option<ReadRequest> {
        if take_more {
            self.inbox.pop_now()
        } else {
            self.inbox.pop_taken()
        }
    }

    /// Serves `first` and the requests queued behind it, up to the batch limits, in one read transaction. A request
    /// alone gets one too, since its closure may run several statements, which must all see the same snapshot —
    /// unless it runs exactly one ([`ReadRequest::one_statement`]).
    fn serve_batch(&mut self, conn: &GuardedConnection, first: ReadRequest, take_more: bool) {
        let second = self.next_request(take_more);
        if second.is_none() && first.one_statement {
            // One statement takes a snapshot by itself: the explicit BEGIN/COMMIT pair would only add two
            // statements of latency.
            let metrics = &self.shared.metrics;
            metrics.read_transactions.fetch_add(1, Ordering::Relaxed);
            self.serve(conn, first, Instant::now());
            // Its statement may have begun a transaction and left it open (a `SAVEPOINT`): the next read would
            // run in its snapshot, and on a registry's writer connection the next write in it.
            conn.roll_back_open();
            self.shared.metrics.read_batch.record(1);
            self.hand_over();
            return;
        }
        // Every commit numbered up to `snapshot` had returned before the transaction begins, so the snapshot
        // (taken lazily, at the first read) contains it.
        let _span = tracing::debug_span!("quicklite.read_batch").entered();
        let mut snapshot = self.shared.commit_seq();
        self.begin(conn);
        let started = Instant::now();
        let mut pending_since = started;
        let mut served = 0_usize;
        let mut next = Some(first);
        let mut queued = second;
        while let Some(req) = next.take() {
            if req.min_seq > snapshot {
                // Read-your-writes: this request was made after a commit our snapshot may predate.
                if served > 0 {
                    self.shared.metrics.read_batch.record(served as u64);
                }
                self.end(conn);
                snapshot = self.shared.commit_seq();
                self.begin(conn);
                served = 0;
            }
            let now = Instant::now();
            let pending = self.serve(conn, req, now);
            served += 1;
            // A checkpoint waiting for readers to leave the WAL (writes queued behind it) ends the batch's snapshot
            // now: the next one begins past what it copied back, out of its way.
            if served >= self.batch_max
                || now - started >= self.snapshot_max_age
                || self.shared.checkpoint_waits()
            {
                break;
            }
            next = queued.take().or_else(|| self.next_request(take_more));
            // Answers go out during the batch only while more requests follow, so the batch's last answers leave
            // after its metrics are recorded: a caller holding every answer of a batch sees it counted.
            if next.is_some() && (pending >= REPLY_BATCH || now - pending_since >= REPLY_EVERY) {
                self.hand_over();
                pending_since = now;
            }
        }
        if let Some(left) = queued {
            // The batch ended before reaching the request taken to decide on a transaction: it opens the next.
            self.inbox.push_front(left);
        }
        self.shared.metrics.read_batch.record(served as u64);
        self.end(conn);
        self.hand_over();
    }

    /// Runs one request, keeping its answer until the next hand-over; returns the number of answers pending. A
    /// request whose caller has stopped waiting is dropped without running, or interrupted if it is running.
    fn serve(&mut self, conn: &GuardedConnection, mut req: ReadRequest, now: Instant) -> usize {
        if req.job.abandoned() {
            self.pending.abandoned += 1;
            return self.pending.answers.len();
        }
        let ran = match req.deadline {
            // Past its deadline already (it waited in the queue): answered without running.
            Some(deadline) if deadline.passed(now) => {
                req.job.fail_later(deadline.error(RequestKind::Read, false));
                Ran::Failed
            }
            deadline => {
                let _span = tracing::debug_span!(parent: &req.span, "quicklite.read").entered();
                let vetoed = conn.vetoed();
                let (mut ran, passed) = bound::within(Bound::new(Some(now), None), || {
                    conn.run_until(deadline.map(|d| d.at), || req.job.run(conn.conn()))
                });
                if passed.long {
                    self.shared
                        .metrics
                        .long_reads
                        .fetch_add(1, Ordering::Relaxed);
                }
                // Only the writer's connection, lent to a batch, lets a read write: its witness vetoed a commit, and
                // what is written inside the batch's snapshot is rolled back with it before anyone can see it (the
                // reads after it each take a snapshot of their own).
                let writing = conn.writing();
                if writing || conn.vetoed() > vetoed {
                    if writing {
                        let _ = conn.control(Control::Rollback);
                    }
                    req.job.fail_later(crate::Error::read_wrote());
                    ran = Ran::Failed;
                }
                if let Some(site) = req.site {
                    // What the read cost, for the decision to run the next ones on their callers' threads.
                    self.shared.costs.record(
                        site,
                        now.elapsed(),
                        self.inline_read_max,
                        RanOn::Threads,
                    );
                }
                match deadline {
                    // Failed past its deadline: interrupted (or failing anyway, too late to tell).
                    Some(deadline) if !ran.is_ok() && deadline.passed(Instant::now()) => {
                        req.job.fail_later(deadline.error(RequestKind::Read, true));
                        Ran::Failed
                    }
                    _ => ran,
                }
            }
        };
        let pending = &mut self.pending;
        pending.wait_us.record_duration(now - req.enqueued);
        if !ran.is_ok() && req.job.abandoned() {
            // Its caller left while it ran (SQLite's progress handler interrupted it): nobody takes the answer.
            pending.abandoned += 1;
            return pending.answers.len();
        }
        pending.reads += 1;
        pending.errors += u64::from(!ran.is_ok());
        pending.panics += u64::from(ran == Ran::Panicked);
        pending.answers.push((req.caller, req.job));
        pending.answers.len()
    }

    /// Adds the pending counts to the shared metrics, then answers every pending request (in that order: a caller that
    /// has its answer finds its read counted).
    fn hand_over(&mut self) {
        let pending = &mut self.pending;
        let metrics = &self.shared.metrics;
        for (count, total) in [
            (&mut pending.reads, &metrics.reads),
            (&mut pending.errors, &metrics.read_errors),
            (&mut pending.panics, &metrics.panics),
            (&mut pending.abandoned, &metrics.abandoned_reads),
        ] {
            if *count > 0 {
                total.fetch_add(std::mem::take(count), Ordering::Relaxed);
            }
        }
        pending.wait_us.drain_into(&metrics.read_queue_wait_us);
        // The answers leave with the relay; the next ones need a vector of their own.
        let mut answers = std::mem::replace(&mut pending.answers, Vec::with_capacity(REPLY_BATCH));
        self.relays.answer_all(&mut answers);
    }

    fn begin(&mut self, conn: &GuardedConnection) {
        self.shared
            .metrics
            .read_transactions
            .fetch_add(1, Ordering::Relaxed);
        let r = if conn.conn().is_autocommit() {
            conn.control(Control::Begin)
        } else {
            conn.control(Control::Rollback)
                .and_then(|_| conn.control(Control::Begin))
        };
        self.began = Some(Instant::now());
        if let Err(e) = r {
            // Requests are still served, each in its own autocommit snapshot.
            tracing::warn!(error = %e, "reader could not begin a read transaction");
        }
    }

    fn end(&mut self, conn: &GuardedConnection) {
        if let Some(began) = self.began.take() {
            self.shared
                .metrics
                .read_transaction_us
                .record_duration(began.elapsed());
        }
        if conn.conn().is_autocommit() {
            return;
        }
        if let Err(e) = conn.control(Control::Commit) {
            tracing::warn!(error = %e, "reader could not end its read transaction");
        }
    }
}
