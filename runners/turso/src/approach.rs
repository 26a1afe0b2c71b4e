//! `turso` and `turso-mvcc`: the `turso` crate's native async API, called from the client tasks themselves — no
//! thread of the approach's own, each task on a pooled connection ([`crate::pool`]).
//!
//! - `turso` (WAL): a one-statement write runs as it is (autocommit), a write of several statements in
//!   `BEGIN IMMEDIATE … COMMIT`; writers take turns at the write lock, waiting in Turso's busy handler.
//! - `turso-mvcc` (MVCC): every write transaction opens with `BEGIN CONCURRENT`, Turso's optimistic transactions,
//!   which run side by side and fail at their statement or commit only when another transaction wrote the same rows
//!   (`Write-write conflict`) or committed under them (a busy snapshot); the runner rolls such a transaction back and
//!   runs it again, as an application must, and counts the retries (standard error, at the end of the cell).
//!
//! Reads run on the caller's connection in autocommit, a custom read of several statements inside `BEGIN … COMMIT`.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use anyhow::{Context, Result, bail};
use quicklite_lab_core::{Approach, Block, Bound, Knobs, NewItem, NewJob, sql};
use turso::{Connection, Database};

use crate::database::{self, Mode};
use crate::pool::Pool;

/// How many times one transaction is run again after conflicts before its error is counted.
const MAX_RETRIES: u32 = 1_000;

/// A write transaction of one of the workloads: what [`Turso::write`] runs, retried as a whole.
enum Write {
    /// `insert`: one row.
    Insert(NewItem),
    /// `mixed`'s and `write-read`'s update by primary key.
    Update { id: i64, delta: i64 },
    /// `queue`'s publish.
    Publish(NewJob),
    /// `queue`'s claim: the claimed job's id, if any.
    Claim { owner: i64, now_ms: i64 },
    /// `queue`'s ack.
    Ack { id: i64, owner: i64 },
    /// `throughput`'s transaction: the rows, then the think time, blocking the calling thread inside the
    /// transaction.
    Batch {
        items: Vec<NewItem>,
        think: Duration,
    },
    /// A custom workload's write transaction.
    Custom(Vec<Bound>),
}

impl Write {
    /// Whether it is one statement, which the WAL mode runs without a transaction of its own.
    fn is_one_statement(&self) -> bool {
        match self {
            Self::Batch { .. } => false,
            Self::Custom(statements) => statements.len() == 1,
            _ => true,
        }
    }
}

/// The `turso` and `turso-mvcc` approaches.
pub struct Turso {
    /// The connections of the cell's one database.
    pool: Pool,
    /// WAL or MVCC.
    mode: Mode,
    /// Transactions run again after a conflict (MVCC), for the log.
    retries: AtomicU64,
}

impl Turso {
    /// The approach on `db`, its connections set up with the cell's PRAGMAs.
    pub fn new(db: Database, knobs: &Knobs, mode: Mode) -> Self {
        Self {
            pool: Pool::new(db, database::connection_pragmas(knobs)),
            mode,
            retries: AtomicU64::new(0),
        }
    }

    /// Runs `write` as one transaction on a pooled connection — in MVCC mode `BEGIN CONCURRENT`, run again after a
    /// conflict — and returns what it returns (a claimed job's id).
    async fn write(&self, write: Write) -> Result<Option<i64>> {
        let conn = self.pool.get().await?;
        match self.mode {
            Mode::Wal if write.is_one_statement() => run(&conn, &write).await,
            Mode::Wal => transaction(&conn, "BEGIN IMMEDIATE", &write).await,
            Mode::Mvcc => {
                let mut attempts = 0;
                loop {
                    match transaction(&conn, "BEGIN CONCURRENT", &write).await {
                        Err(e) if attempts < MAX_RETRIES && is_conflict(&e) => {
                            attempts += 1;
                            self.retries.fetch_add(1, Ordering::Relaxed);
                            tokio::task::yield_now().await;
                        }
                        outcome => return outcome,
                    }
                }
            }
        }
    }
}

impl Drop for Turso {
    fn drop(&mut self) {
        if self.mode == Mode::Mvcc {
            eprintln!(
                "turso-mvcc: {} transactions run again after a conflict",
                self.retries.load(Ordering::Relaxed)
            );
        }
    }
}

/// Runs `write` inside `begin … COMMIT`, rolled back if it fails.
async fn transaction(conn: &Connection, begin: &str, write: &Write) -> Result<Option<i64>> {
    conn.execute(begin, ()).await?;
    let outcome = match run(conn, write).await {
        Ok(value) => conn
            .execute("COMMIT", ())
            .await
            .map(|_| value)
            .map_err(Into::into),
        Err(e) => Err(e),
    };
    if outcome.is_err() && !conn.is_autocommit().unwrap_or(true) {
        // The transaction is being abandoned; its own error is the one worth reporting.
        let _ = conn.execute("ROLLBACK", ()).await;
    }
    outcome
}

/// Whether `error` is one after which Turso asks for the transaction to be run again: a write-write conflict, a
/// stale snapshot, the database busy.
fn is_conflict(error: &anyhow::Error) -> bool {
    match error.downcast_ref::<turso::Error>() {
        Some(turso::Error::Busy(_) | turso::Error::BusySnapshot(_)) => true,
        Some(turso::Error::Error(message)) => message.contains("conflict"),
        _ => false,
    }
}

