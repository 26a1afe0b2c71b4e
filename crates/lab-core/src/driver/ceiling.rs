//! The ceiling: the same statements on the same data with no async hand-off at all — what the machine allows.
//!
//! One OS thread per core (no more than the cell's tasks), each with a connection of its own, runs the workload's
//! operations synchronously in a tight loop, in batches of `concurrency` operations (the most any approach could
//! gather from the cell's tasks in one transaction): a batch's reads in one
//! read transaction, its writes in one write transaction — the threads take turns at writing behind a plain mutex
//! rather than SQLite's busy handler, each drawing and reading its next batch while another commits. Every
//! operation of a batch completes when its transaction does, and counts (as for client tasks) if that is inside
//! the window. A thread's point reads stay in the snapshot its previous reads began until a commit (any thread's)
//! moves past it, as a caller's reads can with an approach that keeps its snapshot between reads. The queue's
//! cycles go the same way, a step at a time: a batch's jobs published in one write transaction, as many claimed in
//! the next, the claimed ones acknowledged in a third.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use anyhow::{Context, Result, bail};

use super::client_loop::{store, store_transaction};
use super::custom::transactions;
use super::queue::{QUEUE_OPERATIONS, now_ms, operations};
use super::window::{Window, WindowedRun};
use crate::alloc;
use crate::approach_name::ApproachName;
use crate::cell::Cell;
use crate::custom::{Bound, Drawer, leaked_names};
use crate::data::{self, NewItem, NewJob};
use crate::measurement::Measurement;
use crate::rng::Rng;
use crate::stats::{OpKind, StatsSink};
use crate::workload::{Workload, mixed_draws_write};

/// A write of the ceiling's batches.
#[derive(Debug, Clone)]
pub enum CeilingWrite {
    /// [`crate::sql::INSERT_ITEM`].
    Insert(NewItem),
    /// [`crate::sql::UPDATE_ITEM`] of row `id` by `delta`.
    Update {
        /// The row.
        id: i64,
        /// Added to its value.
        delta: i64,
    },
    /// [`crate::sql::PUBLISH`].
    Publish(NewJob),
    /// [`crate::sql::ACK`] of job `id`, claimed by `owner`: an error unless it deletes that job.
    Ack {
        /// The job.
        id: i64,
        /// The worker that claimed it.
        owner: i64,
    },
}

/// Which snapshot a ceiling thread's point reads run in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CeilingSnapshot {
    /// The one the thread's previous reads began, if it still holds it: nothing committed since.
    Kept,
    /// A new one: something committed since the thread's previous reads (or it has none).
    New,
}

/// A connection of the ceiling, owned by one of its threads.
pub trait CeilingConnection: Send + 'static {
    /// [`crate::sql::POINT_READ`] for each of `ids`, reading every column, in one read transaction: the one left
    /// open by the previous reads when `snapshot` is [`CeilingSnapshot::Kept`], a new one otherwise. The transaction may
    /// stay open after it returns; the connection ends it before it writes.
    fn reads(&mut self, ids: &[i64], snapshot: CeilingSnapshot) -> Result<()>;

    /// Each of `writes` in one write transaction (a lone write may run on its own), committed before it returns.
    fn writes(&mut self, writes: &[CeilingWrite]) -> Result<()>;

    /// [`crate::sql::CLAIM`] for each of `owners` (at `now_ms`) in one write transaction (a lone claim may run on
    /// its own), committed before it returns: the ids claimed, in order; an error if the queue ran dry.
    fn claims(&mut self, owners: &[i64], now_ms: i64) -> Result<Vec<i64>>;

    /// A custom workload's `transactions` ([`crate::Approach::custom`]), every one in one read transaction when
    /// `writes` is false, in one write transaction committed before it returns otherwise. By default, an error.
    fn custom(&mut self, writes: bool, transactions: &[Vec<Bound>]) -> Result<()> {
        let _ = (writes, transactions);
        bail!("this ceiling does not run custom workloads")
    }
}

