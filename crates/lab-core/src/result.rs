//! What a runner reports for one cell.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::cell::Cell;

/// The outcome of one cell, printed by a runner as one JSON document on standard output.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CellResult {
    /// The cell exactly as the runner received it.
    pub cell: Cell,
    /// `None` when the cell ran to completion; otherwise why it did not (runner crash, timeout, set-up error).
    /// A failed cell still carries whatever was measured and its environment, if known.
    pub failure: Option<String>,
    /// Read operations (point reads, JOIN queries), counted after the warm-up.
    pub reads: OpStats,
    /// Write operations (inserts, updates), counted after the warm-up.
    pub writes: OpStats,
    /// For workloads with a paced writer (`multi-db`): writes expected from the pacing vs completed.
    pub write_completion: Option<Completion>,
    /// Operations that returned an error (not counted in `reads` / `writes`).
    pub errors: u64,
    /// The first few distinct error messages, for the report.
    pub error_samples: Vec<String>,
    /// Measured wall-clock time in seconds (excluding the warm-up).
    pub wall_secs: f64,
    /// User + system CPU time of the runner process during the measured window, in seconds.
    pub cpu_secs: f64,
    /// OS threads of the runner process at the end of the measured window.
    pub threads: Option<u64>,
    /// Resident memory of the runner process at the end of the measured window, in bytes.
    pub rss_bytes: Option<u64>,
    /// Databases with open connections at the end of the measured window, if the approach reports it
    /// (`rss_bytes / open_databases` is the memory an open database costs, the lab's own tasks included).
    #[serde(default)]
    pub open_databases: Option<u64>,
    /// Times databases were opened since the approach started (set-up included), if the approach reports it:
    /// the number of databases when each opens once; more when a capped registry closes and reopens them.
    #[serde(default)]
    pub database_opens: Option<u64>,
    /// Named operations with their own statistics (the `queue` workload: `publish`, `claim`, `ack` and the whole
    /// `cycle`); empty for the other workloads.
    #[serde(default)]
    pub operations: Vec<NamedOp>,
    /// Heap allocations (Rust's global allocator, every thread of the runner) during the measured window, when the
    /// runner counts them (`queue`); `None` when not measured.
    #[serde(default)]
    pub window_allocations: Option<u64>,
    /// Bytes those allocations requested.
    #[serde(default)]
    pub window_alloc_bytes: Option<u64>,
    /// How late a task on the runner's tokio runtime was woken during the measured window: a ticker due every
    /// millisecond beside the workload ([`Lateness`]). It tells an approach
    /// that keeps the runtime's workers (SQLite called on them) from one that leaves them free. `None` from runners
    /// that do not measure it (Go, Node) and in results written before it existed.
    #[serde(default)]
    pub lateness: Option<Lateness>,
    /// Process CPU time (user + system, every thread of the runner) per operation completed in the measured
    /// window, in microseconds: [`CellResult::cpu_secs`] over the workload's operations (reads and writes; the
    /// queue's cycles; the ORM suite's operations; `throughput`'s transactions). What a request costs the machine
    /// beside what it costs the caller in latency. `None` when the window completed no operation, from runners
    /// that do not report it, and in results written before it existed.
    #[serde(default)]
    pub cpu_per_op_us: Option<f64>,
    /// The runner's CPU time in a short window after the measured one, with the approach still open but sent no
    /// request ([`IdleCpu`]): what an approach whose threads stay awake costs a service in its quiet hours.
    /// `None` from runners that do not measure it and in results written before it existed.
    #[serde(default)]
    pub idle_cpu: Option<IdleCpu>,
    /// What an open-loop cell ([`Cell::rate`]) offered and what came of it: requests due, dropped, unfinished,
    /// the rate achieved, and latency from each request's scheduled time. `None` for a closed-loop cell, and then
    /// not written, so a closed-loop result reads as it always did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub open_loop: Option<OpenLoop>,
    /// Where and with what the number was obtained.
    pub env: Environment,
}

impl CellResult {
    /// The named operation `name`, if the cell measured one.
    pub fn operation(&self, name: &str) -> Option<&NamedOp> {
        self.operations.iter().find(|op| op.name == name)
    }
}

/// How late a ticker on the runner's tokio runtime, due every millisecond, fired during the measured window
/// ([`crate::TICK`]; the driver runs the ticker beside every workload).
///
/// The baseline is not zero: tokio's timer works in whole milliseconds, so on an idle runtime ticks are 0–2 ms
/// late (p50 anywhere from about 0.5 to 1.5 ms from one run to the next, p99 under about 2 ms), a little more
/// where the runner's threads keep every core busy; tens of milliseconds mean the approach kept the runtime's
/// workers, or its timer, from running.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Lateness {
    /// Median lateness of a tick, in microseconds.
    pub p50_us: f64,
    /// 99th percentile of the ticks' lateness, in microseconds.
    pub p99_us: f64,
    /// 99.9th percentile of the ticks' lateness, in microseconds: one tick in a thousand, a millisecond of stall in
    /// every second of the window. `None` in results written before it was reported.
    #[serde(default)]
    pub p999_us: Option<f64>,
    /// The latest tick's lateness, in microseconds.
    pub max_us: f64,
    /// Ticks measured: one per millisecond of the window.
    pub ticks: u64,
}

