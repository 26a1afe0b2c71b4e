//! `runner-rusqlite040`: runs one lab cell for the approaches built on rusqlite 0.40 — the real
//! `tokio-rusqlite` 0.8 and `deadpool-sqlite` 0.14 crates — and prints its result.
//!
//! Protocol (see `quicklite_lab_core::run_runner_main`): a cell as JSON on standard input, one result as JSON
//! on standard output; `--approaches` lists the approach names.

mod deadpool;
// The SQL-running code of quicklite-runner, compiled here against rusqlite 0.40 so every approach runs the
// same statements the same way.
#[path = "../../../crates/runner/src/sqlite/mod.rs"]
mod sqlite;
mod tokio_rusqlite_conn;

use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Result;
use quicklite_lab_core::{
    Approach, ApproachName, Cell, Environment, Knobs, Measurement, Runner, RunnerProgram, Workload,
    drive,
};

use sqlite::{checkpointer, report, seed};

/// Counts heap allocations for the workloads that report them per operation (`queue`, seed 002); a relaxed load
/// per allocation otherwise.
#[global_allocator]
static ALLOCATOR: quicklite_lab_core::CountingAllocator = quicklite_lab_core::CountingAllocator;

fn main() -> ExitCode {
    quicklite_lab_core::run_runner_main(Rusqlite040Runner)
}

/// The runner of this workspace's approaches.
struct Rusqlite040Runner;

impl Runner for Rusqlite040Runner {
    fn name(&self) -> String {
        format!("runner-rusqlite040 {}", env!("CARGO_PKG_VERSION"))
    }

    fn approaches(&self) -> Vec<ApproachName> {
        RunnerProgram::Rusqlite040.approaches()
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
        if workload == Workload::Throughput {
            checkpointer::start(&workload.database_path(cell, 0), &knobs)?;
        }
        match approach {
            ApproachName::TokioRusqlite => {
                let connection =
                    tokio_rusqlite_conn::TokioRusqlite::open(cell, workload, &knobs, env).await?;
                measure(cell, env, memstatus, connection).await
            }
            ApproachName::DeadpoolSqlite => {
                let pool = deadpool::DeadpoolSqlite::open(cell, workload, &knobs, env).await?;
                measure(cell, env, memstatus, pool).await
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
