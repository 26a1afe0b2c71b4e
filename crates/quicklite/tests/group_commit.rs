//! Group commit, batched snapshot reads and read-your-writes.

mod common;

use common::{Backend, TestDb, both_backends, one_group};
use quicklite::rusqlite::{self, ErrorCode};
use quicklite::{Database, Error};

async fn kv(backend: Backend) -> TestDb {
    let db = common::open(backend, |b| b).await;
    db.execute_batch("CREATE TABLE kv (k INTEGER PRIMARY KEY, v INTEGER NOT NULL CHECK (v >= 0))")
        .await
        .unwrap();
    db
}

both_backends! {
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_failing_write_in_a_group_rolls_back_alone(backend) {
        let db = kv(backend).await;
        // Request 4 violates the CHECK constraint after inserting a good row first: its whole closure must roll back,
        // not just the failing statement.
        let results = one_group(&db, 9, |i| {
            move |c: &rusqlite::Connection| {
                c.execute("INSERT INTO kv VALUES (?1, 1)", (100 + i,))?;
                let v = if i == 4 { -1 } else { i };
                c.execute("INSERT INTO kv VALUES (?1, ?2)", (i, v))
            }
        })
        .await;
        // Registry: what the group committed is read back through connections opened again.
        db.evict().await;
        for (i, r) in results.iter().enumerate() {
            if i == 4 {
                let e = r.as_ref().unwrap_err();
                assert_eq!(e.sqlite_code(), Some(ErrorCode::ConstraintViolation), "{e}");
                assert_eq!(
                    e.extended_code(),
                    Some(rusqlite::ffi::SQLITE_CONSTRAINT_CHECK)
                );
            } else {
                assert_eq!(*r.as_ref().unwrap(), 1, "request {i}");
            }
        }
        let keys: Vec<i64> = db
            .query_all("SELECT k FROM kv ORDER BY k", [], |r| r.get(0))
            .await
            .unwrap();
        let expected: Vec<i64> = (0..9)
            .filter(|&i| i != 4)
            .chain((100..109).filter(|&i| i != 104))
            .collect();
        assert_eq!(keys, expected);
        // The nine were one group: one commit for all of them.
        let m = db.metrics();
        assert_eq!(m.write_batch.max, 9, "{m:?}");
        db.close().await;
    }
}

/// Creates `src` with ten rows to copy into `kv`; the last one breaks kv's CHECK, so a copy fails after inserting
/// nine.
async fn ten_rows_to_copy(db: &Database) {
    db.execute_batch("CREATE TABLE src (k INTEGER PRIMARY KEY, v INTEGER NOT NULL)")
        .await
        .unwrap();
    db.execute_batch(
        "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 10) \
         INSERT INTO src SELECT 1000 + i, CASE WHEN i = 10 THEN -1 ELSE i END FROM n",
    )
    .await
    .unwrap();
}

both_backends! {
    /// `execute` joins the group without a savepoint: a failing statement must still leave no trace, even one that
    /// had written rows before it failed, while the statements and closures around it commit.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_failing_statement_in_a_group_leaves_no_trace(backend) {
        let db = kv(backend).await;
        ten_rows_to_copy(&db).await;
        let (release, blocker) = common::hold_writer(&db).await;
        let mut pending = Vec::new();
        for i in 0..7_i64 {
            let db2 = db.clone();
            pending.push(tokio::spawn(async move {
                match i {
                    // Fails on its tenth row.
                    2 => db2.execute("INSERT INTO kv SELECT k, v FROM src", ()).await,
                    // Fails on its only row (primary key taken by request 0).
                    4 => db2.execute("INSERT INTO kv VALUES (?1, 1)", (0,)).await,
                    // A closure between statements, savepoint and all.
                    5 => {
                        db2.write(move |c| c.execute("INSERT INTO kv VALUES (?1, 5)", (5,)))
                            .await
                    }
                    _ => db2.execute("INSERT INTO kv VALUES (?1, ?2)", (i, i)).await,
                }
            }));
            common::until_write_queue_holds(&db, i as usize + 1).await;
        }
        release.send(()).unwrap();
        blocker.await.unwrap();
        for (i, p) in pending.into_iter().enumerate() {
            let r = p.await.unwrap();
            match i {
                2 => assert_eq!(
                    r.unwrap_err().extended_code(),
                    Some(rusqlite::ffi::SQLITE_CONSTRAINT_CHECK)
                ),
                4 => assert_eq!(
                    r.unwrap_err().extended_code(),
                    Some(rusqlite::ffi::SQLITE_CONSTRAINT_PRIMARYKEY)
                ),
                _ => assert_eq!(r.unwrap(), 1, "request {i}"),
            }
        }
        db.evict().await;
        let rows: Vec<(i64, i64)> = db
            .query_all("SELECT k, v FROM kv ORDER BY k", [], |r| {
                Ok((r.get(0)?, r.get(1)?))
            })
            .await
            .unwrap();
        assert_eq!(rows, vec![(0, 0), (1, 1), (3, 3), (5, 5), (6, 6)]);
        let m = db.metrics();
        assert_eq!(m.write_batch.max, 7, "one group: {m:?}");
        assert_eq!(m.rollbacks, 2, "{m:?}");
        db.close().await;
    }
}

