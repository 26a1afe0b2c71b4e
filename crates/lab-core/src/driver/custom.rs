//! A custom workload ([`crate::CustomWorkload`]): `concurrency` client tasks, each drawing transactions by weight
//! and running them back to back; every transaction timed as a read or a write and under its own name.

use std::sync::Arc;
use std::time::Instant;

use anyhow::{Context, Result};

use super::client_loop::{observe, store_transaction, yield_if_never_pending};
use super::window::{Window, WindowedRun};
use crate::approach::Approach;
use crate::cell::Cell;
use crate::custom::{CustomWorkload, Drawer, leaked_names};
use crate::measurement::Measurement;
use crate::result::NamedOp;
use crate::rng::Rng;
use crate::stats::{OpKind, StatsSink, TaskStats};

/// Runs a custom cell closed loop: one client task per `concurrency`, each with its own random stream, until the
/// window closes.
pub(super) async fn drive<A: Approach>(cell: &Cell, approach: Arc<A>) -> Result<Measurement> {
    let custom = workload_of(cell)?;
    let names = leaked_names(custom);
    let run = WindowedRun::begin(cell)?;
    let tasks = u64::from(cell.concurrency);
    for task in 0..tasks {
        let drawer = Drawer::new(custom, &names, task, tasks);
        let rng = Rng::derive(cell.seed, task);
        tokio::spawn(client(
            approach.clone(),
            drawer,
            rng,
            run.window,
            run.stats.clone(),
        ));
    }
    let (mut measurement, total) = run.finish(&*approach).await?;
    measurement.operations = transactions(&total, &names, measurement.wall_secs);
    Ok(measurement)
}

/// The cell's custom workload.
pub(super) fn workload_of(cell: &Cell) -> Result<&CustomWorkload> {
    cell.custom
        .as_ref()
        .context("a custom cell carries its workload (`custom`)")
}

/// Each transaction's figures, in the workload's order (one never completed has empty figures).
pub(super) fn transactions(
    total: &TaskStats,
    names: &[&'static str],
    wall_secs: f64,
) -> Vec<NamedOp> {
    let named = total.named_stats(wall_secs);
    names
        .iter()
        .map(|name| NamedOp {
            name: (*name).to_owned(),
            stats: named
                .iter()
                .find(|(n, _)| n == name)
                .map(|(_, s)| s.clone())
                .unwrap_or_default(),
            allocs_per_op: None,
            alloc_bytes_per_op: None,
        })
        .collect()
}

/// A client: transactions back to back until the window ends. Drawing one (its values generated) is not part of
/// its latency; waiting for a worker is.
async fn client<A: Approach>(
    approach: Arc<A>,
    mut drawer: Drawer,
    mut rng: Rng,
    window: Window,
    stats: Arc<StatsSink>,
) {
    let mut ready = false;
    loop {
        let drawn = drawer.next(&mut rng);
        let started = Instant::now();
        if started >= window.end {
            return;
        }
        yield_if_never_pending(ready).await;
        let kind = if drawn.writes {
            OpKind::Write
        } else {
            OpKind::Read
        };
        let name = drawer.names[drawn.index];
        let (outcome, ready_now) = observe(approach.custom(drawn.writes, drawn.statements)).await;
        let done = Instant::now();
        if window.counts(done) {
            store_transaction(&stats, kind, name, done - started, outcome);
        }
        ready = ready_now;
    }
}

#[cfg(test)]
mod tests {
    use crate::test_support::{Fake, run, sample_cell, sample_custom as sample};

    fn custom_cell() -> crate::Cell {
        let mut cell = sample_cell("shop", "fake");
        cell.custom = Some(sample());
        cell
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn transactions_are_timed_as_reads_or_writes_and_by_name() {
        let (m, fake) = run(&custom_cell(), Fake::seeded(200)).await;
        assert_eq!(m.errors, 0, "{:?}", m.error_samples);
        assert!(m.reads.ops > m.writes.ops && m.writes.ops > 0, "{m:?}");
        let names: Vec<&str> = m.operations.iter().map(|op| op.name.as_str()).collect();
        assert_eq!(names, ["read", "add"]);
        assert_eq!(m.operations[0].stats.ops, m.reads.ops);
        assert_eq!(m.operations[1].stats.ops, m.writes.ops);
        // Each transaction reached the approach with its statement and values.
        let seen = fake.custom.lock().unwrap();
        assert!(
            seen.iter()
                .any(|(writes, sql)| *writes && sql.starts_with("INSERT"))
        );
        assert!(
            seen.iter()
                .any(|(writes, sql)| !*writes && sql.starts_with("SELECT"))
        );
        // Counted once, not once as a kind and again by name.
        assert_eq!(m.operations_completed(), m.reads.ops + m.writes.ops);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn an_approach_without_custom_workloads_fails_every_transaction() {
        let approach = std::sync::Arc::new(crate::test_support::RequiredOnly);
        let m = crate::drive(&custom_cell(), approach).await.unwrap();
        assert_eq!(m.reads.ops + m.writes.ops, 0);
        assert!(m.errors > 0);
        assert!(
            m.error_samples
                .iter()
                .any(|e| e.contains("does not run custom workloads")),
            "{:?}",
            m.error_samples
        );
    }
}
