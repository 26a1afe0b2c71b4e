//! A short write that finds the writer idle runs on its caller's thread, on the writer's connection, with every
//! promise it has on the writer's thread: answered after its commit, rolled back alone, read-your-writes, its commit
//! told (a partial `OR FAIL` commit too), a write beside another connection's lock waiting for it while the runtime
//! goes on, checkpoints still run, the runtime's worker handed away when a write turns long, a cancelled write not
//! run, no write lost or run twice under contention. Every test runs on both backends: a registry's writers run on
//! its pool, and there every write goes to the writer as before (the same promises, checked the same way).

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use common::{Backend, both_backends};
use futures::FutureExt;
use quicklite::rusqlite::{Connection, ErrorCode};
use quicklite::{Checkpointing, Database, Error, Notice, Profile};

const INSERT: &str = "INSERT INTO t (id, v) VALUES (?1, ?2)";

/// A database with a table `t (id PRIMARY KEY, v UNIQUE)`. Writes may run inline if they took up to 10 ms
/// (unoptimized builds of SQLite take tens of microseconds for an insert, past the default bound).
async fn with_table(
    backend: Backend,
    configure: fn(quicklite::Builder) -> quicklite::Builder,
) -> common::TestDb {
    let db = common::open(backend, move |b| {
        configure(b.inline_write_max(Duration::from_millis(10)))
    })
    .await;
    db.execute_batch("CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT UNIQUE)")
        .await
        .unwrap();
    db
}

/// Inserts rows `from..` with [`INSERT`] until one ran on its caller's thread (a call site's first writes go to the
/// writer); returns the next id. On a registry none does: returns after 50 writes, all on the writer.
async fn until_inline(db: &common::TestDb, from: i64) -> i64 {
    let start = Instant::now();
    let mut id = from;
    loop {
        let before = db.metrics().inline_writes;
        db.execute(INSERT, (id, format!("v{id}"))).await.unwrap();
        id += 1;
        let inline = db.metrics().inline_writes > before;
        match db.backend() {
            Backend::Standalone if inline => return id,
            Backend::Registry => {
                assert!(!inline, "a registry's writes run on its pool");
                if id - from >= 50 {
                    return id;
                }
            }
            Backend::Standalone => {}
        }
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "no write ran on its caller's thread in 10 s"
        );
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
}

both_backends! {
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_short_write_runs_on_its_callers_thread_and_is_read_back_at_once(backend) {
        let db = with_table(backend, |b| b).await;
        let before = db.metrics();
        let mut id = until_inline(&db, 0).await;
        // Each write is visible to the read made right after its answer, and counted once.
        for _ in 0..50 {
            db.execute(INSERT, (id, format!("v{id}"))).await.unwrap();
            let read: i64 = db
                .query_row("SELECT count(*) FROM t WHERE id = ?1", (id,), |r| r.get(0))
                .await
                .unwrap();
            assert_eq!(read, 1, "write {id} read back");
            id += 1;
        }
        assert_eq!(common::count(&db, "t").await, id);
        let m = db.metrics();
        assert_eq!(m.writes - before.writes, id as u64);
        if backend == Backend::Standalone {
            assert!(m.inline_writes >= 50, "{m:?}");
        } else {
            assert_eq!(m.inline_writes, 0);
        }
    }
}

both_backends! {
    #[tokio::test(flavor = "multi_thread", worker_threads = 1)]
    async fn a_task_writing_on_its_callers_thread_in_a_loop_lets_the_other_tasks_of_its_worker_run(backend) {
        let db = with_table(backend, |b| b).await;
        let from = until_inline(&db, 0).await;
        let turns = Arc::new(AtomicU64::new(0));
        // Both tasks on the runtime's one worker: the other runs only when the writing task returns to the runtime.
        let other = tokio::spawn(common::take_turns(turns.clone()));
        let writing = tokio::spawn({
            let (db, turns) = (db.db.clone(), turns.clone());
            async move {
                // Writes that ran here, and of them those during whose call the other task never ran.
                let (mut inline, mut holding) = (0, 0);
                for id in from..from + 1_000 {
                    let (inline_before, turns_before) = (db.metrics().inline_writes, turns.load(Ordering::Relaxed));
                    db.execute(INSERT, (id, format!("v{id}"))).await.unwrap();
                    if db.metrics().inline_writes > inline_before {
                        inline += 1;
                        holding += usize::from(turns.load(Ordering::Relaxed) == turns_before);
                    }
                }
                (inline, holding)
            }
        });
        let (inline, holding) = writing.await.unwrap();
        other.abort();
        if backend == Backend::Standalone {
            assert!(inline >= 900, "{inline} of 1,000 writes ran on the caller's thread");
        }
        assert!(
            holding <= inline / 20,
            "{holding} of the {inline} writes on the caller's thread held its worker from the other task"
        );
        assert_eq!(common::count(&db, "t").await, from + 1_000);
    }
}

