//! The driver: runs a cell's client tasks against an [`Approach`] and measures them.
//!
//! Every approach is measured through this one piece of code, so differences in the results come from the
//! approaches, not from how each was driven. Clients are closed-loop: each task issues its next operation
//! when the previous one returns. Operations that *complete* inside the measured window count; the warm-up
//! before it warms caches, connections and thread pools.
//!
//! The window is kept by a plain OS thread, not a tokio timer: the `direct-blocking` approach blocks every
//! worker thread, which would also stop the runtime's timers (and that is exactly the effect being measured).

use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use futures_util::future::join_all;

use crate::alloc::{self, AllocCount};
use crate::cell::WriteMode;
use crate::clients::{
    QUEUE_OPERATIONS, ReadTarget, Window, blocking_writer, client, ledger_reader, now_ms,
    paced_writer, queue_client,
};
use crate::data::{self, Block, LedgerGenerator, NewItem, NewJob};

use crate::orm::{ORM_ARTISTS, ORM_THREADING, OrmOp, orm_entry_name, orm_result_name};
use crate::pacing::Schedule;
use crate::rng::Rng;
use crate::stats::{OpKind, StatsSink, TaskStats};
use crate::workload::{Workload, multi_db_settings};
use crate::{Cell, CellResult, Completion, Environment, MultiDb, NamedOp, OpStats, process};

/// Queue cycles run one at a time after the window, with allocations counted around each operation.
pub const QUEUE_PROBE_CYCLES: u64 = 1_000;

/// The error of an approach that has no queue operations.
fn no_queue() -> anyhow::Error {
    anyhow::anyhow!("this approach does not implement the queue workload")
}

/// One way of using SQLite from async Rust, as measured by the lab.
///
/// A runner opens the approach's connections (after seeding, before the warm-up) and hands it to
/// [`drive`]. Single-database workloads use database 0; `multi-db` passes the database index.
/// Implementations run exactly the statements in [`crate::sql`].
pub trait Approach: Send + Sync + 'static {
    /// `point-read`: [`crate::sql::POINT_READ`] for `id`, reading every column.
    fn point_read(&self, id: i64) -> impl Future<Output = Result<()>> + Send;

    /// `insert`: [`crate::sql::INSERT_ITEM`], one logical write.
    fn insert(&self, item: NewItem) -> impl Future<Output = Result<()>> + Send;

    /// `mixed`'s write: [`crate::sql::UPDATE_ITEM`] for `id`.
    fn update(&self, id: i64, delta: i64) -> impl Future<Output = Result<()>> + Send;

    /// `multi-db`'s read: [`crate::sql::ACCOUNT_HISTORY`] for `account` in database `db`, reading every row.
    fn join_read(&self, db: usize, account: i64) -> impl Future<Output = Result<()>> + Send;

    /// `multi-db`'s write: append `block` to database `db` in one transaction, and before committing block
    /// the calling thread for `delay` with `std::thread::sleep` *inside* the database operation (inside the
    /// closure the approach sends to its thread, or directly on the caller's thread for approaches that have
    /// none) — the slow writer of seed 004. In the `paced` write mode `delay` is zero and nothing sleeps.
    fn paced_write(
        &self,
        db: usize,
        block: Block,
        delay: Duration,
    ) -> impl Future<Output = Result<()>> + Send;

    /// `queue`'s publish: [`crate::sql::PUBLISH`] with `job`, one logical write. By default, an error: the
    /// approach does not implement the queue.
    fn publish(&self, job: NewJob) -> impl Future<Output = Result<()>> + Send {
        drop(job);
        async { Err(no_queue()) }
    }

    /// `queue`'s claim: [`crate::sql::CLAIM`] for worker `owner` at `now_ms`, one logical write; the claimed job's
    /// id, or `None` when no job is waiting. By default, an error.
    fn claim(&self, owner: i64, now_ms: i64) -> impl Future<Output = Result<Option<i64>>> + Send {
        let _ = (owner, now_ms);
        async { Err(no_queue()) }
    }

    /// `queue`'s ack: [`crate::sql::ACK`] for job `id` claimed by `owner`, one logical write; an error if no row
    /// was deleted. By default, an error.
    fn ack(&self, id: i64, owner: i64) -> impl Future<Output = Result<()>> + Send {
        let _ = (id, owner);
        async { Err(no_queue()) }
    }

    /// `orm`: operation `op` of the suite on the artist `key` (in `1..=ORM_ARTISTS`), wrapped in a transaction of
    /// its own when `txn` is set. By default, an error: the approach does not implement the suite.
    fn orm(&self, op: OrmOp, key: i64, txn: bool) -> impl Future<Output = Result<()>> + Send {
        let _ = (op, key, txn);
        async {
            Err(anyhow::anyhow!(
                "this approach does not implement the orm workload"
            ))
        }
    }

    /// Databases with open connections right now, if the approach knows: all of them for approaches that open
    /// every database up front; fewer for one that closes idle databases (quicklite's registry). By default,
    /// unknown.
    fn open_databases(&self) -> Option<u64> {
        None
    }

    /// Times databases were opened (connections set up) since the approach started: once per database for
    /// approaches that open everything up front and keep it open — the default, [`Approach::open_databases`] —
    /// and more when a capped registry closes databases and reopens them on demand.
    fn database_opens(&self) -> Option<u64> {
        self.open_databases()
    }
}

