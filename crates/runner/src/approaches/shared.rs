//! Connections shared by all tasks behind a `std::sync::Mutex`: the state behind `direct-blocking` and
//! `spawn-blocking`.

use std::sync::{Arc, Mutex};

use anyhow::{Context, Result, anyhow};
use quicklite_lab_core::{Cell, Environment, Knobs, Workload};
use rusqlite::Connection;

use crate::sqlite::connect;
use crate::sqlite::report::SqliteFacts;

/// A connection shared between tasks.
pub type Shared = Arc<Mutex<Connection>>;

/// The connections of one database.
struct DbConnections {
    /// Serves reads.
    reader: Shared,
    /// Serves writes.
    writer: Shared,
}

/// One shared connection per database for single-database workloads (reads and writes take turns on it, the
/// way an application with one global connection works). For `multi-db`, each database gets a read connection
/// and a write connection: in WAL mode readers need not wait for the writer, and sharing one connection would
/// make every read sit out the writer's simulated delay — measuring the sharing rather than the approach.
pub struct SharedConnections {
    /// Indexed by database.
    dbs: Vec<DbConnections>,
}

impl SharedConnections {
    /// Opens the connections of every database of the cell.
    pub fn open(cell: &Cell, workload: Workload, knobs: &Knobs) -> Result<Self> {
        let open = |db| -> Result<Shared> {
            Ok(Arc::new(Mutex::new(connect::open(
                &workload.database_path(cell, db),
                knobs,
            )?)))
        };
        let dbs = (0..workload.databases(cell))
            .map(|db| {
                let writer = open(db)?;
                let reader = if workload == Workload::MultiDb {
                    open(db)?
                } else {
                    writer.clone()
                };
                Ok(DbConnections { reader, writer })
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(Self { dbs })
    }

    /// Number of databases, all open for the whole run.
    pub fn databases(&self) -> usize {
        self.dbs.len()
    }

    /// The read connection of database `db`.
    pub fn reader(&self, db: usize) -> Result<&Shared> {
        self.dbs
            .get(db)
            .map(|d| &d.reader)
            .with_context(|| format!("no database {db}"))
    }

    /// The write connection of database `db`.
    pub fn writer(&self, db: usize) -> Result<&Shared> {
        self.dbs
            .get(db)
            .map(|d| &d.writer)
            .with_context(|| format!("no database {db}"))
    }

    /// Fills the SQLite fields of `env` from database 0's read connection.
    pub fn describe(&self, env: &mut Environment) -> Result<()> {
        with(self.reader(0)?, |conn| Ok(SqliteFacts::read(conn)))??.fill(env);
        Ok(())
    }
}

/// Runs `f` on the connection, holding its lock for the duration (on the calling thread).
pub fn with<T>(shared: &Shared, f: impl FnOnce(&Connection) -> rusqlite::Result<T>) -> Result<T> {
    let conn = shared
        .lock()
        .map_err(|_| anyhow!("a task panicked while holding the connection"))?;
    Ok(f(&conn)?)
}
