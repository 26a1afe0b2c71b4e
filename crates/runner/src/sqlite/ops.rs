//! The workload statements run on one rusqlite connection; every approach calls these, wherever it runs them.

use std::time::Duration;

use quicklite_lab_core::{Block, NewItem, Param, sql};
use rusqlite::types::{ToSqlOutput, ValueRef};
use rusqlite::{Connection, params, params_from_iter};

/// `point-read`: reads every column of the row; a missing row is an error (the driver only asks for
/// seeded ids).
pub fn point_read(conn: &Connection, id: i64) -> rusqlite::Result<()> {
    let mut stmt = conn.prepare_cached(sql::POINT_READ)?;
    let (_id, _name, _value, _payload): (i64, String, i64, String) =
        stmt.query_row([id], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)))?;
    Ok(())
}

/// `insert`: one row, autocommit unless the caller opened a transaction.
pub fn insert(conn: &Connection, item: &NewItem) -> rusqlite::Result<()> {
    let mut stmt = conn.prepare_cached(sql::INSERT_ITEM)?;
    stmt.execute(params![item.name, item.value, item.payload])?;
    Ok(())
}

/// `mixed`'s write: one update by primary key.
pub fn update(conn: &Connection, id: i64, delta: i64) -> rusqlite::Result<()> {
    let mut stmt = conn.prepare_cached(sql::UPDATE_ITEM)?;
    stmt.execute([id, delta])?;
    Ok(())
}

/// `multi-db`'s read: the account-history JOIN, every row and column read.
pub fn join_read(conn: &Connection, account: i64) -> rusqlite::Result<()> {
    let mut stmt = conn.prepare_cached(sql::ACCOUNT_HISTORY)?;
    let mut rows = stmt.query([account])?;
    while let Some(row) = rows.next()? {
        let _block: i64 = row.get(0)?;
        let _tx: i64 = row.get(1)?;
        let _to: i64 = row.get(2)?;
        let _amount: i64 = row.get(3)?;
        let _hash: Vec<u8> = row.get(4)?;
        let _timestamp: i64 = row.get(5)?;
        let _balance: Option<i64> = row.get(6)?;
    }
    Ok(())
}

/// `multi-db`'s write in its own transaction: `BEGIN IMMEDIATE`, the block's statements, the simulated slow
/// part (a blocking sleep of `delay` while holding the write lock, as seed 004's writer does), `COMMIT`.
pub fn paced_write(conn: &Connection, block: &Block, delay: Duration) -> rusqlite::Result<()> {
    conn.execute_batch("BEGIN IMMEDIATE")?;
    let outcome = append_block(conn, block, delay);
    match outcome {
        Ok(()) => conn.execute_batch("COMMIT"),
        Err(e) => {
            // The transaction is being abandoned; its own error is the one worth reporting.
            let _ = conn.execute_batch("ROLLBACK");
            Err(e)
        }
    }
}

/// The block's statements and the blocking `delay` (none in the `paced` write mode, where it is zero), inside a
/// transaction the caller manages (quicklite's write closure runs inside the writer's transaction).
pub fn append_block(conn: &Connection, block: &Block, delay: Duration) -> rusqlite::Result<()> {
    for statement in &block.statements {
        execute(conn, statement.sql, &statement.params)?;
    }
    if !delay.is_zero() {
        std::thread::sleep(delay);
    }
    Ok(())
}

/// Executes one statement with lab-core parameters, through the statement cache.
pub fn execute(conn: &Connection, sql: &str, params: &[Param]) -> rusqlite::Result<usize> {
    let mut stmt = conn.prepare_cached(sql)?;
    stmt.execute(params_from_iter(
        params.iter().map(|p| ToSqlOutput::Borrowed(value_ref(p))),
    ))
}

/// A lab-core parameter as a rusqlite value.
pub fn value_ref(param: &Param) -> ValueRef<'_> {
    match param {
        Param::Int(v) => ValueRef::Integer(*v),
        Param::Text(v) => ValueRef::Text(v.as_bytes()),
        Param::Blob(v) => ValueRef::Blob(v),
    }
}