both_backends! {
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_lone_statement_commits_by_itself_or_leaves_no_trace(backend) {
        let db = kv(backend).await;
        ten_rows_to_copy(&db).await;
        let before = db.metrics();
        // One caller at a time: nothing is queued behind either statement.
        let failed = db.execute("INSERT INTO kv SELECT k, v FROM src", ()).await;
        assert_eq!(
            failed.unwrap_err().extended_code(),
            Some(rusqlite::ffi::SQLITE_CONSTRAINT_CHECK)
        );
        assert_eq!(
            db.execute("INSERT INTO kv VALUES (1, 1)", ())
                .await
                .unwrap(),
            1
        );
        let rows: Vec<(i64, i64)> = db
            .query_all("SELECT k, v FROM kv ORDER BY k", [], |r| {
                Ok((r.get(0)?, r.get(1)?))
            })
            .await
            .unwrap();
        assert_eq!(rows, vec![(1, 1)], "none of the failed copy's nine rows");
        db.evict().await;
        let rows: Vec<(i64, i64)> = db
            .query_all("SELECT k, v FROM kv ORDER BY k", [], |r| {
                Ok((r.get(0)?, r.get(1)?))
            })
            .await
            .unwrap();
        assert_eq!(rows, vec![(1, 1)], "none of them after a reopen either");
        // Read back on the writer's connection too: no transaction was left open there.
        let open = db
            .with_write_connection(|c| Ok(!c.is_autocommit()))
            .await
            .unwrap();
        assert!(!open);
        let m = db.metrics();
        assert_eq!(
            m.commits - before.commits,
            2,
            "the insert and the look above: {m:?}"
        );
        assert_eq!(m.rollbacks - before.rollbacks, 1, "{m:?}");
        db.close().await;
    }
}

both_backends! {
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn execute_refuses_a_statement_that_returns_rows_before_running_it(backend) {
        let db = kv(backend).await;
        let e = db
            .execute("INSERT INTO kv VALUES (1, 1) RETURNING k", ())
            .await
            .unwrap_err();
        assert!(
            matches!(e, Error::ReturnsRows),
            "{e:?}"
        );
        assert!(e.to_string().contains("execute_returning"), "{e}");
        assert_eq!(
            common::count(&db, "kv").await,
            0,
            "the row was not inserted"
        );
        // `execute_returning` runs it, and so does `write`.
        let k: Vec<i64> = db
            .execute_returning("INSERT INTO kv VALUES (1, 1) RETURNING k", (), |r| r.get(0))
            .await
            .unwrap();
        assert_eq!(k, [1]);
        let k: i64 = db
            .write(|c| c.query_row("INSERT INTO kv VALUES (2, 1) RETURNING k", [], |r| r.get(0)))
            .await
            .unwrap();
        assert_eq!(k, 2);
        db.close().await;
    }
}