/// What [`drive`] measured; becomes a [`CellResult`] once the runner adds its environment.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Measurement {
    /// Reads in the window.
    pub reads: OpStats,
    /// Writes in the window.
    pub writes: OpStats,
    /// Paced writes expected vs completed (`multi-db` only).
    pub write_completion: Option<Completion>,
    /// Failed operations in the window.
    pub errors: u64,
    /// The first distinct error messages.
    pub error_samples: Vec<String>,
    /// Length of the measured window in seconds.
    pub wall_secs: f64,
    /// Process CPU time (user + system) spent in the window, in seconds.
    pub cpu_secs: f64,
    /// OS threads of the process at the end of the window.
    pub threads: Option<u64>,
    /// Resident memory at the end of the window, in bytes.
    pub rss_bytes: Option<u64>,
    /// Databases with open connections at the end of the window, as the approach reports it.
    pub open_databases: Option<u64>,
    /// Database opens since the approach started, as the approach reports it.
    pub database_opens: Option<u64>,
    /// Named operations (`queue`).
    pub operations: Vec<NamedOp>,
    /// Heap allocations in the window, if counted.
    pub window_allocations: Option<u64>,
    /// Bytes those allocations requested.
    pub window_alloc_bytes: Option<u64>,
}

impl Measurement {
    /// The result of a cell that ran to completion.
    pub fn into_result(self, cell: Cell, env: Environment) -> CellResult {
        CellResult {
            cell,
            failure: None,
            reads: self.reads,
            writes: self.writes,
            write_completion: self.write_completion,
            errors: self.errors,
            error_samples: self.error_samples,
            wall_secs: self.wall_secs,
            cpu_secs: self.cpu_secs,
            threads: self.threads,
            rss_bytes: self.rss_bytes,
            open_databases: self.open_databases,
            database_opens: self.database_opens,
            operations: self.operations,
            window_allocations: self.window_allocations,
            window_alloc_bytes: self.window_alloc_bytes,
            env,
        }
    }
}

/// The result of a cell that could not run (unknown approach, set-up error), with the environment known so far.
pub fn failed_result(cell: Cell, env: Environment, failure: String) -> CellResult {
    let mut result = Measurement::default().into_result(cell, env);
    result.failure = Some(failure);
    result
}

/// Samples of the process taken at the edges of the window by the timekeeper thread.
pub(crate) struct Edges {
    /// CPU seconds used during the window.
    pub(crate) cpu_secs: f64,
    /// Threads at the end.
    pub(crate) threads: Option<u64>,
    /// RSS at the end.
    pub(crate) rss_bytes: Option<u64>,
    /// Heap allocations during the window, when counted.
    pub(crate) allocations: Option<AllocCount>,
}

/// Starts the timekeeper: a plain OS thread (tokio's timers stop when direct-blocking calls hold every worker)
/// that samples CPU time, allocations, threads and memory at `measure_start` and `end`.
pub(crate) fn spawn_timekeeper(
    measure_start: Instant,
    end: Instant,
) -> Result<tokio::sync::oneshot::Receiver<Edges>> {
    let (edges_tx, edges_rx) = tokio::sync::oneshot::channel();
    std::thread::Builder::new()
        .name("lab-timekeeper".into())
        .spawn(move || {
            // Opened before the approach gets to use up the file descriptors.
            let mut status = process::StatusFile::open();
            sleep_until(measure_start);
            let cpu_start = process::cpu_time();
            let allocs_start = alloc::allocations();
            sleep_until(end);
            let cpu_end = process::cpu_time();
            let allocs_end = alloc::allocations();
            let _ = edges_tx.send(Edges {
                cpu_secs: (cpu_end - cpu_start).as_secs_f64(),
                threads: status.threads(),
                rss_bytes: status.rss_bytes(),
                allocations: allocs_end
                    .zip(allocs_start)
                    .map(|(end, start)| end.since(start)),
            });
        })
        .context("cannot start the timekeeper thread")?;
    Ok(edges_rx)
}