/// Runs `cell` as the ceiling: `open` gives each thread its connection (all opened before the warm-up begins).
pub(super) async fn drive<C, F>(cell: &Cell, mut open: F) -> Result<Measurement>
where
    C: CeilingConnection,
    F: FnMut() -> Result<C>,
{
    let workload = Workload::of_cell(cell)?;
    if !ApproachName::Ceiling.implements(workload) {
        let defined: Vec<&str> = Workload::ALL
            .into_iter()
            .chain([Workload::Custom])
            .filter(|w| ApproachName::Ceiling.implements(*w))
            .map(Workload::name)
            .collect();
        bail!(
            "the ceiling is defined for single-row operations on one database ({}), not for {workload}",
            defined.join(", ")
        );
    }
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let threads = cores.min(cell.concurrency as usize).max(1);
    // Each thread runs as many operations per batch as the cell has tasks: the most any approach could gather in
    // one transaction.
    let batch = cell.concurrency as usize;
    // Connections first, so that opening them is not part of the warm-up.
    let mut connections = Vec::with_capacity(threads);
    for _ in 0..threads {
        connections.push(open()?);
    }
    let names = match &cell.custom {
        Some(custom) => leaked_names(custom),
        None => Vec::new(),
    };
    let run = WindowedRun::begin(cell)?;
    let writing = Arc::new(Mutex::new(()));
    let commits = Arc::new(AtomicU64::new(0));
    for (thread, conn) in connections.into_iter().enumerate() {
        let (window, stats, writing) = (run.window, run.stats.clone(), writing.clone());
        let commits = commits.clone();
        let thread_named = std::thread::Builder::new().name(format!("lab-ceiling-{thread}"));
        let started = if workload == Workload::Queue {
            let plan = QueuePlan::new(cell, thread, batch);
            thread_named.spawn(move || plan.run(conn, window, &stats, &writing))
        } else if let Some(custom) = &cell.custom {
            let plan = CustomPlan {
                drawer: Drawer::new(custom, &names, thread as u64, threads as u64),
                batch,
                rng: Rng::derive(cell.seed, thread as u64),
            };
            thread_named.spawn(move || plan.run(conn, window, &stats, &writing))
        } else {
            let plan = Plan {
                workload,
                rows: cell.rows.max(1) as i64,
                write_ppm: cell.write_ppm,
                batch,
                rng: Rng::derive(cell.seed, thread as u64),
            };
            thread_named.spawn(move || plan.run(conn, window, &stats, &writing, &commits))
        };
        started.context("cannot start a ceiling thread")?;
    }
    let (mut measurement, total) = run.finish_with(Some(1), Some(1)).await?;
    if workload == Workload::Queue {
        measurement.operations = operations(&total, measurement.wall_secs, &Default::default());
    }
    if cell.custom.is_some() {
        measurement.operations = transactions(&total, &names, measurement.wall_secs);
    }
    Ok(measurement)
}

/// What one ceiling thread runs for a custom workload: batches of drawn transactions, the batch's writes in one
/// write transaction and its reads in one read transaction.
struct CustomPlan {
    /// This thread's transactions, drawn as a client task draws its own.
    drawer: Drawer,
    /// Transactions per batch: the cell's tasks.
    batch: usize,
    /// This thread's stream, derived from the cell's seed as a client task's is.
    rng: Rng,
}

impl CustomPlan {
    /// Batches back to back until the window ends.
    fn run<C: CeilingConnection>(
        mut self,
        mut conn: C,
        window: Window,
        stats: &StatsSink,
        writing: &Mutex<()>,
    ) {
        // Each side's transactions, and which of the workload's each is.
        let (mut reads, mut read_names) = (Vec::with_capacity(self.batch), Vec::new());
        let (mut writes, mut write_names) = (Vec::with_capacity(self.batch), Vec::new());
        loop {
            reads.clear();
            read_names.clear();
            writes.clear();
            write_names.clear();
            for _ in 0..self.batch {
                let drawn = self.drawer.next(&mut self.rng);
                let name = self.drawer.names[drawn.index];
                if drawn.writes {
                    writes.push(drawn.statements);
                    write_names.push(name);
                } else {
                    reads.push(drawn.statements);
                    read_names.push(name);
                }
            }
            let started = Instant::now();
            if started >= window.end {
                return;
            }
            if !writes.is_empty() {
                let outcome = match writing.lock() {
                    Ok(_turn) => conn.custom(true, &writes),
                    Err(_) => Err(anyhow::anyhow!("another ceiling thread panicked")),
                };
                let name_of = |op: usize| Some(write_names[op]);
                finish(
                    stats,
                    &window,
                    OpKind::Write,
                    writes.len(),
                    started,
                    outcome,
                    name_of,
                );
            }
            if !reads.is_empty() {
                let started = Instant::now();
                let outcome = conn.custom(false, &reads);
                let name_of = |op: usize| Some(read_names[op]);
                finish(
                    stats,
                    &window,
                    OpKind::Read,
                    reads.len(),
                    started,
                    outcome,
                    name_of,
                );
            }
        }
    }
}

