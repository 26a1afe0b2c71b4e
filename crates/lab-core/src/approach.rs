//! The contract between the driver and an approach: the [`Approach`] trait, one method per kind of operation.
//!
//! The driver chooses the operations (which row, which database, when); an approach only knows how to run each
//! kind, so every approach is measured through the same workload code.

use std::future::Future;
use std::time::Duration;

use anyhow::Result;

use crate::custom::Bound;
use crate::data::{Block, NewItem, NewJob};
use crate::orm::OrmOp;

/// The error of an approach that has no queue operations.
fn no_queue() -> anyhow::Error {
    anyhow::anyhow!("this approach does not implement the queue workload")
}

/// The error of an approach that does not implement the `long-read` workload.
fn no_long_reads() -> anyhow::Error {
    anyhow::anyhow!("this approach does not implement the long-read workload")
}

/// One way of using SQLite from async Rust, as measured by the lab.
///
/// A runner opens the approach's connections (after seeding, before the warm-up) and hands it to
/// [`crate::drive`]. Single-database workloads use database 0; `multi-db` passes the database index.
/// Implementations run exactly the statements in [`crate::sql`].
pub trait Approach: Send + Sync + 'static {
    /// `point-read`: [`crate::sql::POINT_READ`] for `id`, reading every column.
    fn point_read(&self, id: i64) -> impl Future<Output = Result<()>> + Send;

    /// `insert`: [`crate::sql::INSERT_ITEM`], one logical write.
    fn insert(&self, item: NewItem) -> impl Future<Output = Result<()>> + Send;

    /// `mixed`'s write: [`crate::sql::UPDATE_ITEM`] for `id`.
    fn update(&self, id: i64, delta: i64) -> impl Future<Output = Result<()>> + Send;

    /// `multi-db`'s read: [`crate::sql::ACCOUNT_HISTORY`] for `account` in database `db`, reading every row.
    fn join_read(&self, db: usize, account: i64) -> impl Future<Output = Result<()>> + Send;

    /// `multi-db`'s write: append `block` to database `db` in one transaction, and before committing block
    /// the calling thread for `delay` with `std::thread::sleep` *inside* the database operation (inside the
    /// closure the approach sends to its thread, or directly on the caller's thread for approaches that have
    /// none) — the slow writer of seed 004. In the `paced` write mode `delay` is zero and nothing sleeps.
    fn paced_write(
        &self,
        db: usize,
        block: Block,
        delay: Duration,
    ) -> impl Future<Output = Result<()>> + Send;

    /// `queue`'s publish: [`crate::sql::PUBLISH`] with `job`, one logical write. By default, an error: the
    /// approach does not implement the queue.
    fn publish(&self, job: NewJob) -> impl Future<Output = Result<()>> + Send {
        drop(job);
        async { Err(no_queue()) }
    }

    /// `queue`'s claim: [`crate::sql::CLAIM`] for worker `owner` at `now_ms`, one logical write; the claimed job's
    /// id, or `None` when no job is waiting. By default, an error.
    fn claim(&self, owner: i64, now_ms: i64) -> impl Future<Output = Result<Option<i64>>> + Send {
        let _ = (owner, now_ms);
        async { Err(no_queue()) }
    }

    /// `queue`'s ack: [`crate::sql::ACK`] for job `id` claimed by `owner`, one logical write; an error if no row
    /// was deleted. By default, an error.
    fn ack(&self, id: i64, owner: i64) -> impl Future<Output = Result<()>> + Send {
        let _ = (id, owner);
        async { Err(no_queue()) }
    }

    /// `orm`: operation `op` of the suite on the artist `key` (in `1..=ORM_ARTISTS`), wrapped in a transaction of
    /// its own when `txn` is set. By default, an error: the approach does not implement the suite.
    fn orm(&self, op: OrmOp, key: i64, txn: bool) -> impl Future<Output = Result<()>> + Send {
        let _ = (op, key, txn);
        async {
            Err(anyhow::anyhow!(
                "this approach does not implement the orm workload"
            ))
        }
    }

    /// `throughput`'s transaction: [`crate::sql::INSERT_ITEM`] for each of `items`, then `think` blocking the calling
    /// thread with `std::thread::sleep` inside the transaction (inside the closure the approach sends to its thread,
    /// as for [`Approach::paced_write`]), then the commit — all or nothing. By default, an error.
    fn insert_batch(
        &self,
        items: Vec<NewItem>,
        think: Duration,
    ) -> impl Future<Output = Result<()>> + Send {
        let _ = (items, think);
        async {
            Err(anyhow::anyhow!(
                "this approach does not implement the throughput workload"
            ))
        }
    }

    /// `held-tx`'s transaction, all or nothing: in one write transaction (taking the write lock before its read, so
    /// that the read value is still the row's when it is written back), [`crate::sql::POINT_READ`] for `id`; then
    /// `think` with the transaction open; then [`crate::sql::SET_ITEM_VALUE`] to the value read plus `delta` and
    /// [`crate::sql::LOG_ITEM_CHANGE`] with both values; then the commit. The think is an async pause
    /// ([`crate::await_think`]) between statements awaited one by one, the shape of code that calls another service
    /// inside a transaction — unless the approach is the closure form of the same transaction (quicklite's
    /// `quicklite-closure`), which spends it blocking its writer's thread inside the closure, as
    /// [`Approach::insert_batch`] does. By default, an error.
    fn held_transaction(
        &self,
        id: i64,
        delta: i64,
        think: Duration,
    ) -> impl Future<Output = Result<()>> + Send {
        let _ = (id, delta, think);
        async {
            Err(anyhow::anyhow!(
                "this approach does not implement the held-tx workload"
            ))
        }
    }

    /// `held-tx`'s check, read through the approach after the last transaction returned: the result of
    /// [`crate::sql::CHECK_ITEM_LOG`], the log's rows and the lost updates. By default, an error.
    fn check_item_log(&self) -> impl Future<Output = Result<(u64, u64)>> + Send {
        async {
            Err(anyhow::anyhow!(
                "this approach cannot check the held-tx workload's log"
            ))
        }
    }

    /// `long-read`'s read: [`crate::sql::COUNTED_READ`] for `id` with its count running to `count` — `1` for a short
    /// read, millions for a long one — through the approach's usual path for a one-statement read, one call site
    /// whatever the count (quicklite: `query_row`). By default, an error: the approach does not implement the
    /// workload.
    fn counted_read(&self, id: i64, count: i64) -> impl Future<Output = Result<()>> + Send {
        let _ = (id, count);
        async { Err(no_long_reads()) }
    }

    /// `long-read`'s calibration: the same statement as [`Approach::counted_read`], run on one of the approach's
    /// connections and timed there — the time SQLite took, not the hand-off — through a call site of its own, so
    /// that the site of the workload's reads knows only the reads the workload makes. By default, an error.
    fn time_counted_read(
        &self,
        id: i64,
        count: i64,
    ) -> impl Future<Output = Result<Duration>> + Send {
        let _ = (id, count);
        async { Err(no_long_reads()) }
    }

    /// A custom workload's transaction ([`crate::CustomWorkload`]): each of `statements` in order with its values
    /// bound to SQLite parameters `1..=n`, every column of every row it returns read — in one read transaction when
    /// `writes` is false; otherwise in one write transaction, committed before it returns, all or nothing. By
    /// default, an error: the approach cannot run arbitrary SQL.
    fn custom(
        &self,
        writes: bool,
        statements: Vec<Bound>,
    ) -> impl Future<Output = Result<()>> + Send {
        let _ = (writes, statements);
        async {
            Err(anyhow::anyhow!(
                "this approach does not run custom workloads"
            ))
        }
    }

    /// The rows of the `items` table now, read through the approach after the last write returned (`throughput`
    /// checks them against the acknowledged transactions). By default, an error.
    fn count_items(&self) -> impl Future<Output = Result<u64>> + Send {
        async {
            Err(anyhow::anyhow!(
                "this approach cannot count the throughput workload's rows"
            ))
        }
    }

    /// Databases with open connections right now, if the approach knows: all of them for approaches that open
    /// every database up front; fewer for one that closes idle databases (quicklite's registry). By default,
    /// unknown.
    fn open_databases(&self) -> Option<u64> {
        None
    }

    /// Times databases were opened (connections set up) since the approach started: once per database for
    /// approaches that open everything up front and keep it open — the default, [`Approach::open_databases`] —
    /// and more when a capped registry closes databases and reopens them on demand.
    fn database_opens(&self) -> Option<u64> {
        self.open_databases()
    }
}
