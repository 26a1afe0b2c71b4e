//! `point-read`, `insert`, `mixed` and `write-read`: `concurrency` client tasks running single-row operations back
//! to back.

use std::sync::Arc;
use std::time::Instant;

use anyhow::Result;

use super::client_loop::{observe, record, yield_if_never_pending};
use super::window::{Window, WindowedRun};
use crate::approach::Approach;
use crate::cell::Cell;
use crate::data::NewItem;
use crate::measurement::Measurement;
use crate::rng::Rng;
use crate::stats::{OpKind, StatsSink};
use crate::workload::{Workload, mixed_draws_write};

/// Runs a `point-read`, `insert`, `mixed` or `write-read` cell: one client task per `concurrency`, each with its own random
/// stream, until the window closes.
pub(super) async fn drive<A: Approach>(
    cell: &Cell,
    workload: Workload,
    approach: Arc<A>,
) -> Result<Measurement> {
    let run = WindowedRun::begin(cell)?;
    for task in 0..cell.concurrency {
        let rng = Rng::derive(cell.seed, u64::from(task));
        tokio::spawn(client(
            approach.clone(),
            workload,
            cell.rows,
            cell.write_ppm,
            rng,
            run.window,
            run.stats.clone(),
        ));
    }
    let (measurement, _) = run.finish(&*approach).await?;
    Ok(measurement)
}

/// A client of `point-read`, `insert`, `mixed` (with `write_ppm` of its operations updates) or `write-read`:
/// operations back to back until the window ends.
async fn client<A: Approach>(
    approach: Arc<A>,
    workload: Workload,
    rows: u64,
    write_ppm: u32,
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
            Workload::WriteRead => {
                let (id, delta) = (rng.between(1, rows), rng.between(-100, 100));
                let (outcome, _) = observe(approach.update(id, delta)).await;
                let failed = outcome.is_err();
                record(&stats, &window, OpKind::Write, started, outcome);
                if failed {
                    ready = false;
                    continue;
                }
                // The read is timed from the moment the write's answer came back.
                let read_started = Instant::now();
                let read = observe(approach.point_read(id)).await;
                record(&stats, &window, OpKind::Read, read_started, read.0);
                ready = read.1;
                continue;
            }
            _ if !mixed_draws_write(&mut rng, write_ppm) => (
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

#[cfg(test)]
mod tests {
    use crate::test_support::{Fake, run, sample_cell};

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
        // The ticker beside the clients: one tick per millisecond of the 60 ms window, every one accounted for.
        let lateness = m.lateness.unwrap();
        assert_eq!(lateness.ticks, 60);
        assert!(lateness.p50_us <= lateness.p99_us && lateness.p99_us <= lateness.max_us);
        // The window's CPU over its reads, and the idle window after it.
        assert_eq!(m.cpu_per_op_us, Some(m.cpu_secs * 1e6 / m.reads.ops as f64));
        let idle = m.idle_cpu.unwrap();
        assert!(idle.secs >= crate::IDLE_WINDOW.as_secs_f64(), "{idle:?}");
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
    async fn mixed_follows_its_share_of_writes_to_either_end() {
        let mut cell = sample_cell("mixed", "fake");
        cell.write_ppm = 0;
        let (m, fake) = run(&cell, Fake::seeded(200)).await;
        assert!(m.reads.ops > 0);
        assert_eq!(m.writes.ops, 0);
        assert!(
            fake.items.lock().unwrap().values().all(|&v| v == 0),
            "nothing updated"
        );
        cell.write_ppm = crate::cell::PPM;
        let (m, fake) = run(&cell, Fake::seeded(200)).await;
        assert!(m.writes.ops > 0);
        assert_eq!(m.reads.ops, 0);
        assert!(fake.items.lock().unwrap().values().any(|&v| v != 0));
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn write_read_reads_back_each_row_it_writes() {
        let cell = sample_cell("write-read", "fake");
        let (m, _) = run(&cell, Fake::seeded(200)).await;
        assert!(m.writes.ops > 0);
        // Each read follows its write; the window may close between the two.
        assert!(m.reads.ops.abs_diff(m.writes.ops) <= u64::from(cell.concurrency));
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
}
