//! Deadlines: a runaway read is interrupted and fails alone with `Error::Timeout`, the reads beside it are served;
//! a runaway write is interrupted and rolled back while the writes queued beside it commit; a write still queued
//! past its deadline never runs; the handle goes on; on both backends.

use std::time::{Duration, Instant};

use quicklite::{Error, RequestKind};

mod common;

use common::both_backends;

/// A database of `backend` with an empty table `t (id INTEGER PRIMARY KEY, v INTEGER)`.
async fn table_t(backend: common::Backend) -> common::TestDb {
    let db = common::open(backend, |b| b).await;
    db.execute_batch("CREATE TABLE t (id INTEGER PRIMARY KEY, v INTEGER)")
        .await
        .unwrap();
    db
}

/// `outcome` is the timeout of a 100 ms deadline of a `request` interrupted while it ran, reached well before a
/// hang guard (without the deadline the runaway never ends): not a timing assertion.
fn assert_timed_out_after_100_ms<T: std::fmt::Debug>(
    outcome: quicklite::Result<T>,
    request: RequestKind,
    started: Instant,
) {
    assert!(
        matches!(
            outcome,
            Err(Error::Timeout { timeout, request: r, ran: true }) if timeout == Duration::from_millis(100) && r == request
        ),
        "{outcome:?}"
    );
    let took = started.elapsed();
    assert!(took < Duration::from_secs(30), "{took:?}");
}

const RUNAWAY: &str =
    "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT count(*) FROM c";

both_backends! {
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_runaway_read_times_out_alone_and_the_reads_beside_it_are_served(backend) {
        let db = table_t(backend).await;
        db.execute_many("INSERT INTO t VALUES (?1, ?2)", (0..100_i64).map(|i| (i, i * 2)))
            .await
            .unwrap();
        let started = Instant::now();
        let runaway = {
            let db = db.db.clone();
            tokio::spawn(async move {
                db.read_with_timeout(Duration::from_millis(100), |c| {
                    c.query_row(RUNAWAY, [], |r| r.get::<_, i64>(0))
                })
                .await
            })
        };
        let points: Vec<_> = (0..63_i64)
            .map(|i| {
                let db = db.db.clone();
                tokio::spawn(async move {
                    db.query_row("SELECT v FROM t WHERE id = ?1", (i,), |r| r.get::<_, i64>(0)).await
                })
            })
            .collect();
        for (i, p) in points.into_iter().enumerate() {
            assert_eq!(p.await.unwrap().unwrap(), i as i64 * 2);
        }
        assert_timed_out_after_100_ms(runaway.await.unwrap(), RequestKind::Read, started);
        // The handle goes on: reads and writes.
        db.execute("INSERT INTO t VALUES (100, 200)", ()).await.unwrap();
        let v: i64 = db.query_row("SELECT v FROM t WHERE id = 100", [], |r| r.get(0)).await.unwrap();
        assert_eq!(v, 200);
        db.close().await;
    }
}

both_backends! {
    #[tokio::test]
    async fn a_builder_timeout_applies_to_every_read_and_a_read_within_it_is_unaffected(backend) {
        let db = common::open(backend, |b| b.read_timeout(Some(Duration::from_millis(100)))).await;
        let e = db.query_row(RUNAWAY, [], |r| r.get::<_, i64>(0)).await.unwrap_err();
        assert!(matches!(e, Error::Timeout { .. }), "{e}");
        let n: i64 = db.query_row("SELECT 41 + 1", [], |r| r.get(0)).await.unwrap();
        assert_eq!(n, 42);
        db.close().await;
    }
}