/// What one ceiling thread runs.
struct Plan {
    /// The workload whose operations it draws.
    workload: Workload,
    /// Rows of the seeded table: keys are drawn in `1..=rows`.
    rows: i64,
    /// `mixed`'s share of writes, in parts per million ([`Cell::write_ppm`]).
    write_ppm: u32,
    /// Operations per batch: the cell's tasks.
    batch: usize,
    /// This thread's stream, derived from the cell's seed as a client task's is.
    rng: Rng,
}

impl Plan {
    /// Batches back to back until the window ends; `commits` counts every thread's commits.
    fn run<C: CeilingConnection>(
        mut self,
        mut conn: C,
        window: Window,
        stats: &StatsSink,
        writing: &Mutex<()>,
        commits: &AtomicU64,
    ) {
        let mut reads = Vec::with_capacity(self.batch);
        let mut writes = Vec::with_capacity(self.batch);
        // The commits counted when this thread's snapshot began; none yet.
        let mut snapshot_at = None;
        loop {
            let started = Instant::now();
            if started >= window.end {
                return;
            }
            reads.clear();
            writes.clear();
            self.next_batch(&mut reads, &mut writes);
            // Writes first: a write-read's read sees its write.
            if !writes.is_empty() {
                let outcome = match writing.lock() {
                    Ok(_turn) => conn.writes(&writes),
                    Err(_) => Err(anyhow::anyhow!("another ceiling thread panicked")),
                };
                commits.fetch_add(1, Ordering::Release);
                let unnamed = |_| None;
                finish(
                    stats,
                    &window,
                    OpKind::Write,
                    writes.len(),
                    started,
                    outcome,
                    unnamed,
                );
            }
            if !reads.is_empty() {
                let started = Instant::now();
                let now = commits.load(Ordering::Acquire);
                let snapshot = if snapshot_at == Some(now) {
                    CeilingSnapshot::Kept
                } else {
                    CeilingSnapshot::New
                };
                snapshot_at = Some(now);
                let outcome = conn.reads(&reads, snapshot);
                let unnamed = |_| None;
                finish(
                    stats,
                    &window,
                    OpKind::Read,
                    reads.len(),
                    started,
                    outcome,
                    unnamed,
                );
            }
        }
    }

    /// The next `batch` operations, drawn as the client tasks draw theirs.
    fn next_batch(&mut self, reads: &mut Vec<i64>, writes: &mut Vec<CeilingWrite>) {
        let rng = &mut self.rng;
        for _ in 0..self.batch {
            match self.workload {
                Workload::PointRead => reads.push(rng.between(1, self.rows)),
                Workload::Insert => writes.push(CeilingWrite::Insert(NewItem::random(rng))),
                Workload::WriteRead => {
                    let (id, delta) = (rng.between(1, self.rows), rng.between(-100, 100));
                    writes.push(CeilingWrite::Update { id, delta });
                    reads.push(id);
                }
                _ if !mixed_draws_write(rng, self.write_ppm) => {
                    reads.push(rng.between(1, self.rows));
                }
                _ => {
                    let (id, delta) = (rng.between(1, self.rows), rng.between(-100, 100));
                    writes.push(CeilingWrite::Update { id, delta });
                }
            }
        }
    }
}

