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
    "throughput",
];

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

/// The approaches whose runners implement [`THROUGHPUT`]: those on rusqlite (this workspace's runner and the
/// tokio-rusqlite / deadpool-sqlite one).
pub const THROUGHPUT_APPROACHES: &[&str] = &[
    "direct-blocking",
    "spawn-blocking",
    "per-request",
    "tokio-rusqlite",
    "deadpool-sqlite",
    "async-sqlite",
    "quicklite",
    "quicklite-timeouts",
    "quicklite-writes-first",
    "quicklite-no-inline",
    "quicklite-subscribed",
    "quicklite-subscribed-100",
];

/// The workload with many databases, paced writers and JOIN readers (seed 004).
pub const MULTI_DB: &str = "multi-db";

/// The reference row: the workload's statements on one plain connection per core, synchronous, reads batched in one
/// transaction and writes grouped per commit — what the machine allows with no async hand-off. Tables show every
/// approach as a share of it. Only for single-row operations on one database ([`ceiling_supports`]).
pub const CEILING: &str = "ceiling";

/// Approaches, in the order the matrix runs them (the ceiling, the blocking patterns, quicklite last).
pub const APPROACHES: &[&str] = &[
    CEILING,
    "direct-blocking",
    "spawn-blocking",
    "per-request",
    "tokio-rusqlite",
    "deadpool-sqlite",
    "async-sqlite",
    "sqlx",
    "trailbase-sqlite",
    "quicklite",
];

/// Rust approaches whose runner needs more than the Rust toolchain to build: trailbase-sqlite turns on rusqlite's
/// `preupdate_hook`, whose bindings are generated at build time by bindgen, which needs libclang
/// (`scripts/install-test-deps.sh` installs it). Left out of `--quick`, whose command must work on a fresh machine.
pub const NEEDS_MORE_THAN_RUST: &[&str] = &["trailbase-sqlite"];

/// The Go drivers (`runners/go`): `database/sql` over mattn/go-sqlite3 (cgo) and over modernc.org/sqlite (pure
/// Go, seed 002's baseline), and zombiezen.com/go/sqlite's pool.
pub const GO_APPROACHES: &[&str] = &["go-mattn", "go-modernc", "go-zombiezen"];

/// The Node drivers (`runners/node`): better-sqlite3, and node:sqlite when the installed Node has it (seed 001).
pub const NODE_APPROACHES: &[&str] = &["node-better-sqlite3", "node-sqlite"];

/// Whether `name` is measured by a runner in another language (Go, Node).
pub fn is_other_language(name: &str) -> bool {
    GO_APPROACHES.contains(&name) || NODE_APPROACHES.contains(&name)
}

/// Approaches that need a server the run provides (`--with-postgres` or `--postgres-url`): never in the default
/// list, and only for the workloads they implement.
pub const SERVER_APPROACHES: &[&str] = &["postgres"];

/// Variants of an approach, measured only when named: `quicklite-timeouts` is quicklite with a read and a write
/// timeout on every request (`Builder::read_timeout`, `Builder::write_timeout`), none of them met, for the cost
/// of keeping deadlines against `quicklite` in the same run; `quicklite-writes-first` is quicklite with its read
/// threads three nice steps below its write threads (`read_thread_nice(3)`); `quicklite-no-inline` is quicklite with
/// every read handed to its reader threads (`inline_reads(false)`), for what reads on their callers' threads are
/// worth; `quicklite-subscribed` and `quicklite-subscribed-100` are quicklite with one and a hundred subscribers to
/// its change notices, for what notifications cost.
pub const VARIANT_APPROACHES: &[&str] = &[
    "quicklite-timeouts",
    "quicklite-writes-first",
    "quicklite-no-inline",
    "quicklite-subscribed",
    "quicklite-subscribed-100",
];

/// Whether `name` is an approach the lab knows, built in, in another language, server-backed or a variant.
pub fn is_approach(name: &str) -> bool {
    APPROACHES.contains(&name)
        || VARIANT_APPROACHES.contains(&name)
        || GO_APPROACHES.contains(&name)
        || NODE_APPROACHES.contains(&name)
        || SERVER_APPROACHES.contains(&name)
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

/// Approaches that do not implement a workload, which the matrix leaves out of that workload's cells: the runners
/// of sqlx and trailbase-sqlite have no queue operations, no HTTP service and no ORM suite.
pub fn unsupported(workload: &str) -> &'static [&'static str] {
    match workload {
        QUEUE | HTTP | ORM => &["sqlx", "trailbase-sqlite"],
        _ => &[],
    }
}

/// Whether the [`CEILING`] is defined for `workload` (the driver's [`quicklite_lab_core::CEILING_WORKLOADS`]).
pub fn ceiling_supports(workload: &str) -> bool {
    quicklite_lab_core::CEILING_WORKLOADS
        .iter()
        .any(|w| w.name() == workload)
}

/// Whether `approach` runs custom workloads (`--workload-file`): every approach on SQLite in Rust — the built-in
/// ones and quicklite's variants — whose runner takes any SQL with its values. The Go and Node runners implement the
/// built-in workloads only, and PostgreSQL speaks another SQL.
pub fn runs_custom(approach: &str) -> bool {
    APPROACHES.contains(&approach) || VARIANT_APPROACHES.contains(&approach)
}

/// Whether `approach` implements `workload`.
pub fn supports(workload: &str, approach: &str) -> bool {
    if approach == CEILING {
        return ceiling_supports(workload);
    }
    if workload == THROUGHPUT {
        return THROUGHPUT_APPROACHES.contains(&approach);
    }
    if SERVER_APPROACHES.contains(&approach) {
        return workload == ORM;
    }
    if GO_APPROACHES.contains(&approach) {
        return ["point-read", "insert", QUEUE, MULTI_DB].contains(&workload);
    }
    if NODE_APPROACHES.contains(&approach) {
        return ["point-read", "insert", QUEUE].contains(&workload);
    }
    !unsupported(workload).contains(&approach)
}

/// `a, b, c` — for error messages listing valid names.
pub fn list(names: &[&str]) -> String {
    names.join(", ")
}
