//! quicklite with its default features (serde, prometheus) in a project on rusqlite 0.43: rows typed with serde,
//! and the WAL's frames as quicklite counts them beside rusqlite 0.43's own no-op checkpoint, one SQLite for both.

use rusqlite::wal::CheckpointMode;

/// A row of the project's table, deserialized by column name.
#[derive(Debug, PartialEq, serde::Deserialize)]
struct Item {
    id: i64,
    name: String,
    note: Option<String>,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("service.db");
    let db = quicklite::Database::builder(&path)
        .checkpointing(quicklite::Checkpointing::Sqlite)
        .open()
        .await?;
    db.execute_batch("CREATE TABLE item (id INTEGER PRIMARY KEY, name TEXT NOT NULL, note TEXT)")
        .await?;
    db.execute("INSERT INTO item (name) VALUES (?1)", ("tea",))
        .await?;
    let items: Vec<Item> = db.query_all_as("SELECT * FROM item", ()).await?;
    anyhow::ensure!(
        items
            == [Item {
                id: 1,
                name: "tea".into(),
                note: None
            }],
        "quicklite read {items:?}"
    );

    // rusqlite 0.43's API on a connection of the project's own, against quicklite's count of the same WAL.
    let other = rusqlite::Connection::open(&path)?;
    other.query_row("SELECT count(*) FROM item", [], |r| r.get::<_, i64>(0))?;
    let (frames, _) = other.wal_checkpoint_v2(Some(rusqlite::MAIN_DB), CheckpointMode::NOOP)?;
    let counted = db.metrics().wal_frames;
    anyhow::ensure!(
        frames > 0 && u64::try_from(frames)? == counted,
        "rusqlite counts {frames} frames, quicklite {counted}"
    );
    anyhow::ensure!(quicklite::wal_frames(&other) == Some(counted));
    let exported = quicklite::prometheus::render(&[("service", &db.metrics())]);
    anyhow::ensure!(
        exported.contains(&format!(
            "quicklite_wal_frames{{database=\"service\"}} {counted}"
        )),
        "{exported}"
    );
    drop(other);
    db.close().await?;
    println!(
        "quicklite with its default features on rusqlite 0.43, SQLite {}: typed rows, and {counted} WAL frames \
         counted alike by quicklite and rusqlite's no-op checkpoint",
        rusqlite::version()
    );
    Ok(())
}
