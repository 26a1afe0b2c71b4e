//! The lab behind `quicklite bench`: it turns options into a matrix of cells, runs each cell in a fresh runner
//! process, stores every result the moment it exists, and draws the reports.
//!
//! # Design
//!
//! A [`Cell`] goes to a runner as JSON on stdin and a
//! [`CellResult`] comes back on stdout, so process-wide SQLite state never leaks
//! from one cell into the next and a runner may link any SQLite binding (docs/design.md, "Lab architecture").
//! A runner that crashes, hangs or prints garbage becomes a failed result and the run goes on. After every cell
//! the CSV, JSON and reports are rewritten atomically, so an interrupted run keeps what it measured. The CSV
//! carries the environment too, so [`read_csv`] + [`write_reports`] redraw every report from it alone.
//!
//! This crate has no SQLite dependency: it only starts programs and reads what they print.
//!
//! # Example
//!
//! ```no_run
//! use quicklite_lab::{ApproachName, BenchOptions, ExecOptions, ResultStore, Runners, RunnerSetup, Silent};
//!
//! # fn main() -> Result<(), quicklite_lab::LabError> {
//! let options = BenchOptions { approaches: vec![ApproachName::Quicklite], ..BenchOptions::quick() };
//! let cells = quicklite_lab::build_matrix(&options)?;
//! let setup = RunnerSetup { build: true, ..RunnerSetup::default() };
//! let runners = Runners::resolve(&options.approaches, &setup)?;
//! let mut store = ResultStore::create("results/example".as_ref(), ApproachName::TokioRusqlite)?;
//! quicklite_lab::run_all(&cells, &runners, &ExecOptions::default(), &mut store, &mut Silent)?;
//! # Ok(())
//! # }
//! ```
#![deny(missing_docs)]

mod atomic;
pub mod build_profiles;
pub mod catalog;
mod clock;
mod environment;
mod error;
mod execute;
pub mod export;
#[cfg(test)]
mod fixtures;
pub mod format;
mod matrix;
mod options;
pub mod repetitions;
mod report;
mod row;
mod run;
mod runners;
pub mod seeds;
mod store;
mod summary;
pub mod wal_reset_bug;
pub mod workload_file;

pub use atomic::write_atomically;
pub use clock::{now_compact, now_rfc3339};
pub use environment::{EnvSummary, ProfilePragmas, RunnerEnv};
pub use error::{LabError, Result};
pub use execute::{ExecOptions, default_timeout, run_cell};
pub use export::{ExportFormat, Exporter};
pub use matrix::{build_matrix, interleave, validate};
pub use options::{BenchOptions, Variant, default_worker_threads};
pub use quicklite_lab_core::{ApproachName, Cell, CellResult, IDLE_WINDOW, PPM, Workload};
pub use report::{read_csv, write_reports};
pub use row::{COLUMNS, CsvRow};
pub use run::{Observer, Silent, cell_label, run_all};
pub use runners::{RunnerSetup, Runners, find_repo_root, query_approaches};
pub use store::ResultStore;
pub use summary::{Baseline, Failure, Row, Summary, Table, orm_suite_us, throughput};
pub use workload_file::WorkloadFile;
