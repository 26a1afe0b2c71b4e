//! `ceiling`: the workload's statements on plain rusqlite connections, one per core, synchronous, point reads in a
//! snapshot kept until a commit moves past it and writes grouped per commit
//! ([`quicklite_lab_core::drive_ceiling`]) — no async at all, for the tables' "% of ceiling".

use anyhow::{Context, Result};
use quicklite_lab_core::{
    Bound, CeilingConnection, CeilingSnapshot, CeilingWrite, Cell, Environment, Knobs, Workload,
};
use rusqlite::{Connection, TransactionBehavior};

use crate::sqlite::connect;
use crate::sqlite::ops;
use crate::sqlite::report::SqliteFacts;

/// One ceiling thread's connection.
pub struct Ceiling {
    conn: Connection,
    /// Whether a read transaction its point reads began is still open.
    reading: bool,
}

impl Ceiling {
    /// Opens a connection to the cell's database with its knobs — but, where the workload writes between reads, with
    /// no memory map unless the cell sets one: with a map, each read transaction that follows another connection's
    /// commit unmaps it (docs/design.md), which the ceiling of what the machine allows need not pay.
    pub fn open(cell: &Cell, workload: Workload, knobs: &Knobs) -> Result<Self> {
        let conn = connect::open(&workload.database_path(cell, 0), knobs)?;
        if matches!(workload, Workload::Mixed | Workload::WriteRead) && cell.mmap_size.is_none() {
            conn.pragma_update(None, "mmap_size", 0)?;
        }
        Ok(Self {
            conn,
            reading: false,
        })
    }

    /// Ends the read transaction the point reads left open, if any.
    fn end_reading(&mut self) -> Result<()> {
        if std::mem::take(&mut self.reading) {
            self.conn.execute_batch("COMMIT")?;
        }
        Ok(())
    }

    /// Fills the SQLite fields of `env` from this connection.
    pub fn describe(&self, env: &mut Environment) -> Result<()> {
        SqliteFacts::read(&self.conn)?.fill(env);
        Ok(())
    }
}

impl CeilingConnection for Ceiling {
    fn reads(&mut self, ids: &[i64], snapshot: CeilingSnapshot) -> Result<()> {
        if snapshot == CeilingSnapshot::New {
            self.end_reading()?;
        }
        if !self.reading {
            self.conn.execute_batch("BEGIN")?;
            self.reading = true;
        }
        for &id in ids {
            ops::point_read(&self.conn, id)?;
        }
        Ok(())
    }

    fn writes(&mut self, writes: &[CeilingWrite]) -> Result<()> {
        self.end_reading()?;
        let write = |conn: &Connection, write: &CeilingWrite| match write {
            CeilingWrite::Insert(item) => ops::insert(conn, item),
            CeilingWrite::Update { id, delta } => ops::update(conn, *id, *delta),
            CeilingWrite::Publish(job) => ops::publish(conn, job),
            CeilingWrite::Ack { id, owner } => ops::ack(conn, *id, *owner),
        };
        if let [one] = writes {
            return Ok(write(&self.conn, one)?);
        }
        let txn = self
            .conn
            .transaction_with_behavior(TransactionBehavior::Immediate)?;
        for w in writes {
            write(&txn, w)?;
        }
        Ok(txn.commit()?)
    }

    fn custom(&mut self, writes: bool, transactions: &[Vec<Bound>]) -> Result<()> {
        self.end_reading()?;
        if let [one] = transactions {
            return Ok(ops::custom(&self.conn, writes, one)?);
        }
        let behavior = if writes {
            TransactionBehavior::Immediate
        } else {
            TransactionBehavior::Deferred
        };
        let txn = self.conn.transaction_with_behavior(behavior)?;
        for statements in transactions {
            ops::custom_statements(&txn, statements)?;
        }
        Ok(txn.commit()?)
    }

    fn claims(&mut self, owners: &[i64], now_ms: i64) -> Result<Vec<i64>> {
        self.end_reading()?;
        let claim = |conn: &Connection, owner: i64| {
            ops::claim(conn, owner, now_ms)?.context("claim found no unclaimed job")
        };
        if let [owner] = owners {
            return Ok(vec![claim(&self.conn, *owner)?]);
        }
        let txn = self
            .conn
            .transaction_with_behavior(TransactionBehavior::Immediate)?;
        let ids = owners
            .iter()
            .map(|&owner| claim(&txn, owner))
            .collect::<Result<Vec<_>>>()?;
        txn.commit()?;
        Ok(ids)
    }
}
