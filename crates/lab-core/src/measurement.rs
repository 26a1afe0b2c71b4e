//! What driving a cell measured ([`Measurement`]), and how it becomes the [`CellResult`] a runner prints.
//!
//! The driver knows the operations and the process samples; only the runner knows its environment (SQLite
//! version, settings in effect), so the two halves meet here.

use crate::cell::Cell;
use crate::result::{
    CellResult, Completion, Environment, IdleCpu, Lateness, NamedOp, OpStats, OpenLoop,
};

/// What [`crate::drive`] measured; becomes a [`CellResult`] once the runner adds its environment.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Measurement {
    /// Reads in the window.
    pub reads: OpStats,
    /// Writes in the window.
    pub writes: OpStats,
    /// Paced writes expected vs completed (`multi-db` only).
    pub write_completion: Option<Completion>,
    /// Failed operations in the window.
    pub errors: u64,
    /// The first distinct error messages.
    pub error_samples: Vec<String>,
    /// Length of the measured window in seconds.
    pub wall_secs: f64,
    /// Process CPU time (user + system) spent in the window, in seconds.
    pub cpu_secs: f64,
    /// OS threads of the process at the end of the window.
    pub threads: Option<u64>,
    /// Resident memory at the end of the window, in bytes.
    pub rss_bytes: Option<u64>,
    /// Databases with open connections at the end of the window, as the approach reports it.
    pub open_databases: Option<u64>,
    /// Database opens since the approach started, as the approach reports it.
    pub database_opens: Option<u64>,
    /// Named operations (`queue`).
    pub operations: Vec<NamedOp>,
    /// Heap allocations in the window, if counted.
    pub window_allocations: Option<u64>,
    /// Bytes those allocations requested.
    pub window_alloc_bytes: Option<u64>,
    /// How late a 1 ms ticker on the runtime fired during the window; `None` when it was not measured.
    pub lateness: Option<Lateness>,
    /// Process CPU time per operation completed in the window, in microseconds; `None` until the driver fills it
    /// ([`Measurement::cpu_per_op_us_of_window`]) or when no operation completed.
    pub cpu_per_op_us: Option<f64>,
    /// The process's CPU time in the idle window after the measured one; `None` when it was not measured.
    pub idle_cpu: Option<IdleCpu>,
    /// What an open-loop cell offered and what came of it; `None` for a closed-loop cell.
    pub open_loop: Option<OpenLoop>,
}

impl Measurement {
    /// Operations the window completed, in the workload's own unit: the queue's cycles (its named `cycle`), reads
    /// plus writes where the workload counts them (`throughput`'s transactions, `http`'s requests, a custom
    /// workload's transactions, also named one by one), otherwise the ORM suite's named operations.
    pub fn operations_completed(&self) -> u64 {
        if let Some(cycle) = self.operations.iter().find(|op| op.name == "cycle") {
            return cycle.stats.ops;
        }
        match self.reads.ops + self.writes.ops {
            0 => self.operations.iter().map(|op| op.stats.ops).sum(),
            counted => counted,
        }
    }

    /// The window's CPU time over its operations, in microseconds; `None` when none completed.
    pub fn cpu_per_op_us_of_window(&self) -> Option<f64> {
        let ops = self.operations_completed();
        (ops > 0).then(|| self.cpu_secs * 1e6 / ops as f64)
    }
}

impl Measurement {
    /// The result of a cell that ran to completion.
    pub fn into_result(self, cell: Cell, env: Environment) -> CellResult {
        CellResult {
            cell,
            failure: None,
            reads: self.reads,
            writes: self.writes,
            write_completion: self.write_completion,
            errors: self.errors,
            error_samples: self.error_samples,
            wall_secs: self.wall_secs,
            cpu_secs: self.cpu_secs,
            threads: self.threads,
            rss_bytes: self.rss_bytes,
            open_databases: self.open_databases,
            database_opens: self.database_opens,
            operations: self.operations,
            window_allocations: self.window_allocations,
            window_alloc_bytes: self.window_alloc_bytes,
            lateness: self.lateness,
            cpu_per_op_us: self.cpu_per_op_us,
            idle_cpu: self.idle_cpu,
            open_loop: self.open_loop,
            env,
        }
    }
}

