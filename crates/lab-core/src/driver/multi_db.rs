//! `multi-db` (seed 004): per database one writer appending ledger blocks, and readers running the
//! account-history JOIN; the writes completed are counted against the writes the window expects.

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Result;

use super::client_loop::{observe, record, store, yield_if_never_pending};
use super::window::{Window, WindowedRun};
use crate::approach::Approach;
use crate::cell::{Cell, MultiDb, WriteMode};
use crate::data::{self, LedgerGenerator};
use crate::measurement::Measurement;
use crate::pacing::Schedule;
use crate::result::Completion;
use crate::rng::Rng;
use crate::stats::{OpKind, StatsSink};
use crate::workload::multi_db_settings;

/// Runs a `multi-db` cell: a writer per database in the cell's write mode, the readers of [`reader_plan`], and the
/// writes completed against [`expected`].
pub(super) async fn drive<A: Approach>(cell: &Cell, approach: Arc<A>) -> Result<Measurement> {
    let settings = multi_db_settings(cell)?;
    let run = WindowedRun::begin(cell)?;
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
                    run.window,
                    run.stats.clone(),
                ));
            }
            WriteMode::Paced => {
                let schedule = Schedule::for_database(delay, db, databases);
                tokio::spawn(paced_writer(
                    approach.clone(),
                    db,
                    generator,
                    schedule,
                    run.start,
                    run.window,
                    run.stats.clone(),
                ));
            }
        }
    }
    let expected_writes = expected(cell, settings.write_mode, delay, databases);
    for (target, stream) in reader_plan(settings) {
        let rng = Rng::derive(cell.seed, stream);
        tokio::spawn(ledger_reader(
            approach.clone(),
            target,
            rng,
            run.window,
            run.stats.clone(),
        ));
    }
    let (mut measurement, total) = run.finish(&*approach).await?;
    measurement.write_completion = expected_writes.map(|expected| {
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
    Ok(measurement)
}

/// The `multi-db` writer of database `db` in the `blocking` write mode: one block after another, each holding the
/// write for `delay`.
async fn blocking_writer<A: Approach>(
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
/// at most the writes the schedule puts in the window, which is what [`expected`] counts. Its latency runs
/// from when it was issued.
async fn paced_writer<A: Approach>(
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
enum ReadTarget {
    /// Always this one (`readers` per database).
    Fixed(usize),
    /// One of this many, chosen at random for every read (`total_readers`).
    Any(usize),
}

impl ReadTarget {
    /// The database of the next read.
    fn pick(self, rng: &mut Rng) -> usize {
        match self {
            Self::Fixed(db) => db,
            Self::Any(databases) => rng.below(databases.max(1) as u64) as usize,
        }
    }
}

/// A `multi-db` reader: the account-history JOIN in a loop, random accounts, on the databases `target` names.
async fn ledger_reader<A: Approach>(
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

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::*;
    use crate::test_support::{Fake, run, sample_cell};

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
}
