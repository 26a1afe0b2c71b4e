//! A write transaction held across `.await` (`Database::begin`): committed, rolled back, dropped, past its limit,
//! after a panic or a cancelled caller, with writes queued behind it — on a standalone database and on a registry's.

mod common;

use std::future::Future;
use std::sync::mpsc;
use std::time::Duration;

use quicklite::{Database, Error, Notice, QueueFull, Registry, Transaction, rusqlite};

use common::both_backends;

/// Bounds a wait that never ends when a transaction is not let go: a hang guard, not a timing assertion.
const HANG: Duration = Duration::from_secs(30);

/// `fut`, or a failure if it hangs.
async fn within<T>(what: &str, fut: impl Future<Output = T>) -> T {
    tokio::time::timeout(HANG, fut)
        .await
        .unwrap_or_else(|_| panic!("{what} hung"))
}

/// A database of `backend` with an empty table `t (id INTEGER PRIMARY KEY, v TEXT)`, and `configure`'s options.
async fn table_t(
    backend: common::Backend,
    configure: impl Fn(quicklite::Builder) -> quicklite::Builder + Send + Sync + 'static,
) -> common::TestDb {
    let db = common::open(backend, configure).await;
    db.execute_batch("CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT)")
        .await
        .unwrap();
    db
}

/// The ids in `t`, read through the handle.
async fn ids(db: &Database) -> Vec<i64> {
    db.query_all("SELECT id FROM t ORDER BY id", [], |r| r.get(0))
        .await
        .unwrap()
}

/// The ids in `t`, read by a connection of its own: what the file holds, whoever reads it.
fn ids_in_file(path: &std::path::Path) -> Vec<i64> {
    let conn = rusqlite::Connection::open(path).unwrap();
    common::ids(&conn, "t").into_iter().collect()
}

/// The writer serves other writes: one completes.
async fn writer_is_free(db: &Database, id: i64) {
    within(
        "a write after the transaction",
        db.execute("INSERT INTO t VALUES (?1, 'after')", (id,)),
    )
    .await
    .unwrap();
}

both_backends! {
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_committed_transaction_is_seen_by_other_callers_and_in_the_file(backend) {
        let db = table_t(backend, |b| b).await;
        let mut tx = db.begin().await.unwrap();
        // A transaction moves between tasks, and its futures may be spawned.
        let mut tx = tokio::spawn(async move {
            assert_eq!(tx.execute("INSERT INTO t VALUES (1, 'a')", ()).await.unwrap(), 1);
            tx
        })
        .await
        .unwrap();
        // Something awaited between two statements, with the transaction open.
        tokio::task::yield_now().await;
        tx.execute("INSERT INTO t VALUES (2, 'b')", ()).await.unwrap();
        // Its own writes are visible inside it; other callers' reads see none of them yet.
        let inside: i64 = tx.query_row("SELECT count(*) FROM t", [], |r| r.get(0)).await.unwrap();
        assert_eq!(inside, 2);
        assert_eq!(ids(&db).await, Vec::<i64>::new());
        let all: Vec<String> = tx.query_all("SELECT v FROM t ORDER BY id", [], |r| r.get(0)).await.unwrap();
        assert_eq!(all, ["a", "b"]);
        tx.commit().await.unwrap();
        // Read right after the commit returned: read-your-writes.
        assert_eq!(ids(&db).await, [1, 2]);
        assert_eq!(ids_in_file(db.path()), [1, 2]);
        let other = db.env.handle().await;
        assert_eq!(ids(&other).await, [1, 2]);
        let m = db.metrics();
        assert_eq!(m.held_transaction_us.count, 1, "{m:#?}");
        assert_eq!(m.held_transactions_expired, 0, "{m:#?}");
        db.close().await;
    }
}

both_backends! {
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn every_commit_is_read_back_at_once_by_the_committer(backend) {
        let db = table_t(backend, |b| b).await;
        for i in 1..=20_i64 {
            let mut tx = db.begin().await.unwrap();
            tx.execute("INSERT INTO t VALUES (?1, 'x')", (i,)).await.unwrap();
            tx.commit().await.unwrap();
            let n: i64 = db.query_row("SELECT count(*) FROM t", [], |r| r.get(0)).await.unwrap();
            assert_eq!(n, i, "the commit of row {i} was not read back right after it returned");
        }
        db.close().await;
    }
}

