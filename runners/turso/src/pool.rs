//! A pool of Turso connections: a task takes one for an operation and gives it back.
//!
//! A `turso::Connection` runs one statement at a time, and a transaction belongs to its connection, so concurrent
//! tasks need connections of their own; opening one is cheap (Turso shares the database's state between them) but
//! sets the cell's PRAGMAs, so idle connections are kept for the next task, as deadpool or sqlx's pool keep theirs.
//! There is no bound: at most one connection per client task is ever open (64 at 64 tasks).

use std::ops::Deref;
use std::sync::Mutex;

use anyhow::Result;
use quicklite_lab_core::Pragma;
use turso::{Connection, Database};

use crate::database;

/// Idle connections of one database.
pub struct Pool {
    /// Where new connections come from.
    db: Database,
    /// The PRAGMAs every new connection is given.
    pragmas: Vec<Pragma>,
    /// Connections no task holds, most recently returned last (the warmest taken first).
    idle: Mutex<Vec<Connection>>,
}

impl Pool {
    /// A pool of connections to `db`, each opened with `pragmas`.
    pub fn new(db: Database, pragmas: Vec<Pragma>) -> Self {
        Self {
            db,
            pragmas,
            idle: Mutex::new(Vec::new()),
        }
    }

    /// An idle connection, or a new one.
    pub async fn get(&self) -> Result<Pooled<'_>> {
        let idle = self.idle.lock().unwrap_or_else(|e| e.into_inner()).pop();
        let conn = match idle {
            Some(conn) => conn,
            None => database::connect(&self.db, &self.pragmas).await?,
        };
        Ok(Pooled {
            pool: self,
            conn: Some(conn),
        })
    }
}

/// A connection taken from a [`Pool`], given back when dropped.
pub struct Pooled<'p> {
    /// Where it goes back.
    pool: &'p Pool,
    /// `Some` until dropped.
    conn: Option<Connection>,
}

impl Deref for Pooled<'_> {
    type Target = Connection;

    fn deref(&self) -> &Connection {
        self.conn.as_ref().expect("present until dropped")
    }
}

impl Drop for Pooled<'_> {
    fn drop(&mut self) {
        if let Some(conn) = self.conn.take() {
            // A connection left inside a transaction (its operation cancelled half-way) is not given back: the next
            // task would find that transaction open.
            if conn.is_autocommit().unwrap_or(false) {
                self.pool
                    .idle
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .push(conn);
            }
        }
    }
}
