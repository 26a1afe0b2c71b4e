//! Seeding: schema and rows, before the warm-up, with plain rusqlite in one transaction; for `multi-db`, database 0
//! is seeded and its file copied to the others (10,000 ledgers seeded one by one would take minutes).

use anyhow::{Context, Result};
use quicklite_lab_core::{Cell, Knobs, Workload};
use rusqlite::Connection;

use super::{connect, ops};

/// Creates and fills every database of the cell. Sets the profile's file-level PRAGMAs (`journal_mode`) too,
/// which then hold for every connection the approach opens later, and for the copies.
pub fn seed_databases(cell: &Cell, workload: Workload, knobs: &Knobs) -> Result<()> {
    std::fs::create_dir_all(&cell.dir)
        .with_context(|| format!("cannot create the cell directory {}", cell.dir))?;
    let path = workload.database_path(cell, 0);
    let conn = Connection::open_with_flags(&path, connect::open_flags(knobs.mutex))
        .with_context(|| format!("cannot create {}", path.display()))?;
    connect::unlock(&conn)?;
    connect::apply(&conn, &knobs.pragmas())?;
    seed_one(&conn, cell, workload).with_context(|| format!("cannot seed {}", path.display()))?;
    // The last connection to close folds the WAL back into the file, so the file alone is the whole database.
    conn.close()
        .map_err(|(_, e)| e)
        .with_context(|| format!("cannot close {} after seeding", path.display()))?;
    workload.copy_seeded_database(cell)
}

fn seed_one(conn: &Connection, cell: &Cell, workload: Workload) -> rusqlite::Result<()> {
    conn.execute_batch(workload.schema())?;
    conn.execute_batch("BEGIN")?;
    for statement in workload.seed_rows(cell) {
        ops::execute(conn, &statement.sql, &statement.params)?;
    }
    conn.execute_batch("COMMIT")
}