/// Runs `cell` against `approach`: spawns the client tasks, waits out the warm-up and the window, and returns
/// what was measured. Tasks still inside an operation at the end are left to finish on their own; the runner
/// exits without waiting for them.
pub async fn drive<A: Approach>(cell: &Cell, approach: Arc<A>) -> Result<Measurement> {
    let workload = Workload::of_cell(cell)?;
    if workload == Workload::Http {
        #[cfg(feature = "http")]
        return crate::http::drive(cell, approach).await;
        #[cfg(not(feature = "http"))]
        anyhow::bail!(
            "this runner was built without the http workload (lab-core's `http` feature)"
        );
    }
    if workload == Workload::Orm {
        return drive_orm(cell, &*approach).await;
    }
    if workload == Workload::Queue {
        // Seed 002 compares drivers by allocations per cycle: count them (a no-op without the runner's counting
        // allocator).
        alloc::start_counting();
    }
    let start = Instant::now();
    let measure_start = start + Duration::from_millis(cell.warmup_ms);
    let window = Window {
        measure_start,
        end: measure_start + Duration::from_millis(cell.duration_ms),
    };

    let edges_rx = spawn_timekeeper(window.measure_start, window.end)?;

    let stats = StatsSink::new();
    let mut expected_writes = None;
    let mut queue_tasks = Vec::new();
    if workload == Workload::Queue {
        for task in 0..cell.concurrency {
            let rng = Rng::derive(cell.seed, u64::from(task));
            queue_tasks.push(tokio::spawn(queue_client(
                approach.clone(),
                i64::from(task) + 1,
                rng,
                window,
                stats.clone(),
            )));
        }
    } else if workload == Workload::MultiDb {
        let settings = multi_db_settings(cell)?;
        let databases = settings.num_databases as usize;
        let delay = Duration::from_millis(settings.write_delay_ms);
        for db in 0..databases {
            let generator = LedgerGenerator::writing(cell.seed, db);
            match settings.write_mode {
                WriteMode::Blocking => {
                    tokio::spawn(blocking_writer(
                        approach.clone(),
                        db,
                        generator,
                        delay,
                        window,
                        stats.clone(),
                    ));
                }
                WriteMode::Paced => {
                    let schedule = Schedule::for_database(delay, db, databases);
                    tokio::spawn(paced_writer(
                        approach.clone(),
                        db,
                        generator,
                        schedule,
                        start,
                        window,
                        stats.clone(),
                    ));
                }
            }
        }
        expected_writes = expected(cell, settings.write_mode, delay, databases);
        for (target, stream) in reader_plan(settings) {
            let rng = Rng::derive(cell.seed, stream);
            tokio::spawn(ledger_reader(
                approach.clone(),
                target,
                rng,
                window,
                stats.clone(),
            ));
        }
    } else {
        for task in 0..cell.concurrency {
            let rng = Rng::derive(cell.seed, u64::from(task));
            tokio::spawn(client(
                approach.clone(),
                workload,
                cell.rows,
                rng,
                window,
                stats.clone(),
            ));
        }
    }

    let edges = edges_rx
        .await
        .context("the timekeeper thread stopped early")?;

    let open_databases = approach.open_databases();
    let database_opens = approach.database_opens();
    let total = stats.merged();
    let wall_secs = window
        .end
        .duration_since(window.measure_start)
        .as_secs_f64();
    let mut operations = Vec::new();
    if workload == Workload::Queue {
        // Each task stops after the cycle it is in when the window closes; the probe runs alone after them.
        for task in queue_tasks {
            task.await.context("a queue client task panicked")?;
        }
        let probe = probe_queue(&*approach, cell.seed).await?;
        let named = total.named_stats(wall_secs);
        operations = QUEUE_OPERATIONS
            .iter()
            .map(|name| {
                let stats = named
                    .iter()
                    .find(|(n, _)| n == name)
                    .map(|(_, s)| s.clone())
                    .unwrap_or_default();
                let per_op = probe.get(name);
                NamedOp {
                    name: (*name).to_owned(),
                    stats,
                    allocs_per_op: per_op.map(|c| c.allocations as f64 / QUEUE_PROBE_CYCLES as f64),
                    alloc_bytes_per_op: per_op.map(|c| c.bytes as f64 / QUEUE_PROBE_CYCLES as f64),
                }
            })
            .collect();
    }
    let write_completion = expected_writes.map(|expected| {
        let completed = total.count(OpKind::Write);
        Completion {
            expected,
            completed,
            ratio: if expected == 0 {
                1.0
            } else {
                (completed as f64 / expected as f64).min(1.0)
            },
        }
    });
    Ok(Measurement {
        reads: total.op_stats(OpKind::Read, wall_secs),
        writes: total.op_stats(OpKind::Write, wall_secs),
        write_completion,
        errors: total.errors(),
        error_samples: total.error_samples().to_vec(),
        wall_secs,
        cpu_secs: edges.cpu_secs,
        threads: edges.threads,
        rss_bytes: edges.rss_bytes,
        open_databases,
        database_opens,
        operations,
        window_allocations: edges.allocations.map(|a| a.allocations),
        window_alloc_bytes: edges.allocations.map(|a| a.bytes),
    })
}

