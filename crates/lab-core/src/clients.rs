//! The client tasks the driver spawns: closed-loop loops of operations, timed into per-thread statistics
//! ([`StatsSink`]).

use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Result;

use crate::data::{self, LedgerGenerator, NewItem, NewJob};
use crate::driver::Approach;
use crate::pacing::Schedule;
use crate::rng::Rng;
use crate::stats::{OpKind, StatsSink};
use crate::workload::{MIXED_READ_PERCENT, Workload};

/// The measured window, fixed before the first task starts.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Window {
    /// End of the warm-up; operations completing before it are not counted.
    pub(crate) measure_start: Instant,
    /// End of the measurement; tasks stop issuing operations at this instant.
    pub(crate) end: Instant,
}

impl Window {
    /// Whether an operation completing at `done` is counted.
    fn counts(&self, done: Instant) -> bool {
        done >= self.measure_start && done < self.end
    }
}

/// Awaits an operation and tells whether it completed on its first poll, i.e. without ever giving its worker
/// thread back to the runtime (the direct-blocking approach).
async fn observe<F: Future>(operation: F) -> (F::Output, bool) {
    let mut operation = std::pin::pin!(operation);
    let mut polls = 0u32;
    let output = std::future::poll_fn(|cx| {
        polls += 1;
        operation.as_mut().poll(cx)
    })
    .await;
    (output, polls == 1)
}

/// Gives the worker thread back to the runtime before the next operation if the previous one never did.
///
/// In a service every request is its own task and ends after one operation; a client loop that never awaits
/// anything pending would instead keep its worker for the whole run and hide the queueing that blocking calls
/// cause. The yield happens after the next operation's clock started, so the wait for a worker counts in its
/// latency, as a request's wait for a worker does. Approaches that await a reply already yielded, so they pay
/// nothing here.
async fn yield_if_never_pending(ready_at_once: bool) {
    if ready_at_once {
        tokio::task::yield_now().await;
    }
}

/// Records the outcome of one operation that started at `started`, if it completed inside the window.
fn record(stats: &StatsSink, window: &Window, kind: OpKind, started: Instant, outcome: Result<()>) {
    let done = Instant::now();
    if window.counts(done) {
        store(stats, kind, done - started, outcome);
    }
}

/// Adds one counted operation to the statistics of the thread it ran on.
fn store(stats: &StatsSink, kind: OpKind, latency: Duration, outcome: Result<()>) {
    // The lab's own allocations (a histogram growing, an error message) are not the approach's: not counted.
    crate::alloc::uncounted(|| {
        stats.with(|stats| match outcome {
            Ok(()) => stats.record(kind, latency.as_nanos() as u64),
            Err(e) => stats.record_error(format!("{e:#}")),
        })
    });
}

/// A client of `point-read`, `insert` or `mixed`: operations back to back until the window ends.
pub(crate) async fn client<A: Approach>(
    approach: Arc<A>,
    workload: Workload,
    rows: u64,
    mut rng: Rng,
    window: Window,
    stats: Arc<StatsSink>,
) {
    let rows = rows.max(1) as i64;
    let mut ready = false;
    loop {
        let started = Instant::now();
        if started >= window.end {
            return;
        }
        // Waiting for the worker is part of this operation's latency, as a request waits for one.
        yield_if_never_pending(ready).await;
        let ((outcome, ready_now), kind) = match workload {
            Workload::PointRead => (
                observe(approach.point_read(rng.between(1, rows))).await,
                OpKind::Read,
            ),
            Workload::Insert => (
                observe(approach.insert(NewItem::random(&mut rng))).await,
                OpKind::Write,
            ),
            _ if rng.percent(MIXED_READ_PERCENT) => (
                observe(approach.point_read(rng.between(1, rows))).await,
                OpKind::Read,
            ),
            _ => {
                let (id, delta) = (rng.between(1, rows), rng.between(-100, 100));
                (observe(approach.update(id, delta)).await, OpKind::Write)
            }
        };
        record(&stats, &window, kind, started, outcome);
        ready = ready_now;
    }
}

/// The `multi-db` writer of database `db` in the `blocking` write mode: one block after another, each holding the
/// write for `delay`.
pub(crate) async fn blocking_writer<A: Approach>(
    approach: Arc<A>,
    db: usize,
    mut generator: LedgerGenerator,
    delay: Duration,
    window: Window,
    stats: Arc<StatsSink>,
) {
    let mut ready = false;
    loop {
        let started = Instant::now();
        if started >= window.end {
            return;
        }
        // Waiting for the worker is part of this operation's latency, as a request waits for one.
        yield_if_never_pending(ready).await;
        let (outcome, ready_now) =
            observe(approach.paced_write(db, generator.next_block(), delay)).await;
        record(&stats, &window, OpKind::Write, started, outcome);
        ready = ready_now;
    }
}

