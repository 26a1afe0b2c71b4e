//! `runner-trailbase`: runs one lab cell for the approach built on rusqlite 0.36 — the real `trailbase-sqlite` 0.3
//! crate — and prints its result.
//!
//! Protocol (see `quicklite_lab_core::run_runner_main`): a cell as JSON on standard input, one result as JSON
//! on standard output; `--approaches` lists the approach names.

// The SQL-running code of quicklite-runner, compiled here against rusqlite 0.36: seeding, opening a connection
// with the cell's knobs, the `multi-db` write and the environment report. The other workloads' statements run
// through trailbase-sqlite's own methods, so part of the shared code goes unused here.
#[allow(
    dead_code,
    reason = "trailbase-sqlite runs most statements through its own methods, not the shared `ops`"
)]
#[path = "../../../crates/runner/src/sqlite/mod.rs"]
mod sqlite;
mod trailbase_conn;

use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Result;
use quicklite_lab_core::{
    Approach, ApproachName, Cell, Environment, Knobs, Measurement, Runner, RunnerProgram, Workload,
    drive,
};

use sqlite::{report, seed};

/// Counts heap allocations for the workloads that report them per operation; a relaxed load per allocation
/// otherwise.
#[global_allocator]
static ALLOCATOR: quicklite_lab_core::CountingAllocator = quicklite_lab_core::CountingAllocator;

fn main() -> ExitCode {
    quicklite_lab_core::run_runner_main(TrailbaseRunner)
}

/// The runner of this workspace's approach.
struct TrailbaseRunner;

impl Runner for TrailbaseRunner {
    fn name(&self) -> String {
        format!("runner-trailbase {}", env!("CARGO_PKG_VERSION"))
    }

    fn approaches(&self) -> Vec<ApproachName> {
        RunnerProgram::Trailbase.approaches()
    }

    async fn run(
        &self,
        approach: ApproachName,
        cell: &Cell,
        env: &mut Environment,
    ) -> Result<Measurement> {
        let knobs = Knobs::from_cell(cell)?;
        let workload = Workload::of_cell(cell)?;
        // Process-wide, before the first connection of the process (seeding included).
        let memstatus = report::configure_memstatus(knobs.memstatus);
        seed::seed_databases(cell, workload, &knobs)?;
        match approach {
            ApproachName::TrailbaseSqlite => {
                let connection =
                    trailbase_conn::TrailbaseSqlite::open(cell, workload, &knobs, env).await?;
                measure(cell, env, memstatus, connection).await
            }
            other => anyhow::bail!("approach `{other}` is listed but not wired up"),
        }
    }
}

/// Records the memory-statistics outcome (now that connections are open), then drives the cell.
async fn measure<A: Approach>(
    cell: &Cell,
    env: &mut Environment,
    memstatus: report::MemstatusRequest,
    approach: A,
) -> Result<Measurement> {
    env.memstatus = report::memstatus_outcome(memstatus);
    drive(cell, Arc::new(approach)).await
}