both_backends! {
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_failing_write_on_its_callers_thread_rolls_back_alone_and_says_why(backend) {
        let db = with_table(backend, |b| b).await;
        let id = until_inline(&db, 0).await;
        let inline_before = db.metrics().inline_writes;
        // The same call site, its unique value taken.
        let e = db.execute(INSERT, (id, "v0".to_string())).await.unwrap_err();
        assert_eq!(e.sqlite_code(), Some(ErrorCode::ConstraintViolation), "{e}");
        assert_eq!(common::count(&db, "t").await, id, "nothing of it committed");
        db.execute(INSERT, (id, format!("v{id}"))).await.unwrap();
        assert_eq!(common::count(&db, "t").await, id + 1);
        if backend == Backend::Standalone {
            assert!(db.metrics().inline_writes > inline_before, "{:?}", db.metrics());
        }
        // A statement that returns rows is refused, as on the writer.
        let e = db
            .execute("INSERT INTO t (id, v) VALUES (?1, ?2) RETURNING id", (id + 1, "r".to_string()))
            .await
            .unwrap_err();
        assert!(matches!(e, Error::ReturnsRows), "{e}");
        assert_eq!(common::count(&db, "t").await, id + 1);
    }
}

/// `UPDATE OR FAIL` setting rows `?2` and `?3` to `?1`: with two ids the second row's value collides with the
/// first's new one, and the statement fails having changed the first, which SQLite keeps (`OR FAIL`).
const OR_FAIL: &str = "UPDATE OR FAIL t SET v = ?1 WHERE id IN (?2, ?3)";

async fn next_commit(changes: &mut quicklite::Subscription) -> Arc<quicklite::Commit> {
    match tokio::time::timeout(Duration::from_secs(30), changes.next()).await {
        Ok(Some(Notice::Committed(commit))) => commit,
        other => panic!("expected a commit, got {other:?}"),
    }
}

both_backends! {
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_statement_that_fails_after_keeping_rows_commits_them_and_they_are_told(backend) {
        let db = with_table(backend, |b| b).await;
        let mut rows = until_inline(&db, 0).await;
        while rows < 50 {
            db.execute(INSERT, (rows, format!("v{rows}"))).await.unwrap();
            rows += 1;
        }
        // The call site made known: one row at a time, no collision.
        for round in 0..20 {
            db.execute(OR_FAIL, (format!("w{round}"), 0, 0)).await.unwrap();
        }
        let mut changes = db.subscribe();
        let mut inline = false;
        let mut attempts = 0;
        while !inline && attempts < 20 {
            let (a, b) = (1 + 2 * attempts, 2 + 2 * attempts);
            assert!(b < rows);
            let seq = db.commit_seq();
            let before = db.metrics().inline_writes;
            let e = db.execute(OR_FAIL, (format!("both{attempts}"), a, b)).await.unwrap_err();
            inline = db.metrics().inline_writes > before;
            assert_eq!(e.sqlite_code(), Some(ErrorCode::ConstraintViolation), "{e}");
            let values: Vec<String> = db
                .query_all("SELECT v FROM t WHERE id IN (?1, ?2) ORDER BY id", (a, b), |r| r.get(0))
                .await
                .unwrap();
            assert_eq!(values, [format!("both{attempts}"), format!("v{b}")], "the first row's change kept");
            let commit = next_commit(&mut changes).await;
            assert_eq!(commit.seq, seq + 1, "the partial commit is a commit, told");
            assert_eq!(db.commit_seq(), seq + 1);
            assert_eq!(commit.tables.len(), 1);
            assert_eq!(commit.tables[0].rowids.as_deref(), Some(&[a][..]));
            attempts += 1;
        }
        assert_eq!(inline, backend == Backend::Standalone, "ran on its caller's thread: {inline}");
    }
}

