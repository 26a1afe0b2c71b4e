//! Beside another connection that holds the write lock — Litestream around each of its checkpoints, another
//! program writing the file: a write waits for the lock past the busy timeout, up to its deadline or
//! `write_lock_wait`; one that gives up did not run and is told who held the lock; a write whose deadline comes
//! first leaves its group while the others wait on; reads leave the callers' threads while the writer waits for
//! the lock, so that beside a process committing back to back the writer keeps its share of the commits; on both
//! backends.

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

/// Reads `t`'s rows through `db`; returns whether the read ran on this thread (the caller's), not a reader's. One
/// call site, so that once it is known short its reads may run on their callers' threads.
async fn read_here(db: &quicklite::Database) -> bool {
    let (thread, _) = db
        .read(|c| {
            let rows: i64 = c.query_row("SELECT count(*) FROM t", [], |r| r.get(0))?;
            Ok((std::thread::current().id(), rows))
        })
        .await
        .unwrap();
    thread == std::thread::current().id()
}

/// Reads until one runs on its caller's thread; fails after 10 s.
async fn until_a_read_runs_here(db: &quicklite::Database) {
    let guard = Instant::now() + Duration::from_secs(10);
    while !read_here(db).await {
        assert!(
            Instant::now() < guard,
            "no read ran on its caller's thread in 10 s"
        );
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
}

both_backends! {
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn reads_leave_the_callers_threads_while_the_writer_waits_for_the_write_lock_another_connection_holds(backend) {
        // Read closures may run on their callers' threads if they took up to 10 ms (an unoptimized SQLite is slow).
        let db = table_t(backend, |b| {
            b.inline_read_max(Duration::from_millis(10))
                .inline_read_closures(true)
        })
        .await;
        until_a_read_runs_here(&db).await;
        let other = holding_the_write_lock(db.path());
        let retries_before = db.metrics().busy_retries;
        let write = tokio::spawn({
            let db = db.db.clone();
            async move { db.execute("INSERT INTO t VALUES ('ours')", ()).await }
        });
        let guard = Instant::now() + Duration::from_secs(60);
        while db.metrics().busy_retries < retries_before + 3 {
            assert!(Instant::now() < guard, "the writer never waited");
            tokio::task::yield_now().await;
        }
        // The writer tries for the lock every millisecond, saying each time that another connection holds it.
        let inline_before = db.metrics().inline_reads;
        for _ in 0..50 {
            assert!(!read_here(&db).await, "a read ran on its caller's thread while the writer waited");
        }
        assert_eq!(db.metrics().inline_reads, inline_before);
        assert!(!write.is_finished());
        other.execute_batch("COMMIT").unwrap();
        assert_eq!(write.await.unwrap().unwrap(), 1);
        // Once the other connection has not held the lock for a while, reads run on their callers' threads again.
        until_a_read_runs_here(&db).await;
        db.close().await;
    }
}

/// The other process's program: Python's `sqlite3` with its defaults (a 5 s busy timeout, SQLite's back-off between
/// tries) committing to the file back to back — `BEGIN IMMEDIATE`, one insert, `COMMIT` — for as many seconds as its
/// second argument says, with `synchronous=NORMAL` so that its commits wait for no disk. It prints `ready` after its
/// first commit, then how many it made.
const COMMITS_BACK_TO_BACK: &str = r#"
import sqlite3, sys, time
conn = sqlite3.connect(sys.argv[1], timeout=5.0, isolation_level=None)
conn.execute("PRAGMA synchronous=NORMAL")
n = 0
def commit():
    global n
    conn.execute("BEGIN IMMEDIATE")
    conn.execute("INSERT INTO t (source, n) VALUES ('python', ?)", (n,))
    conn.execute("COMMIT")
    n += 1
commit()
print("ready", flush=True)
end = time.monotonic() + float(sys.argv[2])
while time.monotonic() < end:
    commit()
print(n, flush=True)
"#;

both_backends! {
    /// Issue 45: with reads run on the callers' threads without pause, the writes' callers came back late, the writer
    /// went idle between its groups, and the other process kept the write lock: quicklite made a tenth of the
    /// commits. Every acknowledged commit of either side must be in the file, once.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn beside_a_process_committing_back_to_back_reading_tasks_leave_the_writer_a_third_of_the_commits(backend) {
        use std::io::BufRead;
        use std::sync::Arc;
        use std::sync::atomic::{AtomicBool, Ordering};

        const ROWS: i64 = 1000;
        // The two backends' variants take turns: each contest needs the machine's CPUs to itself.
        static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());
        let _turn = ONE_AT_A_TIME.lock().await;
        // Point reads run on their callers' threads whatever the build's speed and the machine's load (an
        // unoptimized SQLite is slow, and a read preempted past four times the bound sends its site to the threads).
        let db = common::open(backend, |b| b.inline_read_max(Duration::from_millis(100))).await;
        db.execute_batch(
            "CREATE TABLE t (id INTEGER PRIMARY KEY, source TEXT NOT NULL, n INTEGER NOT NULL, UNIQUE (source, n))",
        )
        .await
        .unwrap();
        db.execute(
            "WITH RECURSIVE s(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM s WHERE n < ?1)
             INSERT INTO t (id, source, n) SELECT n, 'seed', n FROM s",
            (ROWS,),
        )
        .await
        .unwrap();

        let mut python = std::process::Command::new("python3")
            .args(["-c", COMMITS_BACK_TO_BACK])
            .arg(db.path())
            .arg("4")
            .stdout(std::process::Stdio::piped())
            .spawn()
            .expect("python3 (scripts/install-test-deps.sh installs it)");
        let mut lines = std::io::BufReader::new(python.stdout.take().unwrap()).lines();
        let (ready, lines) = tokio::task::spawn_blocking(move || (lines.next(), lines))
            .await
            .unwrap();
        assert_eq!(ready.unwrap().unwrap(), "ready");
        // The tasks write and read for as long as the other process commits.
        let done = Arc::new(AtomicBool::new(false));
        let theirs = tokio::task::spawn_blocking({
            let done = done.clone();
            move || {
                let mut lines = lines;
                let commits: i64 = lines.next().unwrap().unwrap().parse().unwrap();
                assert!(python.wait().unwrap().success());
                done.store(true, Ordering::Relaxed);
                commits
            }
        });
        let writers: Vec<_> = (0..8_i64)
            .map(|task| {
                let (db, done) = (db.db.clone(), done.clone());
                tokio::spawn(async move {
                    let mut acknowledged = 0_i64;
                    while !done.load(Ordering::Relaxed) {
                        let n = task << 32 | acknowledged;
                        db.execute("INSERT INTO t (source, n) VALUES ('quicklite', ?1)", (n,))
                            .await
                            .unwrap();
                        acknowledged += 1;
                    }
                    acknowledged
                })
            })
            .collect();
        let readers: Vec<_> = (0..16_i64)
            .map(|task| {
                let (db, done) = (db.db.clone(), done.clone());
                tokio::spawn(async move {
                    let mut id = task;
                    while !done.load(Ordering::Relaxed) {
                        id = id * 7 % ROWS + 1;
                        // Point reads by primary key, every fourth in a closure.
                        let n: i64 = if id % 4 == 0 {
                            let point = move |c: &rusqlite::Connection| {
                                c.query_row("SELECT n FROM t WHERE id = ?1", [id], |r| r.get(0))
                            };
                            db.read(point).await
                        } else {
                            db.query_row("SELECT n FROM t WHERE id = ?1", (id,), |r| r.get(0))
                                .await
                        }
                        .unwrap();
                        assert_eq!(n, id);
                    }
                })
            })
            .collect();
        let mut ours = 0;
        for writer in writers {
            ours += writer.await.unwrap();
        }
        for reader in readers {
            reader.await.unwrap();
        }
        let theirs = theirs.await.unwrap();

        // `UNIQUE (source, n)` refuses a duplicate: each side's acknowledged commits are in the file, once.
        let in_file = |source: &'static str| {
            db.query_row("SELECT count(*) FROM t WHERE source = ?1", (source,), |r| r.get::<_, i64>(0))
        };
        assert_eq!(in_file("quicklite").await.unwrap(), ours, "quicklite's acknowledged writes");
        assert_eq!(in_file("python").await.unwrap(), theirs, "the other process's commits");
        assert!(
            ours * 2 >= theirs,
            "quicklite made {ours} of the {} commits, less than a third",
            ours + theirs
        );
        db.close().await;
    }
}

