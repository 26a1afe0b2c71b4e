//! Open-loop load ([`Cell::rate`]): requests sent on a fixed schedule whatever the answers do, as wrk2 and k6's
//! constant-arrival-rate executor send them, for `point-read`, `insert`, `mixed` and custom workloads.
//!
//! A closed-loop client waits for each answer before it sends the next request, so a slow answer delays the
//! requests behind it and they are never timed at all (coordinated omission). Here request `k` is due at
//! `start + k / rate` ([`arrivals`]); a thread of its own ([`dispatcher`]) hands each one to the runtime as its
//! own task when it is due, as a service spawns a task per request, and its latency runs from the due instant,
//! so time spent waiting to be sent, for a worker or for the approach all counts. At most [`Cell::concurrency`]
//! requests are in flight ([`in_flight`]); one due while that many are is dropped and counted. A request counts
//! when it was due inside the measured window, whenever it finished; after the window the driver waits up to
//! [`DRAIN_GRACE`] for the last ones and counts those still running as unfinished.

mod arrivals;
mod dispatcher;
mod in_flight;
mod request;

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use tokio::sync::oneshot;

use self::arrivals::Arrivals;
use self::dispatcher::{Dispatcher, Sent, SystemClock};
use self::in_flight::InFlight;
use self::request::{Draw, serve};
use super::custom::transactions;
use super::window::WindowedRun;
use crate::approach::Approach;
use crate::cell::Cell;
use crate::custom::{Drawer, leaked_names};
use crate::measurement::Measurement;
use crate::result::OpenLoop;
use crate::rng::Rng;
use crate::stats::{OpKind, StatsSink, TaskStats};
use crate::workload::Workload;

/// How long after the window the driver waits for requests still in flight before counting them unfinished.
pub const DRAIN_GRACE: Duration = Duration::from_secs(2);

/// Runs a `point-read`, `insert`, `mixed` or custom cell open loop at `rate` requests per second.
pub(super) async fn drive<A: Approach>(
    cell: &Cell,
    workload: Workload,
    approach: Arc<A>,
    rate: u64,
) -> Result<Measurement> {
    let run = WindowedRun::begin(cell)?;
    let in_flight = InFlight::new(cell.concurrency);
    let dispatcher = Dispatcher {
        arrivals: Arrivals::new(run.start, rate),
        window: run.window,
        in_flight: in_flight.clone(),
    };
    let due = dispatcher
        .arrivals
        .due_between(run.window.measure_start, run.window.end);
    let names = match &cell.custom {
        Some(custom) => leaked_names(custom),
        None => Vec::new(),
    };
    let draw = Draw {
        workload,
        rows: cell.rows.max(1) as i64,
        write_ppm: cell.write_ppm,
        // One stream of requests: one drawer, as for one client task.
        custom: cell.custom.as_ref().map(|c| Drawer::new(c, &names, 0, 1)),
    };
    let rng = Rng::derive(cell.seed, 0);
    let sent = spawn_dispatcher(dispatcher, draw, rng, approach.clone(), run.stats.clone())?
        .await
        .context("the open-loop schedule's thread stopped early")?;
    drain(&in_flight, DRAIN_GRACE).await;
    let (mut measurement, total) = run.finish(&*approach).await?;
    measurement.open_loop = Some(figures(due, &sent, &total, measurement.wall_secs));
    if cell.custom.is_some() {
        measurement.operations = transactions(&total, &names, measurement.wall_secs);
    }
    Ok(measurement)
}

/// Starts the dispatcher on a thread of its own, each request spawned on the calling runtime; its report arrives
/// when the window has closed.
fn spawn_dispatcher<A: Approach>(
    dispatcher: Dispatcher,
    mut draw: Draw,
    mut rng: Rng,
    approach: Arc<A>,
    stats: Arc<StatsSink>,
) -> Result<oneshot::Receiver<Sent>> {
    let runtime = tokio::runtime::Handle::current();
    let (report, sent) = oneshot::channel();
    std::thread::Builder::new()
        .name("lab-open-loop".to_owned())
        .spawn(move || {
            let clock = SystemClock::for_this_thread();
            let outcome = dispatcher.run(&clock, |due, permit| {
                let operation = draw.next(&mut rng);
                runtime.spawn(serve(
                    approach.clone(),
                    operation,
                    due,
                    permit,
                    stats.clone(),
                ));
            });
            let _ = report.send(outcome);
        })
        .context("cannot start the open-loop schedule's thread")?;
    Ok(sent)
}

