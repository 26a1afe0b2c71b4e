//! A cell: one measured combination of workload × approach × settings, sent to a runner as JSON.

use serde::{Deserialize, Serialize};

/// One measured combination of workload, approach and knobs.
///
/// The orchestrator serializes a `Cell` to JSON and writes it to a fresh runner process's standard input;
/// the runner prints one [`crate::CellResult`] as JSON on standard output. Every field is a column in the
/// results, so a number never travels without the settings that produced it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Cell {
    /// Workload name: `point-read`, `insert`, `mixed`, `multi-db` (see [`crate::Workload`]).
    pub workload: String,
    /// Approach name, e.g. `quicklite`, `tokio-rusqlite`, `direct-blocking`.
    pub approach: String,
    /// Measured time, after the warm-up.
    pub duration_ms: u64,
    /// Time run before measuring starts; its operations are not counted.
    pub warmup_ms: u64,
    /// Concurrent client tasks issuing operations (for `multi-db`: ignored, see [`MultiDb`]).
    pub concurrency: u32,
    /// Tokio worker threads of the runner's runtime.
    pub worker_threads: u32,
    /// PRAGMA profile: `server` (WAL, tuned) or `sqlite-default` (no PRAGMA touched).
    pub profile: String,
    /// `synchronous` override (`off`, `normal`, `full`); `None` keeps the profile's value.
    pub synchronous: Option<String>,
    /// SQLite memory statistics (`SQLITE_CONFIG_MEMSTATUS`) on or off, set before SQLite initializes.
    pub memstatus: bool,
    /// Connection mutex mode: `nomutex` (multi-thread) or `fullmutex` (serialized).
    pub mutex: String,
    /// Rows in the seeded table (`point-read`, `mixed`).
    pub rows: u64,
    /// Settings of the `multi-db` workload; `None` for the others.
    pub multi_db: Option<MultiDb>,
    /// Directory where the runner creates its database files (a fresh, empty directory per cell).
    pub dir: String,
    /// Seed for the operation mix and key choice, so runs are repeatable.
    pub seed: u64,
}

/// Settings of the `multi-db` workload (seed 004).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MultiDb {
    /// Number of databases.
    pub num_databases: u32,
    /// Reader tasks per database, each running the JOIN query in a loop.
    pub readers: u32,
    /// Delay of the single writer per database between writes, in milliseconds; the delay is spent
    /// *inside* the write (blocking the way seed 004's does, simulating a slow writer).
    pub write_delay_ms: u64,
}
