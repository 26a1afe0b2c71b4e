//! Under the managed checkpoint policy, `PASSIVE` checkpoints run on a thread and a connection of their own (the
//! writer does not wait for their fsyncs), and that thread ends with the database. A process of its own: the test
//! counts the threads of the process by name.

mod common;

use std::time::{Duration, Instant};

use common::{count, temp_db};
use quicklite::{Checkpointing, Database};

/// Threads of this process named `name`, from the kernel.
fn threads_named(name: &str) -> usize {
    common::threads().iter().filter(|(n, _)| n == name).count()
}

/// Waits (up to 10 s) for exactly `n` threads named `name`: a thread carries its starter's name until it sets its
/// own. Returns how many there were at the last look.
async fn settle_on(name: &str, n: usize) -> usize {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let seen = threads_named(name);
        if seen == n || Instant::now() >= deadline {
            return seen;
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
}

/// The managed policy with a `PASSIVE` checkpoint every 20 frames and no other.
fn passive_only() -> Checkpointing {
    Checkpointing::Managed {
        passive_at_frames: 20,
        // Far away: every checkpoint of these tests is a PASSIVE one.
        restart_at_frames: 1_000_000,
        reader_wait: Duration::from_secs(1),
        truncate_when_idle: None,
    }
}

/// 8 tasks inserting 250 rows of 1000 bytes each into `log`: about 500 pages, a checkpoint asked for every 20
/// frames of growth.
fn spawn_writers(db: &Database) -> Vec<tokio::task::JoinHandle<()>> {
    (0..8)
        .map(|_| {
            let db = db.clone();
            tokio::spawn(async move {
                for _ in 0..250 {
                    db.execute("INSERT INTO log (body) VALUES (randomblob(1000))", ())
                        .await
                        .unwrap();
                }
            })
        })
        .collect()
}

/// The metrics once a checkpoint has finished (polled; the deadline only turns a hang into a failure).
async fn checkpointed(db: &Database) -> quicklite::MetricsSnapshot {
    let deadline = Instant::now() + Duration::from_secs(30);
    while db.metrics().checkpoints == 0 {
        assert!(Instant::now() < deadline, "no checkpoint ran");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    db.metrics()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn passive_checkpoints_run_on_a_thread_of_their_own_that_ends_with_the_database() {
    let t = temp_db();
    let db = Database::builder(&t.path)
        .checkpointing(passive_only())
        .open()
        .await
        .unwrap();
    db.execute_batch("CREATE TABLE log (id INTEGER PRIMARY KEY, body BLOB NOT NULL)")
        .await
        .unwrap();
    assert_eq!(settle_on("quicklite-ckpt", 1).await, 1);
    for w in spawn_writers(&db) {
        w.await.unwrap();
    }
    let m = checkpointed(&db).await;
    assert_eq!(m.checkpoint_errors, 0, "{m:#?}");
    assert_eq!(count(&db, "log").await, 2000);
    db.close().await.unwrap();
    assert_eq!(
        threads_named("quicklite-ckpt"),
        0,
        "ended with the database"
    );
    // Closing truncated the WAL: the database file holds everything by itself.
    let conn = rusqlite::Connection::open(&t.path).unwrap();
    let n: i64 = conn
        .query_row("SELECT count(*) FROM log", [], |r| r.get(0))
        .unwrap();
    assert_eq!(n, 2000);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_registrys_passive_checkpoints_run_beside_its_writes_and_end_with_it() {
    let db = common::open(common::Backend::Registry, |b| {
        b.checkpointing(passive_only())
    })
    .await;
    db.execute_batch("CREATE TABLE log (id INTEGER PRIMARY KEY, body BLOB NOT NULL)")
        .await
        .unwrap();
    let writers = spawn_writers(&db);
    let mut most = 0;
    // The checkpoints run on threads of their own, a few at a time, while the writes go on. The kernel lists a
    // thread for a moment after it has been joined (until it is reaped), so two seen at once are looked at again a
    // few milliseconds later: two checkpoints of one database that ran together for longer are still both counted.
    while writers.iter().any(|w| !w.is_finished()) {
        let mut seen = threads_named("quicklite-rckpt");
        if seen > 1 {
            tokio::time::sleep(Duration::from_millis(3)).await;
            seen = seen.min(threads_named("quicklite-rckpt"));
        }
        most = most.max(seen);
        tokio::task::yield_now().await;
    }
    for w in writers {
        w.await.unwrap();
    }
    let m = checkpointed(&db).await;
    assert_eq!(m.checkpoint_errors, 0, "{m:#?}");
    println!(
        "{} checkpoints, at most {most} checkpoint threads seen at once",
        m.checkpoints
    );
    // Each lives for a connection's opening and a checkpoint's fsyncs: dozens of them are not all missed.
    assert!(most >= 1, "no checkpoint thread seen");
    assert!(
        most <= 1,
        "{most} checkpoint threads at once for one database"
    );
    assert_eq!(count(&db, "log").await, 2000);
    db.close().await;
    assert_eq!(
        threads_named("quicklite-rckpt"),
        0,
        "none outlives the database"
    );
}
