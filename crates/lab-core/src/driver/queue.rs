//! `queue` (seed 002): every client task publishes a job, claims the oldest unclaimed one and acknowledges it,
//! over and over; each operation and the whole cycle are timed, then a probe counts heap allocations per operation.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};

use super::client_loop::{observe, yield_if_never_pending};
use super::window::{Window, WindowedRun};
use crate::alloc::{self, AllocCount};
use crate::approach::Approach;
use crate::cell::Cell;
use crate::data::{self, NewJob};
use crate::measurement::Measurement;
use crate::result::NamedOp;
use crate::rng::Rng;
use crate::stats::{StatsSink, TaskStats};

/// Queue cycles run one at a time after the window, with allocations counted around each operation.
pub const QUEUE_PROBE_CYCLES: u64 = 1_000;

/// The names of the queue's operations, in report order.
pub(super) const QUEUE_OPERATIONS: [&str; 4] = ["publish", "claim", "ack", "cycle"];

/// Runs a `queue` cell: one client task per `concurrency` (worker ids from 1), then, once every task has stopped,
/// the allocation probe; each operation is reported by name.
pub(super) async fn drive<A: Approach>(cell: &Cell, approach: Arc<A>) -> Result<Measurement> {
    // Seed 002 compares drivers by allocations per cycle: count them (a no-op without the runner's counting
    // allocator).
    alloc::start_counting();
    let run = WindowedRun::begin(cell)?;
    let mut tasks = Vec::new();
    for task in 0..cell.concurrency {
        let rng = Rng::derive(cell.seed, u64::from(task));
        tasks.push(tokio::spawn(client(
            approach.clone(),
            i64::from(task) + 1,
            rng,
            run.window,
            run.stats.clone(),
        )));
    }
    let (mut measurement, total) = run.finish(&*approach).await?;
    // Each task stops after the cycle it is in when the window closes; the probe runs alone after them.
    for task in tasks {
        task.await.context("a queue client task panicked")?;
    }
    let probe = probe(&*approach, cell.seed).await?;
    measurement.operations = operations(&total, measurement.wall_secs, &probe);
    Ok(measurement)
}

/// The queue's operations in report order: their statistics in `total`, and their allocations from `probe` (none
/// where it has none).
pub(super) fn operations(
    total: &TaskStats,
    wall_secs: f64,
    probe: &BTreeMap<&'static str, AllocCount>,
) -> Vec<NamedOp> {
    let named = total.named_stats(wall_secs);
    QUEUE_OPERATIONS
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
        .collect()
}

/// Milliseconds since the Unix epoch, for job creation and claim times.
pub(super) fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

/// One queue cycle's outcome: each operation's latency, or the first error.
struct Cycle {
    /// Latency of publish, claim and ack.
    latencies: [Duration; 3],
    /// Whether the cycle's last operation completed without giving its worker back (direct-blocking).
    ready_at_once: bool,
}

/// Runs one queue cycle as worker `owner`: publish `job`, claim the oldest unclaimed job, acknowledge it.
///
/// An empty queue is an error: every task publishes before it claims, so with the backlog the queue never runs dry.
async fn cycle<A: Approach>(approach: &A, owner: i64, job: NewJob) -> Result<Cycle> {
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
async fn client<A: Approach>(
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
        let outcome = cycle(&*approach, owner, job).await;
        let done = Instant::now();
        if !window.counts(done) {
            ready = outcome.is_ok_and(|c| c.ready_at_once);
            continue;
        }
        ready = match &outcome {
            Ok(cycle) => cycle.ready_at_once,
            Err(_) => false,
        };
        alloc::uncounted(|| {
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

/// Allocations per queue operation, counted around each operation of [`QUEUE_PROBE_CYCLES`] cycles run one at a
/// time by one task: every thread's allocations while the operation is in flight (the caller's future, the
/// channel to the approach's thread, that thread's work). Empty when the runner does not count allocations.
async fn probe<A: Approach>(approach: &A, seed: u64) -> Result<BTreeMap<&'static str, AllocCount>> {
    let mut totals = BTreeMap::new();
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

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use crate::driver::drive;
    use crate::test_support::{Fake, RequiredOnly, run, sample_cell};

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
    async fn an_approach_without_a_queue_fails_every_cycle_with_a_clear_error() {
        let cell = sample_cell("queue", "none");
        let m = drive(&cell, Arc::new(RequiredOnly)).await.unwrap();
        assert!(m.errors > 0);
        assert_eq!(
            m.error_samples,
            ["this approach does not implement the queue workload"]
        );
        assert!(m.operations.iter().all(|o| o.stats.ops == 0));
    }
}
