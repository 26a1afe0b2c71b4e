//! Seeding with sqlx itself (this runner has no rusqlite): the same schema, rows and single transaction as the
//! other runners, before the warm-up; for `multi-db`, database 0 is seeded and copied to the others.

use anyhow::{Context, Result};
use quicklite_lab_core::{Cell, Knobs, Workload};
use sqlx::{AssertSqlSafe, Connection, SqliteConnection};

use crate::pool::{bound, connect_options};

/// Creates and fills database 0, setting the profile's PRAGMAs (`journal_mode` included), and copies its file to
/// the cell's other databases, as the other runners do.
pub async fn seed_databases(cell: &Cell, workload: Workload, knobs: &Knobs) -> Result<()> {
    std::fs::create_dir_all(&cell.dir)
        .with_context(|| format!("cannot create the cell directory {}", cell.dir))?;
    let path = workload.database_path(cell, 0);
    let mut conn = SqliteConnection::connect_with(&connect_options(&path, knobs))
        .await
        .with_context(|| format!("cannot create {}", path.display()))?;
    sqlx::raw_sql(workload.schema()).execute(&mut conn).await?;
    let mut tx = conn.begin().await?;
    for statement in workload.seed_rows(cell) {
        bound(AssertSqlSafe(statement.sql), &statement.params)
            .execute(&mut *tx)
            .await?;
    }
    tx.commit()
        .await
        .with_context(|| format!("cannot seed {}", path.display()))?;
    // Closing the only connection folds the WAL back into the file, which is then copied whole.
    conn.close().await?;
    workload.copy_seeded_database(cell)
}