both_backends! {
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn execute_returning_gives_every_returned_row_and_a_failing_mapper_undoes_its_statement(backend) {
        let db = kv(backend).await;
        for k in 0..10_i64 {
            let rows: Vec<(i64, i64)> = db
                .execute_returning("INSERT INTO kv VALUES (?1, ?2) RETURNING k, v", (k, k * 10), |r| {
                    Ok((r.get(0)?, r.get(1)?))
                })
                .await
                .unwrap();
            assert_eq!(rows, [(k, k * 10)], "the inserted row, read back by its caller at once");
            assert_eq!(common::count(&db, "kv").await, k + 1);
        }
        // A statement that changed nothing returns nothing; one that changed several returns each.
        let none: Vec<i64> = db
            .execute_returning("UPDATE kv SET v = v + 1 WHERE k < 0 RETURNING k", (), |r| r.get(0))
            .await
            .unwrap();
        assert!(none.is_empty());
        let mut deleted: Vec<i64> = db
            .execute_returning("DELETE FROM kv WHERE k >= ?1 RETURNING k", (7_i64,), |r| r.get(0))
            .await
            .unwrap();
        deleted.sort_unstable();
        assert_eq!(deleted, [7, 8, 9]);
        // The mapper fails after the statement changed its row: the change goes with it, and so does its commit.
        let seq = db.commit_seq();
        let e = db
            .execute_returning("UPDATE kv SET v = 99 WHERE k = 1 RETURNING v", (), |r| {
                r.get::<_, String>(0)
            })
            .await
            .unwrap_err();
        assert!(matches!(e, Error::Sqlite(rusqlite::Error::InvalidColumnType(..))), "{e:?}");
        let v: i64 = db.query_row("SELECT v FROM kv WHERE k = 1", (), |r| r.get(0)).await.unwrap();
        assert_eq!(v, 10, "the update undone with its failed mapper");
        assert_eq!(db.commit_seq(), seq, "nothing committed");
        // A constraint it breaks fails it alone, with what SQLite said.
        let e = db
            .execute_returning("UPDATE kv SET v = -1 WHERE k = 2 RETURNING k", (), |r| r.get::<_, i64>(0))
            .await
            .unwrap_err();
        assert_eq!(e.sqlite_code(), Some(ErrorCode::ConstraintViolation), "{e:?}");
        db.close().await;
    }
}

both_backends! {
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn writes_that_return_rows_share_groups_and_each_fails_alone(backend) {
        let db = kv(backend).await;
        let mut tasks = Vec::new();
        for task in 0..32_i64 {
            let db: Database = db.db.clone();
            tasks.push(tokio::spawn(async move {
                let mut kept = Vec::new();
                for i in 0..20_i64 {
                    let k = task * 20 + i;
                    // One write in five fails in its mapper, after its row went in.
                    let fails = i % 5 == 4;
                    let out = db
                        .execute_returning("INSERT INTO kv VALUES (?1, 0) RETURNING k", (k,), move |r| {
                            if fails {
                                r.get::<_, String>(0).map(|_| 0)
                            } else {
                                r.get::<_, i64>(0)
                            }
                        })
                        .await;
                    match out {
                        Ok(rows) => {
                            assert!(!fails);
                            assert_eq!(rows, [k]);
                            kept.push(k);
                        }
                        Err(e) => assert!(fails, "{e:?}"),
                    }
                }
                kept
            }));
        }
        let mut kept = Vec::new();
        for t in tasks {
            kept.extend(t.await.unwrap());
        }
        kept.sort_unstable();
        let rows: Vec<i64> = db
            .query_all("SELECT k FROM kv ORDER BY k", (), |r| r.get(0))
            .await
            .unwrap();
        assert_eq!(rows, kept, "every row whose mapper failed undone, every other one kept");
        assert_eq!(rows.len(), 32 * 16);
        let m = db.metrics();
        assert!(m.write_batch.count < m.writes, "some writes shared a commit: {m:?}");
        db.close().await;
    }
}

