//! `held-tx`: `concurrency` tasks back to back, each transaction reading a row, thinking with the transaction open,
//! writing the row back and logging the change; at the end, the log must hold every acknowledged transaction and no
//! lost update.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};

use super::client_loop::{observe, record, yield_if_never_pending};
use super::window::WindowedRun;
use crate::approach::Approach;
use crate::cell::Cell;
use crate::measurement::Measurement;
use crate::rng::Rng;
use crate::stats::OpKind;

/// How long the tasks still inside a transaction when the window closes may take to finish.
const DRAIN: Duration = Duration::from_secs(60);

/// Runs a `held-tx` cell: each transaction is one write in the statistics; after the window, waits for the tasks to
/// finish and checks the log against the acknowledged transactions.
pub(super) async fn drive<A: Approach>(cell: &Cell, approach: Arc<A>) -> Result<Measurement> {
    let run = WindowedRun::begin(cell)?;
    let think = Duration::from_micros(cell.think_us);
    let rows = cell.rows.max(1) as i64;
    let acknowledged = Arc::new(AtomicU64::new(0));
    let mut tasks = Vec::with_capacity(cell.concurrency as usize);
    for task in 0..cell.concurrency {
        let mut rng = Rng::derive(cell.seed, u64::from(task));
        let (approach, window, stats) = (approach.clone(), run.window, run.stats.clone());
        let acknowledged = acknowledged.clone();
        tasks.push(tokio::spawn(async move {
            let mut ready = false;
            loop {
                let started = Instant::now();
                if started >= window.end {
                    return;
                }
                yield_if_never_pending(ready).await;
                let (id, delta) = (rng.between(1, rows), rng.between(-100, 100));
                let (outcome, ready_now) =
                    observe(approach.held_transaction(id, delta, think)).await;
                if outcome.is_ok() {
                    acknowledged.fetch_add(1, Ordering::Relaxed);
                }
                record(&stats, &window, OpKind::Write, started, outcome);
                ready = ready_now;
            }
        }));
    }
    let (measurement, _) = run.finish(&*approach).await?;
    tokio::time::timeout(DRAIN, futures_util::future::join_all(tasks))
        .await
        .context("tasks were still inside a transaction a minute after the window closed")?;
    let acknowledged = acknowledged.load(Ordering::Relaxed);
    let (logged, lost) = approach.check_item_log().await?;
    if logged != acknowledged {
        bail!("the log holds {logged} changes, but {acknowledged} transactions were acknowledged");
    }
    if lost > 0 {
        bail!("{lost} of {logged} logged changes lost another transaction's update");
    }
    Ok(measurement)
}

#[cfg(test)]
mod tests {
    use crate::test_support::{Fake, run, sample_cell};

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn every_acknowledged_transaction_is_logged_and_checked() {
        let mut cell = sample_cell("held-tx", "fake");
        cell.think_us = 200;
        let (m, fake) = run(&cell, Fake::seeded(200)).await;
        assert!(m.writes.ops > 0);
        assert_eq!(m.reads.ops, 0);
        assert_eq!(m.errors, 0, "{:?}", m.error_samples);
        let logged = fake.item_log.lock().unwrap().len() as u64;
        assert!(logged >= m.writes.ops, "{logged} changes logged");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_lost_update_fails_the_cell() {
        let cell = sample_cell("held-tx", "fake");
        let fake = std::sync::Arc::new(Fake {
            loses_an_update: true,
            ..Fake::seeded(200)
        });
        let err = crate::drive(&cell, fake).await.unwrap_err().to_string();
        assert!(err.contains("lost another transaction's update"), "{err}");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_missing_log_row_fails_the_cell() {
        let cell = sample_cell("held-tx", "fake");
        let fake = std::sync::Arc::new(Fake {
            loses_a_row: true,
            ..Fake::seeded(200)
        });
        let err = crate::drive(&cell, fake).await.unwrap_err().to_string();
        assert!(err.contains("transactions were acknowledged"), "{err}");
    }
}
