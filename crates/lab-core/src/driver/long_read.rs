//! `long-read`: point reads through one call site whose cost a parameter sets ([`COUNTED_READ`]), one in N of the
//! window's reads long, beside one writer inserting a row every [`LONG_READ_WRITE_PERIOD`] on a fixed schedule.
//!
//! The hazard it measures: a library that runs a read on its caller's runtime thread when the read's call site has
//! been short lately holds that thread for the whole run of a read that turns long — one tenant with a million rows
//! behind a query that ran short thousands of times. What the rest of the runtime suffers shows in the ticker's
//! lateness; what the writes suffer, in their latency.
//!
//! - **Calibration.** Before the warm-up, the driver finds how many steps of the statement's count a millisecond
//!   holds, timed on one of the approach's connections ([`Approach::time_counted_read`], a call site of its own): a
//!   run long enough to time well, then the fastest of [`CALIBRATION_RUNS`] at that count.
//! - **Reads.** `concurrency` client tasks, closed loop. Every read of the warm-up is short (its count `1`), so a
//!   site's history says short when the window opens. In the window each task's reads are counted, and one in
//!   [`LongReads::every`] is long, made to take a time drawn from the cell's range; each task starts at a random
//!   point of its cycle, so the tasks' long reads do not come together. Short reads are the cell's reads; long ones
//!   its named operation [`LONG_READ`].
//! - **Writes.** One task, write `k` due at `k ×` [`LONG_READ_WRITE_PERIOD`] after the warm-up began; a late writer
//!   issues its overdue writes back to back. A write's latency runs from its due instant, not from when it was
//!   issued: a write that could not start because the one before was still waiting counts that wait too (as the
//!   ticker's ticks and the open loop's requests do), and so the latency includes tokio's timer waking the writer,
//!   0–2 ms on an idle runtime. A write counts when it was due inside the window, whenever it finished: after the
//!   window the driver waits up to [`DRAIN_GRACE`] for the writer's last one, and the write completion says how
//!   many of the writes due in the window were done.

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};

use super::client_loop::{observe, store, store_named, yield_if_never_pending};
use super::open_loop::DRAIN_GRACE;
use super::window::{Window, WindowedRun};
use crate::approach::Approach;
use crate::cell::{Cell, LongReads};
use crate::data::NewItem;
use crate::measurement::Measurement;
use crate::pacing::Schedule;
use crate::result::{Completion, NamedOp};
use crate::rng::Rng;
use crate::stats::{OpKind, StatsSink};
use crate::workload::{LONG_READ_WRITE_PERIOD, long_read_settings};

#[cfg(doc)]
use crate::sql::COUNTED_READ;

/// The named operation the long reads are recorded under.
pub const LONG_READ: &str = "long read";

/// The shortest calibration run that counts: long enough that the clock's resolution and the run's start are
/// nothing beside it.
const CALIBRATION_RUN: Duration = Duration::from_millis(20);

/// Runs at the calibrated count; the fastest stands for SQLite's speed (another thread or a page fault can only slow
/// a run down).
const CALIBRATION_RUNS: u32 = 3;

/// The count the calibration starts from.
const FIRST_COUNT: i64 = 1 << 12;

/// The count past which the calibration gives up: a count this long that still runs in no time is not a count.
const MAX_COUNT: i64 = 1 << 40;