/// The `orm` suite: a warm-up running every operation in turn, then each operation alone, without and with a
/// wrapping transaction, for an equal share of the measured time; one operation in flight at a time, as the seed's
/// single ActiveRecord connection ran them.
async fn drive_orm<A: Approach>(cell: &Cell, approach: &A) -> Result<Measurement> {
    let mut key = 0i64;
    let mut next_key = || {
        key = key % ORM_ARTISTS + 1;
        key
    };
    let warm_end = Instant::now() + Duration::from_millis(cell.warmup_ms);
    while Instant::now() < warm_end {
        for op in OrmOp::ALL {
            approach
                .orm(op, next_key(), false)
                .await
                .with_context(|| format!("warm-up: {}", op.name()))?;
        }
    }
    let slices = ((OrmOp::ALL.len() + ORM_THREADING.len()) * 2) as u32;
    let slice = (Duration::from_millis(cell.duration_ms) / slices).max(Duration::from_millis(1));
    let cpu_start = process::cpu_time();
    let start = Instant::now();
    let mut totals = TaskStats::new();
    let mut operations = Vec::new();
    for op in OrmOp::ALL {
        for txn in [false, true] {
            let mut stats = TaskStats::new();
            let end = Instant::now() + slice;
            while Instant::now() < end {
                let started = Instant::now();
                match approach.orm(op, next_key(), txn).await {
                    Ok(()) => stats.record(OpKind::Read, started.elapsed().as_nanos() as u64),
                    Err(e) => stats.record_error(format!("{}: {e:#}", op.name())),
                }
            }
            totals.merge(&stats);
            operations.push(NamedOp {
                name: orm_result_name(op, txn),
                stats: stats.op_stats(OpKind::Read, slice.as_secs_f64()),
                allocs_per_op: None,
                alloc_bytes_per_op: None,
            });
        }
    }
    for (name, calls, op) in ORM_THREADING {
        for txn in [false, true] {
            let mut stats = TaskStats::new();
            let end = Instant::now() + slice;
            while Instant::now() < end {
                let keys: Vec<i64> = (0..calls).map(|_| next_key()).collect();
                let started = Instant::now();
                let round = join_all(keys.into_iter().map(|key| approach.orm(op, key, txn))).await;
                let elapsed = started.elapsed().as_nanos() as u64;
                match round.into_iter().find_map(Result::err) {
                    None => stats.record(OpKind::Read, elapsed),
                    Some(e) => stats.record_error(format!("{name}: {e:#}")),
                }
            }
            totals.merge(&stats);
            operations.push(NamedOp {
                name: orm_entry_name(name, txn),
                stats: stats.op_stats(OpKind::Read, slice.as_secs_f64()),
                allocs_per_op: None,
                alloc_bytes_per_op: None,
            });
        }
    }
    let wall_secs = start.elapsed().as_secs_f64();
    Ok(Measurement {
        errors: totals.errors(),
        error_samples: totals.error_samples().to_vec(),
        wall_secs,
        cpu_secs: (process::cpu_time() - cpu_start).as_secs_f64(),
        operations,
        ..Measurement::default()
    })
}

