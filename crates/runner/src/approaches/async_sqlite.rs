//! `async-sqlite`: the real `async-sqlite` crate's `Pool` (one thread per connection, calls handed out
//! round-robin), with its default size: one connection per available core.
//!
//! For `multi-db` each database gets its own pool, and the writer shares it with the readers, as an
//! application using the crate would: a read routed to the connection that is inside the slow write waits.

use std::time::Duration;

use anyhow::{Context, Result};
use async_sqlite::{Pool, PoolBuilder};
use quicklite_lab_core::{
    Approach, Block, Bound, Cell, Environment, Knobs, NewItem, NewJob, OrmOp, Workload,
};

use crate::sqlite::report::SqliteFacts;
use crate::sqlite::{connect, ops};

/// One pool per database.
pub struct AsyncSqlite {
    /// Indexed by database.
    pools: Vec<Pool>,
}

impl AsyncSqlite {
    /// Opens a pool per database, sets the per-connection PRAGMAs on every pooled connection, and describes
    /// database 0 into `env`.
    pub async fn open(
        cell: &Cell,
        workload: Workload,
        knobs: &Knobs,
        env: &mut Environment,
    ) -> Result<Self> {
        let mut pools = Vec::new();
        for db in 0..workload.databases(cell) {
            let path = workload.database_path(cell, db);
            let pool = PoolBuilder::new()
                .path(&path)
                .flags(connect::open_flags(knobs.mutex))
                .open()
                .await
                .with_context(|| {
                    format!("cannot open an async-sqlite pool on {}", path.display())
                })?;
            let pragmas = knobs.connection_pragmas();
            for outcome in pool
                .conn_for_each(move |conn| {
                    let set_up =
                        connect::unlock(conn).and_then(|()| connect::apply(conn, &pragmas));
                    Ok(set_up.map_err(|e| format!("{e:#}")))
                })
                .await
            {
                outcome?.map_err(anyhow::Error::msg)?;
            }
            pools.push(pool);
        }
        let facts = pools[0]
            .conn(|conn| Ok(SqliteFacts::read(conn).map_err(|e| format!("{e:#}"))))
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

impl Approach for AsyncSqlite {
    async fn point_read(&self, id: i64) -> Result<()> {
        Ok(self.pool(0)?.conn(move |c| ops::point_read(c, id)).await?)
    }

    async fn counted_read(&self, id: i64, count: i64) -> Result<()> {
        self.pool(0)?
            .conn(move |c| ops::counted_read(c, id, count))
            .await?;
        Ok(())
    }

    async fn time_counted_read(&self, id: i64, count: i64) -> Result<Duration> {
        Ok(self
            .pool(0)?
            .conn(move |c| ops::time_counted_read(c, id, count))
            .await?)
    }

    async fn insert(&self, item: NewItem) -> Result<()> {
        Ok(self.pool(0)?.conn(move |c| ops::insert(c, &item)).await?)
    }

    async fn update(&self, id: i64, delta: i64) -> Result<()> {
        Ok(self
            .pool(0)?
            .conn(move |c| ops::update(c, id, delta))
            .await?)
    }

    async fn join_read(&self, db: usize, account: i64) -> Result<()> {
        Ok(self
            .pool(db)?
            .conn(move |c| ops::join_read(c, account))
            .await?)
    }

    async fn paced_write(&self, db: usize, block: Block, delay: Duration) -> Result<()> {
        Ok(self
            .pool(db)?
            .conn(move |c| ops::paced_write(c, &block, delay))
            .await?)
    }

    async fn insert_batch(&self, items: Vec<NewItem>, think: Duration) -> Result<()> {
        Ok(self
            .pool(0)?
            .conn(move |c| ops::insert_batch(c, &items, think))
            .await?)
    }

    async fn count_items(&self) -> Result<u64> {
        Ok(self.pool(0)?.conn(ops::count_items).await?)
    }

    async fn publish(&self, job: NewJob) -> Result<()> {
        Ok(self.pool(0)?.conn(move |c| ops::publish(c, &job)).await?)
    }

    async fn claim(&self, owner: i64, now_ms: i64) -> Result<Option<i64>> {
        Ok(self
            .pool(0)?
            .conn(move |c| ops::claim(c, owner, now_ms))
            .await?)
    }

    async fn ack(&self, id: i64, owner: i64) -> Result<()> {
        Ok(self.pool(0)?.conn(move |c| ops::ack(c, id, owner)).await?)
    }

    async fn custom(&self, writes: bool, statements: Vec<Bound>) -> Result<()> {
        Ok(self
            .pool(0)?
            .conn(move |c| ops::custom(c, writes, &statements))
            .await?)
    }

    async fn orm(&self, op: OrmOp, key: i64, txn: bool) -> Result<()> {
        Ok(self
            .pool(0)?
            .conn(move |c| ops::orm(c, op, key, txn))
            .await?)
    }

    fn open_databases(&self) -> Option<u64> {
        Some(self.pools.len() as u64)
    }
}
