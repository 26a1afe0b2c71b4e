//! `tokio-rusqlite`: the real `tokio-rusqlite` 0.8 crate — one background thread per `Connection`, every
//! operation sent to it as a closure through `call`.
//!
//! Single-database workloads use one `Connection`, as the crate is meant to be used. For `multi-db` each
//! database gets a write connection and a read connection (two threads): with a single one, every read would
//! queue behind the writer's simulated delay, which would measure that sharing rather than the crate.

use std::time::Duration;

use anyhow::{Context, Result};
use quicklite_lab_core::{
    Approach, Block, Bound, Cell, Environment, Knobs, NewItem, NewJob, OrmOp, Workload, process,
};
use tokio_rusqlite::Connection;

use crate::sqlite::report::SqliteFacts;
use crate::sqlite::{connect, ops};

/// The connections of one database.
struct DbConnections {
    /// Serves reads.
    reader: Connection,
    /// Serves writes (the same handle as `reader` outside `multi-db`).
    writer: Connection,
}

/// tokio-rusqlite connections, per database.
pub struct TokioRusqlite {
    /// Indexed by database.
    dbs: Vec<DbConnections>,
}

impl TokioRusqlite {
    /// Opens the connections with the cell's flags and PRAGMAs and describes database 0 into `env`.
    pub async fn open(
        cell: &Cell,
        workload: Workload,
        knobs: &Knobs,
        env: &mut Environment,
    ) -> Result<Self> {
        let mut dbs = Vec::new();
        let databases = workload.databases(cell);
        for db in 0..databases {
            let opened = async {
                let writer = open_one(cell, workload, knobs, db).await?;
                let reader = if workload == Workload::MultiDb {
                    open_one(cell, workload, knobs, db).await?
                } else {
                    writer.clone()
                };
                anyhow::Ok(DbConnections { reader, writer })
            };
            // At thousands of databases this is where a thread per connection meets the process's limits: say
            // which limit, not just which file.
            dbs.push(opened.await.with_context(|| {
                let per_db = if workload == Workload::MultiDb { 2 } else { 1 };
                format!(
                    "tokio-rusqlite opened {db} of {databases} databases; now {}",
                    process_usage(per_db * db)
                )
            })?);
        }
        let facts = dbs[0]
            .reader
            .call(|c| Ok::<_, rusqlite::Error>(SqliteFacts::read(c).map_err(|e| format!("{e:#}"))))
            .await?;
        facts.map_err(anyhow::Error::msg)?.fill(env);
        Ok(Self { dbs })
    }

    fn db(&self, db: usize) -> Result<&DbConnections> {
        self.dbs
            .get(db)
            .with_context(|| format!("no database {db}"))
    }
}

/// Threads and open files of the process against its open-file limit, for error messages; `connections` is what
/// the approach opened so far, for when not even `/proc/self` can be read any more.
fn process_usage(connections: usize) -> String {
    let limit = process::open_files_limits()
        .map_or_else(|_| "unknown".to_string(), |(soft, _)| soft.to_string());
    match (process::threads(), process::open_files()) {
        (Some(threads), Some(files)) => {
            format!("{threads} threads, {files} open files (open-file limit {limit})")
        }
        _ => format!(
            "{connections} connections with a thread each, and no file descriptor left even to read /proc/self \
             (open-file limit {limit})"
        ),
    }
}

async fn open_one(cell: &Cell, workload: Workload, knobs: &Knobs, db: usize) -> Result<Connection> {
    let path = workload.database_path(cell, db);
    let conn = Connection::open_with_flags(&path, connect::open_flags(knobs.mutex))
        .await
        .with_context(|| format!("cannot open {} with tokio-rusqlite", path.display()))?;
    let pragmas = knobs.connection_pragmas();
    conn.call(move |c| {
        Ok::<_, rusqlite::Error>(connect::apply(c, &pragmas).map_err(|e| format!("{e:#}")))
    })
    .await?
    .map_err(anyhow::Error::msg)?;
    Ok(conn)
}

impl Approach for TokioRusqlite {
    async fn point_read(&self, id: i64) -> Result<()> {
        Ok(self
            .db(0)?
            .reader
            .call(move |c| ops::point_read(c, id))
            .await?)
    }

    async fn counted_read(&self, id: i64, count: i64) -> Result<()> {
        self.db(0)?
            .reader
            .call(move |c| ops::counted_read(c, id, count))
            .await?;
        Ok(())
    }

    async fn time_counted_read(&self, id: i64, count: i64) -> Result<Duration> {
        Ok(self
            .db(0)?
            .reader
            .call(move |c| ops::time_counted_read(c, id, count))
            .await?)
    }

    async fn insert(&self, item: NewItem) -> Result<()> {
        Ok(self
            .db(0)?
            .writer
            .call(move |c| ops::insert(c, &item))
            .await?)
    }

    async fn update(&self, id: i64, delta: i64) -> Result<()> {
        Ok(self
            .db(0)?
            .writer
            .call(move |c| ops::update(c, id, delta))
            .await?)
    }

    async fn join_read(&self, db: usize, account: i64) -> Result<()> {
        Ok(self
            .db(db)?
            .reader
            .call(move |c| ops::join_read(c, account))
            .await?)
    }

    async fn paced_write(&self, db: usize, block: Block, delay: Duration) -> Result<()> {
        Ok(self
            .db(db)?
            .writer
            .call(move |c| ops::paced_write(c, &block, delay))
            .await?)
    }

    async fn insert_batch(&self, items: Vec<NewItem>, think: Duration) -> Result<()> {
        Ok(self
            .db(0)?
            .writer
            .call(move |c| ops::insert_batch(c, &items, think))
            .await?)
    }

    async fn count_items(&self) -> Result<u64> {
        Ok(self.db(0)?.writer.call(|c| ops::count_items(c)).await?)
    }

    async fn publish(&self, job: NewJob) -> Result<()> {
        Ok(self
            .db(0)?
            .writer
            .call(move |c| ops::publish(c, &job))
            .await?)
    }

    async fn claim(&self, owner: i64, now_ms: i64) -> Result<Option<i64>> {
        Ok(self
            .db(0)?
            .writer
            .call(move |c| ops::claim(c, owner, now_ms))
            .await?)
    }

    async fn ack(&self, id: i64, owner: i64) -> Result<()> {
        Ok(self
            .db(0)?
            .writer
            .call(move |c| ops::ack(c, id, owner))
            .await?)
    }

    async fn orm(&self, op: OrmOp, key: i64, txn: bool) -> Result<()> {
        Ok(self
            .db(0)?
            .writer
            .call(move |c| ops::orm(c, op, key, txn))
            .await?)
    }

    async fn custom(&self, writes: bool, statements: Vec<Bound>) -> Result<()> {
        let db = self.db(0)?;
        let conn = if writes { &db.writer } else { &db.reader };
        Ok(conn
            .call(move |c| ops::custom(c, writes, &statements))
            .await?)
    }

    fn open_databases(&self) -> Option<u64> {
        Some(self.dbs.len() as u64)
    }
}