both_backends! {
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_panicking_write_in_a_group_rolls_back_alone_and_the_writer_survives(backend) {
        let db = kv(backend).await;
        let results = one_group(&db, 5, |i| {
            move |c: &rusqlite::Connection| {
                c.execute("INSERT INTO kv VALUES (?1, ?1)", (i,))?;
                if i == 2 {
                    panic!("request {i} panicked after writing");
                }
                Ok(())
            }
        })
        .await;
        assert!(matches!(&results[2], Err(Error::Panic { message }) if message.contains("request 2")));
        assert!(results.iter().enumerate().all(|(i, r)| i == 2 || r.is_ok()));
        let keys: Vec<i64> = db
            .query_all("SELECT k FROM kv ORDER BY k", [], |r| r.get(0))
            .await
            .unwrap();
        assert_eq!(keys, vec![0, 1, 3, 4]);
        db.execute("INSERT INTO kv VALUES (9, 9)", ())
            .await
            .unwrap();
        assert_eq!(db.metrics().write_batch.max, 5);
        db.close().await;
    }
}

both_backends! {
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_failed_commit_fails_every_write_of_the_group(backend) {
        let db = common::open(backend, |b| b).await;
        // A deferred foreign key is only checked at COMMIT: the group's COMMIT fails, so nobody in it committed.
        db.execute_batch(
            "CREATE TABLE parent (id INTEGER PRIMARY KEY);
             CREATE TABLE child (id INTEGER PRIMARY KEY,
                 parent INTEGER REFERENCES parent(id) DEFERRABLE INITIALLY DEFERRED);",
        )
        .await
        .unwrap();
        let results = one_group(&db, 4, |i| {
            let parent = if i == 3 { 999 } else { i };
            move |c: &rusqlite::Connection| {
                c.execute("INSERT OR IGNORE INTO parent VALUES (?1)", (i,))?;
                c.execute("INSERT INTO child VALUES (?1, ?2)", (i, parent))
            }
        })
        .await;
        for r in results {
            let e = r.unwrap_err();
            assert!(matches!(e, Error::CommitFailed { batch: 4, .. }), "{e:?}");
            assert_eq!(e.sqlite_code(), Some(ErrorCode::ConstraintViolation));
        }
        let n = common::count(&db, "child").await;
        assert_eq!(n, 0);
        assert_eq!(db.metrics().failed_commits, 1);
        // The writer goes on.
        db.execute("INSERT INTO parent VALUES (1)", ())
            .await
            .unwrap();
        db.close().await;
    }
}

both_backends! {
    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn every_task_reads_its_own_writes(backend) {
        let db = kv(backend).await;
        let tasks = 48_i64;
        let rounds = 200_i64;
        // Registry: the neighbour keeps closing the database's connections meanwhile.
        let churn = db.churn();
        let mut handles = Vec::new();
        for task in 0..tasks {
            let db = db.clone();
            handles.push(tokio::spawn(async move {
                for round in 1..=rounds {
                    db.execute("INSERT OR REPLACE INTO kv VALUES (?1, ?2)", (task, round))
                        .await
                        .unwrap();
                    let seen: i64 = db
                        .query_row("SELECT v FROM kv WHERE k = ?1", (task,), |r| r.get(0))
                        .await
                        .unwrap();
                    assert_eq!(seen, round, "task {task} did not read its own write");
                }
            }));
        }
        // Readers that only read, keeping snapshots busy meanwhile.
        for _ in 0..8 {
            let db = db.clone();
            handles.push(tokio::spawn(async move {
                for _ in 0..500 {
                    let n = common::count(&db, "kv").await;
                    assert!(n <= tasks);
                }
            }));
        }
        for h in handles {
            h.await.unwrap();
        }
        churn.stop().await;
        let m = db.metrics();
        // Enough concurrency that both kinds of batching happened.
        assert!(m.write_batch.max > 1, "{m:?}");
        assert!(m.commits < (tasks * rounds) as u64, "{m:?}");
        assert_eq!(m.reads, (tasks * rounds + 8 * 500) as u64);
        db.close().await;
    }
}

