//! `per-request`: a connection opened, configured, used once and closed for every operation — the pattern of
//! seed 000's axum service, where SQLite's allocation churn (and the memory-statistics mutex) dominates.
//!
//! Each operation runs on tokio's blocking pool, as a service doing this would, so operations run in parallel.
//!
//! One idle connection per database stays open for the whole run. Without it, whenever the number of open
//! connections drops to zero, the closing one checkpoints the WAL and deletes it (an fsync), and the next open
//! recreates it: that measures WAL teardown, not the per-request open/close cost, and a service under load
//! always has some connection open.

use std::path::PathBuf;
use std::sync::Mutex;
use std::time::Duration;

use anyhow::{Context, Result};
use quicklite_lab_core::{
    Approach, Block, Bound, Cell, Environment, Knobs, NewItem, NewJob, OrmOp, Workload,
};
use rusqlite::Connection;

use crate::sqlite::report::SqliteFacts;
use crate::sqlite::{connect, ops};

/// Database paths and the knobs to apply on every open.
pub struct PerRequest {
    /// Path of each database.
    paths: Vec<PathBuf>,
    /// Open flags and per-connection PRAGMAs, applied on every open as the pattern requires.
    knobs: Knobs,
    /// One idle connection per database, never used for operations, kept open so the WAL is not torn down
    /// between operations (see the module documentation).
    keepers: Vec<Mutex<Connection>>,
}

impl PerRequest {
    /// Opens the idle connection of every database and describes database 0's into `env`.
    pub fn open(
        cell: &Cell,
        workload: Workload,
        knobs: &Knobs,
        env: &mut Environment,
    ) -> Result<Self> {
        let paths: Vec<PathBuf> = (0..workload.databases(cell))
            .map(|db| workload.database_path(cell, db))
            .collect();
        let keepers = paths
            .iter()
            .map(|path| connect::open(path, knobs))
            .collect::<Result<Vec<_>>>()?;
        SqliteFacts::read(&keepers[0])?.fill(env);
        Ok(Self {
            paths,
            knobs: knobs.clone(),
            keepers: keepers.into_iter().map(Mutex::new).collect(),
        })
    }

    /// Opens database `db`, runs `f`, closes — all on the blocking pool.
    async fn once<T, F>(&self, db: usize, f: F) -> Result<T>
    where
        F: FnOnce(&Connection) -> rusqlite::Result<T> + Send + 'static,
        T: Send + 'static,
    {
        let path = self
            .paths
            .get(db)
            .with_context(|| format!("no database {db}"))?
            .clone();
        let knobs = self.knobs.clone();
        tokio::task::spawn_blocking(move || {
            let conn = connect::open(&path, &knobs)?;
            let out = f(&conn)?;
            conn.close()
                .map_err(|(_, e)| e)
                .context("cannot close the connection")?;
            Ok(out)
        })
        .await
        .context("the blocking task failed")?
    }
}

impl Approach for PerRequest {
    async fn point_read(&self, id: i64) -> Result<()> {
        self.once(0, move |c| ops::point_read(c, id)).await
    }

    async fn counted_read(&self, id: i64, count: i64) -> Result<()> {
        self.once(0, move |c| ops::counted_read(c, id, count))
            .await?;
        Ok(())
    }

    async fn time_counted_read(&self, id: i64, count: i64) -> Result<Duration> {
        self.once(0, move |c| ops::time_counted_read(c, id, count))
            .await
    }

    async fn insert(&self, item: NewItem) -> Result<()> {
        self.once(0, move |c| ops::insert(c, &item)).await
    }

    async fn update(&self, id: i64, delta: i64) -> Result<()> {
        self.once(0, move |c| ops::update(c, id, delta)).await
    }

    async fn join_read(&self, db: usize, account: i64) -> Result<()> {
        self.once(db, move |c| ops::join_read(c, account)).await
    }

    async fn paced_write(&self, db: usize, block: Block, delay: Duration) -> Result<()> {
        self.once(db, move |c| ops::paced_write(c, &block, delay))
            .await
    }

    async fn insert_batch(&self, items: Vec<NewItem>, think: Duration) -> Result<()> {
        self.once(0, move |c| ops::insert_batch(c, &items, think))
            .await
    }

    async fn count_items(&self) -> Result<u64> {
        self.once(0, ops::count_items).await
    }

    async fn publish(&self, job: NewJob) -> Result<()> {
        self.once(0, move |c| ops::publish(c, &job)).await
    }

    async fn claim(&self, owner: i64, now_ms: i64) -> Result<Option<i64>> {
        self.once(0, move |c| ops::claim(c, owner, now_ms)).await
    }

    async fn ack(&self, id: i64, owner: i64) -> Result<()> {
        self.once(0, move |c| ops::ack(c, id, owner)).await
    }

    async fn orm(&self, op: OrmOp, key: i64, txn: bool) -> Result<()> {
        self.once(0, move |c| ops::orm(c, op, key, txn)).await
    }

    async fn custom(&self, writes: bool, statements: Vec<Bound>) -> Result<()> {
        self.once(0, move |c| ops::custom(c, writes, &statements))
            .await
    }

    fn open_databases(&self) -> Option<u64> {
        Some(self.keepers.len() as u64)
    }

    fn database_opens(&self) -> Option<u64> {
        // Every operation opens its own connection: not counted.
        None
    }
}
