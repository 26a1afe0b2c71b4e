//! A result's ranking key: reads and writes per second, queue cycles per second, or ORM suites per second from
//! the suite's time.

use quicklite_lab_core::{Cell, CellResult, Workload};

/// Whether a cell runs the ORM suite, whose result is a suite time rather than a rate.
pub(super) fn is_orm(cell: &Cell) -> bool {
    cell.workload == Workload::Orm.name()
}

/// The ranking key of a result: reads + writes per second, full queue cycles per second, or ORM suites per
/// second (one suite: each operation once, without a wrapping transaction).
pub fn throughput(result: &CellResult) -> f64 {
    if is_orm(&result.cell) {
        return orm_suite_us(result, false)
            .filter(|us| *us > 0.0)
            .map_or(0.0, |us| 1e6 / us);
    }
    match result.operation("cycle") {
        Some(cycle) => cycle.stats.ops_per_sec,
        None => result.reads.ops_per_sec + result.writes.ops_per_sec,
    }
}

/// The ORM suite's time in microseconds: the sum of every operation's mean, without (`txn = false`) or with a
/// wrapping transaction; `None` when an operation has no measurement, or for another workload (the queue's named
/// operations are no suite).
pub fn orm_suite_us(result: &CellResult, txn: bool) -> Option<f64> {
    if !is_orm(&result.cell) {
        return None;
    }
    let ops: Vec<_> = result
        .operations
        .iter()
        .filter(|o| o.name.ends_with(" (txn)") == txn)
        .collect();
    if ops.is_empty() || ops.iter().any(|o| o.stats.ops == 0) {
        return None;
    }
    Some(ops.iter().map(|o| o.stats.avg_us).sum())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixtures;

    #[test]
    fn only_an_orm_result_has_a_suite_time() {
        let results = fixtures::results();
        let workload = |name: &str| results.iter().find(|r| r.cell.workload == name).unwrap();
        assert!(orm_suite_us(workload("orm"), false).is_some());
        // The queue's publish, claim, ack and cycle are named operations too, but no suite (the progress line
        // called them "ORM suite").
        let queue = workload("queue");
        assert!(!queue.operations.is_empty());
        assert_eq!(orm_suite_us(queue, false), None);
        assert_eq!(orm_suite_us(queue, true), None);
    }
}