both_backends! {
    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn counters_incremented_concurrently_end_exact(backend) {
        let db = common::open(backend, |b| b.readers(3)).await;
        db.execute_batch("CREATE TABLE counter (id INTEGER PRIMARY KEY, n INTEGER NOT NULL)")
            .await
            .unwrap();
        db.execute_many(
            "INSERT INTO counter VALUES (?1, 0)",
            (0..8_i64).map(|i| (i,)).collect::<Vec<_>>(),
        )
        .await
        .unwrap();
        let (tasks, per_task) = (64_i64, 100_i64);
        // Registry: the neighbour keeps closing the database's connections meanwhile.
        let churn = db.churn();
        let mut handles = Vec::new();
        for task in 0..tasks {
            let db = db.clone();
            handles.push(tokio::spawn(async move {
                for i in 0..per_task {
                    // Read-modify-write inside one write closure is atomic: the writer is the only writer.
                    db.write(move |c| {
                        let id = (task + i) % 8;
                        let n: i64 =
                            c.query_row("SELECT n FROM counter WHERE id = ?1", (id,), |r| r.get(0))?;
                        c.execute("UPDATE counter SET n = ?1 WHERE id = ?2", (n + 1, id))
                    })
                    .await
                    .unwrap();
                }
            }));
        }
        for h in handles {
            h.await.unwrap();
        }
        churn.stop().await;
        let counts: Vec<i64> = db
            .query_all("SELECT n FROM counter ORDER BY id", [], |r| r.get(0))
            .await
            .unwrap();
        assert_eq!(counts, vec![tasks * per_task / 8; 8]);
        let m = db.metrics();
        assert_eq!(m.writes, (tasks * per_task) as u64 + 2);
        assert_eq!(m.write_errors, 0);
        db.close().await;
        // Everything survives a reopen (on a registry: by a new registry on the same directory).
        let db = db.reopen().await;
        let total: i64 = db
            .query_row("SELECT sum(n) FROM counter", [], |r| r.get(0))
            .await
            .unwrap();
        assert_eq!(total, tasks * per_task);
        db.close().await;
    }
}

both_backends! {
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn queued_reads_share_one_snapshot(backend) {
        let db = common::open(backend, |b| {
            b.readers(1)
                .read_snapshot_max_age(std::time::Duration::from_secs(600))
        })
        .await;
        db.execute_batch("CREATE TABLE t (a); INSERT INTO t VALUES (1)")
            .await
            .unwrap();
        // Registry: with the connections closed, the holding read reopens the database on the read task (a read
        // made as the table's write task ends could otherwise be held on that task, leaving the read task free).
        db.evict().await;
        // Hold the only reader until 20 reads are queued behind it.
        let (release_tx, blocker) = common::hold_reader(&db).await;
        let before = db.metrics().read_transactions;
        let mut reads = Vec::new();
        for _ in 0..20 {
            let db = db.clone();
            reads.push(tokio::spawn(async move {
                db.query_row("SELECT a FROM t", [], |r| r.get::<_, i64>(0))
                    .await
            }));
        }
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        while db.metrics().read_queue_depth < 20 {
            assert!(std::time::Instant::now() < deadline);
            tokio::task::yield_now().await;
        }
        release_tx.send(()).unwrap();
        blocker.await.unwrap();
        for r in reads {
            assert_eq!(r.await.unwrap().unwrap(), 1);
        }
        let m = db.metrics();
        // The 20 reads queued behind the blocking one were served in its read transaction, which was counted as it
        // began: no other.
        assert_eq!(m.read_transactions, before, "{m:?}");
        assert_eq!(m.read_batch.max, 21, "{m:?}");
        db.close().await;
    }
}

