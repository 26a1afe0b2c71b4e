//! `orm` (seed 003): the suite's operations one after another, each alone for an equal share of the measured time.

use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use futures_util::future::join_all;

use crate::approach::Approach;
use crate::cell::Cell;
use crate::measurement::Measurement;
use crate::orm::{ORM_ARTISTS, ORM_THREADING, OrmOp, orm_entry_name, orm_result_name};
use crate::process;
use crate::result::NamedOp;
use crate::stats::{OpKind, TaskStats};
use crate::ticker::Ticker;

/// The `orm` suite: a warm-up running every operation in turn, then each operation alone, without and with a
/// wrapping transaction, for an equal share of the measured time; one operation in flight at a time, as the seed's
/// single ActiveRecord connection ran them.
pub(super) async fn drive<A: Approach>(cell: &Cell, approach: &A) -> Result<Measurement> {
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
    // Over the slices as planned; the suite runs them back to back, so it ends a little after.
    let ticker = Ticker::spawn(start, start + slice * slices);
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
    let lateness = ticker.finish().await;
    Ok(Measurement {
        errors: totals.errors(),
        error_samples: totals.error_samples().to_vec(),
        wall_secs,
        cpu_secs: (process::cpu_time() - cpu_start).as_secs_f64(),
        operations,
        lateness,
        ..Measurement::default()
    })
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::driver::drive;
    use crate::test_support::{Fake, RequiredOnly, run, sample_cell};

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
        let err = drive(&cell, Arc::new(RequiredOnly)).await.unwrap_err();
        assert!(
            format!("{err:#}").contains("does not implement the orm"),
            "{err:#}"
        );
    }
}