both_backends! {
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_commit_is_told_to_subscribers_with_its_rows(backend) {
        let db = table_t(backend, |b| b).await;
        let mut changes = db.subscribe();
        let mut tx = db.begin().await.unwrap();
        tx.execute("INSERT INTO t VALUES (1, 'a')", ()).await.unwrap();
        tx.execute("INSERT INTO t VALUES (2, 'b')", ()).await.unwrap();
        // A failing step's changes are not told: rolled back to its savepoint.
        let failed = tx
            .with(|c| {
                c.execute("INSERT INTO t VALUES (3, 'c')", [])?;
                c.execute("INSERT INTO nowhere VALUES (1)", [])
            })
            .await;
        assert!(failed.is_err());
        tx.commit().await.unwrap();
        // A rolled-back transaction is never told.
        let mut rolled_back = db.begin().await.unwrap();
        rolled_back.execute("INSERT INTO t VALUES (9, 'z')", ()).await.unwrap();
        rolled_back.rollback().await.unwrap();
        db.execute("INSERT INTO t VALUES (4, 'd')", ()).await.unwrap();
        let notice = within("a notice", changes.next()).await.expect("a notice");
        let Notice::Committed(commit) = notice else {
            panic!("{notice:?}")
        };
        assert_eq!(commit.tables.len(), 1, "{commit:?}");
        assert_eq!(commit.tables[0].table, "t");
        assert_eq!(commit.tables[0].rowids.as_deref(), Some(&[1, 2][..]));
        let next = within("a notice", changes.next()).await.expect("a notice");
        let Notice::Committed(after) = next else {
            panic!("{next:?}")
        };
        assert_eq!(after.seq, commit.seq + 1, "nothing was told between the two");
        assert_eq!(after.tables[0].rowids.as_deref(), Some(&[4][..]));
        db.close().await;
    }
}

both_backends! {
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_rolled_back_transaction_leaves_nothing_and_frees_the_writer(backend) {
        let db = table_t(backend, |b| b).await;
        let mut tx = db.begin().await.unwrap();
        tx.execute("INSERT INTO t VALUES (1, 'a')", ()).await.unwrap();
        tx.rollback().await.unwrap();
        writer_is_free(&db, 2).await;
        assert_eq!(ids(&db).await, [2]);
        assert_eq!(db.metrics().held_transaction_us.count, 1);
        db.close().await;
    }
}

both_backends! {
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_transaction_dropped_without_commit_rolls_back_and_frees_the_writer(backend) {
        let db = table_t(backend, |b| b).await;
        let mut tx = db.begin().await.unwrap();
        tx.execute("INSERT INTO t VALUES (1, 'a')", ()).await.unwrap();
        drop(tx);
        writer_is_free(&db, 2).await;
        assert_eq!(ids(&db).await, [2]);
        assert_eq!(ids_in_file(db.path()), [2]);
        db.close().await;
    }
}

/// `e` is the error of a transaction rolled back at its limit of `limit`.
fn assert_expired(e: &Error, limit: Duration) {
    assert!(
        matches!(e, Error::TransactionExpired { limit: l } if *l == limit),
        "{e:?}"
    );
    assert!(e.to_string().contains("past its limit"), "{e}");
}

both_backends! {
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn past_its_limit_a_transaction_is_rolled_back_and_the_writer_serves_the_others(backend) {
        let limit = Duration::from_millis(200);
        let db = table_t(backend, move |b| b.held_transaction_limit(limit)).await;
        let mut tx = db.begin().await.unwrap();
        tx.execute("INSERT INTO t VALUES (1, 'held')", ()).await.unwrap();
        // This write waits for the writer the transaction keeps: it completes once the limit let it go.
        writer_is_free(&db, 2).await;
        let e = tx.execute("INSERT INTO t VALUES (3, 'late')", ()).await.unwrap_err();
        assert_expired(&e, limit);
        let again = tx.query_row("SELECT 1", [], |r| r.get::<_, i64>(0)).await.unwrap_err();
        assert_expired(&again, limit);
        assert_expired(&tx.commit().await.unwrap_err(), limit);
        assert_eq!(ids(&db).await, [2], "nothing of the expired transaction was committed");
        let m = db.metrics();
        assert_eq!(m.held_transactions_expired, 1, "{m:#?}");
        assert_eq!(m.held_transaction_us.count, 1, "{m:#?}");
        #[cfg(feature = "prometheus")]
        {
            let text = quicklite::prometheus::render(&[("db", &m)]);
            assert!(text.contains("quicklite_held_transactions_expired_total{database=\"db\"} 1"), "{text}");
            assert!(text.contains("quicklite_held_transaction_duration_seconds_count{database=\"db\"} 1"), "{text}");
        }
        db.close().await;
    }
}

