//! `trailbase-sqlite`: the real `trailbase-sqlite` 0.3 crate, TrailBase's async SQLite connection — a writer thread
//! and reader threads, each owning one SQLite connection, fed closures through channels.
//!
//! Reads go through its read methods (`read_query_row_f`, `read_query_rows`), which its reader threads serve;
//! writes through its write methods (`execute`, `call`), which its writer thread serves. Every SQLite connection
//! sits behind one read-write lock that a write holds exclusively, so a read waits while a write runs. Each
//! database gets one `Connection`, as TrailBase opens its own databases.
//!
//! A custom workload's lone read statement goes through `read_query_rows`, its other transactions through `call`:
//! trailbase-sqlite runs closures only on its writer thread, and a read of several statements needs one snapshot,
//! which its read methods (a statement each, on whichever reader thread is free) cannot give.

use std::time::Duration;

use anyhow::{Context, Result};
use quicklite_lab_core::{
    Approach, Block, Bound, Cell, Environment, Knobs, NewItem, Param, Workload, process, sql,
};
use rusqlite::types::Value;
use trailbase_sqlite::Connection;
use trailbase_sqlite::connection::Options;

use crate::sqlite::report::SqliteFacts;
use crate::sqlite::{connect, ops};

/// trailbase-sqlite connections, one per database.
pub struct TrailbaseSqlite {
    /// Indexed by database.
    dbs: Vec<Connection>,
}

impl TrailbaseSqlite {
    /// Opens a `Connection` per database, every SQLite connection with the cell's flags and PRAGMAs, and
    /// describes database 0 into `env`.
    pub async fn open(
        cell: &Cell,
        workload: Workload,
        knobs: &Knobs,
        env: &mut Environment,
    ) -> Result<Self> {
        let options = options(knobs)?;
        let databases = workload.databases(cell);
        let mut dbs = Vec::with_capacity(databases);
        for db in 0..databases {
            let path = workload.database_path(cell, db);
            // Called once per SQLite connection: the writer's, then each reader's.
            let builder = || connect::open(&path, knobs);
            // At thousands of databases this is where threads and open files meet the process's limits: say
            // which limit, not just which file.
            let conn = Connection::new(builder, Some(options.clone())).with_context(|| {
                format!(
                    "trailbase-sqlite opened {db} of {databases} databases (each with {} threads); now {}",
                    1 + options.n_read_threads,
                    process_usage()
                )
            })?;
            dbs.push(conn);
        }
        let facts = dbs[0]
            .call(|c| Ok(SqliteFacts::read(c).map_err(|e| format!("{e:#}"))))
            .await?;
        facts.map_err(anyhow::Error::msg)?.fill(env);
        Ok(Self { dbs })
    }

    fn db(&self, db: usize) -> Result<&Connection> {
        self.dbs
            .get(db)
            .with_context(|| format!("no database {db}"))
    }
}

/// The `Options` of every `Connection`: as many reader threads as TrailBase gives its own databases (the machine's
/// parallelism, clamped to 2..=4), and the cell's `busy_timeout`, which trailbase-sqlite sets on each SQLite
/// connection after the builder's PRAGMAs (zero, SQLite's default, when the profile sets none).
fn options(knobs: &Knobs) -> Result<Options> {
    let busy_timeout = match knobs
        .connection_pragmas()
        .iter()
        .find(|p| p.name == "busy_timeout")
    {
        Some(pragma) => Duration::from_millis(
            pragma
                .value
                .parse()
                .with_context(|| format!("busy_timeout `{}` is not milliseconds", pragma.value))?,
        ),
        None => Duration::ZERO,
    };
    let n_read_threads = std::thread::available_parallelism().map_or(4, |n| n.get().clamp(2, 4));
    Ok(Options {
        busy_timeout,
        n_read_threads,
    })
}

/// Threads and open files of the process against its open-file limit, for error messages.
fn process_usage() -> String {
    let limit = process::open_files_limits()
        .map_or_else(|_| "unknown".to_string(), |(soft, _)| soft.to_string());
    match (process::threads(), process::open_files()) {
        (Some(threads), Some(files)) => {
            format!("{threads} threads, {files} open files (open-file limit {limit})")
        }
        _ => format!("no file descriptor left even to read /proc/self (open-file limit {limit})"),
    }
}

impl Approach for TrailbaseSqlite {
    async fn point_read(&self, id: i64) -> Result<()> {
        let row = self
            .db(0)?
            .read_query_row_f(sql::POINT_READ, trailbase_sqlite::params!(id), |r| {
                let (_id, _name, _value, _payload): (i64, String, i64, String) =
                    (r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?);
                Ok::<_, rusqlite::Error>(())
            })
            .await?;
        row.with_context(|| format!("no item {id}"))
    }

    async fn insert(&self, item: NewItem) -> Result<()> {
        self.db(0)?
            .execute(
                sql::INSERT_ITEM,
                trailbase_sqlite::params!(item.name, item.value, item.payload),
            )
            .await?;
        Ok(())
    }

    async fn update(&self, id: i64, delta: i64) -> Result<()> {
        self.db(0)?
            .execute(sql::UPDATE_ITEM, trailbase_sqlite::params!(id, delta))
            .await?;
        Ok(())
    }

    async fn join_read(&self, db: usize, account: i64) -> Result<()> {
        // Every row and column, materialized as trailbase-sqlite's `Rows` of values.
        self.db(db)?
            .read_query_rows(sql::ACCOUNT_HISTORY, trailbase_sqlite::params!(account))
            .await?;
        Ok(())
    }

    async fn paced_write(&self, db: usize, block: Block, delay: Duration) -> Result<()> {
        self.db(db)?
            .call(move |c| Ok(ops::paced_write(c, &block, delay)?))
            .await?;
        Ok(())
    }

    async fn custom(&self, writes: bool, statements: Vec<Bound>) -> Result<()> {
        if !writes && statements.len() == 1 {
            // Every row and column, materialized as trailbase-sqlite's `Rows` of values.
            let Bound { sql, params } = statements.into_iter().next().expect("one statement");
            let values: Vec<Value> = params.into_iter().map(value).collect();
            self.db(0)?.read_query_rows(sql, values).await?;
        } else {
            self.db(0)?
                .call(move |c| Ok(ops::custom(c, writes, &statements)?))
                .await?;
        }
        Ok(())
    }

    fn open_databases(&self) -> Option<u64> {
        Some(self.dbs.len() as u64)
    }
}

/// A lab-core parameter as a rusqlite value, for trailbase-sqlite's owned parameters.
fn value(param: Param) -> Value {
    match param {
        Param::Int(v) => Value::Integer(v),
        Param::Text(v) => Value::Text(v),
        Param::Blob(v) => Value::Blob(v),
    }
}