/// What one ceiling thread runs for the queue: batches of cycles, each step of a batch in one transaction.
struct QueuePlan {
    /// The workers of this thread's batch (distinct across threads, as the client tasks' are).
    owners: Vec<i64>,
    /// The payload of every job, drawn once as each client task draws its own.
    payload: std::sync::Arc<str>,
}

impl QueuePlan {
    fn new(cell: &Cell, thread: usize, batch: usize) -> QueuePlan {
        let first = (thread * batch) as i64 + 1;
        let mut rng = Rng::derive(cell.seed, thread as u64);
        QueuePlan {
            owners: (first..first + batch as i64).collect(),
            payload: rng.text(data::JOB_PAYLOAD_LEN).into(),
        }
    }

    /// Batches back to back until the window ends, the whole batch in one turn at writing.
    fn run<C: CeilingConnection>(
        self,
        mut conn: C,
        window: Window,
        stats: &StatsSink,
        writing: &Mutex<()>,
    ) {
        let mut writes = Vec::with_capacity(self.owners.len());
        loop {
            let started = Instant::now();
            if started >= window.end {
                return;
            }
            let outcome = match writing.lock() {
                Ok(_turn) => self.batch(&mut conn, &mut writes),
                Err(_) => Err(anyhow::anyhow!("another ceiling thread panicked")),
            };
            let done = Instant::now();
            if !window.counts(done) {
                continue;
            }
            alloc::uncounted(|| {
                stats.with(|stats| match outcome {
                    Ok(steps) => {
                        for _ in &self.owners {
                            for (name, took) in QUEUE_OPERATIONS.iter().zip(steps) {
                                stats.record_named(name, took.as_nanos() as u64);
                            }
                            stats.record_named("cycle", (done - started).as_nanos() as u64);
                        }
                    }
                    Err(e) => stats.record_error(format!("{e:#}")),
                })
            });
        }
    }

    /// One batch: every owner publishes a job, claims the oldest unclaimed one and acknowledges it, a step per
    /// transaction; how long each step took.
    fn batch<C: CeilingConnection>(
        &self,
        conn: &mut C,
        writes: &mut Vec<CeilingWrite>,
    ) -> Result<[std::time::Duration; 3]> {
        let t0 = Instant::now();
        writes.clear();
        writes.extend(self.owners.iter().map(|_| {
            CeilingWrite::Publish(NewJob {
                payload: self.payload.clone(),
                created_at: now_ms(),
            })
        }));
        conn.writes(writes)?;
        let t1 = Instant::now();
        let ids = conn.claims(&self.owners, now_ms())?;
        let t2 = Instant::now();
        writes.clear();
        writes.extend(
            ids.iter()
                .zip(&self.owners)
                .map(|(&id, &owner)| CeilingWrite::Ack { id, owner }),
        );
        conn.writes(writes)?;
        let t3 = Instant::now();
        Ok([t1 - t0, t2 - t1, t3 - t2])
    }
}