both_backends! {
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_transactions_own_limit_replaces_the_builders_and_a_rollback_after_it_is_quiet(backend) {
        let db = table_t(backend, |b| b.held_transaction_limit(Duration::from_secs(3600))).await;
        let limit = Duration::from_millis(100);
        let mut tx = db.begin_with_limit(limit).await.unwrap();
        tx.execute("INSERT INTO t VALUES (1, 'held')", ()).await.unwrap();
        writer_is_free(&db, 2).await;
        // A step that runs past the limit is interrupted, whatever it does.
        let e = tx
            .with(|c| c.query_row("WITH RECURSIVE r(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM r) SELECT count(*) FROM r", [], |r| r.get::<_, i64>(0)))
            .await
            .unwrap_err();
        assert_expired(&e, limit);
        tx.rollback().await.unwrap();
        assert_eq!(ids(&db).await, [2]);
        assert!(matches!(
            db.begin_with_limit(Duration::ZERO).await,
            Err(Error::InvalidConfig(_))
        ));
        db.close().await;
    }
}

both_backends! {
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_statement_running_into_the_limit_is_interrupted(backend) {
        let limit = Duration::from_millis(100);
        let db = table_t(backend, |b| b).await;
        let mut tx = db.begin_with_limit(limit).await.unwrap();
        tx.execute("INSERT INTO t VALUES (1, 'held')", ()).await.unwrap();
        let e = tx
            .query_row("WITH RECURSIVE r(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM r) SELECT count(*) FROM r", [], |r| r.get::<_, i64>(0))
            .await
            .unwrap_err();
        assert_expired(&e, limit);
        assert_expired(&tx.commit().await.unwrap_err(), limit);
        writer_is_free(&db, 2).await;
        assert_eq!(ids(&db).await, [2]);
        db.close().await;
    }
}

both_backends! {
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_panic_in_a_step_rolls_the_transaction_back_and_the_writer_lives_on(backend) {
        let db = table_t(backend, |b| b).await;
        let mut tx = db.begin().await.unwrap();
        tx.execute("INSERT INTO t VALUES (1, 'a')", ()).await.unwrap();
        let e = tx
            .with(|c| -> rusqlite::Result<()> {
                c.execute("INSERT INTO t VALUES (2, 'b')", [])?;
                panic!("boom")
            })
            .await
            .unwrap_err();
        assert!(matches!(&e, Error::Panic { message } if message == "boom"), "{e:?}");
        let next = tx.execute("INSERT INTO t VALUES (3, 'c')", ()).await.unwrap_err();
        assert!(
            matches!(&next, Error::TransactionAborted { reason } if reason.contains("boom")),
            "{next:?}"
        );
        assert!(next.to_string().contains("nothing of it was committed"), "{next}");
        assert!(matches!(tx.commit().await, Err(Error::TransactionAborted { .. })));
        writer_is_free(&db, 4).await;
        assert_eq!(ids(&db).await, [4]);
        assert_eq!(db.metrics().panics, 1);
        db.close().await;
    }
}

