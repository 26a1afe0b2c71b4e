//! `deadpool-sqlite`: the real `deadpool-sqlite` 0.14 crate — a pool of connections (its default size: four per
//! core), each operation checked out with `get` and run with `interact` on tokio's blocking pool.
//!
//! The crate opens connections itself with rusqlite's default flags (`SQLITE_OPEN_NO_MUTEX`), so a cell asking
//! for `fullmutex` fails with a message instead of reporting a number for a setting that was not applied.
//! Per-connection PRAGMAs are set in a `post_create` hook. For `multi-db` each database gets its own pool.

use std::time::Duration;

use anyhow::{Context, Result, anyhow, bail};
use deadpool_sqlite::{Config, Hook, HookError, Pool, Runtime};
use quicklite_lab_core::{
    Approach, Block, Bound, Cell, Environment, Knobs, MutexMode, NewItem, NewJob, OrmOp, Workload,
};
use rusqlite::Connection;

use crate::sqlite::report::SqliteFacts;
use crate::sqlite::{connect, ops};

/// One pool per database.
pub struct DeadpoolSqlite {
    /// Indexed by database.
    pools: Vec<Pool>,
}

impl DeadpoolSqlite {
    /// Builds a pool per database with the cell's PRAGMAs and describes database 0 into `env`.
    pub async fn open(
        cell: &Cell,
        workload: Workload,
        knobs: &Knobs,
        env: &mut Environment,
    ) -> Result<Self> {
        if knobs.mutex == MutexMode::FullMutex {
            bail!(
                "deadpool-sqlite 0.14 opens its connections with rusqlite's default flags (nomutex); fullmutex cannot be applied"
            );
        }
        let mut pools = Vec::new();
        for db in 0..workload.databases(cell) {
            let path = workload.database_path(cell, db);
            let pragmas = knobs.connection_pragmas();
            let pool = Config::new(&path)
                .builder(Runtime::Tokio1)
                .with_context(|| {
                    format!(
                        "cannot configure a deadpool-sqlite pool on {}",
                        path.display()
                    )
                })?
                .post_create(Hook::async_fn(move |conn, _metrics| {
                    let pragmas = pragmas.clone();
                    Box::pin(async move {
                        conn.interact(move |c| {
                            connect::apply(c, &pragmas).map_err(|e| format!("{e:#}"))
                        })
                        .await
                        .map_err(|e| HookError::Message(e.to_string().into()))?
                        .map_err(|e| HookError::Message(e.into()))
                    })
                }))
                .build()
                .with_context(|| {
                    format!("cannot build a deadpool-sqlite pool on {}", path.display())
                })?;
            pools.push(pool);
        }
        let facts = interact(&pools[0], |c| {
            Ok(SqliteFacts::read(c).map_err(|e| format!("{e:#}")))
        })
        .await?;
        facts.map_err(anyhow::Error::msg)?.fill(env);
        Ok(Self { pools })
    }

    fn pool(&self, db: usize) -> Result<&Pool> {
        self.pools
            .get(db)
            .with_context(|| format!("no database {db}"))
    }
}

/// Checks a connection out of `pool` and runs `f` on it with `interact`.
async fn interact<T, F>(pool: &Pool, f: F) -> Result<T>
where
    F: FnOnce(&Connection) -> rusqlite::Result<T> + Send + 'static,
    T: Send + 'static,
{
    let conn = pool
        .get()
        .await
        .map_err(|e| anyhow!("cannot get a pooled connection: {e}"))?;
    let outcome = conn
        .interact(move |c| f(c))
        .await
        .map_err(|e| anyhow!("interact failed: {e}"))?;
    Ok(outcome?)
}

impl Approach for DeadpoolSqlite {
    async fn point_read(&self, id: i64) -> Result<()> {
        interact(self.pool(0)?, move |c| ops::point_read(c, id)).await
    }

    async fn counted_read(&self, id: i64, count: i64) -> Result<()> {
        interact(self.pool(0)?, move |c| ops::counted_read(c, id, count)).await?;
        Ok(())
    }

    async fn time_counted_read(&self, id: i64, count: i64) -> Result<Duration> {
        interact(self.pool(0)?, move |c| ops::time_counted_read(c, id, count)).await
    }

    async fn insert(&self, item: NewItem) -> Result<()> {
        interact(self.pool(0)?, move |c| ops::insert(c, &item)).await
    }

    async fn update(&self, id: i64, delta: i64) -> Result<()> {
        interact(self.pool(0)?, move |c| ops::update(c, id, delta)).await
    }

    async fn join_read(&self, db: usize, account: i64) -> Result<()> {
        interact(self.pool(db)?, move |c| ops::join_read(c, account)).await
    }

    async fn paced_write(&self, db: usize, block: Block, delay: Duration) -> Result<()> {
        interact(self.pool(db)?, move |c| ops::paced_write(c, &block, delay)).await
    }

    async fn insert_batch(&self, items: Vec<NewItem>, think: Duration) -> Result<()> {
        interact(self.pool(0)?, move |c| ops::insert_batch(c, &items, think)).await
    }

    async fn count_items(&self) -> Result<u64> {
        interact(self.pool(0)?, ops::count_items).await
    }

    async fn publish(&self, job: NewJob) -> Result<()> {
        interact(self.pool(0)?, move |c| ops::publish(c, &job)).await
    }

    async fn claim(&self, owner: i64, now_ms: i64) -> Result<Option<i64>> {
        interact(self.pool(0)?, move |c| ops::claim(c, owner, now_ms)).await
    }

    async fn ack(&self, id: i64, owner: i64) -> Result<()> {
        interact(self.pool(0)?, move |c| ops::ack(c, id, owner)).await
    }

    async fn orm(&self, op: OrmOp, key: i64, txn: bool) -> Result<()> {
        interact(self.pool(0)?, move |c| ops::orm(c, op, key, txn)).await
    }

    async fn custom(&self, writes: bool, statements: Vec<Bound>) -> Result<()> {
        interact(self.pool(0)?, move |c| ops::custom(c, writes, &statements)).await
    }

    fn open_databases(&self) -> Option<u64> {
        Some(self.pools.len() as u64)
    }
}