/// Allocations per queue operation, counted around each operation of [`QUEUE_PROBE_CYCLES`] cycles run one at a
/// time by one task: every thread's allocations while the operation is in flight (the caller's future, the
/// channel to the approach's thread, that thread's work). Empty when the runner does not count allocations.
async fn probe_queue<A: Approach>(
    approach: &A,
    seed: u64,
) -> Result<std::collections::BTreeMap<&'static str, AllocCount>> {
    let mut totals = std::collections::BTreeMap::new();
    if alloc::allocations().is_none() {
        return Ok(totals);
    }
    let mut rng = Rng::derive(seed, u64::MAX - 2);
    let payload: Arc<str> = rng.text(data::JOB_PAYLOAD_LEN).into();
    let owner = 0;
    let mut add = |name: &'static str, before: Option<AllocCount>, after: Option<AllocCount>| {
        if let (Some(before), Some(after)) = (before, after) {
            let entry: &mut AllocCount = totals.entry(name).or_default();
            let d = after.since(before);
            entry.allocations += d.allocations;
            entry.bytes += d.bytes;
        }
    };
    for _ in 0..QUEUE_PROBE_CYCLES {
        let job = NewJob {
            payload: payload.clone(),
            created_at: now_ms(),
        };
        let now = now_ms();
        let cycle_start = alloc::allocations();
        approach.publish(job).await.context("probe: publish")?;
        let published = alloc::allocations();
        let id = approach
            .claim(owner, now)
            .await
            .context("probe: claim")?
            .context("probe: claim found no unclaimed job")?;
        let claimed = alloc::allocations();
        approach.ack(id, owner).await.context("probe: ack")?;
        let acked = alloc::allocations();
        add("publish", cycle_start, published);
        add("claim", published, claimed);
        add("ack", claimed, acked);
        add("cycle", cycle_start, acked);
    }
    Ok(totals)
}

/// The `multi-db` reader tasks: what each reads, and the stream its random numbers come from.
///
/// `readers` per database read their own database; `total_readers` read any, so the total read load stays the
/// same whatever the number of databases.
fn reader_plan(settings: &MultiDb) -> Vec<(ReadTarget, u64)> {
    let databases = settings.num_databases as usize;
    match settings.total_readers {
        Some(total) => (0..total)
            .map(|reader| (ReadTarget::Any(databases), u64::from(reader)))
            .collect(),
        None => (0..databases)
            .flat_map(|db| {
                (0..settings.readers).map(move |reader| {
                    (
                        ReadTarget::Fixed(db),
                        ((db as u64) << 20) | u64::from(reader),
                    )
                })
            })
            .collect(),
    }
}

/// The writes the window expects, over all databases; `None` when the writers are not paced (no delay).
///
/// `blocking`: `duration / delay` per database, seed 004's formula. `paced`: the writes the schedules put inside
/// the window — the same `duration / delay` per database when the duration is a whole number of periods.
fn expected(cell: &Cell, mode: WriteMode, delay: Duration, databases: usize) -> Option<u64> {
    if delay.is_zero() {
        return None;
    }
    match mode {
        WriteMode::Blocking => cell
            .duration_ms
            .checked_div(delay.as_millis() as u64)
            .map(|per_db| per_db * databases as u64),
        WriteMode::Paced => {
            let from = Duration::from_millis(cell.warmup_ms);
            let to = from + Duration::from_millis(cell.duration_ms);
            Some(
                (0..databases)
                    .map(|db| Schedule::for_database(delay, db, databases).ticks_in(from, to))
                    .sum(),
            )
        }
    }
}

/// Sleeps the current OS thread until `deadline`.
fn sleep_until(deadline: Instant) {
    let now = Instant::now();
    if deadline > now {
        std::thread::sleep(deadline - now);
    }
}

#[cfg(test)]
mod tests {
    use std::collections::{BTreeMap, BTreeSet};
    use std::sync::Mutex;

    use anyhow::bail;

    use super::*;
    use crate::data;
    use crate::test_support::sample_cell;

    /// An in-memory approach: deterministic, no SQLite, records what it was asked to do.
    #[derive(Default)]
    struct Fake {
        /// `items` rows by id.
        items: Mutex<BTreeMap<i64, i64>>,
        /// Databases that saw a JOIN read.
        joined: Mutex<BTreeSet<usize>>,
        /// Block indexes written, per database.
        blocks: Mutex<BTreeMap<usize, Vec<i64>>>,
        /// Fail every operation, alternating between two messages.
        failing: bool,
        /// The queue: job id → the worker that claimed it.
        jobs: Mutex<BTreeMap<i64, Option<i64>>>,
        /// `orm` calls per (operation, in a transaction).
        orm_calls: Mutex<BTreeMap<(&'static str, bool), u64>>,
    }

    impl Fake {
        fn seeded(rows: i64) -> Self {
            let fake = Fake::default();
            fake.items
                .lock()
                .unwrap()
                .extend((1..=rows).map(|id| (id, 0)));
            fake
        }

        fn check(&self, id: i64) -> Result<()> {
            if self.failing {
                bail!("injected failure {}", id % 2);
            }
            Ok(())
        }
    }

    impl Approach for Fake {
        async fn point_read(&self, id: i64) -> Result<()> {
            self.check(id)?;
            match self.items.lock().unwrap().get(&id) {
                Some(_) => Ok(()),
                None => bail!("no row {id}"),
            }
        }