both_backends! {
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_step_whose_caller_stopped_waiting_rolls_the_transaction_back(backend) {
        let db = table_t(backend, |b| b).await;
        let mut tx = db.begin().await.unwrap();
        tx.execute("INSERT INTO t VALUES (1, 'a')", ()).await.unwrap();
        let (started_tx, started_rx) = tokio::sync::oneshot::channel();
        let (release_tx, release_rx) = mpsc::channel::<()>();
        {
            let step = tx.with(move |c| {
                c.execute("INSERT INTO t VALUES (2, 'b')", [])?;
                let _ = started_tx.send(());
                let _ = release_rx.recv();
                Ok(())
            });
            tokio::pin!(step);
            tokio::select! {
                _ = &mut step => panic!("the step ended before it was let go"),
                started = started_rx => started.unwrap(),
            }
            // The step's future dropped while its step runs on the writer.
        }
        release_tx.send(()).unwrap();
        let e = tx.execute("INSERT INTO t VALUES (3, 'c')", ()).await.unwrap_err();
        assert!(
            matches!(&e, Error::TransactionAborted { reason } if reason.contains("dropped")),
            "{e:?}"
        );
        assert!(matches!(tx.commit().await, Err(Error::TransactionAborted { .. })));
        writer_is_free(&db, 4).await;
        assert_eq!(ids(&db).await, [4], "nothing of the transaction was committed");
        db.close().await;
    }
}

both_backends! {
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_begin_dropped_while_queued_never_takes_the_writer(backend) {
        let db = table_t(backend, |b| b).await;
        let (release, blocker) = common::hold_writer(&db).await;
        {
            let begin = db.begin();
            tokio::pin!(begin);
            // Polled until it is queued behind the held writer, then dropped.
            assert!(futures::poll!(&mut begin).is_pending());
            common::until_write_queue_holds(&db, 1).await;
        }
        release.send(()).unwrap();
        blocker.await.unwrap();
        writer_is_free(&db, 1).await;
        assert_eq!(db.metrics().held_transaction_us.count, 0, "it never began");
        assert_eq!(db.metrics().abandoned_writes, 1);
        db.close().await;
    }
}

both_backends! {
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_begin_dropped_after_its_transaction_began_rolls_it_back(backend) {
        let db = table_t(backend, |b| b).await;
        // However far it got, a dropped `begin` leaves the writer free and nothing committed: try it at every poll.
        for polls in 0..4 {
            let begin = db.begin();
            tokio::pin!(begin);
            for _ in 0..polls {
                if let std::task::Poll::Ready(tx) = futures::poll!(&mut begin) {
                    // Began: a transaction dropped at once.
                    let _ = tx.unwrap();
                    break;
                }
                tokio::task::yield_now().await;
            }
        }
        writer_is_free(&db, 1).await;
        assert_eq!(ids(&db).await, [1]);
        db.close().await;
    }
}

both_backends! {
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn sixty_four_writes_queued_behind_a_transaction_all_commit_once_after_it(backend) {
        let db = table_t(backend, |b| b).await;
        let mut tx = db.begin().await.unwrap();
        tx.execute("INSERT INTO t VALUES (1000, 'held')", ()).await.unwrap();
        let mut writers = Vec::new();
        for i in 0..64_i64 {
            let db = db.db.clone();
            writers.push(tokio::spawn(async move {
                db.execute("INSERT INTO t VALUES (?1, 'queued')", (i,)).await
            }));
        }
        common::until_write_queue_holds(&db, 64).await;
        // They wait: the transaction still has the writer, and sees none of them.
        tx.execute("INSERT INTO t VALUES (1001, 'held')", ()).await.unwrap();
        let seen: i64 = tx.query_row("SELECT count(*) FROM t", [], |r| r.get(0)).await.unwrap();
        assert_eq!(seen, 2);
        let before = db.metrics();
        tx.commit().await.unwrap();
        for w in writers {
            assert_eq!(within("a queued write", w).await.unwrap().unwrap(), 1);
        }
        let mut expected: Vec<i64> = (0..64).collect();
        expected.extend([1000, 1001]);
        assert_eq!(ids(&db).await, expected, "none lost, none twice");
        let after = db.metrics();
        assert_eq!(after.writes - before.writes, 65, "the transaction and each queued write, once");
        // Queued before the transaction ended, they were committed together right after it.
        assert_eq!(after.write_batch.max, 64, "{after:#?}");
        db.close().await;
    }
}