/// The result of a cell that could not run (unknown approach, set-up error), with the environment known so far.
pub fn failed_result(cell: Cell, env: Environment, failure: String) -> CellResult {
    let mut result = Measurement::default().into_result(cell, env);
    result.failure = Some(failure);
    result
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::sample_cell;

    #[test]
    fn failed_result_carries_the_message() {
        let cell = sample_cell("point-read", "nope");
        let result = failed_result(
            cell.clone(),
            Environment::default(),
            "unknown approach".into(),
        );
        assert_eq!(result.failure.as_deref(), Some("unknown approach"));
        assert_eq!(result.cell, cell);
        assert_eq!(result.reads.ops, 0);
    }

    #[test]
    fn lateness_is_carried_and_a_result_without_it_reads_as_not_measured() {
        let lateness = Lateness {
            p50_us: 640.0,
            p99_us: 1_900.0,
            p999_us: Some(2_050.0),
            max_us: 2_100.0,
            ticks: 2_000,
        };
        let measured = Measurement {
            lateness: Some(lateness),
            ..Measurement::default()
        };
        let result = measured.into_result(
            sample_cell("point-read", "quicklite"),
            Environment::default(),
        );
        assert_eq!(result.lateness, Some(lateness));
        // The Go and Node runners, and every result written before the ticker, have no `lateness`.
        let mut json = serde_json::to_value(&result).unwrap();
        json.as_object_mut().unwrap().remove("lateness");
        let back: CellResult = serde_json::from_value(json).unwrap();
        assert_eq!(back.lateness, None);
        assert_eq!(back.cell, result.cell);
    }

    #[test]
    fn cpu_per_op_counts_the_workloads_own_operations() {
        let ops = |n: u64| OpStats {
            ops: n,
            ..OpStats::default()
        };
        let named = |name: &str, n: u64| NamedOp {
            name: name.to_owned(),
            stats: ops(n),
            ..NamedOp::default()
        };
        let mixed = Measurement {
            reads: ops(900),
            writes: ops(100),
            cpu_secs: 0.5,
            ..Measurement::default()
        };
        assert_eq!(mixed.cpu_per_op_us_of_window(), Some(500.0));
        // The queue's unit is the cycle, not its three operations.
        let queue = Measurement {
            operations: ["publish", "claim", "ack", "cycle"]
                .map(|name| named(name, 250))
                .to_vec(),
            cpu_secs: 0.5,
            ..Measurement::default()
        };
        assert_eq!(queue.cpu_per_op_us_of_window(), Some(2_000.0));
        let orm = Measurement {
            operations: vec![named("select", 300), named("insert", 100)],
            cpu_secs: 0.4,
            ..Measurement::default()
        };
        assert_eq!(orm.cpu_per_op_us_of_window(), Some(1_000.0));
        // A custom workload's transactions are its reads and writes, named too: counted once.
        let custom = Measurement {
            reads: ops(300),
            writes: ops(100),
            operations: vec![named("page", 300), named("order", 100)],
            cpu_secs: 0.4,
            ..Measurement::default()
        };
        assert_eq!(custom.cpu_per_op_us_of_window(), Some(1_000.0));
        // No operation, no figure: a cell whose every operation failed costs nothing per operation it never did.
        let failed = Measurement {
            cpu_secs: 0.5,
            ..Measurement::default()
        };
        assert_eq!(failed.cpu_per_op_us_of_window(), None);
    }

    #[test]
    fn cpu_figures_are_carried_and_a_result_without_them_reads_as_not_measured() {
        let idle = IdleCpu {
            secs: 0.5,
            cpu_secs: 0.05,
        };
        let measured = Measurement {
            cpu_per_op_us: Some(12.5),
            idle_cpu: Some(idle),
            ..Measurement::default()
        };
        let result = measured.into_result(
            sample_cell("point-read", "quicklite"),
            Environment::default(),
        );
        assert_eq!(result.cpu_per_op_us, Some(12.5));
        assert_eq!(result.idle_cpu, Some(idle));
        assert!((idle.core_share() - 0.1).abs() < 1e-12);
        // Results written before these figures existed (and runners that do not report them) have neither.
        let mut json = serde_json::to_value(&result).unwrap();
        let object = json.as_object_mut().unwrap();
        object.remove("cpu_per_op_us");
        object.remove("idle_cpu");
        let back: CellResult = serde_json::from_value(json).unwrap();
        assert_eq!((back.cpu_per_op_us, back.idle_cpu), (None, None));
        assert_eq!(back.cell, result.cell);
    }
}