        async fn insert(&self, item: NewItem) -> Result<()> {
            let mut items = self.items.lock().unwrap();
            let id = items.len() as i64 + 1;
            items.insert(id, item.value);
            Ok(())
        }

        async fn update(&self, id: i64, delta: i64) -> Result<()> {
            match self.items.lock().unwrap().get_mut(&id) {
                Some(v) => *v += delta,
                None => bail!("no row {id}"),
            }
            Ok(())
        }

        async fn join_read(&self, db: usize, account: i64) -> Result<()> {
            assert!((1..=data::LEDGER_ACCOUNTS).contains(&account));
            self.joined.lock().unwrap().insert(db);
            Ok(())
        }

        async fn paced_write(&self, db: usize, block: Block, delay: Duration) -> Result<()> {
            std::thread::sleep(delay);
            self.blocks
                .lock()
                .unwrap()
                .entry(db)
                .or_default()
                .push(block.idx);
            Ok(())
        }

        async fn publish(&self, job: NewJob) -> Result<()> {
            assert_eq!(job.payload.len(), data::JOB_PAYLOAD_LEN);
            let mut jobs = self.jobs.lock().unwrap();
            let id = jobs.keys().next_back().map_or(1, |last| last + 1);
            jobs.insert(id, None);
            Ok(())
        }

        async fn claim(&self, owner: i64, _now_ms: i64) -> Result<Option<i64>> {
            let mut jobs = self.jobs.lock().unwrap();
            let oldest = jobs.iter_mut().find(|(_, claimed)| claimed.is_none());
            Ok(oldest.map(|(id, claimed)| {
                *claimed = Some(owner);
                *id
            }))
        }

        async fn orm(&self, op: OrmOp, key: i64, txn: bool) -> Result<()> {
            assert!((1..=ORM_ARTISTS).contains(&key));
            *self
                .orm_calls
                .lock()
                .unwrap()
                .entry((op.name(), txn))
                .or_default() += 1;
            Ok(())
        }

        async fn ack(&self, id: i64, owner: i64) -> Result<()> {
            let mut jobs = self.jobs.lock().unwrap();
            match jobs.get(&id) {
                Some(Some(by)) if *by == owner => {
                    jobs.remove(&id);
                    Ok(())
                }
                _ => bail!("job {id} is not claimed by {owner}"),
            }
        }
    }

    /// An approach with no queue operations: the trait's defaults.
    struct NoQueue;

