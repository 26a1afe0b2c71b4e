//! `throughput`: `concurrency` writers back to back, each transaction inserting
//! [`THROUGHPUT_ROWS_PER_TRANSACTION`] rows and thinking before its commit; at the end, every acknowledged row must be
//! in the table.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};

use super::client_loop::{observe, record, yield_if_never_pending};
use super::window::WindowedRun;
use crate::approach::Approach;
use crate::cell::Cell;
use crate::data::NewItem;
use crate::measurement::Measurement;
use crate::rng::Rng;
use crate::stats::OpKind;
use crate::workload::THROUGHPUT_ROWS_PER_TRANSACTION;

/// How long the writers still inside a transaction when the window closes may take to finish.
const DRAIN: Duration = Duration::from_secs(60);

/// Runs a `throughput` cell: each transaction is one write in the statistics; after the window, waits for the
/// writers to finish and checks the table's row count against the seeded rows plus those acknowledged.
pub(super) async fn drive<A: Approach>(cell: &Cell, approach: Arc<A>) -> Result<Measurement> {
    let run = WindowedRun::begin(cell)?;
    let think = Duration::from_micros(cell.think_us);
    let acknowledged = Arc::new(AtomicU64::new(0));
    let mut writers = Vec::with_capacity(cell.concurrency as usize);
    for task in 0..cell.concurrency {
        let mut rng = Rng::derive(cell.seed, u64::from(task));
        let (approach, window, stats) = (approach.clone(), run.window, run.stats.clone());
        let acknowledged = acknowledged.clone();
        writers.push(tokio::spawn(async move {
            let mut ready = false;
            loop {
                let started = Instant::now();
                if started >= window.end {
                    return;
                }
                yield_if_never_pending(ready).await;
                let items = (0..THROUGHPUT_ROWS_PER_TRANSACTION)
                    .map(|_| NewItem::random(&mut rng))
                    .collect();
                let (outcome, ready_now) = observe(approach.insert_batch(items, think)).await;
                if outcome.is_ok() {
                    acknowledged.fetch_add(1, Ordering::Relaxed);
                }
                record(&stats, &window, OpKind::Write, started, outcome);
                ready = ready_now;
            }
        }));
    }
    let (measurement, _) = run.finish(&*approach).await?;
    tokio::time::timeout(DRAIN, futures_util::future::join_all(writers))
        .await
        .context("writers were still inside a transaction a minute after the window closed")?;
    let expected =
        cell.rows + THROUGHPUT_ROWS_PER_TRANSACTION as u64 * acknowledged.load(Ordering::Relaxed);
    let found = approach.count_items().await?;
    if found != expected {
        bail!(
            "the table holds {found} rows, but {} were seeded and {} transactions of {THROUGHPUT_ROWS_PER_TRANSACTION} \
             acknowledged: {expected} expected",
            cell.rows,
            acknowledged.load(Ordering::Relaxed)
        );
    }
    Ok(measurement)
}

#[cfg(test)]
mod tests {
    use crate::test_support::{Fake, run, sample_cell};

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn every_acknowledged_transaction_is_counted_and_checked() {
        let mut cell = sample_cell("throughput", "fake");
        cell.think_us = 200;
        let (m, fake) = run(&cell, Fake::seeded(200)).await;
        assert!(m.writes.ops > 0);
        assert_eq!(m.reads.ops, 0);
        assert_eq!(m.errors, 0, "{:?}", m.error_samples);
        let rows = fake.items.lock().unwrap().len() as u64;
        assert!(rows >= 200 + 100 * m.writes.ops, "{rows} rows");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_lost_row_fails_the_cell() {
        let cell = sample_cell("throughput", "fake");
        let fake = std::sync::Arc::new(Fake {
            loses_a_row: true,
            ..Fake::seeded(200)
        });
        let err = crate::drive(&cell, fake).await.unwrap_err().to_string();
        assert!(err.contains("rows, but 200 were seeded"), "{err}");
    }
}
