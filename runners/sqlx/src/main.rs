//! `runner-sqlx`: runs one lab cell for the `sqlx` approach (the real sqlx 0.9 `SqlitePool`) and prints its
//! result.
//!
//! Protocol (see `quicklite_lab_core::run_runner_main`): a cell as JSON on standard input, one result as JSON
//! on standard output; `--approaches` lists the approach names.

mod ffi;
mod pool;
mod positional;
mod seed;

use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Result;
use quicklite_lab_core::{
    ApproachName, Cell, Environment, Knobs, Measurement, Runner, RunnerProgram, Workload, drive,
};

fn main() -> ExitCode {
    quicklite_lab_core::run_runner_main(SqlxRunner)
}

include!(concat!(env!("OUT_DIR"), "/crate_versions.rs"));

/// The runner of the sqlx approach.
struct SqlxRunner;

impl Runner for SqlxRunner {
    fn name(&self) -> String {
        format!("runner-sqlx {}", env!("CARGO_PKG_VERSION"))
    }

    fn approaches(&self) -> Vec<ApproachName> {
        RunnerProgram::Sqlx.approaches()
    }

    async fn run(
        &self,
        _approach: ApproachName,
        cell: &Cell,
        env: &mut Environment,
    ) -> Result<Measurement> {
        let knobs = Knobs::from_cell(cell)?;
        let workload = Workload::of_cell(cell)?;
        // Process-wide, before the first connection of the process (seeding included).
        let memstatus_rc = ffi::configure_memstatus(knobs.memstatus);
        seed::seed_databases(cell, workload, &knobs).await?;
        let approach = pool::SqlxPool::open(cell, workload, &knobs, env).await?;
        env.crate_versions = CRATE_VERSIONS
            .iter()
            .map(|(n, v)| ((*n).to_string(), (*v).to_string()))
            .collect();
        env.memstatus = ffi::memstatus_outcome(knobs.memstatus, memstatus_rc);
        drive(cell, Arc::new(approach)).await
    }
}
