//! `direct-blocking`: rusqlite called directly inside async tasks, on the tokio worker threads.
//!
//! The pattern of seed 004's ICRC Rosetta: every call blocks the worker that runs it (and, with the shared
//! connection's mutex, every worker waiting for it), so other tasks on those workers — timers included — wait.

use std::time::Duration;

use anyhow::Result;
use quicklite_lab_core::{
    Approach, Block, Bound, Cell, Environment, Knobs, NewItem, NewJob, OrmOp, Workload,
};

use super::shared::{SharedConnections, with};
use crate::sqlite::ops;

/// Shared connections, called on the worker thread.
pub struct DirectBlocking {
    /// One connection per database (read + write connections for `multi-db`).
    conns: SharedConnections,
}

impl DirectBlocking {
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

impl Approach for DirectBlocking {
    async fn point_read(&self, id: i64) -> Result<()> {
        with(self.conns.reader(0)?, |c| ops::point_read(c, id))
    }

    async fn counted_read(&self, id: i64, count: i64) -> Result<()> {
        with(self.conns.reader(0)?, |c| ops::counted_read(c, id, count))?;
        Ok(())
    }

    async fn time_counted_read(&self, id: i64, count: i64) -> Result<Duration> {
        with(self.conns.reader(0)?, |c| {
            ops::time_counted_read(c, id, count)
        })
    }

    async fn insert(&self, item: NewItem) -> Result<()> {
        with(self.conns.writer(0)?, |c| ops::insert(c, &item))
    }

    async fn update(&self, id: i64, delta: i64) -> Result<()> {
        with(self.conns.writer(0)?, |c| ops::update(c, id, delta))
    }

    async fn join_read(&self, db: usize, account: i64) -> Result<()> {
        with(self.conns.reader(db)?, |c| ops::join_read(c, account))
    }

    async fn paced_write(&self, db: usize, block: Block, delay: Duration) -> Result<()> {
        with(self.conns.writer(db)?, |c| {
            ops::paced_write(c, &block, delay)
        })
    }

    async fn insert_batch(&self, items: Vec<NewItem>, think: Duration) -> Result<()> {
        with(self.conns.writer(0)?, |c| {
            ops::insert_batch(c, &items, think)
        })
    }

    async fn count_items(&self) -> Result<u64> {
        with(self.conns.reader(0)?, ops::count_items)
    }

    async fn publish(&self, job: NewJob) -> Result<()> {
        with(self.conns.writer(0)?, |c| ops::publish(c, &job))
    }

    async fn claim(&self, owner: i64, now_ms: i64) -> Result<Option<i64>> {
        with(self.conns.writer(0)?, |c| ops::claim(c, owner, now_ms))
    }

    async fn ack(&self, id: i64, owner: i64) -> Result<()> {
        with(self.conns.writer(0)?, |c| ops::ack(c, id, owner))
    }

    async fn orm(&self, op: OrmOp, key: i64, txn: bool) -> Result<()> {
        with(self.conns.writer(0)?, |c| ops::orm(c, op, key, txn))
    }

    async fn custom(&self, writes: bool, statements: Vec<Bound>) -> Result<()> {
        let conn = if writes {
            self.conns.writer(0)?
        } else {
            self.conns.reader(0)?
        };
        with(conn, |c| ops::custom(c, writes, &statements))
    }

    fn open_databases(&self) -> Option<u64> {
        Some(self.conns.databases() as u64)
    }
}