both_backends! {
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn write_closures_run_on_their_callers_threads_only_when_allowed(backend) {
        let db = with_table(backend, |b| b).await;
        for id in 0..100_i64 {
            db.write(move |c| c.execute(INSERT, (id, format!("v{id}")))).await.unwrap();
        }
        assert_eq!(db.metrics().inline_writes, 0, "closures go to the writer by default");
        // A closure that blocks on the runtime is correct on the writer's thread: it stays there.
        let (tx, mut rx) = tokio::sync::mpsc::channel(1);
        db.write(move |c| {
            tx.blocking_send(()).unwrap();
            c.execute(INSERT, (100, "v100"))
        })
        .await
        .unwrap();
        rx.recv().await.unwrap();

        let allowed = with_table(backend, |b| b.inline_write_closures(true)).await;
        let start = Instant::now();
        let mut id = 0_i64;
        loop {
            allowed.write(move |c| c.execute(INSERT, (id, format!("v{id}")))).await.unwrap();
            id += 1;
            let inline = allowed.metrics().inline_writes;
            if backend == Backend::Registry {
                assert_eq!(inline, 0);
                if id == 100 {
                    break;
                }
            } else if inline > 0 {
                break;
            }
            assert!(start.elapsed() < Duration::from_secs(10), "no closure ran inline in 10 s");
        }
        assert_eq!(common::count(&allowed, "t").await, id);
    }
}

both_backends! {
    // One worker: a write that held it while it waited would stall the runtime, its timers included.
    #[tokio::test(flavor = "multi_thread", worker_threads = 1)]
    async fn a_write_beside_another_connection_holding_the_lock_waits_for_it_and_the_runtime_goes_on(backend) {
        let db = with_table(backend, |b| b).await;
        let id = until_inline(&db, 0).await;
        let other = Connection::open(db.path()).unwrap();
        other.execute_batch("BEGIN IMMEDIATE; INSERT INTO t (id, v) VALUES (-1, 'other')").unwrap();
        let released = Arc::new(AtomicU64::new(0));
        let release = {
            let released = released.clone();
            std::thread::spawn(move || {
                std::thread::sleep(Duration::from_millis(300));
                released.store(1, Ordering::SeqCst);
                other.execute_batch("COMMIT").unwrap();
            })
        };
        let stop = Arc::new(AtomicU64::new(0));
        let late = common::ticker(stop.clone());
        // From a task of the runtime's one worker: the statement met the lock on its caller's thread (its parameters
        // bound: it cannot go to the writer unrun) or on the writer, and waited for it either way — not refused
        // with `SQLITE_BUSY`.
        let write = tokio::spawn({
            let db = db.db.clone();
            async move { db.execute(INSERT, (id, format!("v{id}"))).await }
        });
        write.await.unwrap().unwrap();
        assert_eq!(released.load(Ordering::SeqCst), 1, "answered only once the other connection let go");
        stop.store(1, Ordering::SeqCst);
        let late = late.await.unwrap();
        release.join().unwrap();
        assert!(late < Duration::from_millis(100), "the runtime's timer was {late:?} late while the write waited");
        assert_eq!(common::count(&db, "t").await, id + 2);
        if backend == Backend::Standalone {
            assert!(db.metrics().runtime_hand_offs > 0, "{:?}", db.metrics());
        }
    }
}

both_backends! {
    #[tokio::test(flavor = "multi_thread", worker_threads = 1)]
    async fn a_write_that_waited_for_the_lock_past_its_bound_says_who_held_it_and_changed_nothing(backend) {
        let db = with_table(backend, |b| b.write_lock_wait(Duration::from_millis(200))).await;
        let id = until_inline(&db, 0).await;
        let other = Connection::open(db.path()).unwrap();
        other.execute_batch("BEGIN IMMEDIATE; INSERT INTO t (id, v) VALUES (-1, 'other')").unwrap();
        let stop = Arc::new(AtomicU64::new(0));
        let late = common::ticker(stop.clone());
        let started = Instant::now();
        let e = tokio::spawn({
            let db = db.db.clone();
            async move { db.execute(INSERT, (id, format!("v{id}"))).await }
        })
        .await
        .unwrap()
        .unwrap_err();
        let waited = started.elapsed();
        stop.store(1, Ordering::SeqCst);
        let late = late.await.unwrap();
        let Error::WriteLockHeld { pid, .. } = &e else {
            panic!("not WriteLockHeld: {e:?}");
        };
        assert_eq!(*pid, Some(std::process::id()), "{e}");
        assert!(waited >= Duration::from_millis(200), "gave up after {waited:?}");
        assert!(late < Duration::from_millis(100), "the runtime's timer was {late:?} late while the write waited");
        other.execute_batch("COMMIT").unwrap();
        // Nothing of it committed; the next write of the site commits.
        assert_eq!(common::count(&db, "t").await, id + 1);
        db.execute(INSERT, (id, format!("v{id}"))).await.unwrap();
        assert_eq!(common::count(&db, "t").await, id + 2);
    }
}

