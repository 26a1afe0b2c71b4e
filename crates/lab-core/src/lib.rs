//! The lab's shared vocabulary, with no SQLite dependency.
//!
//! Every measured cell (workload × approach × settings) runs in a fresh *runner* process: the orchestrator
//! (`quicklite bench`) writes a [`Cell`] as JSON to the runner's standard input, and the runner prints a
//! [`CellResult`] as JSON on its standard output. Runners built against other rusqlite / libsqlite3-sys versions
//! (peer crates) live in their own workspaces and depend on this crate by path, so every approach is measured
//! through the same workload code.

mod cell;
mod result;

pub use cell::{Cell, MultiDb};
pub use result::{CellResult, Completion, Environment, OpStats};
