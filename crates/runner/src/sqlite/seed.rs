//! Seeding: schema and rows, before the warm-up, with plain rusqlite in one transaction per database.

use anyhow::{Context, Result};
use quicklite_lab_core::{Cell, Knobs, Workload};
use rusqlite::Connection;

use super::{connect, ops};

/// Creates and fills every database of the cell. Sets the profile's file-level PRAGMAs (`journal_mode`) too,
/// which then hold for every connection the approach opens later.
pub fn seed_databases(cell: &Cell, workload: Workload, knobs: &Knobs) -> Result<()> {
    std::fs::create_dir_all(&cell.dir)
        .with_context(|| format!("cannot create the cell directory {}", cell.dir))?;
    for db in 0..workload.databases(cell) {
        let path = workload.database_path(cell, db);
        let conn = Connection::open_with_flags(&path, connect::open_flags(knobs.mutex))
            .with_context(|| format!("cannot create {}", path.display()))?;
        connect::apply(&conn, &knobs.pragmas())?;
        seed_one(&conn, cell, workload, db)
            .with_context(|| format!("cannot seed {}", path.display()))?;
    }
    Ok(())
}

fn seed_one(conn: &Connection, cell: &Cell, workload: Workload, db: usize) -> rusqlite::Result<()> {
    conn.execute_batch(workload.schema())?;
    conn.execute_batch("BEGIN")?;
    for statement in workload.seed_rows(cell, db) {
        ops::execute(conn, statement.sql, &statement.params)?;
    }
    conn.execute_batch("COMMIT")
}