both_backends! {
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_wal_is_checkpointed_while_writes_run_on_callers_threads(backend) {
        let db = with_table(backend, |b| {
            b.checkpointing(Checkpointing::Managed {
                passive_at_frames: 20,
                restart_at_frames: 80,
                reader_wait: Duration::from_secs(1),
                truncate_when_idle: None,
            })
        })
        .await;
        let mut id = until_inline(&db, 0).await;
        let mut most = 0;
        for _ in 0..2_000 {
            db.execute(INSERT, (id, format!("{id:0>200}"))).await.unwrap();
            id += 1;
            most = most.max(db.metrics().wal_frames);
        }
        let m = db.metrics();
        if backend == Backend::Standalone {
            assert!(m.inline_writes > 1_000, "{m:?}");
        }
        assert!(m.checkpoints > 0, "{m:?}");
        // A write that would find a checkpoint due goes to the writer: the WAL stays near its bound.
        assert!(most < 160, "the WAL grew to {most} frames");
    }
}

/// `INSERT`s `?1` rows of a recursive count: one row is a short write, millions a long one.
const COUNTED: &str = "INSERT INTO t (id, v) SELECT ?2 + x, NULL FROM \
                       (WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < ?1) SELECT x FROM c)";

both_backends! {
    // One worker: a write that held it would stall the runtime, its timers included.
    #[tokio::test(flavor = "multi_thread", worker_threads = 1)]
    async fn a_write_that_turns_long_on_its_callers_thread_hands_the_runtime_worker_away(backend) {
        let db = with_table(backend, |b| b).await;
        // Every write from a task: on the runtime's worker, not on the test's own thread.
        let on_worker = |db: Database, rows: i64, from: i64| {
            tokio::spawn(async move {
                let before = db.metrics().inline_writes;
                db.execute(COUNTED, (rows, from)).await.unwrap();
                db.metrics().inline_writes > before
            })
        };
        // The call site made short (and known) with one-row inserts.
        let mut next = 0_i64;
        let mut inline = false;
        let start = Instant::now();
        while !inline && next < 200 {
            inline = on_worker(db.db.clone(), 1, next).await.unwrap();
            next += 1;
            assert!(start.elapsed() < Duration::from_secs(10));
        }
        assert_eq!(inline, backend == Backend::Standalone);
        // A ticker every millisecond on the runtime, while the same site inserts a million rows.
        let late = Arc::new(AtomicU64::new(0));
        let ticker = {
            let late = late.clone();
            tokio::spawn(async move {
                let mut at = Instant::now();
                for _ in 0..400 {
                    tokio::time::sleep(Duration::from_millis(1)).await;
                    let lateness = at.elapsed().saturating_sub(Duration::from_millis(1));
                    late.fetch_max(lateness.as_micros() as u64, Ordering::Relaxed);
                    at = Instant::now();
                }
            })
        };
        let long = Instant::now();
        on_worker(db.db.clone(), 1_000_000, 1_000_000).await.unwrap();
        let long = long.elapsed();
        ticker.await.unwrap();
        let late = Duration::from_micros(late.load(Ordering::Relaxed));
        assert!(
            late < long / 4,
            "the ticker was {late:?} late while a {long:?} write ran"
        );
        if backend == Backend::Standalone {
            assert!(db.metrics().runtime_hand_offs > 0, "{:?}", db.metrics());
        }
        assert_eq!(common::count(&db, "t").await, next + 1_000_000);
    }
}

both_backends! {
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_write_whose_caller_gives_up_ran_to_its_end_or_was_not_run_and_counted(backend) {
        let db = with_table(backend, |b| b).await;
        let id = until_inline(&db, 0).await;
        let before = db.metrics();
        for k in 0..50 {
            // Polled once, then dropped: on its caller's thread it runs within that poll, its answer ready (a task
            // that ran the last request on its thread takes its turn first: given up then, the write is not run and
            // counted abandoned); queued, it may have been taken by the writer before its caller gave up (then it
            // runs to its end), else it is not run and counted abandoned.
            let write = db.execute(INSERT, (id + k, format!("v{}", id + k)));
            if let Some(answer) = write.now_or_never() {
                answer.unwrap();
            }
        }
        // Something the writer runs after them.
        db.execute("INSERT INTO t (id, v) VALUES (-1, 'last')", ()).await.unwrap();
        let rows = common::count(&db, "t").await;
        let m = db.metrics();
        let abandoned = (m.abandoned_writes - before.abandoned_writes) as i64;
        assert_eq!(rows, id + 1 + 50 - abandoned, "each ran once, or was counted not run: {m:?}");
        let inline = m.inline_writes - before.inline_writes;
        match backend {
            Backend::Standalone => assert!(inline > 0, "{m:?}"),
            Backend::Registry => assert_eq!(inline, 0),
        }
        // A caller that left while its write, run on its thread, waited for its turn is no longer counted among the
        // tasks waiting: a task writing in a loop alone, its writes keeping the connection busy (each about a
        // millisecond), still writes there; counted still, the callers gone would send its writes to the writer.
        const SLOW_INSERT: &str = "INSERT INTO t (id, v) SELECT ?1, ?2 WHERE (WITH RECURSIVE c(x) AS \
            (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 3000) SELECT count(*) FROM c) > 0";
        tokio::time::sleep(Duration::from_millis(20)).await;
        let before = db.metrics();
        for k in 0..200 {
            let row = id + 100 + k;
            db.execute(SLOW_INSERT, (row, format!("v{row}"))).await.unwrap();
        }
        let inline = db.metrics().inline_writes - before.inline_writes;
        if backend == Backend::Standalone {
            assert!(inline >= 150, "{inline} of 200 writes of one task ran on its thread");
        }
    }
}

