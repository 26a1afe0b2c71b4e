//! Overload: far more concurrent requests than the queues hold, behind a slow writer (seed 004's long write
//! delay). Waiting callers all complete with nothing lost; the queues never hold more than their capacity.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use common::{both_backends, count};
use quicklite::QueueFull;

both_backends! {
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn thousands_of_waiting_callers_behind_a_slow_writer_all_complete(backend) {
        const WRITERS: i64 = 5000;
        const READERS: usize = 5000;
        const CAPACITY: usize = 32;
        let db = common::open(backend, |b| b.write_queue_capacity(CAPACITY).read_queue_capacity(CAPACITY).on_full(QueueFull::Wait)).await;
        db.execute_batch("CREATE TABLE t (id INTEGER PRIMARY KEY)")
            .await
            .unwrap();

        // The deepest the queues ever got, sampled while the load runs.
        let done = Arc::new(AtomicBool::new(false));
        let deepest = Arc::new(AtomicUsize::new(0));
        let sampler = tokio::spawn({
            let (db, done, deepest) = (db.clone(), done.clone(), deepest.clone());
            async move {
                while !done.load(Ordering::Relaxed) {
                    let m = db.metrics();
                    deepest.fetch_max(
                        m.write_queue_depth.max(m.read_queue_depth),
                        Ordering::Relaxed,
                    );
                    tokio::task::yield_now().await;
                }
            }
        });

        // Registry: the neighbour keeps asking for the connections while the callers pile up.
        let churn = db.churn();
        // A slow write first (a long blocking delay inside the transaction), then everyone else piles up behind it.
        let slow = tokio::spawn({
            let db = db.clone();
            async move {
                db.write(|c| {
                    std::thread::sleep(Duration::from_millis(300));
                    c.execute("INSERT INTO t VALUES (-1)", [])
                })
                .await
            }
        });
        let mut tasks = Vec::new();
        for id in 0..WRITERS {
            let db = db.clone();
            tasks.push(tokio::spawn(async move {
                db.execute("INSERT INTO t VALUES (?1)", (id,))
                    .await
                    .map(|_| ())
            }));
        }
        for _ in 0..READERS {
            let db = db.clone();
            tasks.push(tokio::spawn(async move {
                db.query_row("SELECT count(*) FROM t", [], |r| r.get::<_, i64>(0))
                    .await
                    .map(|_| ())
            }));
        }
        slow.await.unwrap().unwrap();
        for t in tasks {
            tokio::time::timeout(Duration::from_secs(120), t)
                .await
                .expect("no caller waits forever")
                .unwrap()
                .unwrap();
        }
        done.store(true, Ordering::Relaxed);
        sampler.await.unwrap();
        churn.stop().await;

        assert_eq!(count(&db, "t").await, WRITERS + 1);
        let deepest = deepest.load(Ordering::Relaxed);
        assert!(deepest <= CAPACITY, "a queue held {deepest} requests");
        let m = db.metrics();
        assert_eq!(m.overloaded, 0);
        assert_eq!(m.write_errors, 0);
        println!(
            "deepest queue {deepest} of {CAPACITY}; {} writes in {} commits",
            m.writes, m.commits
        );
        db.close().await;
    }
}