both_backends! {
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn reads_share_their_snapshot_while_a_write_waits_for_a_lock_held_elsewhere(backend) {
        // One reader thread, which serves every queued read in one snapshot unless a commit may be under way.
        let db = table_t(backend, |b| b.readers(1).inline_reads(false)).await;
        db.execute("INSERT INTO t VALUES ('ours')", ()).await.unwrap();
        // Another connection (as Litestream around its checkpoints) holds the write lock, and a write waits for it.
        let other = holding_the_write_lock(db.path());
        let retries = db.metrics().busy_retries;
        let write = tokio::spawn({
            let db = db.db.clone();
            async move { db.execute("INSERT INTO t VALUES ('waiting')", ()).await }
        });
        while db.metrics().busy_retries < retries + 5 {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        // Fifty reads queued behind a held reader: nothing commits meanwhile, so one snapshot serves them all.
        let (release, reader) = common::hold_reader(&db).await;
        let before = db.metrics().read_transactions;
        let reads: Vec<_> = (0..50)
            .map(|_| {
                let db = db.db.clone();
                tokio::spawn(async move {
                    db.read(|c| c.query_row("SELECT count(*) FROM t", [], |r| r.get::<_, i64>(0)))
                        .await
                })
            })
            .collect();
        while db.metrics().read_queue_depth < 50 {
            tokio::task::yield_now().await;
        }
        release.send(()).unwrap();
        reader.await.unwrap();
        for read in reads {
            assert_eq!(read.await.unwrap().unwrap(), 1);
        }
        let begun = db.metrics().read_transactions - before;
        assert!(begun <= 3, "{begun} snapshots begun for 50 reads while a write waited for the lock");
        other.execute_batch("COMMIT").unwrap();
        write.await.unwrap().unwrap();
        db.close().await;
    }
}