/// The `multi-db` writer of database `db` in the `paced` write mode: write `k` is due at `origin +
/// schedule.tick(k)`; the writer sleeps (asynchronously) until then, issues the block without any delay inside,
/// and awaits it. A late writer issues its overdue writes back to back, so none is skipped.
///
/// A write counts when it was *due* inside the window and completed before the window closed: the count is then
/// at most the writes the schedule puts in the window, which is what [`crate::drive`] expects. Its latency runs
/// from when it was issued.
pub(crate) async fn paced_writer<A: Approach>(
    approach: Arc<A>,
    db: usize,
    mut generator: LedgerGenerator,
    schedule: Schedule,
    origin: Instant,
    window: Window,
    stats: Arc<StatsSink>,
) {
    let mut ready = false;
    for k in 0.. {
        let due = origin + schedule.tick(k);
        if due >= window.end {
            return;
        }
        tokio::time::sleep_until(due.into()).await;
        yield_if_never_pending(ready).await;
        let started = Instant::now();
        let (outcome, ready_now) =
            observe(approach.paced_write(db, generator.next_block(), Duration::ZERO)).await;
        let done = Instant::now();
        if due >= window.measure_start && done < window.end {
            store(&stats, OpKind::Write, done - started, outcome);
        }
        ready = ready_now;
    }
}

/// Which database a `multi-db` reader reads.
#[derive(Debug, Clone, Copy)]
pub(crate) enum ReadTarget {
    /// Always this one (`readers` per database).
    Fixed(usize),
    /// One of this many, chosen at random for every read (`total_readers`).
    Any(usize),
}

impl ReadTarget {
    /// The database of the next read.
    pub(crate) fn pick(self, rng: &mut Rng) -> usize {
        match self {
            Self::Fixed(db) => db,
            Self::Any(databases) => rng.below(databases.max(1) as u64) as usize,
        }
    }
}

/// A `multi-db` reader: the account-history JOIN in a loop, random accounts, on the databases `target` names.
pub(crate) async fn ledger_reader<A: Approach>(
    approach: Arc<A>,
    target: ReadTarget,
    mut rng: Rng,
    window: Window,
    stats: Arc<StatsSink>,
) {
    let mut ready = false;
    loop {
        let started = Instant::now();
        if started >= window.end {
            return;
        }
        // Waiting for the worker is part of this operation's latency, as a request waits for one.
        yield_if_never_pending(ready).await;
        let db = target.pick(&mut rng);
        let account = rng.between(1, data::LEDGER_ACCOUNTS);
        let (outcome, ready_now) = observe(approach.join_read(db, account)).await;
        record(&stats, &window, OpKind::Read, started, outcome);
        ready = ready_now;
    }
}

/// Milliseconds since the Unix epoch, for job creation and claim times.
pub(crate) fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

/// The names of the queue's operations, in report order.
pub const QUEUE_OPERATIONS: [&str; 4] = ["publish", "claim", "ack", "cycle"];

/// One queue cycle's outcome: each operation's latency, or the first error.
pub(crate) struct Cycle {
    /// Latency of publish, claim and ack.
    pub(crate) latencies: [Duration; 3],
    /// Whether the cycle's last operation completed without giving its worker back (direct-blocking).
    pub(crate) ready_at_once: bool,
}

/// Runs one queue cycle as worker `owner`: publish `job`, claim the oldest unclaimed job, acknowledge it.
///
/// An empty queue is an error: every task publishes before it claims, so with the backlog the queue never runs dry.
async fn queue_cycle<A: Approach>(approach: &A, owner: i64, job: NewJob) -> Result<Cycle> {
    let t0 = Instant::now();
    let (published, _) = observe(approach.publish(job)).await;
    published?;
    let t1 = Instant::now();
    let (claimed, _) = observe(approach.claim(owner, now_ms())).await;
    let id = claimed?.ok_or_else(|| anyhow::anyhow!("claim found no unclaimed job"))?;
    let t2 = Instant::now();
    let (acked, ready_at_once) = observe(approach.ack(id, owner)).await;
    acked?;
    let t3 = Instant::now();
    Ok(Cycle {
        latencies: [t1 - t0, t2 - t1, t3 - t2],
        ready_at_once,
    })
}

/// A `queue` client: producer and consumer at once, full cycles back to back until the window ends. A cycle
/// counts (with its three operations) when it completes inside the window.
pub(crate) async fn queue_client<A: Approach>(
    approach: Arc<A>,
    owner: i64,
    mut rng: Rng,
    window: Window,
    stats: Arc<StatsSink>,
) {
    let payload: Arc<str> = rng.text(data::JOB_PAYLOAD_LEN).into();
    let mut ready = false;
    loop {
        let started = Instant::now();
        if started >= window.end {
            return;
        }
        // Waiting for the worker is part of this cycle's latency, as a request waits for one.
        yield_if_never_pending(ready).await;
        let job = NewJob {
            payload: payload.clone(),
            created_at: now_ms(),
        };
        let outcome = queue_cycle(&*approach, owner, job).await;
        let done = Instant::now();
        if !window.counts(done) {
            ready = outcome.is_ok_and(|c| c.ready_at_once);
            continue;
        }
        ready = match &outcome {
            Ok(cycle) => cycle.ready_at_once,
            Err(_) => false,
        };
        crate::alloc::uncounted(|| {
            stats.with(|stats| match outcome {
                Ok(cycle) => {
                    for (name, latency) in QUEUE_OPERATIONS.iter().zip(cycle.latencies) {
                        stats.record_named(name, latency.as_nanos() as u64);
                    }
                    stats.record_named("cycle", (done - started).as_nanos() as u64);
                }
                Err(e) => stats.record_error(format!("{e:#}")),
            })
        });
    }
}