/// Waits until no request is in flight, or `grace` has passed.
async fn drain(in_flight: &InFlight, grace: Duration) {
    let deadline = Instant::now() + grace;
    while in_flight.current() > 0 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
}

/// The cell's open-loop figures: `due` requests in the window, what the dispatcher did with them, and what the
/// requests it sent recorded.
fn figures(due: u64, sent: &Sent, total: &TaskStats, wall_secs: f64) -> OpenLoop {
    let completed = total.count(OpKind::Read) + total.count(OpKind::Write);
    let failed = total.errors();
    let latency = total.all_latencies();
    let us = |nanos: u64| nanos as f64 / 1_000.0;
    let quantile = |q: f64| {
        if latency.is_empty() {
            0.0
        } else {
            us(latency.value_at_quantile(q))
        }
    };
    let lateness = |q: f64| {
        if sent.lateness.is_empty() {
            0.0
        } else {
            us(sent.lateness.value_at_quantile(q))
        }
    };
    OpenLoop {
        due,
        issued: sent.issued,
        dropped: sent.dropped,
        completed,
        failed,
        unfinished: sent.issued.saturating_sub(completed + failed),
        achieved_per_sec: if wall_secs > 0.0 {
            completed as f64 / wall_secs
        } else {
            0.0
        },
        p50_us: quantile(0.50),
        p99_us: quantile(0.99),
        p999_us: quantile(0.999),
        max_us: if latency.is_empty() {
            0.0
        } else {
            us(latency.max())
        },
        send_lateness_p50_us: lateness(0.50),
        send_lateness_p99_us: lateness(0.99),
    }
}

#[cfg(test)]
mod tests {
    use crate::test_support::{Fake, run, sample_cell};

    fn open_loop_cell(workload: &str, rate: u64) -> crate::Cell {
        let mut cell = sample_cell(workload, "fake");
        cell.rate = Some(rate);
        cell
    }

    /// The accounting that must hold whatever the timing: every request due in the window was sent or dropped,
    /// and every one sent succeeded, failed or was still running.
    fn assert_accounted(m: &crate::Measurement, rate: u64) -> crate::OpenLoop {
        let o = m.open_loop.expect("an open-loop cell reports its figures");
        assert_eq!(o.due, rate * 60 / 1_000, "the window's 60 ms at {rate}/s");
        assert_eq!(o.due, o.issued + o.dropped, "{o:?}");
        assert_eq!(o.issued, o.completed + o.failed + o.unfinished, "{o:?}");
        assert_eq!(o.completed, m.reads.ops + m.writes.ops, "{o:?}");
        assert_eq!(o.failed, m.errors, "{o:?}");
        assert!(o.p50_us <= o.p99_us && o.p99_us <= o.p999_us && o.p999_us <= o.max_us);
        o
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn point_reads_at_a_rate_are_all_accounted_for() {
        let (m, _) = run(&open_loop_cell("point-read", 2_000), Fake::seeded(200)).await;
        let o = assert_accounted(&m, 2_000);
        assert_eq!(m.writes.ops, 0);
        assert!(o.completed > 0, "{o:?}");
        assert_eq!(m.cpu_per_op_us, Some(m.cpu_secs * 1e6 / o.completed as f64));
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn inserts_and_mixed_run_open_loop_too() {
        let (m, fake) = run(&open_loop_cell("insert", 1_000), Fake::seeded(200)).await;
        let o = assert_accounted(&m, 1_000);
        assert_eq!(m.reads.ops, 0);
        assert!(fake.items.lock().unwrap().len() as u64 >= 200 + o.completed);
        let (m, _) = run(&open_loop_cell("mixed", 1_000), Fake::seeded(200)).await;
        assert_accounted(&m, 1_000);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn failures_are_counted_as_failed_requests() {
        let fake = Fake {
            failing: true,
            ..Fake::seeded(200)
        };
        let (m, _) = run(&open_loop_cell("point-read", 1_000), fake).await;
        let o = assert_accounted(&m, 1_000);
        assert_eq!(o.completed, 0);
        assert!(o.failed > 0, "{o:?}");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_closed_loop_cell_has_no_open_loop_figures() {
        let (m, _) = run(&sample_cell("point-read", "fake"), Fake::seeded(200)).await;
        assert!(m.open_loop.is_none());
    }
}
