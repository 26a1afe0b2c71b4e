//! The names the lab knows: workloads, approaches, profiles and knob values.
//!
//! Kept here rather than derived from the runners so that a typo is rejected before anything is built or run,
//! with the list of valid names in the message.

/// Workloads, in the order the matrix runs them.
pub const WORKLOADS: &[&str] = &[
    "point-read",
    "insert",
    "mixed",
    "write-read",
    "multi-db",
    "queue",
    "http",
    "orm",
];

/// The ORM benchmark's operations, one at a time (seed 003).
pub const ORM: &str = "orm";

/// The axum service with a single-row endpoint under load from another process (seed 000).
pub const HTTP: &str = "http";

/// The durable job queue: publish, claim, ack (seed 002).
pub const QUEUE: &str = "queue";

/// The workload with many databases, paced writers and JOIN readers (seed 004).
pub const MULTI_DB: &str = "multi-db";

/// Approaches, in the order the matrix runs them (the blocking patterns first, quicklite last).
pub const APPROACHES: &[&str] = &[
    "direct-blocking",
    "spawn-blocking",
    "per-request",
    "tokio-rusqlite",
    "deadpool-sqlite",
    "async-sqlite",
    "sqlx",
    "quicklite",
];

/// Approaches that need a server the run provides (`--with-postgres` or `--postgres-url`): never in the default
/// list, and only for the workloads they implement.
pub const SERVER_APPROACHES: &[&str] = &["postgres"];

/// Whether `name` is an approach the lab knows, built in or server-backed.
pub fn is_approach(name: &str) -> bool {
    APPROACHES.contains(&name) || SERVER_APPROACHES.contains(&name)
}

/// PRAGMA profiles a runner understands.
pub const PROFILES: &[&str] = &["server", "sqlite-default"];

/// `synchronous` values; `default` on the command line means "keep the profile's value".
pub const SYNCHRONOUS: &[&str] = &["off", "normal", "full", "extra"];

/// Connection mutex modes (`SQLITE_OPEN_NOMUTEX`, `SQLITE_OPEN_FULLMUTEX`).
pub const MUTEX_MODES: &[&str] = &["nomutex", "fullmutex"];

/// `multi-db` write modes: the delay blocking inside each write (seed 004), or one write per delay.
pub const WRITE_MODES: &[&str] = &["blocking", "paced"];

/// The approach ratios are computed against unless the user names another: the most widely used async wrapper.
pub const DEFAULT_BASELINE: &str = "tokio-rusqlite";

/// Approaches that do not implement a workload, which the matrix leaves out of that workload's cells: sqlx's
/// runner has no queue operations, no HTTP service and no ORM suite.
pub fn unsupported(workload: &str) -> &'static [&'static str] {
    match workload {
        QUEUE | HTTP | ORM => &["sqlx"],
        _ => &[],
    }
}

/// Whether `approach` implements `workload`.
pub fn supports(workload: &str, approach: &str) -> bool {
    if SERVER_APPROACHES.contains(&approach) {
        return workload == ORM;
    }
    !unsupported(workload).contains(&approach)
}

/// `a, b, c` — for error messages listing valid names.
pub fn list(names: &[&str]) -> String {
    names.join(", ")
}