both_backends! {
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_runaway_write_times_out_and_rolls_back_alone_while_the_writes_beside_it_commit(backend) {
        let db = table_t(backend).await;
        let started = Instant::now();
        let runaway = {
            let db = db.db.clone();
            tokio::spawn(async move {
                db.write_with_timeout(Duration::from_millis(100), |c| {
                    // Written before the runaway statement: rolled back with it.
                    c.execute("INSERT INTO t VALUES (-1, 0)", [])?;
                    c.execute(&format!("INSERT INTO t (id, v) SELECT -2, ({RUNAWAY})"), [])
                })
                .await
            })
        };
        let writes: Vec<_> = (0..63_i64)
            .map(|i| {
                let db = db.db.clone();
                tokio::spawn(async move { db.execute("INSERT INTO t VALUES (?1, ?2)", (i, i * 2)).await })
            })
            .collect();
        for w in writes {
            assert_eq!(w.await.unwrap().unwrap(), 1);
        }
        assert_timed_out_after_100_ms(runaway.await.unwrap(), RequestKind::Write, started);
        let (rows, negative): (i64, i64) = db
            .query_row("SELECT count(*), count(*) FILTER (WHERE id < 0) FROM t", [], |r| {
                Ok((r.get(0)?, r.get(1)?))
            })
            .await
            .unwrap();
        assert_eq!((rows, negative), (63, 0), "every other write committed, nothing of the runaway's");
        // The handle goes on: a write with a deadline it meets commits.
        db.write_with_timeout(Duration::from_secs(30), |c| c.execute("INSERT INTO t VALUES (100, 200)", []))
            .await
            .unwrap();
        assert_eq!(common::count(&db, "t").await, 64);
        db.close().await;
    }
}

both_backends! {
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_write_still_queued_past_its_deadline_never_runs(backend) {
        let db = table_t(backend).await;
        let (release, blocker) = common::hold_writer(&db).await;
        let late = {
            let db = db.db.clone();
            tokio::spawn(async move {
                db.write_with_timeout(Duration::from_millis(50), |c| c.execute("INSERT INTO t VALUES (1, 1)", []))
                    .await
            })
        };
        tokio::time::sleep(Duration::from_millis(200)).await;
        release.send(()).unwrap();
        blocker.await.unwrap();
        let e = late.await.unwrap().unwrap_err();
        assert!(matches!(e, Error::Timeout { request: RequestKind::Write, ran: false, .. }), "{e}");
        assert!(e.to_string().contains("never ran"), "{e}");
        assert_eq!(common::count(&db, "t").await, 0);
        db.close().await;
    }
}