both_backends! {
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn writes_queued_behind_a_transaction_keep_their_deadlines_and_a_full_queue_fails_fast(backend) {
        let db = table_t(backend, |b| b.write_queue_capacity(3).on_full(QueueFull::Fail)).await;
        let mut tx = db.begin().await.unwrap();
        let timeout = Duration::from_millis(20);
        let late = {
            let db = db.with_timeout(timeout);
            tokio::spawn(async move { db.execute("INSERT INTO t VALUES (1, 'late')", ()).await })
        };
        common::until_write_queue_holds(&db, 1).await;
        // A `begin` waits in the queue as the other writes do, bounded by its handle's timeout.
        let late_begin = {
            let db = db.with_timeout(timeout);
            tokio::spawn(async move { db.begin().await.map(drop) })
        };
        common::until_write_queue_holds(&db, 2).await;
        let waiting = {
            let db = db.db.clone();
            tokio::spawn(async move { db.execute("INSERT INTO t VALUES (2, 'waits')", ()).await })
        };
        common::until_write_queue_holds(&db, 3).await;
        let full = db.execute("INSERT INTO t VALUES (3, 'refused')", ()).await.unwrap_err();
        assert!(matches!(full, Error::Overloaded { queue: "write", .. }), "{full:?}");
        let e = db.begin().await.unwrap_err();
        assert!(matches!(e, Error::Overloaded { queue: "write", .. }), "{e:?}");
        // The deadlines of the first two pass while the transaction keeps the writer (a clock's deadline: no
        // signal to wait for but the clock).
        tokio::time::sleep(timeout * 2).await;
        tx.execute("INSERT INTO t VALUES (4, 'held')", ()).await.unwrap();
        tx.commit().await.unwrap();
        let late = late.await.unwrap().unwrap_err();
        assert!(matches!(late, Error::Timeout { ran: false, .. }), "{late:?}");
        let late_begin = late_begin.await.unwrap().unwrap_err();
        assert!(matches!(late_begin, Error::Timeout { ran: false, .. }), "{late_begin:?}");
        waiting.await.unwrap().unwrap();
        assert_eq!(ids(&db).await, [2, 4]);
        db.close().await;
    }
}

both_backends! {
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_failing_statement_fails_alone_and_the_transaction_goes_on(backend) {
        let db = table_t(backend, |b| b).await;
        let mut tx = db.begin().await.unwrap();
        tx.execute("INSERT INTO t VALUES (1, 'a')", ()).await.unwrap();
        let e = tx.execute("INSERT INTO nowhere VALUES (1)", ()).await.unwrap_err();
        assert!(matches!(&e, Error::Sqlite(_)) && e.to_string().contains("nowhere"), "{e}");
        let e = tx.execute("INSERT INTO t VALUES (1, 'again')", ()).await.unwrap_err();
        assert_eq!(e.sqlite_code(), Some(rusqlite::ErrorCode::ConstraintViolation), "{e}");
        let e = tx.execute("not sql at all", ()).await.unwrap_err();
        assert!(matches!(&e, Error::Sqlite(_)), "{e:?}");
        // A script fails as a whole: its first statement is rolled back with its savepoint.
        let e = tx.execute_batch("INSERT INTO t VALUES (2, 'b'); INSERT INTO nowhere VALUES (2)").await.unwrap_err();
        assert!(e.to_string().contains("nowhere"), "{e}");
        let e = tx.execute("INSERT INTO t VALUES (5, 'r') RETURNING id", ()).await.unwrap_err();
        assert!(matches!(e, Error::ReturnsRows), "{e:?}");
        // Transaction control stays refused inside a step.
        let e = tx.execute_batch("COMMIT").await.unwrap_err();
        assert_eq!(e.sqlite_code(), Some(rusqlite::ErrorCode::AuthorizationForStatementDenied), "{e}");
        let e = tx.with(|c| c.execute_batch("ROLLBACK")).await.unwrap_err();
        assert_eq!(e.sqlite_code(), Some(rusqlite::ErrorCode::AuthorizationForStatementDenied), "{e}");
        assert_eq!(tx.execute_many("INSERT INTO t VALUES (?1, 'm')", [(3,), (4,)]).await.unwrap(), 2);
        let id: i64 = tx.with(|c| c.query_row("INSERT INTO t VALUES (6, 'r') RETURNING id", [], |r| r.get(0))).await.unwrap();
        assert_eq!(id, 6);
        tx.commit().await.unwrap();
        assert_eq!(ids(&db).await, [1, 3, 4, 6]);
        db.close().await;
    }
}