/// Runs a `long-read` cell: the calibration, then the readers and the writer until the window closes.
pub(super) async fn drive<A: Approach>(cell: &Cell, approach: Arc<A>) -> Result<Measurement> {
    let settings = *long_read_settings(cell)?;
    let rows = i64::try_from(cell.rows.max(1)).unwrap_or(i64::MAX);
    let steps_per_ms = calibrate(&*approach).await?;
    eprintln!(
        "long-read: {steps_per_ms:.0} steps of the count a millisecond, so {} to {} steps for a long read",
        count_for(steps_per_ms, settings.min_ms),
        count_for(steps_per_ms, settings.max_ms)
    );
    let run = WindowedRun::begin(cell)?;
    let plan = Arc::new(Plan {
        settings,
        steps_per_ms,
        rows,
    });
    for task in 0..cell.concurrency {
        tokio::spawn(reader(
            approach.clone(),
            plan.clone(),
            Rng::derive(cell.seed, u64::from(task)),
            run.window,
            run.stats.clone(),
        ));
    }
    let schedule = Schedule::for_database(LONG_READ_WRITE_PERIOD, 0, 1);
    let warmup = Duration::from_millis(cell.warmup_ms);
    let expected = schedule.ticks_in(warmup, warmup + Duration::from_millis(cell.duration_ms));
    let writer = tokio::spawn(writer(
        approach.clone(),
        schedule,
        run.start,
        Rng::derive(cell.seed, u64::from(cell.concurrency)),
        run.window,
        run.stats.clone(),
    ));
    // The writer's last write due in the window may still be waiting behind a long read: it counts if it finishes
    // within the grace, and the completion says so if it does not.
    let drained = run.window.end + DRAIN_GRACE;
    let _ = tokio::time::timeout_at(drained.into(), writer).await;
    let (mut measurement, total) = run.finish(&*approach).await?;
    let completed = total.count(OpKind::Write);
    measurement.write_completion = Some(Completion {
        expected,
        completed,
        ratio: if expected == 0 {
            1.0
        } else {
            (completed as f64 / expected as f64).min(1.0)
        },
    });
    let long = total
        .named_stats(measurement.wall_secs)
        .into_iter()
        .find(|(name, _)| *name == LONG_READ)
        .map(|(_, stats)| stats)
        .unwrap_or_default();
    measurement.operations = vec![NamedOp {
        name: LONG_READ.to_owned(),
        stats: long,
        allocs_per_op: None,
        alloc_bytes_per_op: None,
    }];
    Ok(measurement)
}

/// What every reader of a cell shares: the settings and the calibration.
struct Plan {
    /// Which reads are long, and how long.
    settings: LongReads,
    /// Steps of the count a millisecond holds on the approach's connections.
    steps_per_ms: f64,
    /// Rows in the table: reads pick an id in `1..=rows`.
    rows: i64,
}

/// The count that makes a read take `ms` milliseconds, by the calibration: at least 2, so that a long read is never
/// a short one.
fn count_for(steps_per_ms: f64, ms: u64) -> i64 {
    let count = (steps_per_ms * ms as f64).round();
    if count >= MAX_COUNT as f64 {
        MAX_COUNT
    } else {
        (count as i64).max(2)
    }
}

/// How many steps of the count a millisecond holds on one of `approach`'s connections: the count grown until a run
/// takes [`CALIBRATION_RUN`], then the fastest of [`CALIBRATION_RUNS`] at that count.
async fn calibrate<A: Approach>(approach: &A) -> Result<f64> {
    // Row 1 exists whenever the table has rows (a long-read cell needs them).
    let time = |count| approach.time_counted_read(1, count);
    let mut count = FIRST_COUNT;
    let mut took = time(count)
        .await
        .context("calibrating the long reads' count")?;
    while took < CALIBRATION_RUN {
        if count >= MAX_COUNT {
            bail!("a count of {count} steps ran in {took:?}: the long reads cannot be calibrated");
        }
        // Aim past the mark, growing at most 64 times a step: a run too short to time well says little.
        let factor = if took.is_zero() {
            64.0
        } else {
            (1.5 * CALIBRATION_RUN.as_secs_f64() / took.as_secs_f64()).clamp(2.0, 64.0)
        };
        count = ((count as f64 * factor) as i64).min(MAX_COUNT);
        took = time(count).await?;
    }
    for _ in 1..CALIBRATION_RUNS {
        took = took.min(time(count).await?);
    }
    Ok(count as f64 / (took.as_secs_f64() * 1e3))
}

/// A reader: counted reads back to back until the window ends, short through the warm-up and one in
/// [`LongReads::every`] of the window's long.
async fn reader<A: Approach>(
    approach: Arc<A>,
    plan: Arc<Plan>,
    mut rng: Rng,
    window: Window,
    stats: Arc<StatsSink>,
) {
    let every = u64::from(plan.settings.every.max(1));
    // Where in its cycle of `every` reads this task starts, so the tasks' long reads are spread out.
    let mut until_long = rng.below(every) + 1;
    let mut ready = false;
    loop {
        let started = Instant::now();
        if started >= window.end {
            return;
        }
        // Waiting for the worker is part of this operation's latency, as a request waits for one.
        yield_if_never_pending(ready).await;
        let id = rng.between(1, plan.rows);
        let long = started >= window.measure_start && {
            until_long -= 1;
            until_long == 0
        };
        let count = if long {
            until_long = every;
            let (min, max) = (plan.settings.min_ms, plan.settings.max_ms);
            let ms = rng.between(min as i64, max as i64) as u64;
            count_for(plan.steps_per_ms, ms)
        } else {
            1
        };
        let (outcome, ready_now) = observe(approach.counted_read(id, count)).await;
        let done = Instant::now();
        if window.counts(done) {
            if long {
                store_named(&stats, LONG_READ, done - started, outcome);
            } else {
                store(&stats, OpKind::Read, done - started, outcome);
            }
        }
        ready = ready_now;
    }
}

