//! Beside another connection that holds the write lock — Litestream around each of its checkpoints, another
//! program writing the file: a write waits for the lock past the busy timeout, up to its deadline or
//! `write_lock_wait`; one that gives up did not run and is told who held the lock; a write whose deadline comes
//! first leaves its group while the others wait on; on both backends.

use std::time::{Duration, Instant};

use quicklite::{Error, RequestKind};

mod common;

use common::{both_backends, count};

/// A database of `backend`, set up by `configure`, with an empty table `t (x)`.
async fn table_t(
    backend: common::Backend,
    configure: impl Fn(quicklite::Builder) -> quicklite::Builder + Send + Sync + 'static,
) -> common::TestDb {
    let db = common::open(backend, configure).await;
    db.execute_batch("CREATE TABLE t (x)").await.unwrap();
    db
}

/// Another connection to `path` (as another process's would be) holding the write lock, with a row of its own
/// written and not committed.
fn holding_the_write_lock(path: &std::path::Path) -> rusqlite::Connection {
    let other = rusqlite::Connection::open(path).unwrap();
    other
        .execute_batch("BEGIN IMMEDIATE; INSERT INTO t VALUES ('theirs')")
        .unwrap();
    other
}

both_backends! {
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_write_waits_past_the_busy_timeout_for_the_write_lock_another_connection_holds(backend) {
        let db = table_t(backend, |b| b.busy_timeout(Duration::from_millis(100))).await;
        let other = holding_the_write_lock(db.path());
        let retries_before = db.metrics().busy_retries;
        let write = tokio::spawn({
            let db = db.db.clone();
            async move { db.execute("INSERT INTO t VALUES ('ours')", ()).await }
        });
        // The busy handler sleeps at least a millisecond before each retry: 300 retries are 300 ms of waiting,
        // three times the busy timeout, after which the writer used to give up with SQLITE_BUSY.
        let guard = Instant::now() + Duration::from_secs(60);
        while !write.is_finished() && db.metrics().busy_retries < retries_before + 300 {
            assert!(Instant::now() < guard, "the writer never waited");
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        if write.is_finished() {
            panic!("the write gave up on the lock: {:?}", write.await.unwrap());
        }
        other.execute_batch("COMMIT").unwrap();
        assert_eq!(write.await.unwrap().unwrap(), 1);
        assert_eq!(count(&db, "t").await, 2);
        assert_eq!(db.metrics().busy_timeouts, 0, "{:#?}", db.metrics());
        db.close().await;
    }
}

both_backends! {
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_write_that_waited_write_lock_wait_did_not_run_and_says_who_held_the_lock(backend) {
        let wait = Duration::from_millis(200);
        let db = table_t(backend, move |b| b.write_lock_wait(wait)).await;
        let other = holding_the_write_lock(db.path());
        // One statement alone, a closure in a group of its own, a transaction of its own.
        let refused = [
            db.execute("INSERT INTO t VALUES ('statement')", ()).await.map(|_| ()),
            db.write(|c| c.execute("INSERT INTO t VALUES ('grouped')", []).map(|_| ())).await,
            db.transaction(|c| c.execute("INSERT INTO t VALUES ('alone')", []).map(|_| ())).await,
        ];
        for outcome in refused {
            let e = outcome.unwrap_err();
            let Error::WriteLockHeld { waited, pid, .. } = &e else {
                panic!("not WriteLockHeld: {e:?}");
            };
            assert!(*waited >= wait, "gave up after {waited:?}");
            // The other connection is in this process; `/proc/locks` says so.
            if cfg!(target_os = "linux") {
                assert_eq!(*pid, Some(std::process::id()), "{e}");
                assert!(e.to_string().contains("a connection of this process"), "{e}");
            }
            assert_eq!(e.sqlite_code(), Some(rusqlite::ErrorCode::DatabaseBusy));
        }
        other.execute_batch("COMMIT").unwrap();
        db.execute("INSERT INTO t VALUES ('after')", ()).await.unwrap();
        let rows = db
            .query_all("SELECT x FROM t ORDER BY rowid", (), |r| r.get::<_, String>(0))
            .await
            .unwrap();
        assert_eq!(rows, ["theirs", "after"], "none of the refused writes ran");
        assert_eq!(db.metrics().busy_timeouts, 3, "{:#?}", db.metrics());
        db.close().await;
    }
}

both_backends! {
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_write_whose_deadline_comes_while_its_group_waits_for_the_lock_times_out_and_the_others_wait_on(backend) {
        let db = table_t(backend, |b| b.busy_timeout(Duration::from_millis(100))).await;
        let other = holding_the_write_lock(db.path());
        // Occupy the writer without taking the lock (autocommit, no statement), so that two writes queue and are
        // taken together as one group.
        let (release, released) = std::sync::mpsc::channel::<()>();
        let (started, running) = tokio::sync::oneshot::channel::<()>();
        let blocker = tokio::spawn({
            let db = db.db.clone();
            async move {
                db.with_write_connection(move |_| {
                    let _ = started.send(());
                    let _ = released.recv();
                    Ok(())
                })
                .await
            }
        });
        running.await.unwrap();
        let timeout = Duration::from_millis(500);
        let hasty = tokio::spawn({
            let db = db.with_timeout(timeout);
            async move { db.execute("INSERT INTO t VALUES ('hasty')", ()).await }
        });
        common::until_write_queue_holds(&db, 1).await;
        let patient = tokio::spawn({
            let db = db.db.clone();
            async move { db.execute("INSERT INTO t VALUES ('patient')", ()).await }
        });
        common::until_write_queue_holds(&db, 2).await;
        release.send(()).unwrap();
        blocker.await.unwrap().unwrap();

        let e = hasty.await.unwrap().unwrap_err();
        assert!(
            matches!(e, Error::Timeout { timeout: t, request: RequestKind::Write, ran: false } if t == timeout),
            "{e:?}"
        );
        assert!(!patient.is_finished(), "{:?}", patient.await);
        other.execute_batch("COMMIT").unwrap();
        assert_eq!(patient.await.unwrap().unwrap(), 1);
        let rows = db
            .query_all("SELECT x FROM t ORDER BY rowid", (), |r| r.get::<_, String>(0))
            .await
            .unwrap();
        assert_eq!(rows, ["theirs", "patient"]);
        db.close().await;
    }
}
