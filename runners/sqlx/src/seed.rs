//! Seeding with sqlx itself (this runner has no rusqlite): the same schema, rows and single transaction per
//! database as the other runners, before the warm-up.

use anyhow::{Context, Result};
use quicklite_lab_core::{Cell, Knobs, Workload};
use sqlx::{Connection, SqliteConnection};

use crate::pool::{bound, connect_options};

/// Creates and fills every database of the cell, setting the profile's PRAGMAs (`journal_mode` included).
pub async fn seed_databases(cell: &Cell, workload: Workload, knobs: &Knobs) -> Result<()> {
    std::fs::create_dir_all(&cell.dir)
        .with_context(|| format!("cannot create the cell directory {}", cell.dir))?;
    for db in 0..workload.databases(cell) {
        let path = workload.database_path(cell, db);
        let mut conn = SqliteConnection::connect_with(&connect_options(&path, knobs))
            .await
            .with_context(|| format!("cannot create {}", path.display()))?;
        sqlx::raw_sql(workload.schema()).execute(&mut conn).await?;
        let mut tx = conn.begin().await?;
        for statement in workload.seed_rows(cell, db) {
            bound(statement.sql, &statement.params)
                .execute(&mut *tx)
                .await?;
        }
        tx.commit()
            .await
            .with_context(|| format!("cannot seed {}", path.display()))?;
        conn.close().await?;
    }
    Ok(())
}
