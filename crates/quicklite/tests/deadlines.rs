//! Read deadlines: a runaway read is interrupted and fails alone with `Error::Timeout`, the reads beside it are
//! served, and the handle goes on; on both backends.

use std::time::{Duration, Instant};

use quicklite::Error;

mod common;

use common::both_backends;

const RUNAWAY: &str =
    "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT count(*) FROM c";

both_backends! {
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_runaway_read_times_out_alone_and_the_reads_beside_it_are_served(backend) {
        let db = common::open(backend, |b| b).await;
        db.execute_batch("CREATE TABLE t (id INTEGER PRIMARY KEY, v INTEGER)").await.unwrap();
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
        let timed_out = runaway.await.unwrap();
        let took = started.elapsed();
        assert!(
            matches!(timed_out, Err(Error::Timeout { timeout }) if timeout == Duration::from_millis(100)),
            "{timed_out:?}"
        );
        // A hang guard, not a timing assertion: without the deadline the query never ends.
        assert!(took < Duration::from_secs(30), "{took:?}");
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