/// The writer: write `k` due at `origin + schedule.tick(k)`, each one row inserted, timed from its due instant and
/// counted when it was due inside the window.
async fn writer<A: Approach>(
    approach: Arc<A>,
    schedule: Schedule,
    origin: Instant,
    mut rng: Rng,
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
        let (outcome, ready_now) = observe(approach.insert(NewItem::random(&mut rng))).await;
        if due >= window.measure_start {
            store(&stats, OpKind::Write, due.elapsed(), outcome);
        }
        ready = ready_now;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::{Fake, run, sample_cell};

    #[tokio::test]
    async fn the_calibration_finds_the_steps_a_millisecond_holds() {
        // The fake's count runs 100 ns a step: 10,000 steps a millisecond, found from a run of 262,144 steps.
        let fake = Fake::seeded(10);
        let steps_per_ms = calibrate(&fake).await.unwrap();
        assert!((steps_per_ms - 10_000.0).abs() < 1e-6, "{steps_per_ms}");
        let timed = fake.timed_counts.lock().unwrap().clone();
        assert_eq!(timed, [4_096, 262_144, 262_144, 262_144]);
        assert_eq!(count_for(10_000.0, 100), 1_000_000);
        assert_eq!(count_for(0.0, 100), 2, "a long read is never a short one");
    }

    #[tokio::test]
    async fn a_count_that_takes_no_time_is_refused() {
        let fake = Fake {
            free_counts: true,
            ..Fake::seeded(10)
        };
        let err = calibrate(&fake).await.unwrap_err().to_string();
        assert!(err.contains("cannot be calibrated"), "{err}");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn one_read_in_n_of_the_window_is_long_and_the_writer_writes_beside_them() {
        let cell = sample_cell("long-read", "fake");
        let long = cell.long_reads.unwrap();
        let (m, fake) = run(&cell, Fake::seeded(200)).await;
        assert_eq!(m.errors, 0, "{:?}", m.error_samples);
        // The calibration's runs went through their own call; the reads' counts are 1 or a long read's, 2–4 ms at
        // the fake's 10,000 steps a millisecond.
        let counts = fake.counts.lock().unwrap();
        assert!(counts.get(&1).is_some_and(|&n| n > 0));
        let long_counts: u64 = counts
            .range(2..)
            .inspect(|(count, _)| assert!((20_000..=40_000).contains(*count), "{count}"))
            .map(|(_, n)| n)
            .sum();
        assert!(long_counts > 0);
        // One in `every` of each task's reads in the window: the counted ones agree, within a cycle per task.
        let [op] = &m.operations[..] else {
            panic!("{:?}", m.operations)
        };
        assert_eq!(op.name, LONG_READ);
        let (short, long_ops) = (m.reads.ops, op.stats.ops);
        let slack = u64::from((long.every + 1) * cell.concurrency);
        assert!(
            (long_ops * u64::from(long.every)).abs_diff(short + long_ops) <= slack,
            "{long_ops} long of {} reads",
            short + long_ops
        );
        // The writer: one insert a millisecond due in the 60 ms window, each counted, none lost.
        let completion = m.write_completion.unwrap();
        assert_eq!(completion.expected, 60);
        assert_eq!(completion.completed, m.writes.ops);
        assert!(m.writes.ops > 0);
        assert!(fake.items.lock().unwrap().len() as u64 >= 200 + m.writes.ops);
        // The ticker's figures, its p99.9 among them.
        let lateness = m.lateness.unwrap();
        assert!(lateness.p999_us.is_some_and(|p| p <= lateness.max_us));
    }
}
