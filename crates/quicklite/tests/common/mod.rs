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
