//! `quicklite-runner`: runs one lab cell for the approaches built on rusqlite 0.41 (direct-blocking,
//! spawn-blocking, per-request, async-sqlite, quicklite) and prints its result.
//!
//! Protocol (see `quicklite_lab_core::run_runner_main`): a cell as JSON on standard input, one result as JSON
//! on standard output; `--approaches` lists the approach names.

mod approaches;
mod sqlite;

use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Result;
use quicklite_lab_core::{
    Approach, ApproachName, Cell, Environment, Knobs, Measurement, Runner, RunnerProgram, Workload,
    drive, drive_ceiling,
};

use approaches::async_sqlite::AsyncSqlite;
use approaches::ceiling::Ceiling;
use approaches::ceiling_async::CeilingAsync;
use approaches::direct_blocking::DirectBlocking;
use approaches::per_request::PerRequest;
use approaches::postgres::Postgres;
use approaches::quicklite::Quicklite;
use approaches::spawn_blocking::SpawnBlocking;
use sqlite::{checkpointer, report, seed};

/// Counts heap allocations for the workloads that report them per operation (`queue`, seed 002); a relaxed load
/// per allocation otherwise.
#[global_allocator]
static ALLOCATOR: quicklite_lab_core::CountingAllocator = quicklite_lab_core::CountingAllocator;

fn main() -> ExitCode {
    quicklite_lab_core::run_runner_main(QuickliteRunner)
}

/// The runner of this crate's approaches.
struct QuickliteRunner;

impl Runner for QuickliteRunner {
    fn name(&self) -> String {
        format!("quicklite-runner {}", env!("CARGO_PKG_VERSION"))
    }

    fn approaches(&self) -> Vec<ApproachName> {
        RunnerProgram::Quicklite.approaches()
    }

    async fn run(
        &self,
        approach: ApproachName,
        cell: &Cell,
        env: &mut Environment,
    ) -> Result<Measurement> {
        let knobs = Knobs::from_cell(cell)?;
        let workload = Workload::of_cell(cell)?;
        if approach == ApproachName::Postgres {
            // A server of its own: no SQLite set-up, no SQLite file.
            let postgres = Postgres::open(cell, workload, env).await?;
            return drive(cell, Arc::new(postgres)).await;
        }

        // Process-wide, before the first connection of the process (seeding included).
        let is_quicklite = approach.base() == ApproachName::Quicklite;
        let memstatus_request = if is_quicklite {
            env.memstatus = approaches::quicklite::configure(&knobs);
            None
        } else {
            Some(report::configure_memstatus(knobs.memstatus))
        };

        seed::seed_databases(cell, workload, &knobs)?;
        if workload == Workload::Throughput {
            checkpointer::start(&workload.database_path(cell, 0), &knobs)?;
        }

        match approach {
            ApproachName::DirectBlocking => {
                let direct = DirectBlocking::open(cell, workload, &knobs, env)?;
                measure(cell, env, memstatus_request, Arc::new(direct)).await
            }
            ApproachName::SpawnBlocking => {
                let spawn = SpawnBlocking::open(cell, workload, &knobs, env)?;
                measure(cell, env, memstatus_request, Arc::new(spawn)).await
            }
            ApproachName::PerRequest => {
                let per_request = PerRequest::open(cell, workload, &knobs, env)?;
                measure(cell, env, memstatus_request, Arc::new(per_request)).await
            }
            ApproachName::AsyncSqlite => {
                let pool = AsyncSqlite::open(cell, workload, &knobs, env).await?;
                measure(cell, env, memstatus_request, Arc::new(pool)).await
            }
            _ if is_quicklite => {
                let quicklite =
                    Arc::new(Quicklite::open(approach, cell, workload, &knobs, env).await?);
                let measured = measure(cell, env, memstatus_request, quicklite.clone()).await;
                quicklite.log_metrics();
                measured
            }
            ApproachName::CeilingAsync => {
                let ceiling = CeilingAsync::open(cell, workload, &knobs, env)?;
                measure(cell, env, memstatus_request, Arc::new(ceiling)).await
            }
            ApproachName::Ceiling => {
                // The first thread's connection, opened here to describe the settings in effect.
                let first = Ceiling::open(cell, workload, &knobs)?;
                first.describe(env)?;
                if let Some(request) = memstatus_request {
                    env.memstatus = report::memstatus_outcome(request);
                }
                let mut first = Some(first);
                drive_ceiling(cell, move || match first.take() {
                    Some(first) => Ok(first),
                    None => Ceiling::open(cell, workload, &knobs),
                })
                .await
            }
            other => anyhow::bail!("approach `{other}` is listed but not wired up"),
        }
    }
}

/// Records the memory-statistics outcome (now that connections are open), then drives the cell.
async fn measure<A: Approach>(
    cell: &Cell,
    env: &mut Environment,
    memstatus_request: Option<report::MemstatusRequest>,
    approach: Arc<A>,
) -> Result<Measurement> {
    if let Some(request) = memstatus_request {
        env.memstatus = report::memstatus_outcome(request);
    }
    drive(cell, approach).await
}