both_backends! {
    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn many_writers_lose_nothing_and_run_nothing_twice(backend) {
        let db = with_table(backend, |b| b).await;
        let start = until_inline(&db, 0).await;
        let mut tasks = Vec::new();
        for task in 0..64_i64 {
            let db: Database = db.db.clone();
            tasks.push(tokio::spawn(async move {
                for i in 0..50_i64 {
                    let id = start + task * 50 + i;
                    db.execute(INSERT, (id, format!("v{id}"))).await.unwrap();
                    if i % 8 == 0 {
                        tokio::task::yield_now().await;
                    }
                }
            }));
        }
        for t in tasks {
            t.await.unwrap();
        }
        let ids: Vec<i64> = db
            .query_all("SELECT id FROM t ORDER BY id", (), |r| r.get(0))
            .await
            .unwrap();
        assert_eq!(ids, (0..start + 64 * 50).collect::<Vec<_>>());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_write_runs_on_its_callers_thread_where_its_commit_would_sync_or_checkpoint() {
    for configure in [
        (|b: quicklite::Builder| b.profile(Profile::Durable))
            as fn(quicklite::Builder) -> quicklite::Builder,
        |b| b.checkpointing(Checkpointing::Sqlite),
        |b| b.write_linger(Duration::from_micros(100)),
        |b| b.inline_writes(false),
    ] {
        let db = with_table(Backend::Standalone, configure).await;
        for id in 0..200_i64 {
            db.execute(INSERT, (id, format!("v{id}"))).await.unwrap();
        }
        assert_eq!(db.metrics().inline_writes, 0, "{:?}", db.pragmas());
        assert_eq!(common::count(&db, "t").await, 200);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writes_leave_their_callers_threads_while_the_writer_syncs_its_commits() {
    let db = with_table(Backend::Standalone, |b| b).await;
    let mut id = until_inline(&db, 0).await;
    // Set on the writer's connection itself, where nothing refuses it: every commit syncs now.
    db.with_write_connection(|c| c.execute_batch("PRAGMA synchronous = FULL"))
        .await
        .unwrap();
    let before = db.metrics().inline_writes;
    for _ in 0..200 {
        db.execute(INSERT, (id, format!("v{id}"))).await.unwrap();
        id += 1;
    }
    assert_eq!(
        db.metrics().inline_writes,
        before,
        "a commit that syncs ran on its caller's thread"
    );
    db.with_write_connection(|c| c.execute_batch("PRAGMA synchronous = NORMAL"))
        .await
        .unwrap();
    let id = until_inline(&db, id).await;
    assert_eq!(common::count(&db, "t").await, id);
}

#[test]
fn no_write_runs_on_a_single_threaded_runtimes_thread() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let db = with_table(Backend::Standalone, |b| b).await;
        for id in 0..200_i64 {
            db.execute(INSERT, (id, format!("v{id}"))).await.unwrap();
        }
        assert_eq!(db.metrics().inline_writes, 0);
    });
}

both_backends! {
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_write_that_would_start_the_wal_over_goes_to_the_writer(backend) {
        // Checkpoints left to another connection: here, the test's.
        let db = with_table(backend, |b| b.checkpointing(Checkpointing::External)).await;
        let mut id = until_inline(&db, 0).await;
        for _ in 0..5 {
            let other = Connection::open(db.path()).unwrap();
            let (busy, log, copied): (i64, i64, i64) = other
                .query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
                .unwrap();
            assert_eq!((busy, log), (0, copied), "every frame copied back");
            // The next write starts the WAL over (SQLite syncs its new header): not on its caller's thread.
            let before = db.metrics().inline_writes;
            db.execute(INSERT, (id, format!("v{id}"))).await.unwrap();
            id += 1;
            assert_eq!(db.metrics().inline_writes, before, "the write that starts the WAL over ran on the writer");
            // The WAL started over: the next ones run inline again.
            let start = Instant::now();
            loop {
                let before = db.metrics().inline_writes;
                db.execute(INSERT, (id, format!("v{id}"))).await.unwrap();
                id += 1;
                let inline = db.metrics().inline_writes > before;
                if inline || backend == Backend::Registry {
                    break;
                }
                assert!(start.elapsed() < Duration::from_secs(10), "no write inline after the WAL started over");
            }
        }
        assert_eq!(common::count(&db, "t").await, id);
    }
}

/// 64 tasks write 100 rows each at once: their writes are grouped by the writer, not run one by one on their
/// callers' threads. Returns the writes that ran on callers' threads and the commits, of 6,400.
async fn writes_of_64_tasks(db: &common::TestDb) -> (u64, u64) {
    let start = until_inline(db, 0).await;
    let before = db.metrics();
    let mut tasks = Vec::new();
    for task in 0..64_i64 {
        let db: Database = db.db.clone();
        tasks.push(tokio::spawn(async move {
            for i in 0..100_i64 {
                let id = start + task * 100 + i;
                db.execute(INSERT, (id, format!("v{id}"))).await.unwrap();
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    let m = db.metrics();
    assert_eq!(m.writes - before.writes, 6_400);
    assert_eq!(common::count(db, "t").await, start + 6_400);
    (
        m.inline_writes - before.inline_writes,
        m.write_batch.count - before.write_batch.count,
    )
}

both_backends! {
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn writes_that_come_together_are_grouped_not_run_on_their_callers_threads(backend) {
        let db = with_table(backend, |b| b).await;
        let (inline, commits) = writes_of_64_tasks(&db).await;
        // Once writes come together the writer takes them until it has waited idle: a write run on its caller's
        // thread meanwhile commits alone, with the others waiting for it. A few find it idle between two groups,
        // when the tasks that write next were not polled within its wait (the runtime's two workers busy, or the
        // machine): 0–120 of 6,400 on an idle machine, up to 523 beside a build. Thousands would be writes not
        // grouped.
        assert!(inline * 8 < 6_400, "{inline} of 6,400 writes ran on their callers' threads");
        assert!(commits * 4 < 6_400, "{commits} commits for 6,400 writes: group commit served them");
        // The writer kept its connection while the writes came together; once it has waited idle it lends it again,
        // and the next write, alone, runs on its caller's thread.
        tokio::time::sleep(Duration::from_millis(50)).await;
        let (id, before) = (common::count(&db, "t").await, db.metrics().inline_writes);
        db.execute(INSERT, (id, format!("v{id}"))).await.unwrap();
        if backend == Backend::Standalone {
            assert_eq!(db.metrics().inline_writes, before + 1, "{:?}", db.metrics());
        }
    }
}

both_backends! {
    #[tokio::test(flavor = "multi_thread", worker_threads = 1)]
    async fn writes_of_many_tasks_on_one_worker_are_grouped_not_committed_one_by_one(backend) {
        // On one worker the writer is idle whenever a task writes — the other tasks wait for the worker, not for
        // the writer — yet their writes come one after the other: each run on its caller's thread would commit
        // alone (6,009 of 6,400 did so before the rule; with it 3–12, and 107–126 commits, on an idle machine;
        // 2,604 beside a build of the workspace, whose processes took the worker's CPU between writes).
        let db = with_table(backend, |b| b).await;
        let (inline, commits) = writes_of_64_tasks(&db).await;
        assert!(inline * 4 < 6_400 * 3, "{inline} of 6,400 writes ran on their callers' threads");
        assert!(commits * 4 < 6_400 * 3, "{commits} commits for 6,400 writes: group commit served them");
    }
}

both_backends! {
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn writes_in_bursts_between_idle_spells_keep_every_promise_wherever_they_run(backend) {
        // A load that leaves the writer idle most of the time but sends its writes a few at once: some run on their
        // callers' threads, the others meet in the writer's groups, turn by turn.
        const BURSTS: i64 = 40;
        const EACH: i64 = 8;
        let db = with_table(backend, |b| b).await;
        let start = until_inline(&db, 0).await;
        let mut changes = db.subscribe();
        let (before, seq_before) = (db.metrics(), db.commit_seq());
        for burst in 0..BURSTS {
            let mut tasks = Vec::new();
            for i in 0..EACH {
                let db: Database = db.db.clone();
                let id = start + burst * EACH + i;
                tasks.push(tokio::spawn(async move {
                    db.execute(INSERT, (id, format!("v{id}"))).await.unwrap();
                    let read: Vec<String> = db
                        .query_all("SELECT v FROM t WHERE id = ?1", [id], |r| r.get(0))
                        .await
                        .unwrap();
                    assert_eq!(read, [format!("v{id}")], "its own write read back at once");
                }));
            }
            for t in tasks {
                t.await.unwrap();
            }
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
        let m = db.metrics();
        let (writes, inline) = (m.writes - before.writes, m.inline_writes - before.inline_writes);
        assert_eq!(writes, (BURSTS * EACH) as u64);
        if backend == Backend::Standalone {
            assert!(0 < inline && inline < writes, "{inline} of {writes} writes ran on their callers' threads");
        } else {
            assert_eq!(inline, 0, "a registry's writes run on its pool");
        }
        let ids: Vec<i64> = db
            .query_all("SELECT id FROM t ORDER BY id", (), |r| r.get(0))
            .await
            .unwrap();
        assert_eq!(ids, (0..start + BURSTS * EACH).collect::<Vec<_>>(), "every write once");
        // Every commit told, in order, each row in one of them.
        let mut told = Vec::new();
        let mut seq = seq_before;
        while seq < db.commit_seq() {
            let commit = next_commit(&mut changes).await;
            assert_eq!(commit.seq, seq + 1, "commits told in order, none skipped");
            seq = commit.seq;
            told.extend(commit.tables.iter().flat_map(|t| t.rowids.clone().unwrap_or_default()));
        }
        told.sort_unstable();
        assert_eq!(told, (start..start + BURSTS * EACH).collect::<Vec<_>>());
    }
}

const INSERT_RETURNING: &str = "INSERT INTO t (id, v) VALUES (?1, ?2) RETURNING id";

/// A row mapper of one type whatever it does, so that every call is one call site: fails (after its statement
/// inserted the row) when `fails`.
fn returned_id(
    fails: bool,
) -> impl FnMut(&quicklite::rusqlite::Row<'_>) -> quicklite::rusqlite::Result<i64> + Send {
    move |r| {
        if fails {
            r.get::<_, String>(0).map(|_| -1)
        } else {
            r.get(0)
        }
    }
}

/// Inserts row `id` with [`INSERT_RETURNING`] and checks that it returned its id.
async fn insert_returning(db: &common::TestDb, id: i64) {
    let ids = db
        .execute_returning(INSERT_RETURNING, (id, format!("v{id}")), returned_id(false))
        .await
        .unwrap();
    assert_eq!(ids, [id]);
}

both_backends! {
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_write_that_returns_rows_runs_on_its_callers_thread_and_a_failing_mapper_undoes_it(backend) {
        let db = with_table(backend, |b| b).await;
        let start = Instant::now();
        let mut id = 0_i64;
        // Until one ran inline (a registry's never do).
        loop {
            let before = db.metrics().inline_writes;
            insert_returning(&db, id).await;
            id += 1;
            if db.metrics().inline_writes > before || (backend == Backend::Registry && id == 50) {
                break;
            }
            assert!(start.elapsed() < Duration::from_secs(10), "no write ran inline in 10 s");
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        let mut failed_inline = 0;
        for attempt in 0..20 {
            let (before, seq) = (db.metrics().inline_writes, db.commit_seq());
            let e = db
                .execute_returning(INSERT_RETURNING, (id, format!("v{id}")), returned_id(true))
                .await
                .unwrap_err();
            assert!(
                matches!(e, Error::Sqlite(quicklite::rusqlite::Error::InvalidColumnType(..))),
                "attempt {attempt}: {e:?}"
            );
            failed_inline += usize::from(db.metrics().inline_writes > before);
            assert_eq!(db.commit_seq(), seq, "nothing committed");
            assert_eq!(common::count(&db, "t").await, id, "its row undone");
            insert_returning(&db, id).await;
            id += 1;
        }
        match backend {
            Backend::Standalone => assert!(failed_inline > 0, "no failing write ran on its caller's thread"),
            Backend::Registry => assert_eq!(failed_inline, 0),
        }
    }
}

/// A write closure of one type whatever it does, so that every call is one call site.
fn hostile(
    id: i64,
    mode: u8,
) -> impl FnOnce(&Connection) -> quicklite::rusqlite::Result<usize> + Send + 'static {
    move |c| {
        let inserted = c.execute(INSERT, (id, format!("v{id}")))?;
        match mode {
            1 => panic!("a write closure that panics after writing"),
            2 => c.execute_batch("COMMIT").map(|()| inserted),
            3 => c.execute("INSERT INTO t (id, v) VALUES (?1, 'bad' ||| )", [id]),
            _ => Ok(inserted),
        }
    }
}

both_backends! {
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn hostile_write_closures_on_their_callers_threads_commit_nothing_of_theirs(backend) {
        let db = with_table(backend, |b| b.inline_write_closures(true)).await;
        // The call site made known and short.
        let start = Instant::now();
        let mut id = 0_i64;
        loop {
            let before = db.metrics().inline_writes;
            db.write(hostile(id, 0)).await.unwrap();
            id += 1;
            if db.metrics().inline_writes > before || (backend == Backend::Registry && id == 50) {
                break;
            }
            assert!(start.elapsed() < Duration::from_secs(10), "no closure ran inline in 10 s");
        }
        for round in 0..10 {
            let seq = db.commit_seq();
            let e = db.write(hostile(id, 1)).await.unwrap_err();
            assert!(matches!(e, Error::Panic { .. }), "{e}");
            let e = db.write(hostile(id, 2)).await.unwrap_err();
            assert_eq!(e.sqlite_code(), Some(ErrorCode::AuthorizationForStatementDenied), "{e}");
            let e = db.write(hostile(id, 3)).await.unwrap_err();
            assert!(e.to_string().contains("syntax error"), "{e}");
            assert_eq!(common::count(&db, "t").await, id, "round {round}: nothing of the three committed");
            assert_eq!(db.commit_seq(), seq, "no commit published for them");
            db.write(hostile(id, 0)).await.unwrap();
            id += 1;
        }
        if backend == Backend::Standalone {
            assert!(db.metrics().inline_writes > 10, "{:?}", db.metrics());
        }
        assert_eq!(common::count(&db, "t").await, id);
    }
}

/// How many polls an insert of row `id` took, and whether it ran on its caller's thread.
async fn polls_of_a_write(db: &Database, id: i64) -> (u32, bool) {
    let before = db.metrics().inline_writes;
    let (polls, write) = common::polls(db.execute(INSERT, (id, format!("v{id}")))).await;
    write.unwrap();
    (polls, db.metrics().inline_writes > before)
}

both_backends! {
    // One worker: every task's requests run on one thread.
    #[tokio::test(flavor = "multi_thread", worker_threads = 1)]
    async fn a_tasks_first_write_after_anothers_runs_at_once_and_a_second_in_a_row_takes_its_turn(backend) {
        let db = with_table(backend, |b| b).await;
        let mut id = until_inline(&db, 0).await;
        let (mut firsts, mut seconds) = (0, 0);
        for _ in 0..20 {
            // Another task's write the last request run on the worker's thread.
            let db = db.db.clone();
            tokio::spawn({
                let db = db.clone();
                async move { polls_of_a_write(&db, id).await }
            })
            .await
            .unwrap();
            let (first, second) = tokio::spawn(async move {
                (polls_of_a_write(&db, id + 1).await, polls_of_a_write(&db, id + 2).await)
            })
            .await
            .unwrap();
            id += 3;
            if first.1 {
                firsts += 1;
                // It was polled behind the other task: a yield would only wake the runtime to poll it again.
                assert_eq!(first.0, 1, "a task's first write, after another task's, waited for a turn");
            }
            if second.1 {
                seconds += 1;
                // In the poll that ran its first: it goes behind the others ready to run before it runs.
                assert!(second.0 >= 2, "a task's second write in a row ran without a turn");
            }
        }
        if backend == Backend::Standalone {
            assert!(firsts >= 15 && seconds >= 15, "{firsts} and {seconds} of 20 ran on the caller's thread");
        }
        assert_eq!(common::count(&db, "t").await, id);
        // A write whose caller gives up while it waits for its turn is not run, and counted so.
        let before = db.metrics().abandoned_writes;
        let given_up = tokio::spawn({
            let db = db.db.clone();
            async move {
                let ran_here = polls_of_a_write(&db, id).await.1;
                let second = db.execute(INSERT, (id + 1, format!("v{}", id + 1))).now_or_never();
                (ran_here, second.is_some())
            }
        });
        let (ran_here, answered) = given_up.await.unwrap();
        if backend == Backend::Standalone && ran_here {
            assert!(!answered, "a second write in a row ran without a turn");
            assert_eq!(db.metrics().abandoned_writes, before + 1);
            assert_eq!(common::count(&db, "t").await, id + 1, "the write given up in its turn ran");
        }
    }
}
