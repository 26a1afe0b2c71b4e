//! `spawn-blocking`: the same shared connections as `direct-blocking`, each call moved to tokio's blocking
//! thread pool with `tokio::task::spawn_blocking`, so the workers stay free while SQLite runs.

use std::time::Duration;

use anyhow::{Context, Result};
use quicklite_lab_core::{
    Approach, Block, Bound, Cell, Environment, Knobs, NewItem, NewJob, OrmOp, Workload,
};
use rusqlite::Connection;

use super::shared::{Shared, SharedConnections, with};
use crate::sqlite::ops;

/// Shared connections, called on the blocking pool.
pub struct SpawnBlocking {
    /// One connection per database (read + write connections for `multi-db`).
    conns: SharedConnections,
}

impl SpawnBlocking {
    /// Opens the connections and describes them into `env`.
    pub fn open(
        cell: &Cell,
        workload: Workload,
        knobs: &Knobs,
        env: &mut Environment,
    ) -> Result<Self> {
        let conns = SharedConnections::open(cell, workload, knobs)?;
        conns.describe(env)?;
        Ok(Self { conns })
    }
}

/// Runs `f` on `shared`'s connection on the blocking pool.
async fn blocking<T, F>(shared: &Shared, f: F) -> Result<T>
where
    F: FnOnce(&Connection) -> rusqlite::Result<T> + Send + 'static,
    T: Send + 'static,
{
    let shared = shared.clone();
    tokio::task::spawn_blocking(move || with(&shared, f))
        .await
        .context("the blocking task failed")?
}

impl Approach for SpawnBlocking {
    async fn point_read(&self, id: i64) -> Result<()> {
        blocking(self.conns.reader(0)?, move |c| ops::point_read(c, id)).await
    }

    async fn counted_read(&self, id: i64, count: i64) -> Result<()> {
        blocking(self.conns.reader(0)?, move |c| {
            ops::counted_read(c, id, count)
        })
        .await?;
        Ok(())
    }

    async fn time_counted_read(&self, id: i64, count: i64) -> Result<Duration> {
        blocking(self.conns.reader(0)?, move |c| {
            ops::time_counted_read(c, id, count)
        })
        .await
    }

    async fn insert(&self, item: NewItem) -> Result<()> {
        blocking(self.conns.writer(0)?, move |c| ops::insert(c, &item)).await
    }

    async fn update(&self, id: i64, delta: i64) -> Result<()> {
        blocking(self.conns.writer(0)?, move |c| ops::update(c, id, delta)).await
    }

    async fn join_read(&self, db: usize, account: i64) -> Result<()> {
        blocking(self.conns.reader(db)?, move |c| ops::join_read(c, account)).await
    }

    async fn paced_write(&self, db: usize, block: Block, delay: Duration) -> Result<()> {
        blocking(self.conns.writer(db)?, move |c| {
            ops::paced_write(c, &block, delay)
        })
        .await
    }

    async fn insert_batch(&self, items: Vec<NewItem>, think: Duration) -> Result<()> {
        blocking(self.conns.writer(0)?, move |c| {
            ops::insert_batch(c, &items, think)
        })
        .await
    }

    async fn count_items(&self) -> Result<u64> {
        blocking(self.conns.reader(0)?, ops::count_items).await
    }

    async fn publish(&self, job: NewJob) -> Result<()> {
        blocking(self.conns.writer(0)?, move |c| ops::publish(c, &job)).await
    }

    async fn claim(&self, owner: i64, now_ms: i64) -> Result<Option<i64>> {
        blocking(self.conns.writer(0)?, move |c| ops::claim(c, owner, now_ms)).await
    }

    async fn ack(&self, id: i64, owner: i64) -> Result<()> {
        blocking(self.conns.writer(0)?, move |c| ops::ack(c, id, owner)).await
    }

    async fn orm(&self, op: OrmOp, key: i64, txn: bool) -> Result<()> {
        blocking(self.conns.writer(0)?, move |c| ops::orm(c, op, key, txn)).await
    }

    async fn custom(&self, writes: bool, statements: Vec<Bound>) -> Result<()> {
        let conn = if writes {
            self.conns.writer(0)?
        } else {
            self.conns.reader(0)?
        };
        blocking(conn, move |c| ops::custom(c, writes, &statements)).await
    }

    fn open_databases(&self) -> Option<u64> {
        Some(self.conns.databases() as u64)
    }
}