/// Records the `count` operations of a transaction that began at `started` and has just ended with `outcome`: each
/// under its kind, and under its name as well when `name_of` gives one (a custom workload's transactions).
fn finish(
    stats: &StatsSink,
    window: &Window,
    kind: OpKind,
    count: usize,
    started: Instant,
    outcome: Result<()>,
    name_of: impl Fn(usize) -> Option<&'static str>,
) {
    let done = Instant::now();
    if !window.counts(done) {
        return;
    }
    match outcome {
        Ok(()) => {
            for op in 0..count {
                match name_of(op) {
                    Some(name) => store_transaction(stats, kind, name, done - started, Ok(())),
                    None => store(stats, kind, done - started, Ok(())),
                }
            }
        }
        Err(e) => store(stats, kind, done - started, Err(e)),
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicU64, Ordering};

    use super::*;
    use crate::cell::DEFAULT_WRITE_PPM;
    use crate::driver::drive_ceiling;
    use crate::test_support::sample_cell;

    /// Counts what it is asked to do, and checks a write transaction never overlaps another.
    struct Counting {
        shared: Arc<Shared>,
    }

    #[derive(Default)]
    struct Shared {
        reads: AtomicU64,
        read_batches: AtomicU64,
        writes: AtomicU64,
        writing: AtomicU64,
        overlaps: AtomicU64,
        largest_batch: AtomicU64,
        new_snapshots: AtomicU64,
    }

    impl CeilingConnection for Counting {
        fn reads(&mut self, ids: &[i64], snapshot: CeilingSnapshot) -> Result<()> {
            assert!(ids.iter().all(|&id| (1..=200).contains(&id)));
            if snapshot == CeilingSnapshot::New {
                self.shared.new_snapshots.fetch_add(1, Ordering::Relaxed);
            }
            self.shared
                .reads
                .fetch_add(ids.len() as u64, Ordering::Relaxed);
            self.shared.read_batches.fetch_add(1, Ordering::Relaxed);
            self.shared
                .largest_batch
                .fetch_max(ids.len() as u64, Ordering::Relaxed);
            Ok(())
        }

        fn writes(&mut self, writes: &[CeilingWrite]) -> Result<()> {
            if self.shared.writing.fetch_add(1, Ordering::SeqCst) > 0 {
                self.shared.overlaps.fetch_add(1, Ordering::Relaxed);
            }
            std::thread::sleep(std::time::Duration::from_micros(50));
            self.shared.writing.fetch_sub(1, Ordering::SeqCst);
            self.shared
                .writes
                .fetch_add(writes.len() as u64, Ordering::Relaxed);
            Ok(())
        }

        fn claims(&mut self, _: &[i64], _: i64) -> Result<Vec<i64>> {
            unreachable!("no queue here")
        }
    }

    async fn run(workload: &str, concurrency: u32) -> (Measurement, Arc<Shared>) {
        let mut cell = sample_cell(workload, "ceiling");
        cell.concurrency = concurrency;
        let shared = Arc::new(Shared::default());
        let handed = shared.clone();
        let m = drive_ceiling(&cell, move || {
            Ok(Counting {
                shared: handed.clone(),
            })
        })
        .await
        .unwrap();
        // The threads may still be inside a batch: let them see the window's end.
        std::thread::sleep(std::time::Duration::from_millis(20));
        (m, shared)
    }

    #[tokio::test]
    async fn point_reads_come_in_batches_of_the_tasks() {
        let (m, shared) = run("point-read", 64).await;
        assert!(m.reads.ops > 0);
        assert_eq!(m.writes.ops, 0);
        assert_eq!(m.errors, 0, "{:?}", m.error_samples);
        assert_eq!(shared.largest_batch.load(Ordering::Relaxed), 64);
        assert!(m.reads.ops <= shared.reads.load(Ordering::Relaxed));
        // The ceiling reports its CPU as every approach does: per operation, and in the idle window after.
        assert_eq!(m.cpu_per_op_us, Some(m.cpu_secs * 1e6 / m.reads.ops as f64));
        assert!(m.idle_cpu.is_some());
    }

    #[tokio::test]
    async fn inserts_group_as_many_per_commit_as_there_are_tasks() {
        struct Inserts(Arc<AtomicU64>);
        impl CeilingConnection for Inserts {
            fn reads(&mut self, _: &[i64], _: CeilingSnapshot) -> Result<()> {
                unreachable!("inserts only")
            }
            fn writes(&mut self, writes: &[CeilingWrite]) -> Result<()> {
                assert!(writes.iter().all(|w| matches!(w, CeilingWrite::Insert(_))));
                self.0.fetch_max(writes.len() as u64, Ordering::Relaxed);
                Ok(())
            }
            fn claims(&mut self, _: &[i64], _: i64) -> Result<Vec<i64>> {
                unreachable!("inserts only")
            }
        }
        let mut cell = sample_cell("insert", "ceiling");
        cell.concurrency = 64;
        let largest = Arc::new(AtomicU64::new(0));
        let m = drive_ceiling(&cell, || Ok(Inserts(largest.clone())))
            .await
            .unwrap();
        assert!(m.writes.ops > 0);
        assert_eq!(largest.load(Ordering::Relaxed), 64);
    }

    #[tokio::test]
    async fn one_task_reads_one_row_at_a_time() {
        let (m, shared) = run("point-read", 1).await;
        assert!(m.reads.ops > 0);
        assert_eq!(shared.largest_batch.load(Ordering::Relaxed), 1);
    }

    #[tokio::test]
    async fn reads_keep_their_snapshot_until_a_commit_moves_past_it() {
        // Nothing commits: one snapshot per thread for the whole cell.
        let (_, shared) = run("point-read", 1).await;
        assert!(shared.read_batches.load(Ordering::Relaxed) > 100);
        assert_eq!(shared.new_snapshots.load(Ordering::Relaxed), 1);
        // A write before every read: a new snapshot for every read, which sees its write.
        let (_, shared) = run("write-read", 1).await;
        let batches = shared.read_batches.load(Ordering::Relaxed);
        assert!(batches > 0);
        assert_eq!(shared.new_snapshots.load(Ordering::Relaxed), batches);
    }

    #[tokio::test]
    async fn mixed_writes_take_turns_and_reads_outnumber_them() {
        let (m, shared) = run("mixed", 64).await;
        assert!(m.writes.ops > 0 && m.reads.ops > m.writes.ops, "{m:?}");
        assert_eq!(shared.overlaps.load(Ordering::Relaxed), 0);
    }

    #[test]
    fn a_mixed_batch_draws_the_cell_s_share_of_writes() {
        // 100,000 operations from a fixed seed: about 100 updates at 0.1%, none at 0, about 10,000 at the default.
        for (write_ppm, low, high) in [
            (1_000, 70, 130),
            (0, 0, 0),
            (DEFAULT_WRITE_PPM, 9_700, 10_300),
        ] {
            let mut plan = Plan {
                workload: Workload::Mixed,
                rows: 200,
                write_ppm,
                batch: 100_000,
                rng: Rng::derive(4, 0),
            };
            let (mut reads, mut writes) = (Vec::new(), Vec::new());
            plan.next_batch(&mut reads, &mut writes);
            assert!(
                (low..=high).contains(&writes.len()),
                "{} writes at {write_ppm} ppm",
                writes.len()
            );
            assert_eq!(reads.len() + writes.len(), 100_000);
            assert!(
                writes
                    .iter()
                    .all(|w| matches!(w, CeilingWrite::Update { .. }))
            );
        }
    }

    #[tokio::test]
    async fn write_read_reads_each_row_it_writes() {
        let (m, shared) = run("write-read", 4).await;
        assert!(m.writes.ops > 0);
        let (reads, writes) = (
            shared.reads.load(Ordering::Relaxed),
            shared.writes.load(Ordering::Relaxed),
        );
        assert!(
            reads.abs_diff(writes) <= 4,
            "{reads} reads, {writes} writes"
        );
    }

    #[tokio::test]
    async fn workloads_without_a_ceiling_are_refused() {
        let cell = sample_cell("orm", "ceiling");
        let err = drive_ceiling(&cell, || -> Result<Counting> { unreachable!() })
            .await
            .unwrap_err()
            .to_string();
        assert!(err.contains("not for orm"), "{err}");
    }

    /// A queue in memory, shared by the ceiling's threads: jobs by id, with their owner once claimed.
    #[derive(Default)]
    struct Jobs {
        next: i64,
        jobs: std::collections::BTreeMap<i64, Option<i64>>,
        /// The largest batch of each step: publish, claim, ack.
        largest: [usize; 3],
        acked: u64,
    }

    struct Queue(Arc<Mutex<Jobs>>);

    impl CeilingConnection for Queue {
        fn reads(&mut self, _: &[i64], _: CeilingSnapshot) -> Result<()> {
            unreachable!("the queue only writes")
        }

        fn writes(&mut self, writes: &[CeilingWrite]) -> Result<()> {
            let mut q = self.0.lock().unwrap();
            for write in writes {
                match write {
                    CeilingWrite::Publish(_) => {
                        q.next += 1;
                        let id = q.next;
                        q.jobs.insert(id, None);
                        q.largest[0] = q.largest[0].max(writes.len());
                    }
                    CeilingWrite::Ack { id, owner } => {
                        if q.jobs.remove(id) != Some(Some(*owner)) {
                            bail!("job {id} was not claimed by {owner}");
                        }
                        q.acked += 1;
                        q.largest[2] = q.largest[2].max(writes.len());
                    }
                    other => panic!("not a queue write: {other:?}"),
                }
            }
            Ok(())
        }

        fn claims(&mut self, owners: &[i64], _: i64) -> Result<Vec<i64>> {
            let mut q = self.0.lock().unwrap();
            q.largest[1] = q.largest[1].max(owners.len());
            owners
                .iter()
                .map(|&owner| {
                    let (&id, claimed) = q
                        .jobs
                        .iter_mut()
                        .find(|(_, claimed)| claimed.is_none())
                        .context("claim found no unclaimed job")?;
                    *claimed = Some(owner);
                    Ok(id)
                })
                .collect()
        }
    }

    #[tokio::test]
    async fn queue_cycles_go_a_step_per_transaction_for_the_whole_batch() {
        let mut cell = sample_cell("queue", "ceiling");
        cell.concurrency = 16;
        let jobs = Arc::new(Mutex::new(Jobs::default()));
        let shared = jobs.clone();
        let m = drive_ceiling(&cell, move || Ok(Queue(shared.clone())))
            .await
            .unwrap();
        std::thread::sleep(std::time::Duration::from_millis(20));
        assert_eq!(m.errors, 0, "{:?}", m.error_samples);
        let names: Vec<&str> = m.operations.iter().map(|op| op.name.as_str()).collect();
        assert_eq!(names, QUEUE_OPERATIONS);
        let cycles = m.operations[3].stats.ops;
        assert!(cycles > 0 && cycles % 16 == 0, "{cycles} cycles");
        let jobs = jobs.lock().unwrap();
        assert_eq!(jobs.largest, [16; 3]);
        assert!(
            jobs.acked >= cycles,
            "{} acked, {cycles} counted",
            jobs.acked
        );
        // Every claimed job was acknowledged by its owner: none is left claimed between batches.
        assert!(jobs.jobs.values().all(Option::is_none));
    }

    #[tokio::test]
    async fn a_queue_that_runs_dry_counts_errors() {
        struct Dry;
        impl CeilingConnection for Dry {
            fn reads(&mut self, _: &[i64], _: CeilingSnapshot) -> Result<()> {
                unreachable!("the queue only writes")
            }
            fn writes(&mut self, _: &[CeilingWrite]) -> Result<()> {
                Ok(())
            }
            fn claims(&mut self, _: &[i64], _: i64) -> Result<Vec<i64>> {
                std::thread::sleep(std::time::Duration::from_micros(100));
                bail!("claim found no unclaimed job")
            }
        }
        let cell = sample_cell("queue", "ceiling");
        let m = drive_ceiling(&cell, || Ok(Dry)).await.unwrap();
        assert!(m.errors > 0);
        assert_eq!(m.operations[3].stats.ops, 0);
        assert_eq!(
            m.error_samples,
            vec!["claim found no unclaimed job".to_owned()]
        );
    }

    #[tokio::test]
    async fn a_failing_transaction_counts_one_error() {
        struct Failing;
        impl CeilingConnection for Failing {
            fn reads(&mut self, _: &[i64], _: CeilingSnapshot) -> Result<()> {
                std::thread::sleep(std::time::Duration::from_micros(100));
                bail!("disk I/O error")
            }
            fn writes(&mut self, _: &[CeilingWrite]) -> Result<()> {
                unreachable!("point reads only")
            }
            fn claims(&mut self, _: &[i64], _: i64) -> Result<Vec<i64>> {
                unreachable!("point reads only")
            }
        }
        let cell = sample_cell("point-read", "ceiling");
        let m = drive_ceiling(&cell, || Ok(Failing)).await.unwrap();
        assert_eq!(m.reads.ops, 0);
        assert!(m.errors > 0);
        assert_eq!(m.error_samples, vec!["disk I/O error".to_owned()]);
    }
}
