//! Helpers shared by the integration tests.
#![allow(dead_code)]

use std::sync::mpsc;
use std::time::Duration;

use quicklite::{Database, rusqlite};

/// A temporary directory with a database path inside it.
pub struct TempDb {
    pub dir: tempfile::TempDir,
    pub path: std::path::PathBuf,
}

pub fn temp_db() -> TempDb {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("test.db");
    TempDb { dir, path }
}

/// Occupies the writer until the returned sender is dropped or sent to, so that writes queued meanwhile are
/// committed together as one group. Returns after the blocking write has started running.
pub async fn hold_writer(db: &Database) -> (mpsc::Sender<()>, tokio::task::JoinHandle<()>) {
    let (release_tx, release_rx) = mpsc::channel::<()>();
    let (started_tx, started_rx) = tokio::sync::oneshot::channel::<()>();
    let db = db.clone();
    let handle = tokio::spawn(async move {
        db.transaction(move |_c: &rusqlite::Connection| {
            let _ = started_tx.send(());
            let _ = release_rx.recv();
            Ok(())
        })
        .await
        .expect("blocking write");
    });
    started_rx.await.expect("writer started the blocking write");
    (release_tx, handle)
}

/// Waits (without sleeping) until `n` write requests are queued behind the writer.
pub async fn until_write_queue_holds(db: &Database, n: usize) {
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while db.metrics().write_queue_depth < n {
        assert!(std::time::Instant::now() < deadline, "writes never queued");
        tokio::task::yield_now().await;
    }
}

/// Queues `n` writes made by `make(i)`, in order, behind a held writer, then lets the writer go, so that all of them
/// are committed as one group. Returns each write's own result, in order.
pub async fn one_group<T, F>(
    db: &Database,
    n: i64,
    make: impl Fn(i64) -> F,
) -> Vec<quicklite::Result<T>>
where
    F: FnOnce(&rusqlite::Connection) -> rusqlite::Result<T> + Send + 'static,
    T: Send + 'static,
{
    let (release, blocker) = hold_writer(db).await;
    let mut pending = Vec::new();
    for i in 0..n {
        let (db2, f) = (db.clone(), make(i));
        pending.push(tokio::spawn(async move { db2.write(f).await }));
        until_write_queue_holds(db, i as usize + 1).await;
    }
    release.send(()).expect("the held write is waiting");
    blocker.await.expect("blocking write task");
    let mut results = Vec::new();
    for p in pending {
        results.push(p.await.expect("write task"));
    }
    results
}

/// Number of rows in `table`, read through the handle (so through a reader's snapshot).
pub async fn count(db: &Database, table: &'static str) -> i64 {
    db.read(move |c| c.query_row(&format!("SELECT count(*) FROM {table}"), [], |r| r.get(0)))
        .await
        .expect("count rows")
}

/// Schema of the crash and power-cut tests: each write puts its id into both tables, so a half-applied write
/// shows as an id in one table only.
pub const PAIRED_TABLES: &str =
    "CREATE TABLE IF NOT EXISTS a (id INTEGER PRIMARY KEY, body BLOB NOT NULL);
     CREATE TABLE IF NOT EXISTS b (id INTEGER PRIMARY KEY, body BLOB NOT NULL);";

/// One write of `id` into both [`PAIRED_TABLES`].
pub async fn write_pair(db: &Database, id: i64) -> quicklite::Result<()> {
    db.write(move |c| {
        c.prepare_cached("INSERT INTO a VALUES (?1, randomblob(200))")?
            .execute([id])?;
        c.prepare_cached("INSERT INTO b VALUES (?1, randomblob(500))")?
            .execute([id])?;
        Ok(())
    })
    .await
}

/// The ids of `table`.
pub fn ids(conn: &rusqlite::Connection, table: &str) -> std::collections::BTreeSet<i64> {
    conn.prepare(&format!("SELECT id FROM {table}"))
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .collect::<rusqlite::Result<_>>()
        .unwrap()
}

/// After a crash or a power cut: the file opens with SQLite's own VFS, passes `integrity_check`, has both
/// [`PAIRED_TABLES`] or neither (their creation may itself be lost to a power cut), and every write is whole.
/// Returns the ids stored.
pub fn whole_writes(path: &std::path::Path) -> std::collections::BTreeSet<i64> {
    let conn = rusqlite::Connection::open(path).unwrap();
    let integrity: String = conn
        .query_row("PRAGMA integrity_check", [], |r| r.get(0))
        .unwrap();
    assert_eq!(integrity, "ok");
    let tables: i64 = conn
        .query_row(
            "SELECT count(*) FROM sqlite_schema WHERE type = 'table' AND name IN ('a', 'b')",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert!(tables == 0 || tables == 2, "{tables} of the 2 tables");
    if tables == 0 {
        return Default::default();
    }
    let (a, b) = (ids(&conn, "a"), ids(&conn, "b"));
    assert_eq!(a, b, "a write was half-applied");
    a
}

/// Names of the entries of `dir`, sorted.
pub fn entries(dir: &std::path::Path) -> std::collections::BTreeSet<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect()
}
