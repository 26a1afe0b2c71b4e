//! quicklite in a service whose other crates are on rusqlite 0.40: the schema migrated by rusqlite_migration through
//! quicklite's writer connection, writes of each library read back through the other, one SQLite for all of them.

use rusqlite_migration::{M, Migrations};

/// The service's schema, as rusqlite_migration keeps it (in `PRAGMA user_version`).
const MIGRATIONS: &[M<'static>] = &[
    M::up("CREATE TABLE item (id INTEGER PRIMARY KEY, name TEXT NOT NULL)"),
    M::up("CREATE INDEX item_name ON item (name)"),
];

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("service.db");
    let db = quicklite::Database::open(&path).await?;
    db.with_write_connection_mut(|conn| {
        Migrations::from_slice(MIGRATIONS)
            .to_latest(conn)
            .map_err(|e| rusqlite::Error::ToSqlConversionFailure(Box::new(e)))
    })
    .await?;
    let version: i64 = db
        .query_row("PRAGMA user_version", [], |r| r.get(0))
        .await?;
    anyhow::ensure!(version == 2, "user_version {version} after the migrations");

    db.execute(
        "INSERT INTO item (name) VALUES (?1)",
        ("written by quicklite",),
    )
    .await?;
    let other = tokio_rusqlite::Connection::open(&path).await?;
    let name: String = other
        .call(|c| c.query_row("SELECT name FROM item WHERE id = 1", [], |r| r.get(0)))
        .await?;
    anyhow::ensure!(
        name == "written by quicklite",
        "tokio-rusqlite read {name:?}"
    );
    other
        .call(|c| {
            c.execute(
                "INSERT INTO item (name) VALUES ('written by tokio-rusqlite')",
                [],
            )
        })
        .await?;
    let names: Vec<String> = db
        .query_all("SELECT name FROM item ORDER BY id", [], |r| r.get(0))
        .await?;
    anyhow::ensure!(
        names == ["written by quicklite", "written by tokio-rusqlite"],
        "quicklite read {names:?}"
    );
    other.close().await?;
    db.close().await?;
    println!(
        "quicklite beside tokio-rusqlite 0.8 and rusqlite_migration 2.6, one SQLite {}: the migrations and each \
         library's writes read back through the other",
        rusqlite::version()
    );
    Ok(())
}