/// The statements of `write`, inside whatever transaction the caller opened.
async fn run(conn: &Connection, write: &Write) -> Result<Option<i64>> {
    match write {
        Write::Insert(item) => insert(conn, item).await?,
        Write::Update { id, delta } => {
            let mut stmt = conn.prepare_cached(sql::UPDATE_ITEM).await?;
            stmt.execute((*id, *delta)).await?;
        }
        Write::Publish(job) => {
            let mut stmt = conn.prepare_cached(sql::PUBLISH).await?;
            stmt.execute((&*job.payload, job.created_at)).await?;
        }
        Write::Claim { owner, now_ms } => {
            let mut stmt = conn.prepare_cached(sql::CLAIM).await?;
            let mut rows = stmt.query((*owner, *now_ms)).await?;
            let claimed = match rows.next().await? {
                Some(row) => {
                    let id: i64 = row.get(0)?;
                    let _payload: String = row.get(1)?;
                    Some(id)
                }
                None => None,
            };
            // The statement runs to its end, or Turso would roll it back when it is dropped.
            while rows.next().await?.is_some() {}
            return Ok(claimed);
        }
        Write::Ack { id, owner } => {
            let mut stmt = conn.prepare_cached(sql::ACK).await?;
            let deleted = stmt.execute((*id, *owner)).await?;
            if deleted != 1 {
                bail!("ack of job {id} by {owner} deleted {deleted} rows");
            }
        }
        Write::Batch { items, think } => {
            for item in items {
                insert(conn, item).await?;
            }
            if !think.is_zero() {
                std::thread::sleep(*think);
            }
        }
        Write::Custom(statements) => custom_statements(conn, statements).await?,
    }
    Ok(None)
}

async fn insert(conn: &Connection, item: &NewItem) -> Result<()> {
    let mut stmt = conn.prepare_cached(sql::INSERT_ITEM).await?;
    stmt.execute((item.name.as_str(), item.value, item.payload.as_str()))
        .await?;
    Ok(())
}

/// A custom transaction's statements in order, every column of every row read.
async fn custom_statements(conn: &Connection, statements: &[Bound]) -> Result<()> {
    for statement in statements {
        let mut stmt = conn.prepare_cached(&*statement.sql).await?;
        let mut rows = stmt.query(database::values(&statement.params)).await?;
        while let Some(row) = rows.next().await? {
            for column in 0..row.column_count() {
                row.get_value(column)?;
            }
        }
    }
    Ok(())
}

impl Approach for Turso {
    async fn point_read(&self, id: i64) -> Result<()> {
        let conn = self.pool.get().await?;
        let mut stmt = conn.prepare_cached(sql::POINT_READ).await?;
        let row = stmt
            .query_row([id])
            .await
            .with_context(|| format!("item {id}"))?;
        let (_id, _name, _value, _payload): (i64, String, i64, String) =
            (row.get(0)?, row.get(1)?, row.get(2)?, row.get(3)?);
        Ok(())
    }

    async fn insert(&self, item: NewItem) -> Result<()> {
        self.write(Write::Insert(item)).await?;
        Ok(())
    }

    async fn update(&self, id: i64, delta: i64) -> Result<()> {
        self.write(Write::Update { id, delta }).await?;
        Ok(())
    }

    async fn join_read(&self, _db: usize, _account: i64) -> Result<()> {
        bail!("the turso runner does not implement the multi-db workload")
    }

    async fn paced_write(&self, _db: usize, _block: Block, _delay: Duration) -> Result<()> {
        bail!("the turso runner does not implement the multi-db workload")
    }

    async fn publish(&self, job: NewJob) -> Result<()> {
        self.write(Write::Publish(job)).await?;
        Ok(())
    }

    async fn claim(&self, owner: i64, now_ms: i64) -> Result<Option<i64>> {
        self.write(Write::Claim { owner, now_ms }).await
    }

    async fn ack(&self, id: i64, owner: i64) -> Result<()> {
        self.write(Write::Ack { id, owner }).await?;
        Ok(())
    }

    async fn insert_batch(&self, items: Vec<NewItem>, think: Duration) -> Result<()> {
        self.write(Write::Batch { items, think }).await?;
        Ok(())
    }

    async fn count_items(&self) -> Result<u64> {
        let conn = self.pool.get().await?;
        let row = conn
            .prepare_cached("SELECT count(*) FROM items")
            .await?
            .query_row(())
            .await?;
        Ok(u64::try_from(row.get::<i64>(0)?)?)
    }

    async fn custom(&self, writes: bool, statements: Vec<Bound>) -> Result<()> {
        if writes {
            self.write(Write::Custom(statements)).await?;
            return Ok(());
        }
        let conn = self.pool.get().await?;
        if statements.len() > 1 {
            // One snapshot for all of them.
            transaction(&conn, "BEGIN", &Write::Custom(statements)).await?;
        } else {
            custom_statements(&conn, &statements).await?;
        }
        Ok(())
    }

    fn open_databases(&self) -> Option<u64> {
        Some(1)
    }
}