/// Two requests answered together (one read batch, or one write group), made from two threads that each run their
/// own single-threaded runtime: B's runtime must get its answer while A's thread is blocked, i.e. B's answer does not
/// travel through A's task. `A` is queued last, so it would be the one to pass answers on if they were mixed.
async fn answered_while_another_runtime_is_blocked(backend: Backend, write: bool) {
    let t = common::open(backend, |b| b.readers(1)).await;
    let db = t.db.clone();
    db.execute_batch("CREATE TABLE t (a INTEGER PRIMARY KEY)")
        .await
        .unwrap();
    // Registry: a write task also serves reads queued meanwhile on its connection, so a read made while the
    // table's write task ends could be held there, leaving the read task free to serve B at once. With the
    // connections closed, the holding read reopens the database on a read task and holds the only one.
    t.evict().await;
    let depth = move |db: &Database| {
        let m = db.metrics();
        if write {
            m.write_queue_depth
        } else {
            m.read_queue_depth
        }
    };
    let request = move |db: Database, a: i64| async move {
        if write {
            db.execute("INSERT INTO t VALUES (?1)", [a])
                .await
                .map(|n| n as i64)
        } else {
            db.read(move |_| Ok(a)).await
        }
    };
    // Hold the writer or the only reader while both requests queue up.
    let (release_tx, release_rx) = std::sync::mpsc::channel::<()>();
    let (started_tx, started_rx) = tokio::sync::oneshot::channel::<()>();
    let blocker = {
        let db = db.clone();
        tokio::spawn(async move {
            let hold = move |_: &rusqlite::Connection| {
                let _ = started_tx.send(());
                let _ = release_rx.recv();
                Ok(())
            };
            if write {
                db.write(hold).await
            } else {
                db.read(hold).await
            }
        })
    };
    started_rx.await.unwrap();

    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    let wait_for_depth = |db: &Database, n: usize| {
        while depth(db) < n {
            assert!(
                std::time::Instant::now() < deadline,
                "requests never queued"
            );
            std::thread::yield_now();
        }
    };
    let (b_done_tx, b_done_rx) = std::sync::mpsc::channel::<quicklite::Result<i64>>();
    let b = {
        let db = db.clone();
        std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .build()
                .unwrap();
            let answer = rt.block_on(request(db, 2));
            b_done_tx.send(answer).unwrap();
        })
    };
    wait_for_depth(&db, 1);
    // Set once both requests are queued: from then on the writer or reader may take them at any moment, so A
    // cannot watch the queue's depth itself.
    let both_queued = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let a = {
        let (db, both_queued) = (db.clone(), both_queued.clone());
        std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .build()
                .unwrap();
            rt.block_on(async move {
                let mine = tokio::spawn(request(db.clone(), 1));
                // Lets `mine` run (and queue its request) until both are queued.
                while !both_queued.load(std::sync::atomic::Ordering::SeqCst) {
                    tokio::task::yield_now().await;
                }
                // Block this runtime's only thread until B has its answer (or give up after a long while).
                let b_answer = b_done_rx.recv_timeout(std::time::Duration::from_secs(60));
                (b_answer, mine.await.unwrap())
            })
        })
    };
    wait_for_depth(&db, 2);
    both_queued.store(true, std::sync::atomic::Ordering::SeqCst);
    release_tx.send(()).unwrap();
    blocker.await.unwrap().unwrap();
    let (b_answer, a_answer) = a.join().unwrap();
    b.join().unwrap();
    let b_answer = b_answer.expect("B's answer did not arrive while A's runtime was blocked");
    if write {
        assert_eq!((a_answer.unwrap(), b_answer.unwrap()), (1, 1));
        assert_eq!(common::count(&db, "t").await, 2);
    } else {
        assert_eq!((a_answer.unwrap(), b_answer.unwrap()), (1, 2));
    }
}

both_backends! {
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_read_answer_does_not_wait_for_another_runtime(backend) {
        answered_while_another_runtime_is_blocked(backend, false).await;
    }
}

both_backends! {
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_write_answer_does_not_wait_for_another_runtime(backend) {
        answered_while_another_runtime_is_blocked(backend, true).await;
    }
}

