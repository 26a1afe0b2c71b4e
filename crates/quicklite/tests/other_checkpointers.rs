//! Beside another program that holds long reads or checkpoints the database itself: checkpoints that gave up
//! waiting for readers back off instead of stalling the writer at every threshold; Litestream's tables make the
//! writer leave checkpoints that wait for readers to it; a WAL grown past its warning size is said once; on both
//! backends.

use std::time::{Duration, Instant};

use quicklite::Checkpointing;

mod common;

use common::both_backends;

/// Small thresholds, so that a few hundred inserts cross the `RESTART` one many times.
fn small_thresholds(b: quicklite::Builder) -> quicklite::Builder {
    b.checkpointing(Checkpointing::Managed {
        passive_at_frames: 10,
        restart_at_frames: 20,
        reader_wait: Duration::from_millis(20),
        truncate_when_idle: Some(Duration::from_millis(50)),
    })
}

/// A connection of another program holding a read transaction on `path`, as Litestream does.
fn foreign_reader(path: &std::path::Path) -> rusqlite::Connection {
    let conn = rusqlite::Connection::open(path).unwrap();
    conn.execute_batch("BEGIN").unwrap();
    let _: i64 = conn
        .query_row("SELECT count(*) FROM sqlite_master", [], |r| r.get(0))
        .unwrap();
    conn
}

/// Inserts one row at a time for `time`, each its own commit; returns how many.
async fn insert_for(db: &quicklite::Database, time: Duration) -> i64 {
    let started = Instant::now();
    let mut n = 0_i64;
    while started.elapsed() < time {
        db.execute("INSERT INTO log (body) VALUES (randomblob(2000))", ())
            .await
            .unwrap();
        n += 1;
    }
    n
}

both_backends! {
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn checkpoints_that_give_up_on_a_long_reader_back_off(backend) {
        let db = common::open(backend, small_thresholds).await;
        db.execute_batch("CREATE TABLE log (id INTEGER PRIMARY KEY, body BLOB)").await.unwrap();
        let foreign = foreign_reader(db.path());
        // Without the back-off, a RESTART would wait (and give up) every ten frames: hundreds of times.
        let inserted = insert_for(&db, Duration::from_millis(2_500)).await;
        let m = db.metrics();
        assert!(inserted > 100, "{inserted} inserts");
        // At the start, after 1 s and after 3 s at most (the idle truncation too waits for the back-off).
        assert!(
            (1..=3).contains(&m.checkpoint_reader_waits_given_up),
            "{} give-ups in {inserted} inserts",
            m.checkpoint_reader_waits_given_up
        );
        assert!(m.checkpoints > m.checkpoint_reader_waits_given_up, "PASSIVE ones went on: {m:#?}");
        assert!(!m.another_checkpointer);
        drop(foreign);
        assert_eq!(common::count(&db, "log").await, inserted);
        db.close().await;
    }
}

/// Litestream's start on a database (in WAL mode, which it requires): its two tables, and a read transaction it
/// keeps open.
fn litestream_starts(path: &std::path::Path) -> rusqlite::Connection {
    let conn = rusqlite::Connection::open(path).unwrap();
    conn.busy_timeout(Duration::from_secs(5)).unwrap();
    conn.execute_batch(
        "PRAGMA journal_mode = WAL;
         CREATE TABLE IF NOT EXISTS _litestream_seq (id INTEGER PRIMARY KEY, seq INTEGER);
         CREATE TABLE IF NOT EXISTS _litestream_lock (id INTEGER);
         BEGIN;
         SELECT count(*) FROM _litestream_seq;",
    )
    .unwrap();
    conn
}

both_backends! {
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn once_litestream_replicates_the_database_no_checkpoint_waits_for_readers(backend) {
        // Litestream already there when the database opens.
        let dir = tempfile::tempdir().unwrap();
        let litestream = litestream_starts(&dir.path().join("db.db"));
        let db = common::open_in(backend, dir.path(), small_thresholds).await;
        db.execute_batch("CREATE TABLE log (id INTEGER PRIMARY KEY, body BLOB)").await.unwrap();
        let inserted = insert_for(&db, Duration::from_millis(1_000)).await;
        // Idle past `truncate_when_idle`: no truncation waits for the reader either.
        tokio::time::sleep(Duration::from_millis(200)).await;
        let m = db.metrics();
        assert!(m.another_checkpointer, "{m:#?}");
        assert_eq!(m.checkpoint_reader_waits_given_up, 0, "{m:#?}");
        assert!(m.checkpoints > 0, "PASSIVE checkpoints still run: {m:#?}");
        drop(litestream);
        assert_eq!(common::count(&db, "log").await, inserted);
        db.close().await;

        // Litestream starting while the database is open: seen at the first checkpoint that gives up.
        let db = common::open(backend, small_thresholds).await;
        db.execute_batch("CREATE TABLE log (id INTEGER PRIMARY KEY, body BLOB)").await.unwrap();
        let litestream = litestream_starts(db.path());
        let inserted = insert_for(&db, Duration::from_millis(1_500)).await;
        let m = db.metrics();
        assert!(m.another_checkpointer, "{m:#?}");
        assert_eq!(m.checkpoint_reader_waits_given_up, 1, "{m:#?}");
        drop(litestream);
        assert_eq!(common::count(&db, "log").await, inserted);
        db.close().await;
        let conn = rusqlite::Connection::open(db.path()).unwrap();
        let ok: String = conn.query_row("PRAGMA integrity_check", [], |r| r.get(0)).unwrap();
        assert_eq!(ok, "ok");
    }
}

both_backends! {
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_wal_past_its_warning_size_is_counted_once_until_it_shrinks(backend) {
        let db = common::open(backend, |b| {
            b.checkpointing(Checkpointing::External).wal_size_warning(Some(256 * 1024))
        })
        .await;
        db.execute_batch("CREATE TABLE log (id INTEGER PRIMARY KEY, body BLOB)").await.unwrap();
        // About 1 MiB of WAL: past the size, once.
        for _ in 0..400 {
            db.execute("INSERT INTO log (body) VALUES (randomblob(2000))", ()).await.unwrap();
        }
        let m = db.metrics();
        assert!(m.wal_bytes > 512 * 1024, "{m:#?}");
        assert_eq!(m.wal_size_warnings, 1, "{m:#?}");
        // The owner of checkpoints truncates the WAL; past the size again, a second warning.
        db.with_write_connection(|c| c.execute_batch("PRAGMA wal_checkpoint(TRUNCATE)")).await.unwrap();
        for _ in 0..400 {
            db.execute("INSERT INTO log (body) VALUES (randomblob(2000))", ()).await.unwrap();
        }
        assert_eq!(db.metrics().wal_size_warnings, 2);
        db.close().await;
    }
}
