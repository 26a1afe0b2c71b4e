//! The names the lab knows: workloads, profiles and knob values. Approaches are lab-core's [`ApproachName`], each
//! with its properties (runner, variant, server, workloads).
//!
//! Kept here rather than derived from the runners so that a typo is rejected before anything is built or run,
//! with the list of valid names in the message.

use quicklite_lab_core::ApproachName;

/// Every built-in workload, in the order messages list them.
pub const WORKLOADS: &[&str] = &[
    "point-read",
    "insert",
    "mixed",
    "write-read",
    "multi-db",
    "queue",
    "http",
    "orm",
    "throughput",
    LONG_READ,
    HELD_TX,
];

/// The workloads a run measures when not told which ([`WORKLOADS`] but `long-read` and `held-tx`, measured only
/// when named: each asks one question of a few approaches — those that run reads on their callers' threads, those
/// that offer a transaction held across `.await` — with knobs of its own), in the order the matrix runs them.
pub const DEFAULT_WORKLOADS: &[&str] = &[
    "point-read",
    "insert",
    "mixed",
    "write-read",
    "multi-db",
    "queue",
    "http",
    "orm",
    "throughput",
];

/// Point reads through one call site, one in N of them long, beside a writer: what a read that turns long does to
/// the runtime and to the writes.
pub const LONG_READ: &str = "long-read";

/// A write transaction thinking between its statements (read, think, write back, log), held open by each approach's
/// own means: quicklite's `begin()` and its closure form, sqlx's `begin()`.
pub const HELD_TX: &str = "held-tx";

/// Point reads and updates by primary key, in a share of writes the run chooses (`--write-ratio`).
pub const MIXED: &str = "mixed";

/// The ORM benchmark's operations, one at a time (seed 003).
pub const ORM: &str = "orm";

/// The axum service with a single-row endpoint under load from another process (seed 000).
pub const HTTP: &str = "http";

/// The durable job queue: publish, claim, ack (seed 002).
pub const QUEUE: &str = "queue";

/// Write throughput after Turso's harness: 100 rows per transaction, think time inside it, `synchronous=FULL`.
pub const THROUGHPUT: &str = "throughput";

/// The workload with many databases, paced writers and JOIN readers (seed 004).
pub const MULTI_DB: &str = "multi-db";

/// PRAGMA profiles a runner understands.
pub const PROFILES: &[&str] = &["server", "sqlite-default"];

/// `synchronous` values; `default` on the command line means "keep the profile's value".
pub const SYNCHRONOUS: &[&str] = &["off", "normal", "full", "extra"];

/// Connection mutex modes (`SQLITE_OPEN_NOMUTEX`, `SQLITE_OPEN_FULLMUTEX`).
pub const MUTEX_MODES: &[&str] = &["nomutex", "fullmutex"];

/// `multi-db` write modes: the delay blocking inside each write (seed 004), or one write per delay.
pub const WRITE_MODES: &[&str] = &["blocking", "paced"];

/// The approach ratios are computed against unless the user names another: the most widely used async wrapper.
pub const DEFAULT_BASELINE: ApproachName = ApproachName::TokioRusqlite;

/// `a, b, c` — for error messages listing valid names.
pub fn list(names: &[&str]) -> String {
    names.join(", ")
}
