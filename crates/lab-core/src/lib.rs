//! The lab's shared vocabulary and machinery, with no SQLite dependency.
//!
//! Every measured cell (workload × approach × settings) runs in a fresh *runner* process: the orchestrator
//! (`quicklite bench`) writes a [`Cell`] as JSON to the runner's standard input, and the runner prints a
//! [`CellResult`] as JSON on its standard output. Runners built against other rusqlite / libsqlite3-sys versions
//! (peer crates) live in their own workspaces and depend on this crate by path, so every approach is measured
//! through the same workload code:
//!
//! - [`Workload`] and [`sql`] define the schema, the seed data and the statements, once;
//! - an approach implements [`Approach`] (how to run each kind of operation), and [`ApproachName`] names it and
//!   says what the lab needs to know of it (its [`RunnerProgram`], the workloads it implements);
//! - [`drive`] runs the client tasks, the warm-up and the measured window, with HDR histograms, and beside them a
//!   ticker that measures how late the runtime wakes a task ([`Lateness`]), the CPU each operation costs, and
//!   after the window the CPU the approach costs while idle ([`IdleCpu`]);
//! - [`run_runner_main`] is the whole `main` of a runner: stdin → runtime → [`Runner::run`] → stdout.
//!
//! ```no_run
//! use quicklite_lab_core::{ApproachName, Cell, Environment, Measurement, Runner, run_runner_main};
//!
//! struct MyRunner;
//!
//! impl Runner for MyRunner {
//!     fn name(&self) -> String {
//!         "my-runner 0.1.0".into()
//!     }
//!     fn approaches(&self) -> Vec<ApproachName> {
//!         vec![ApproachName::Quicklite]
//!     }
//!     async fn run(
//!         &self,
//!         approach: ApproachName,
//!         cell: &Cell,
//!         env: &mut Environment,
//!     ) -> anyhow::Result<Measurement> {
//!         // seed the database, open `approach` as `opened` (an `Approach`), then:
//!         // quicklite_lab_core::drive(cell, std::sync::Arc::new(opened)).await
//!         # let _ = (approach, cell, env);
//!         # unimplemented!()
//!     }
//! }
//!
//! fn main() -> std::process::ExitCode {
//!     run_runner_main(MyRunner)
//! }
//! ```

mod alloc;
mod approach;
mod approach_name;
mod cell;
mod custom;
mod data;
mod driver;
pub mod http_load;
mod idle;
mod knobs;
mod machine;
mod measurement;
pub mod orm;
mod pacing;
pub mod process;
mod result;
mod rng;
mod round_trip;
mod runner_main;
mod runner_program;
pub mod sql;
mod stats;
#[cfg(test)]
mod test_support;
mod think;
mod ticker;
mod timekeeper;

#[cfg(feature = "runner-testing")]
pub mod runner_testing;
mod workload;

pub use alloc::{AllocCount, CountingAllocator, allocations, start_counting, uncounted};
pub use approach::Approach;
pub use approach_name::{ApproachName, UnknownApproach};
pub use cell::{
    Cell, DEFAULT_BUILD_PROFILE, DEFAULT_WRITE_PPM, LongReads, MultiDb, PPM, WriteMode,
};
pub use custom::{
    Bound, CustomStatement, CustomWorkload, SeedColumn, SeedTable, Transaction, Values,
};
pub use data::{
    Block, ITEM_PAYLOAD_LEN, JOB_PAYLOAD_LEN, LEDGER_ACCOUNTS, LEDGER_SEED_BLOCKS, LedgerGenerator,
    NewItem, NewJob, Param, Statement, TRANSACTIONS_PER_BLOCK, item_seed,
};
pub use driver::{
    CeilingConnection, CeilingSnapshot, CeilingWrite, DRAIN_GRACE, LONG_READ, QUEUE_PROBE_CYCLES,
    drive, drive_ceiling,
};
pub use idle::IDLE_WINDOW;
pub use knobs::{Knobs, MutexMode, Pragma, Profile, REPORTED_PRAGMAS, SERVER_PRAGMAS};
pub use machine::{cpu_model, rfc3339_utc};
pub use measurement::{Measurement, failed_result};
pub use orm::OrmOp;
pub use pacing::Schedule;
pub use result::{
    CellResult, Completion, Environment, IdleCpu, Lateness, NamedOp, OpStats, OpenLoop,
};
pub use rng::Rng;
pub use round_trip::core_round_trip_ns;
pub use runner_main::{Runner, run_runner_main};
pub use runner_program::RunnerProgram;
pub use stats::{MAX_ERROR_SAMPLES, OpKind, TaskStats};
pub use think::await_think;
pub use ticker::TICK;
pub use workload::{
    LONG_READ_WRITE_PERIOD, THROUGHPUT_ROWS_PER_TRANSACTION, Workload, long_read_settings,
    multi_db_settings,
};