both_backends! {
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_running_read_whose_caller_gave_up_is_interrupted_and_frees_its_reader(backend) {
        let db = common::open(backend, |b| b.readers(1)).await;
        db.execute_batch("CREATE TABLE t (a); INSERT INTO t VALUES (1)").await.unwrap();
        let (started_tx, started_rx) = tokio::sync::oneshot::channel();
        // No deadline: only its caller's leaving can stop it.
        let runaway = {
            let db = db.db.clone();
            tokio::spawn(async move {
                db.read(move |c| {
                    let _ = started_tx.send(());
                    c.query_row(RUNAWAY, [], |r| r.get::<_, i64>(0))
                })
                .await
            })
        };
        started_rx.await.unwrap();
        runaway.abort();
        assert!(runaway.await.unwrap_err().is_cancelled());
        // The only reader is free again: a read is served (the guard only catches a hang).
        let a = tokio::time::timeout(
            Duration::from_secs(30),
            db.query_row("SELECT a FROM t", [], |r| r.get::<_, i64>(0)),
        )
        .await
        .expect("the abandoned runaway read still holds the reader")
        .unwrap();
        assert_eq!(a, 1);
        // In a registry that read may have been served on the writer's connection while the runaway one was still
        // being interrupted: the count comes when the interrupted read ends.
        let counted = tokio::time::timeout(Duration::from_secs(30), async {
            while db.metrics().abandoned_reads == 0 {
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
        })
        .await;
        assert!(counted.is_ok(), "the runaway read was never counted as abandoned");
        let metrics = db.metrics();
        assert_eq!((metrics.abandoned_reads, metrics.read_errors), (1, 0));
        db.close().await;
    }
}

both_backends! {
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn grouped_writes_queued_past_the_builder_timeout_never_run_and_a_started_one_finishes(backend) {
        let db = common::open(backend, |b| b.write_timeout(Some(Duration::from_millis(100)))).await;
        db.execute_batch("CREATE TABLE t (id INTEGER PRIMARY KEY, v INTEGER)").await.unwrap();
        let (release, blocker) = common::hold_writer(&db).await;
        // Queued behind the held writer, as statements and as closures.
        let late: Vec<_> = (0..20_i64)
            .map(|i| {
                let db = db.db.clone();
                tokio::spawn(async move {
                    if i % 2 == 0 {
                        db.execute("INSERT INTO t VALUES (?1, 0)", (i,)).await
                    } else {
                        db.write(move |c| c.execute("INSERT INTO t VALUES (?1, 0)", (i,))).await
                    }
                })
            })
            .collect();
        common::until_write_queue_holds(&db, 20).await;
        tokio::time::sleep(Duration::from_millis(200)).await;
        release.send(()).unwrap();
        blocker.await.unwrap();
        for w in late {
            let e = w.await.unwrap().unwrap_err();
            assert!(
                matches!(
                    e,
                    Error::Timeout { timeout, request: RequestKind::Write, ran: false } if timeout == Duration::from_millis(100)
                ),
                "{e}"
            );
        }
        assert_eq!(common::count(&db, "t").await, 0, "no write that timed out ran");
        // A grouped write that started in time runs to its end and commits, though it ends past the timeout.
        let slow = db
            .write(|c| {
                std::thread::sleep(Duration::from_millis(300));
                c.execute("INSERT INTO t VALUES (100, 1)", [])
            })
            .await;
        assert_eq!(slow.unwrap(), 1);
        assert_eq!(common::count(&db, "t").await, 1);
        let metrics = db.metrics();
        assert!(metrics.write_errors >= 20, "{}", metrics.write_errors);
        assert_eq!(metrics.write_queue_depth, 0);
        db.close().await;
    }
}

/// A write that never ends.
const RUNAWAY_WRITE: &str = "INSERT INTO t SELECT x, x FROM (WITH RECURSIVE c(x) AS (SELECT 1000 UNION ALL SELECT x + 1 FROM c) SELECT x FROM c)";

/// `e` is the timeout of a 100 ms deadline of a `request` that `ran` or not.
fn assert_timeout(e: &Error, request: RequestKind, ran: bool) {
    assert!(
        matches!(
            e,
            Error::Timeout { timeout, request: r, ran: started }
                if *timeout == Duration::from_millis(100) && *r == request && *started == ran
        ),
        "{e}"
    );
}

both_backends! {
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn every_kind_of_request_through_a_handle_with_a_timeout_times_out(backend) {
        let db = table_t(backend).await;
        let timed = db.with_timeout(Duration::from_millis(100));
        // Reads run past it: interrupted.
        let e = timed.query_row(RUNAWAY, [], |r| r.get::<_, i64>(0)).await.unwrap_err();
        assert_timeout(&e, RequestKind::Read, true);
        let e = timed.query_all(RUNAWAY, [], |r| r.get::<_, i64>(0)).await.unwrap_err();
        assert_timeout(&e, RequestKind::Read, true);
        let e = timed.read(|c| c.query_row(RUNAWAY, [], |r| r.get::<_, i64>(0))).await.unwrap_err();
        assert_timeout(&e, RequestKind::Read, true);
        let e = timed
            .read_and_then(|c| -> Result<i64, Error> { Ok(c.query_row(RUNAWAY, [], |r| r.get(0))?) })
            .await
            .unwrap_err();
        assert_timeout(&e, RequestKind::Read, true);
        // A stream's chunk: the runaway must sort every row before its first.
        let mut rows = timed.stream(
            quicklite::Keyset::new(
                "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) \
                 SELECT x FROM c WHERE x > ?1 ORDER BY x",
                0,
            ),
            |r| r.get::<_, i64>(0),
        );
        let e = rows.next().await.unwrap().unwrap_err();
        assert_timeout(&e, RequestKind::Read, true);
        // Writes that run alone: interrupted and rolled back.
        let e = timed.transaction(|c| c.execute(RUNAWAY_WRITE, [])).await.unwrap_err();
        assert_timeout(&e, RequestKind::Write, true);
        let e = timed
            .with_write_connection(|c| c.query_row(RUNAWAY, [], |r| r.get::<_, i64>(0)))
            .await
            .unwrap_err();
        assert_timeout(&e, RequestKind::Write, true);
        // Grouped writes still queued past it: never run.
        let (release, blocker) = common::hold_writer(&db).await;
        let queued: Vec<tokio::task::JoinHandle<Result<usize, Error>>> = vec![
            tokio::spawn({
                let timed = timed.clone();
                async move { timed.execute("INSERT INTO t VALUES (1, 1)", ()).await }
            }),
            tokio::spawn({
                let timed = timed.clone();
                async move { timed.execute_many("INSERT INTO t VALUES (?1, 2)", [(2,), (3,)]).await }
            }),
            tokio::spawn({
                let timed = timed.clone();
                async move { timed.execute_batch("INSERT INTO t VALUES (4, 4)").await.map(|()| 1) }
            }),
            tokio::spawn({
                let timed = timed.clone();
                async move { timed.write(|c| c.execute("INSERT INTO t VALUES (5, 5)", [])).await }
            }),
            tokio::spawn({
                let timed = timed.clone();
                async move {
                    timed
                        .write_and_then(|c| -> Result<usize, Error> { Ok(c.execute("INSERT INTO t VALUES (6, 6)", [])?) })
                        .await
                }
            }),
        ];
        common::until_write_queue_holds(&db, queued.len()).await;
        tokio::time::sleep(Duration::from_millis(200)).await;
        release.send(()).unwrap();
        blocker.await.unwrap();
        for q in queued {
            assert_timeout(&q.await.unwrap().unwrap_err(), RequestKind::Write, false);
        }
        assert_eq!(common::count(&db, "t").await, 0, "nothing of what timed out was kept");
        // The handle it came from has no timeout; the timed one serves what fits in its time.
        assert_eq!(timed.execute("INSERT INTO t VALUES (7, 7)", ()).await.unwrap(), 1);
        let v: i64 = timed.query_row("SELECT v FROM t WHERE id = 7", [], |r| r.get(0)).await.unwrap();
        assert_eq!(v, 7);
        db.close().await;
    }
}

both_backends! {
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_builders_timeouts_are_ceilings_on_longer_ones(backend) {
        let db = common::open(backend, |b| {
            b.read_timeout(Some(Duration::from_millis(100)))
                .write_timeout(Some(Duration::from_millis(100)))
        })
        .await;
        db.execute_batch("CREATE TABLE t (id INTEGER PRIMARY KEY, v INTEGER)").await.unwrap();
        let started = Instant::now();
        let e = db
            .read_with_timeout(Duration::from_secs(60), |c| c.query_row(RUNAWAY, [], |r| r.get::<_, i64>(0)))
            .await
            .unwrap_err();
        assert_timeout(&e, RequestKind::Read, true);
        let e = db
            .with_timeout(Duration::from_secs(60))
            .query_row(RUNAWAY, [], |r| r.get::<_, i64>(0))
            .await
            .unwrap_err();
        assert_timeout(&e, RequestKind::Read, true);
        let e = db
            .write_with_timeout(Duration::from_secs(60), |c| c.execute(RUNAWAY_WRITE, []))
            .await
            .unwrap_err();
        assert_timeout(&e, RequestKind::Write, true);
        assert!(started.elapsed() < Duration::from_secs(30), "{:?}", started.elapsed());
        assert_eq!(common::count(&db, "t").await, 0);
        // A shorter timeout than the builder's wins.
        let e = db
            .with_timeout(Duration::from_millis(10))
            .query_row(RUNAWAY, [], |r| r.get::<_, i64>(0))
            .await
            .unwrap_err();
        assert!(matches!(e, Error::Timeout { timeout, .. } if timeout == Duration::from_millis(10)), "{e}");
        db.close().await;
    }
}

both_backends! {
    #[cfg(feature = "serde")]
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn typed_rows_through_a_handle_with_a_timeout_time_out(backend) {
        #[derive(Debug, serde::Deserialize)]
        struct Count {
            #[allow(dead_code)]
            n: i64,
        }
        let db = table_t(backend).await;
        let timed = db.with_timeout(Duration::from_millis(100));
        let sql = format!("SELECT count(*) AS n FROM ({RUNAWAY})");
        let e = timed.query_row_as::<Count, _>(&sql, []).await.unwrap_err();
        assert_timeout(&e, RequestKind::Read, true);
        let e = timed.query_all_as::<Count, _>(&sql, []).await.unwrap_err();
        assert_timeout(&e, RequestKind::Read, true);
        db.close().await;
    }
}