both_backends! {
    /// Two reads of one thread answered in one batch, the later one's caller carrying the earlier one's answer: that
    /// caller polls its future once and then leaves it aside. The earlier read must still get its answer (from the
    /// reader, after a short grace), while the carrier stays unpolled.
    #[tokio::test(flavor = "current_thread")]
    async fn an_answer_whose_carrier_is_not_polled_still_arrives(backend) {
        use std::future::Future;
        use std::task::{Context, Poll, Waker};

        let t = common::open(backend, |b| b.readers(1)).await;
        let db = t.db.clone();
        // Hold the only reader from another thread while both reads queue up.
        let (release_tx, release_rx) = std::sync::mpsc::channel::<()>();
        let (started_tx, started_rx) = std::sync::mpsc::channel::<()>();
        let holder = {
            let db = db.clone();
            std::thread::spawn(move || {
                let rt = tokio::runtime::Builder::new_current_thread()
                    .build()
                    .unwrap();
                rt.block_on(db.read(move |_| {
                    let _ = started_tx.send(());
                    let _ = release_rx.recv();
                    Ok(())
                }))
            })
        };
        started_rx.recv().unwrap();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        let wait_for_depth = |n: usize| {
            while db.metrics().read_queue_depth < n {
                assert!(std::time::Instant::now() < deadline, "reads never queued");
                std::thread::yield_now();
            }
        };
        let mut cx = Context::from_waker(Waker::noop());
        let mut first = Box::pin(db.read(|_| Ok(1)));
        assert!(first.as_mut().poll(&mut cx).is_pending());
        wait_for_depth(1);
        // Queued last, so it carries the first read's answer; polled once here and then never until the end.
        let mut carrier = Box::pin(db.read(|_| Ok(2)));
        assert!(carrier.as_mut().poll(&mut cx).is_pending());
        wait_for_depth(2);
        release_tx.send(()).unwrap();
        holder.join().unwrap().unwrap();
        let answer = tokio::time::timeout(std::time::Duration::from_secs(30), first)
            .await
            .expect("the first read's answer arrived without its carrier being polled");
        assert_eq!(answer.unwrap(), 1);
        match carrier.as_mut().poll(&mut cx) {
            Poll::Ready(answer) => assert_eq!(answer.unwrap(), 2),
            Poll::Pending => assert_eq!(carrier.await.unwrap(), 2),
        }
    }
}

/// Spawns a write of the row (`k`, `k`) into `kv`.
fn spawn_insert(db: &Database, k: i64) -> tokio::task::JoinHandle<quicklite::Result<usize>> {
    let db = db.clone();
    tokio::spawn(async move {
        db.write(move |c| c.execute("INSERT INTO kv VALUES (?1, ?1)", [k]))
            .await
    })
}

both_backends! {
    /// Writes queued while a group runs join it before it commits, in their order — up to a write that must run
    /// alone, and not one whose caller stopped waiting.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn writes_queued_while_a_group_runs_join_its_commit(backend) {
        let db = kv(backend).await;
        let (release, blocker) = common::hold_writer(&db).await;
        let (running_tx, running) = tokio::sync::oneshot::channel::<()>();
        let (go, go_rx) = std::sync::mpsc::channel::<()>();
        let first = {
            let db = db.clone();
            tokio::spawn(async move {
                db.write(move |c| {
                    let _ = running_tx.send(());
                    let _ = go_rx.recv();
                    c.execute("INSERT INTO kv VALUES (1, 1)", [])
                })
                .await
            })
        };
        common::until_write_queue_holds(&db, 1).await;
        let second = spawn_insert(&db, 2);
        common::until_write_queue_holds(&db, 2).await;
        release.send(()).unwrap();
        blocker.await.unwrap();
        // The first two run as a group, the first held inside its closure while more writes queue.
        running.await.unwrap();
        let third = spawn_insert(&db, 3);
        common::until_write_queue_holds(&db, 1).await;
        let gone = spawn_insert(&db, 5);
        common::until_write_queue_holds(&db, 2).await;
        gone.abort();
        assert!(gone.await.unwrap_err().is_cancelled());
        let fourth = spawn_insert(&db, 6);
        common::until_write_queue_holds(&db, 3).await;
        let alone = {
            let db = db.clone();
            tokio::spawn(async move {
                db.transaction(|c| c.execute("INSERT INTO kv VALUES (4, 4)", []))
                    .await
            })
        };
        common::until_write_queue_holds(&db, 4).await;
        let last = spawn_insert(&db, 7);
        common::until_write_queue_holds(&db, 5).await;
        go.send(()).unwrap();
        for write in [first, second, third, fourth, alone, last] {
            assert_eq!(write.await.unwrap().unwrap(), 1);
        }
        let m = db.metrics();
        // First, second, third and fourth in one commit; the transaction alone, then the last write.
        assert_eq!(m.write_batch.max, 4, "{m:?}");
        assert_eq!(m.abandoned_writes, 1, "{m:?}");
        db.evict().await;
        let keys: Vec<i64> = db
            .query_all("SELECT k FROM kv ORDER BY k", [], |r| r.get(0))
            .await
            .unwrap();
        assert_eq!(keys, [1, 2, 3, 4, 6, 7]);
        db.close().await;
    }
}
