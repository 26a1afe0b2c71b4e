//! `runner-turso`: runs one lab cell for the approaches built on the `turso` crate — Turso, a rewrite of SQLite in
//! Rust with a native async API — and prints its result.
//!
//! Protocol (see `quicklite_lab_core::run_runner_main`): a cell as JSON on standard input, one result as JSON
//! on standard output; `--approaches` lists the approach names.
//!
//! Turso links no C SQLite, so none of the code the Rust runners share (`crates/runner/src/sqlite`, on rusqlite)
//! runs here: this runner opens, seeds and reports with Turso itself ([`database`]), and runs the workloads'
//! statements from `quicklite_lab_core::sql` through its own connections ([`approach`]).

mod approach;
mod database;
mod pool;

use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Result;
use quicklite_lab_core::{
    ApproachName, Cell, Environment, Knobs, Measurement, Runner, RunnerProgram, Workload, drive,
};

use database::Mode;

/// Counts heap allocations for the workloads that report them per operation (`queue`); a relaxed load per
/// allocation otherwise. Turso's allocations are Rust allocations, so they count too (unlike SQLite's `malloc`s in
/// the other runners).
#[global_allocator]
static ALLOCATOR: quicklite_lab_core::CountingAllocator = quicklite_lab_core::CountingAllocator;

fn main() -> ExitCode {
    quicklite_lab_core::run_runner_main(TursoRunner)
}

/// The runner of this workspace's approaches.
struct TursoRunner;

impl Runner for TursoRunner {
    fn name(&self) -> String {
        format!("runner-turso {}", env!("CARGO_PKG_VERSION"))
    }

    fn approaches(&self) -> Vec<ApproachName> {
        RunnerProgram::Turso.approaches()
    }

    async fn run(
        &self,
        approach: ApproachName,
        cell: &Cell,
        env: &mut Environment,
    ) -> Result<Measurement> {
        let knobs = Knobs::from_cell(cell)?;
        let workload = Workload::of_cell(cell)?;
        let mode = match approach {
            ApproachName::Turso => Mode::Wal,
            ApproachName::TursoMvcc => Mode::Mvcc,
            other => anyhow::bail!("approach `{other}` is listed but not wired up"),
        };
        env.memstatus = database::MEMSTATUS.to_owned();
        database::refuse_unsupported(cell, workload, &knobs)?;
        let db = database::open_and_seed(cell, workload, &knobs, mode).await?;
        database::facts(&db, &knobs, mode).await?.fill(env);
        database::check_statements(&db, cell, workload).await?;
        if workload == Workload::Throughput {
            database::start_checkpointer(db.clone())?;
        }
        let approach = approach::Turso::new(db, &knobs, mode);
        drive(cell, Arc::new(approach)).await
    }
}
