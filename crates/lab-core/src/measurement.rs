//! What driving a cell measured ([`Measurement`]), and how it becomes the [`CellResult`] a runner prints.
//!
//! The driver knows the operations and the process samples; only the runner knows its environment (SQLite
//! version, settings in effect), so the two halves meet here.

use crate::cell::Cell;
use crate::result::{CellResult, Completion, Environment, Lateness, NamedOp, OpStats};

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
}