/// What an open-loop cell offered and what came of it, counted by each request's scheduled time: a request due
/// inside the measured window counts, whenever it finished.
///
/// `due = issued + dropped` and `issued = completed + failed + unfinished`. Latency runs from the instant a
/// request was due, not from when it was handed to the runtime, so time spent waiting to be sent counts (no
/// coordinated omission); `send_lateness` says how late the schedule handed requests over.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct OpenLoop {
    /// Requests the schedule made due inside the window: the rate times the window.
    pub due: u64,
    /// Requests handed to the runtime (each its own task).
    pub issued: u64,
    /// Requests not sent because the bound of requests in flight ([`Cell::concurrency`]) was reached when they
    /// were due.
    pub dropped: u64,
    /// Issued requests that succeeded.
    pub completed: u64,
    /// Issued requests that returned an error.
    pub failed: u64,
    /// Issued requests still in flight when the driver stopped waiting for them after the window.
    pub unfinished: u64,
    /// Completed requests per second of the window.
    pub achieved_per_sec: f64,
    /// Median latency from the scheduled time, in microseconds (every completed request, reads and writes).
    pub p50_us: f64,
    /// 99th percentile latency from the scheduled time, in microseconds.
    pub p99_us: f64,
    /// 99.9th percentile latency from the scheduled time, in microseconds.
    pub p999_us: f64,
    /// Longest latency from the scheduled time, in microseconds.
    pub max_us: f64,
    /// Median of how late the schedule handed a request to the runtime after its due time, in microseconds.
    pub send_lateness_p50_us: f64,
    /// 99th percentile of that lateness, in microseconds.
    pub send_lateness_p99_us: f64,
}

/// The runner's CPU time while the approach sat idle: opened, warmed by the cell, sent nothing
/// ([`crate::IDLE_WINDOW`] after the measured window; the driver measures it after every workload).
///
/// Operations still in flight when the window closed finish inside it (a client task's last operation; the
/// threads of the ceiling finishing their batch), so it starts with the approach's own wind-down: the spinning of a
/// thread that waits for the next request is what it is there to show.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct IdleCpu {
    /// Length of the idle window, in seconds.
    pub secs: f64,
    /// User + system CPU time of the runner process during it, in seconds.
    pub cpu_secs: f64,
}

impl IdleCpu {
    /// The CPU used as a share of one core: `1.0` is one core kept busy the whole window.
    pub fn core_share(&self) -> f64 {
        if self.secs > 0.0 {
            self.cpu_secs / self.secs
        } else {
            0.0
        }
    }
}

/// One named operation of a workload, e.g. the queue's `claim`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct NamedOp {
    /// `publish`, `claim`, `ack` or `cycle`.
    pub name: String,
    /// Throughput and latency in the measured window (operations of every client task).
    pub stats: OpStats,
    /// Heap allocations per operation, counted around each of a run of operations issued one at a time after the
    /// window (every thread's allocations during the operation: the caller's future, channels, the approach's
    /// threads); `None` when the runner does not count allocations.
    #[serde(default)]
    pub allocs_per_op: Option<f64>,
    /// Bytes those allocations requested, per operation.
    #[serde(default)]
    pub alloc_bytes_per_op: Option<f64>,
}

/// Throughput and latency of one kind of operation.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct OpStats {
    /// Operations completed successfully in the measured window.
    pub ops: u64,
    /// `ops / wall_secs`.
    pub ops_per_sec: f64,
    /// Mean latency in microseconds.
    pub avg_us: f64,
    /// Median latency in microseconds.
    pub p50_us: f64,
    /// 99th percentile latency in microseconds.
    pub p99_us: f64,
    /// Maximum latency in microseconds.
    pub max_us: f64,
}

/// Writes a paced writer was expected to complete vs what it completed (seed 004's completion ratio).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Completion {
    /// `duration / write_delay × databases`.
    pub expected: u64,
    /// Writes acknowledged in the window.
    pub completed: u64,
    /// `completed / expected`, capped at 1.0.
    pub ratio: f64,
}

/// The settings and machine behind a number. A SQLite figure without these means nothing.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Environment {
    /// Runner program and version, e.g. `quicklite-runner 0.1.0`.
    pub runner: String,
    /// `sqlite_version()` of the linked SQLite.
    pub sqlite_version: String,
    /// `PRAGMA compile_options` of the linked SQLite.
    pub compile_options: Vec<String>,
    /// PRAGMAs in effect on the connection(s) used, read back from SQLite.
    pub pragmas: BTreeMap<String, String>,
    /// Versions of the crates under test (e.g. `tokio-rusqlite` → `0.8.0`, `rusqlite` → `0.41.1`).
    pub crate_versions: BTreeMap<String, String>,
    /// Whether SQLite memory statistics were actually off (not just requested), and how that was set.
    pub memstatus: String,
    /// CPU model name from `/proc/cpuinfo`.
    pub cpu_model: String,
    /// Logical CPUs available to the runner.
    pub cpus: u32,
    /// The runner's open-file limit (`RLIMIT_NOFILE`, soft) after raising it to the hard limit at start: with a
    /// few files per open database, it caps how many databases an approach can keep open.
    #[serde(default)]
    pub open_files_limit: Option<u64>,
    /// Nanoseconds for a cache line to go from one CPU to another and back, measured before the runner set the
    /// cell up ([`crate::core_round_trip_ns`]): on a virtual machine the host moves the CPUs between nearby and distant
    /// places, and every hand-off between threads costs what this measures.
    #[serde(default)]
    pub core_round_trip_before_ns: Option<f64>,
    /// The same, measured once the cell's runtime was shut down.
    #[serde(default)]
    pub core_round_trip_after_ns: Option<f64>,
    /// The allocator behind `malloc` in the runner ([`crate::process::allocator`]).
    #[serde(default)]
    pub allocator: Option<String>,
    /// Kernel release (`uname -r`).
    pub kernel: String,
    /// UTC time the cell started, RFC 3339.
    pub date: String,
}
