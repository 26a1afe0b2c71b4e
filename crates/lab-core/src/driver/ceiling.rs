//! The ceiling: the same statements on the same data with no async hand-off at all — what the machine allows.
//!
//! One OS thread per core (no more than the cell's tasks), each with a connection of its own, runs the workload's
//! operations synchronously in a tight loop, in batches of `concurrency` operations (the most any approach could
//! gather from the cell's tasks in one transaction): a batch's reads in one
//! read transaction, its writes in one write transaction — the threads take turns at writing behind a plain mutex
//! rather than SQLite's busy handler, each drawing and reading its next batch while another commits. Every
//! operation of a batch completes when its transaction does, and counts (as for client tasks) if that is inside
//! the window.

use std::sync::{Arc, Mutex};
use std::time::Instant;

use anyhow::{Context, Result, bail};

use super::client_loop::store;
use super::window::{Window, WindowedRun};
use crate::cell::Cell;
use crate::data::NewItem;
use crate::measurement::Measurement;
use crate::rng::Rng;
use crate::stats::{OpKind, StatsSink};
use crate::workload::{MIXED_READ_PERCENT, Workload};

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
}

/// A connection of the ceiling, owned by one of its threads.
pub trait CeilingConnection: Send + 'static {
    /// [`crate::sql::POINT_READ`] for each of `ids`, reading every column, in one read transaction (a lone read
    /// may run on its own).
    fn reads(&mut self, ids: &[i64]) -> Result<()>;

    /// Each of `writes` in one write transaction (a lone write may run on its own), committed before it returns.
    fn writes(&mut self, writes: &[CeilingWrite]) -> Result<()>;
}

/// The workloads the ceiling is defined for: single-row operations on one database.
pub const CEILING_WORKLOADS: [Workload; 4] = [
    Workload::PointRead,
    Workload::Insert,
    Workload::Mixed,
    Workload::WriteRead,
];

/// Runs `cell` as the ceiling: `open` gives each thread its connection (all opened before the warm-up begins).
pub async fn drive_ceiling<C, F>(cell: &Cell, mut open: F) -> Result<Measurement>
where
    C: CeilingConnection,
    F: FnMut() -> Result<C>,
{
    let workload = Workload::of_cell(cell)?;
    if !CEILING_WORKLOADS.contains(&workload) {
        bail!(
            "the ceiling is defined for single-row operations on one database ({}), not for {workload}",
            CEILING_WORKLOADS.map(Workload::name).join(", ")
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
    let run = WindowedRun::begin(cell)?;
    let writing = Arc::new(Mutex::new(()));
    for (thread, conn) in connections.into_iter().enumerate() {
        let plan = Plan {
            workload,
            rows: cell.rows.max(1) as i64,
            batch,
            rng: Rng::derive(cell.seed, thread as u64),
        };
        let (window, stats, writing) = (run.window, run.stats.clone(), writing.clone());
        std::thread::Builder::new()
            .name(format!("lab-ceiling-{thread}"))
            .spawn(move || plan.run(conn, window, &stats, &writing))
            .context("cannot start a ceiling thread")?;
    }
    let (measurement, _) = run.finish_with(Some(1), Some(1)).await?;
    Ok(measurement)
}

/// What one ceiling thread runs.
struct Plan {
    workload: Workload,
    rows: i64,
    batch: usize,
    rng: Rng,
}

impl Plan {
    /// Batches back to back until the window ends.
    fn run<C: CeilingConnection>(
        mut self,
        mut conn: C,
        window: Window,
        stats: &StatsSink,
        writing: &Mutex<()>,
    ) {
        let mut reads = Vec::with_capacity(self.batch);
        let mut writes = Vec::with_capacity(self.batch);
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
                finish(
                    stats,
                    &window,
                    OpKind::Write,
                    writes.len(),
                    started,
                    outcome,
                );
            }
            if !reads.is_empty() {
                let started = Instant::now();
                let outcome = conn.reads(&reads);
                finish(stats, &window, OpKind::Read, reads.len(), started, outcome);
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
                _ if rng.percent(MIXED_READ_PERCENT) => reads.push(rng.between(1, self.rows)),
                _ => {
                    let (id, delta) = (rng.between(1, self.rows), rng.between(-100, 100));
                    writes.push(CeilingWrite::Update { id, delta });
                }
            }
        }
    }
}

/// Records the `count` operations of a transaction that began at `started` and has just ended with `outcome`.
fn finish(
    stats: &StatsSink,
    window: &Window,
    kind: OpKind,
    count: usize,
    started: Instant,
    outcome: Result<()>,
) {
    let done = Instant::now();
    if !window.counts(done) {
        return;
    }
    match outcome {
        Ok(()) => {
            for _ in 0..count {
                store(stats, kind, done - started, Ok(()));
            }
        }
        Err(e) => store(stats, kind, done - started, Err(e)),
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicU64, Ordering};

    use super::*;
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
    }

    impl CeilingConnection for Counting {
        fn reads(&mut self, ids: &[i64]) -> Result<()> {
            assert!(ids.iter().all(|&id| (1..=200).contains(&id)));
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
    }

    #[tokio::test]
    async fn inserts_group_as_many_per_commit_as_there_are_tasks() {
        struct Inserts(Arc<AtomicU64>);
        impl CeilingConnection for Inserts {
            fn reads(&mut self, _: &[i64]) -> Result<()> {
                unreachable!("inserts only")
            }
            fn writes(&mut self, writes: &[CeilingWrite]) -> Result<()> {
                assert!(writes.iter().all(|w| matches!(w, CeilingWrite::Insert(_))));
                self.0.fetch_max(writes.len() as u64, Ordering::Relaxed);
                Ok(())
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
    async fn mixed_writes_take_turns_and_reads_outnumber_them() {
        let (m, shared) = run("mixed", 64).await;
        assert!(m.writes.ops > 0 && m.reads.ops > m.writes.ops, "{m:?}");
        assert_eq!(shared.overlaps.load(Ordering::Relaxed), 0);
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
        let cell = sample_cell("queue", "ceiling");
        let err = drive_ceiling(&cell, || -> Result<Counting> { unreachable!() })
            .await
            .unwrap_err()
            .to_string();
        assert!(err.contains("not for queue"), "{err}");
    }

    #[tokio::test]
    async fn a_failing_transaction_counts_one_error() {
        struct Failing;
        impl CeilingConnection for Failing {
            fn reads(&mut self, _: &[i64]) -> Result<()> {
                std::thread::sleep(std::time::Duration::from_micros(100));
                bail!("disk I/O error")
            }
            fn writes(&mut self, _: &[CeilingWrite]) -> Result<()> {
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
