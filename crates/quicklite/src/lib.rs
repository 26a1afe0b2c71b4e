//! The fastest correct way to use SQLite from async Rust.
//!
//! A [`Database`] is a cheap, cloneable handle to one SQLite file, served by one writer thread and a pool of
//! reader threads. Async code never blocks on SQLite: it queues a closure and awaits the answer.
//!
//! # Guide
//!
//! Open a database with [`Database::open`] (the [`Profile::Server`] PRAGMAs: WAL, `synchronous=NORMAL`, a real
//! cache) or configure it with [`Database::builder`]. Then:
//!
//! - [`Database::read`] runs a closure on a reader thread's read-only connection;
//! - [`Database::write`] runs a closure on the writer's connection inside a write transaction;
//! - [`Database::execute`], [`Database::query_row`], [`Database::query_all`], [`Database::execute_many`] and
//!   [`Database::execute_batch`] cover the one-liners, with prepared statements cached per connection;
//! - [`Database::stream`] returns a large result as an async stream, read by key a chunk at a time ([`Keyset`]);
//! - [`Database::subscribe`] tells what each commit changed, in memory; [`Builder::change_feed`] records each change
//!   of chosen tables in the database, in the transaction that makes it, for [`Database::changes_since`] to read
//!   from a stored [`Cursor`] — across restarts, and for other processes' commits too;
//! - [`Database::transaction`] and [`Database::with_write_connection`] run a write alone (migrations, `VACUUM`);
//! - [`Database::begin`] holds a write transaction across `.await` ([`Transaction`]), its statements awaited one
//!   by one, within a limit ([`Builder::held_transaction_limit`]);
//! - [`Database::close`] drains the queues, checkpoints and joins the threads;
//! - [`Database::metrics`] returns counters and distributions ([`prometheus`] renders them for Prometheus);
//!   [`Database::backup`] and [`Database::vacuum_into`] copy the live database; [`Checkpointing`] says who
//!   checkpoints the WAL; slow statements are logged through `tracing`
//!   ([`Builder::slow_statement_threshold`]);
//! - [`Registry`] serves many databases (one file per tenant) on a bounded thread pool, each through the same
//!   [`Database`] type;
//! - [`litestream`] reaches beyond one machine: read replicas of what Litestream keeps in object storage
//!   ([`litestream::Replica`]), positions to wait for, a registry's tenants restored from their replicas, and
//!   writes answered only once object storage holds them ([`Acknowledge::Replicated`],
//!   [`Database::until_replicated`]);
//!   [`setup`] holds the process-wide SQLite set-up and what the linked SQLite is.
//!
//! Closures take a [`&rusqlite::Connection`](rusqlite::Connection) and return `rusqlite::Result<T>`; the crate
//! re-exports [`rusqlite`] so the versions always match. Errors come back as [`Error`]: SQLite's with their extended
//! code, [`Error::Closed`], [`Error::Overloaded`], [`Error::Panic`] (a panicking closure does not kill its thread).
//!
//! # Design
//!
//! One writer thread owns the only read-write connection and commits whatever writes are queued together in one
//! `BEGIN IMMEDIATE` transaction, each in its own savepoint (group commit: one commit, and one fsync, for many
//! writes; a failing write rolls back alone). Reader threads pull from one shared bounded queue and serve every
//! queued read inside one read transaction (read batching), starting a newer snapshot whenever a request was made
//! after a commit the current snapshot may predate — so a caller always reads its own acknowledged writes. A
//! statement read ([`Database::query_row`], [`Database::query_all`]) whose SQL has run short lately skips the
//! hand-off altogether: on tokio's multi-threaded runtime it runs on the thread that awaits it, on one of a few
//! read-only connections that keep their snapshot from one read to the next until a commit moves past it, and
//! should it turn long, it hands the runtime's worker to another thread ([`Builder::inline_reads`]). The writer's
//! commit hook witnesses every commit: it alone publishes one, and it vetoes any the writer did not ask for.
//!
//! Before the first connection, the process set-up ([`setup::sqlite_setup`]) turns off SQLite's memory statistics,
//! whose global mutex every allocation would otherwise take; connections open `SQLITE_OPEN_NOMUTEX` because each
//! belongs to exactly one thread. A database does not open on a SQLite that has the WAL-reset bug, which can corrupt a
//! database used as quicklite uses every one ([`setup::has_wal_reset_bug`], [`Builder::allow_wal_reset_bug`]). Queues
//! are bounded: a full queue makes callers wait, or fail fast with [`Error::Overloaded`] ([`QueueFull`]).
//!
//! # Example
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> quicklite::Result<()> {
//! # let dir = tempfile::tempdir().unwrap();
//! # let path = dir.path().join("app.db");
//! use quicklite::Database;
//!
//! let db = Database::open(&path).await?;
//! db.execute_batch("CREATE TABLE kv (k TEXT PRIMARY KEY, v INTEGER NOT NULL)").await?;
//!
//! // Concurrent writes from many tasks are committed in groups.
//! let mut tasks = Vec::new();
//! for i in 0..100 {
//!     let db = db.clone();
//!     tasks.push(tokio::spawn(async move {
//!         db.execute("INSERT INTO kv VALUES (?1, ?2)", (format!("key{i}"), i)).await
//!     }));
//! }
//! for t in tasks {
//!     t.await.unwrap()?;
//! }
//!
//! let total: i64 = db.query_row("SELECT sum(v) FROM kv", [], |r| r.get(0)).await?;
//! assert_eq!(total, (0..100).sum::<i64>());
//! assert_eq!(db.pragmas()["journal_mode"], "wal");
//! db.close().await?;
//! # Ok(()) }
//! ```

#![deny(missing_docs)]

// The layers, each importing only from those below it (`tests/layers.rs` checks it; docs/design.md describes
// them): leaves, requests, engine, scheduling, API.
mod changes;
mod config;
mod control;
mod cost;
#[cfg(feature = "serde")]
mod de;
mod error;
mod feed;
mod metrics;
mod permits;
mod profile;
mod replica;
pub mod setup;
mod sync;
mod util;
mod wal_frames;
mod wal_reset_bug;

mod gate;
mod inbox;
mod queue;
mod reply;
mod request;

mod engine;

mod sched;

mod backup;
mod builder;
mod database;
pub mod litestream;
#[cfg(feature = "prometheus")]
pub mod prometheus;
mod registry;

pub use backup::BackupReport;
pub use builder::Builder;
pub use changes::{Commit, Notice, TableChange};
pub use config::{BoxError, Checkpointing, ConnectionRole, QueueFull};
pub use database::feed::ChangeStream;
pub use database::held::Transaction;
pub use database::stream::{Keyset, RowStream};
pub use database::subscribe::Subscription;
pub use database::{Database, about_to_block};
pub use error::{Error, OptionalExtension, RequestKind, Result};
pub use feed::{Change, Cursor, Op};
pub use litestream::Acknowledge;
pub use metrics::{Distribution, MetricsSnapshot};
pub use profile::Profile;
pub use registry::builder::RegistryBuilder;
pub use registry::{Registry, RegistryMetrics};
pub use wal_frames::wal_frames;

/// The rusqlite crate quicklite is built on, re-exported so closures use the same version.
pub use rusqlite;