    impl Approach for NoQueue {
        async fn point_read(&self, _: i64) -> Result<()> {
            Ok(())
        }
        async fn insert(&self, _: NewItem) -> Result<()> {
            Ok(())
        }
        async fn update(&self, _: i64, _: i64) -> Result<()> {
            Ok(())
        }
        async fn join_read(&self, _: usize, _: i64) -> Result<()> {
            Ok(())
        }
        async fn paced_write(&self, _: usize, _: Block, _: Duration) -> Result<()> {
            Ok(())
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn queue_cycles_time_every_operation_and_leave_the_queue_as_it_was() {
        let cell = sample_cell("queue", "fake");
        let (m, fake) = run(&cell, Fake::default()).await;
        assert_eq!(m.errors, 0, "{:?}", m.error_samples);
        let names: Vec<&str> = m.operations.iter().map(|o| o.name.as_str()).collect();
        assert_eq!(names, ["publish", "claim", "ack", "cycle"]);
        let cycles = m.operations[3].stats.ops;
        assert!(cycles > 0);
        // A cycle counts with its three operations, so all four counts agree.
        assert!(m.operations.iter().all(|o| o.stats.ops == cycles), "{m:?}");
        // Every job published was claimed and acknowledged by the same worker: nothing is left over.
        assert!(fake.jobs.lock().unwrap().is_empty());
        // This test binary does not install the counting allocator: no allocation figure is made up.
        assert!(m.operations.iter().all(|o| o.allocs_per_op.is_none()));
        assert_eq!(m.window_allocations, None);
        assert_eq!(m.reads.ops + m.writes.ops, 0);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_orm_suite_times_every_operation_with_and_without_a_transaction() {
        let cell = sample_cell("orm", "fake");
        let (m, fake) = run(&cell, Fake::default()).await;
        assert_eq!(m.errors, 0, "{:?}", m.error_samples);
        assert_eq!(m.operations.len(), 36);
        assert_eq!(m.operations[32].name, "light_threading");
        assert_eq!(m.operations[35].name, "heavy_threading (txn)");
        assert_eq!(m.operations[0].name, "model_object_creation");
        assert_eq!(m.operations[1].name, "model_object_creation (txn)");
        assert!(m.operations.iter().all(|o| o.stats.ops > 0), "{m:?}");
        let calls = fake.orm_calls.lock().unwrap().clone();
        assert_eq!(calls.len(), 32, "every operation, both ways");
        // Each measured operation ran at least as often as it was counted (the warm-up ran the plain ones too); a
        // threading round is 4 or 16 calls of its operation at once.
        for (name, calls, op) in ORM_THREADING {
            for txn in [false, true] {
                let rounds = m
                    .operations
                    .iter()
                    .find(|o| o.name == orm_entry_name(name, txn))
                    .unwrap()
                    .stats
                    .ops;
                assert!(rounds > 0);
                assert!(fake.orm_calls.lock().unwrap()[&(op.name(), txn)] >= rounds * calls as u64);
            }
        }
        for o in m
            .operations
            .iter()
            .filter(|o| !o.name.contains("threading"))
        {
            let txn = o.name.ends_with(" (txn)");
            let name = o.name.trim_end_matches(" (txn)");
            assert!(
                calls[&(
                    OrmOp::ALL
                        .iter()
                        .find(|op| op.name() == name)
                        .unwrap()
                        .name(),
                    txn
                )] >= o.stats.ops
            );
        }
        // An approach without the suite fails the cell at the warm-up, naming the operation.
        let err = drive(&cell, Arc::new(NoQueue)).await.unwrap_err();
        assert!(
            format!("{err:#}").contains("does not implement the orm"),
            "{err:#}"
        );
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn an_approach_without_a_queue_fails_every_cycle_with_a_clear_error() {
        let cell = sample_cell("queue", "none");
        let m = drive(&cell, Arc::new(NoQueue)).await.unwrap();
        assert!(m.errors > 0);
        assert_eq!(
            m.error_samples,
            ["this approach does not implement the queue workload"]
        );
        assert!(m.operations.iter().all(|o| o.stats.ops == 0));
    }

    async fn run(cell: &Cell, fake: Fake) -> (Measurement, Arc<Fake>) {
        let fake = Arc::new(fake);
        let m = drive(cell, fake.clone()).await.unwrap();
        (m, fake)
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn point_read_counts_only_reads() {
        let cell = sample_cell("point-read", "fake");
        let (m, _) = run(&cell, Fake::seeded(200)).await;
        assert!(m.reads.ops > 0);
        assert_eq!(m.writes.ops, 0);
        assert_eq!(m.errors, 0, "{:?}", m.error_samples);
        assert_eq!(m.wall_secs, 0.06);
        assert!(m.reads.p50_us <= m.reads.p99_us && m.reads.p99_us <= m.reads.max_us);
        assert!(m.write_completion.is_none());
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn mixed_does_mostly_reads_and_some_updates() {
        let cell = sample_cell("mixed", "fake");
        let (m, _) = run(&cell, Fake::seeded(200)).await;
        assert!(m.writes.ops > 0);
        assert!(m.reads.ops > m.writes.ops);
        assert_eq!(m.errors, 0, "{:?}", m.error_samples);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn insert_adds_rows() {
        let cell = sample_cell("insert", "fake");
        let (m, fake) = run(&cell, Fake::seeded(200)).await;
        assert!(m.writes.ops > 0);
        assert_eq!(m.reads.ops, 0);
        assert!(fake.items.lock().unwrap().len() as u64 >= 200 + m.writes.ops);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn multi_db_writes_consecutive_blocks_to_every_database() {
        let cell = sample_cell("multi-db", "fake");
        let (m, fake) = run(&cell, Fake::default()).await;
        let completion = m
            .write_completion
            .expect("multi-db reports write completion");
        // 60 ms window / 5 ms delay × 3 databases.
        assert_eq!(completion.expected, 36);
        assert_eq!(completion.completed, m.writes.ops);
        assert!(completion.ratio <= 1.0);
        assert_eq!(*fake.joined.lock().unwrap(), BTreeSet::from([0, 1, 2]));
        let blocks = fake.blocks.lock().unwrap();
        assert_eq!(blocks.keys().copied().collect::<Vec<_>>(), vec![0, 1, 2]);
        for written in blocks.values() {
            let expected: Vec<i64> = (0..written.len() as i64)
                .map(|i| data::LEDGER_SEED_BLOCKS + i)
                .collect();
            assert_eq!(*written, expected);
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn paced_writes_count_against_the_schedule() {
        let mut cell = sample_cell("multi-db", "fake");
        let m = cell.multi_db.as_mut().unwrap();
        m.write_mode = WriteMode::Paced;
        // 60 ms window, one write every 5 ms on each of 3 databases.
        let (measured, fake) = run(&cell, Fake::default()).await;
        let completion = measured.write_completion.expect("paced writes are counted");
        assert_eq!(completion.expected, 60 / 5 * 3);
        assert_eq!(completion.completed, measured.writes.ops);
        // At most one write per scheduled tick inside the window is counted, whatever the machine's load.
        assert!(
            completion.completed <= completion.expected,
            "{completion:?}"
        );
        assert!((completion.ratio - completion.completed as f64 / 36.0).abs() < 1e-9);
        assert_eq!(measured.errors, 0, "{:?}", measured.error_samples);
        // Every database got its blocks in order; the ones counted are among them.
        let blocks = fake.blocks.lock().unwrap();
        let written: usize = blocks.values().map(Vec::len).sum();
        assert!(written as u64 >= completion.completed);
        for written in blocks.values() {
            let expected: Vec<i64> = (0..written.len() as i64)
                .map(|i| data::LEDGER_SEED_BLOCKS + i)
                .collect();
            assert_eq!(*written, expected);
        }
    }

    #[test]
    fn expected_paced_writes_follow_the_schedules() {
        let mut cell = sample_cell("multi-db", "fake");
        cell.duration_ms = 1_000;
        cell.warmup_ms = 250;
        let period = Duration::from_millis(100);
        assert_eq!(expected(&cell, WriteMode::Paced, period, 7), Some(70));
        assert_eq!(expected(&cell, WriteMode::Blocking, period, 7), Some(70));
        // Window [250, 1250) ms, one write every 300 ms at phases 0, 100 and 200 ms: due at 300, 600, 900 and
        // 1200; at 400, 700 and 1000; at 500, 800 and 1100.
        assert_eq!(expected(&cell, WriteMode::Paced, 3 * period, 3), Some(10));
        assert_eq!(expected(&cell, WriteMode::Blocking, 3 * period, 3), Some(9));
        assert_eq!(
            expected(&cell, WriteMode::Blocking, Duration::ZERO, 3),
            None
        );
    }

    #[test]
    fn total_readers_spread_over_every_database() {
        let settings = MultiDb {
            num_databases: 1_000,
            readers: 3,
            write_delay_ms: 100,
            write_mode: WriteMode::Paced,
            total_readers: Some(8),
        };
        let plan = reader_plan(&settings);
        assert_eq!(
            plan.len(),
            8,
            "a fixed number of readers, not 3 per database"
        );
        assert!(
            plan.iter()
                .all(|(t, _)| matches!(t, ReadTarget::Any(1_000)))
        );
        // Each read picks its database afresh: one reader's picks cover many databases, all valid.
        let mut rng = Rng::derive(4, plan[0].1);
        let picks: BTreeSet<usize> = (0..5_000).map(|_| plan[0].0.pick(&mut rng)).collect();
        assert!(picks.len() > 900, "{} databases", picks.len());
        assert!(picks.iter().all(|&db| db < 1_000));

        let per_db = MultiDb {
            total_readers: None,
            ..settings
        };
        let plan = reader_plan(&per_db);
        assert_eq!(plan.len(), 3_000);
        assert!(matches!(plan[2_999].0, ReadTarget::Fixed(999)));
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn total_readers_read_only_existing_databases() {
        let mut cell = sample_cell("multi-db", "fake");
        cell.multi_db.as_mut().unwrap().total_readers = Some(1);
        let (m, fake) = run(&cell, Fake::default()).await;
        assert_eq!(m.errors, 0, "{:?}", m.error_samples);
        assert!(fake.joined.lock().unwrap().iter().all(|&db| db < 3));
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn errors_are_counted_with_distinct_samples() {
        let cell = sample_cell("point-read", "fake");
        let fake = Fake {
            failing: true,
            ..Fake::seeded(200)
        };
        let (m, _) = run(&cell, fake).await;
        assert_eq!(m.reads.ops, 0);
        assert!(m.errors > 0);
        let mut samples = m.error_samples.clone();
        samples.sort();
        assert_eq!(samples, vec!["injected failure 0", "injected failure 1"]);
    }

    #[tokio::test]
    async fn unknown_workload_is_an_error() {
        let cell = sample_cell("point-reads", "fake");
        let err = drive(&cell, Arc::new(Fake::default())).await.unwrap_err();
        assert!(err.to_string().contains("unknown workload"), "{err}");
    }

    #[test]
    fn failed_result_carries_the_message() {
        let cell = sample_cell("point-read", "nope");
        let result = failed_result(
            cell.clone(),
            Environment::default(),
            "unknown approach".into(),
        );
        assert_eq!(result.failure.as_deref(), Some("unknown approach"));
        assert_eq!(result.cell, cell);
        assert_eq!(result.reads.ops, 0);
    }
}