both_backends! {
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_transaction_sqlite_rolls_back_by_itself_ends_with_the_reason(backend) {
        let db = table_t(backend, |b| b).await;
        db.execute_batch(
            "CREATE TABLE undo (a);
             CREATE TRIGGER undo_all BEFORE INSERT ON undo BEGIN SELECT RAISE(ROLLBACK, 'undone'); END;",
        )
        .await
        .unwrap();
        let mut tx = db.begin().await.unwrap();
        tx.execute("INSERT INTO t VALUES (1, 'a')", ()).await.unwrap();
        let e = tx.execute("INSERT INTO undo VALUES (1)", ()).await.unwrap_err();
        assert!(e.to_string().contains("undone"), "{e}");
        let next = tx.execute("INSERT INTO t VALUES (2, 'b')", ()).await.unwrap_err();
        assert!(
            matches!(&next, Error::TransactionAborted { reason } if reason.contains("undone")),
            "{next:?}"
        );
        writer_is_free(&db, 3).await;
        assert_eq!(ids(&db).await, [3]);
        db.close().await;
    }
}

#[tokio::test]
async fn a_zero_limit_is_refused_by_the_builder() {
    let dir = tempfile::tempdir().unwrap();
    let e = Database::builder(dir.path().join("db.db"))
        .held_transaction_limit(Duration::ZERO)
        .open()
        .await
        .unwrap_err();
    assert!(
        matches!(e, Error::InvalidConfig(ref m) if m.contains("held_transaction_limit")),
        "{e}"
    );
}

/// A transaction held on one tenant of `registry`, and a write to another tenant made while it is open.
async fn write_beside_a_held_transaction(
    registry: &Registry,
    limit: Duration,
) -> (Transaction, Database) {
    let held = registry.get("held").await.unwrap();
    let other = registry.get("other").await.unwrap();
    for db in [&held, &other] {
        db.execute_batch("CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT)")
            .await
            .unwrap();
    }
    let mut tx = held.begin_with_limit(limit).await.unwrap();
    tx.execute("INSERT INTO t VALUES (1, 'held')", ())
        .await
        .unwrap();
    within(
        "another tenant's write",
        other.execute("INSERT INTO t VALUES (1, 'other')", ()),
    )
    .await
    .unwrap();
    (tx, other)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_registry_serves_other_tenants_while_one_holds_a_transaction_on_its_only_write_thread() {
    // Two threads: one serves writes. It is held by the transaction, so the lane grows for the other tenant.
    let dir = tempfile::tempdir().unwrap();
    let registry = Registry::builder(dir.path())
        .threads(2)
        .open()
        .await
        .unwrap();
    let (mut tx, other) =
        write_beside_a_held_transaction(&registry, Duration::from_secs(3600)).await;
    // The transaction was open all along: it goes on and commits.
    tx.execute("INSERT INTO t VALUES (2, 'held')", ())
        .await
        .unwrap();
    tx.commit().await.unwrap();
    assert_eq!(ids(&registry.get("held").await.unwrap()).await, [1, 2]);
    assert_eq!(ids(&other).await, [1]);
    assert!(
        registry.metrics().write_threads_added >= 1,
        "{:?}",
        registry.metrics()
    );
    registry.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_a_registry_with_one_write_thread_that_cannot_grow_the_limit_ends_the_wait() {
    // A caller that awaits another tenant's write with a transaction open would wait for good on a single write
    // thread: the limit lets the thread go.
    let dir = tempfile::tempdir().unwrap();
    let registry = Registry::builder(dir.path())
        .threads(2)
        .max_write_threads(1)
        .open()
        .await
        .unwrap();
    let limit = Duration::from_millis(200);
    let (mut tx, other) = write_beside_a_held_transaction(&registry, limit).await;
    assert_expired(
        &tx.execute("INSERT INTO t VALUES (2, 'held')", ())
            .await
            .unwrap_err(),
        limit,
    );
    assert_eq!(
        ids(&registry.get("held").await.unwrap()).await,
        Vec::<i64>::new()
    );
    assert_eq!(ids(&other).await, [1]);
    assert_eq!(registry.metrics().write_threads_added, 0);
    registry.close().await.unwrap();
}
