//! Short reads run on their callers' threads, with every guarantee of the reader threads: read-your-writes across a
//! kept snapshot, a commit ending it, an idle snapshot ended (checkpoints unaffected), a read that ran long sent
//! back to the threads, panics, deadlines and `query_only`. Every test runs on both backends.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread::ThreadId;
use std::time::{Duration, Instant};

use common::{Backend, both_backends};
use quicklite::rusqlite::{self, Connection, ErrorCode};
use quicklite::{Database, Error};

/// What a probe read does.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// Reads the one row of `t`.
    Point,
    /// Counts to a few hundred thousand: milliseconds.
    Long,
    /// Panics.
    Panic,
    /// Tries to write.
    Write,
    /// Sleeps 50 ms, then reads: longer than a preempted thread waits for its core, and over four times the bound.
    Sleep,
}

/// A read closure of one type whatever it does, so that every probe is one call site: it returns the thread it ran
/// on and the row of `t`.
fn probe(
    mode: Mode,
) -> impl FnOnce(&Connection) -> rusqlite::Result<(ThreadId, i64)> + Send + 'static {
    move |conn| {
        let thread = std::thread::current().id();
        let value = match mode {
            Mode::Point => conn
                .prepare_cached("SELECT v FROM t")?
                .query_row([], |r| r.get(0))?,
            Mode::Long => conn.query_row(
                "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 300000) \
                 SELECT count(*) FROM c",
                [],
                |r| r.get(0),
            )?,
            Mode::Panic => panic!("a probe that panics"),
            Mode::Write => conn.execute("UPDATE t SET v = v + 1", [])? as i64,
            Mode::Sleep => {
                std::thread::sleep(Duration::from_millis(50));
                conn.prepare_cached("SELECT v FROM t")?
                    .query_row([], |r| r.get(0))?
            }
        };
        Ok((thread, value))
    }
}

fn wal_of(db: &std::path::Path) -> std::path::PathBuf {
    let mut wal = db.as_os_str().to_owned();
    wal.push("-wal");
    wal.into()
}

fn here() -> ThreadId {
    std::thread::current().id()
}

/// A database with a table `t` of one row, `v = 0`. Reads may run inline if they took up to 10 ms (unoptimized
/// builds of SQLite run a point read in tens of microseconds, past the default bound).
async fn with_table(
    backend: Backend,
    configure: fn(quicklite::Builder) -> quicklite::Builder,
) -> common::TestDb {
    let db = common::open(backend, move |b| {
        configure(
            b.inline_read_max(Duration::from_millis(10))
                .inline_read_closures(true),
        )
    })
    .await;
    db.execute_batch("CREATE TABLE t (v INTEGER NOT NULL); INSERT INTO t VALUES (0);")
        .await
        .unwrap();
    db
}

/// Reads with the probe until one runs on this thread (its first runs go to the reader threads, and its connection
/// opens in the background). Fails after 10 s.
async fn until_inline(db: &Database) {
    let start = Instant::now();
    // Two in a row: the first read on a caller's thread may be a probe, or pay for opening its connection, after
    // which its site's next reads may go back to the reader threads until a probe runs short.
    let mut in_a_row = 0;
    loop {
        let (thread, _) = db.read(probe(Mode::Point)).await.unwrap();
        in_a_row = if thread == here() { in_a_row + 1 } else { 0 };
        if in_a_row == 2 {
            return;
        }
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "no read ran on its caller's thread in 10 s"
        );
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
}

both_backends! {
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_short_read_runs_on_its_callers_thread_once_its_call_site_is_known(backend) {
        let db = with_table(backend, |b| b).await;
        let (first, _) = db.read(probe(Mode::Point)).await.unwrap();
        assert_ne!(first, here(), "a call site's first read goes to the reader threads");
        until_inline(&db).await;
        let m = db.metrics();
        assert!(m.inline_reads >= 1 && m.reads > m.inline_reads, "{m:?}");
    }
}

both_backends! {
    #[tokio::test(flavor = "multi_thread", worker_threads = 1)]
    async fn a_task_reading_on_its_callers_thread_in_a_loop_lets_the_other_tasks_of_its_worker_run(backend) {
        let db = with_table(backend, |b| b).await;
        let turns = Arc::new(AtomicU64::new(0));
        // Both tasks on the runtime's one worker: the other runs only when the reading task returns to the runtime.
        let other = tokio::spawn(common::take_turns(turns.clone()));
        let reading = tokio::spawn({
            let (db, turns) = (db.db.clone(), turns.clone());
            async move {
                until_inline(&db).await;
                let turns_before = turns.load(Ordering::Relaxed);
                let mut here_count = 0;
                for _ in 0..2_000 {
                    let (thread, _) = db.read(probe(Mode::Point)).await.unwrap();
                    here_count += usize::from(thread == here());
                }
                (here_count, turns.load(Ordering::Relaxed) - turns_before)
            }
        });
        let (here_count, turns_meanwhile) = reading.await.unwrap();
        other.abort();
        assert!(here_count >= 1_900, "{here_count} of 2,000 reads ran on the caller's thread");
        assert!(
            turns_meanwhile >= 500,
            "the other task of the worker ran {turns_meanwhile} times during 2,000 reads"
        );
    }
}

/// A point read that takes 15 ms on any thread but `caller`'s — over `with_table`'s 10 ms bound on the reader
/// threads, within four times it — and returns the thread it ran on.
fn slow_off(
    caller: ThreadId,
) -> impl FnOnce(&Connection) -> rusqlite::Result<ThreadId> + Send + 'static {
    move |conn| {
        let thread = std::thread::current().id();
        if thread != caller {
            std::thread::sleep(Duration::from_millis(15));
        }
        conn.prepare_cached("SELECT v FROM t")?
            .query_row([], |r| r.get::<_, i64>(0))?;
        Ok(thread)
    }
}

both_backends! {
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_site_over_the_bound_on_the_reader_threads_is_tried_on_its_callers_thread_and_stays_there(backend) {
        let db = with_table(backend, |b| b).await;
        let caller = here();
        // Its runs on the threads keep its average over the bound; one read in 64 on this thread is tried here (the
        // first such try may find the connection still opening).
        let mut on_threads = 0;
        while db.read(slow_off(caller)).await.unwrap() != caller {
            on_threads += 1;
            assert!(on_threads <= 200, "no read of the site was tried on its caller's thread");
        }
        assert!(on_threads >= 1, "the site's first read went to the reader threads");
        // The try ran short: the site's reads run here now (one may meet a connection the janitor holds).
        let mut here_now = 0;
        for _ in 0..20 {
            here_now += usize::from(db.read(slow_off(caller)).await.unwrap() == caller);
        }
        assert!(here_now >= 15, "{here_now} of 20 reads after the try ran on the caller's thread");
    }
}

both_backends! {
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn an_inline_read_sees_every_write_acknowledged_before_it(backend) {
        let db = with_table(backend, |b| b).await;
        until_inline(&db).await;
        for i in 1..=20_i64 {
            // The previous read left its snapshot open; this write commits past it.
            db.execute("UPDATE t SET v = ?1", (i,)).await.unwrap();
            let (thread, v) = db.read(probe(Mode::Point)).await.unwrap();
            assert_eq!(v, i, "read {i} saw an older snapshot");
            assert_eq!(thread, here(), "read {i} ran on the reader threads");
        }
    }
}

both_backends! {
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_kept_snapshot_serves_reads_until_a_commit_ends_it(backend) {
        let db = with_table(backend, |b| b.read_snapshot_max_age(Duration::from_secs(60))).await;
        until_inline(&db).await;
        let before = db.metrics().read_transactions;
        for _ in 0..10 {
            let (thread, _) = db.read(probe(Mode::Point)).await.unwrap();
            assert_eq!(thread, here());
        }
        let kept = db.metrics().read_transactions;
        assert!(kept - before <= 1, "ten reads in one snapshot: {before} → {kept} read transactions");
        db.execute("UPDATE t SET v = 7", ()).await.unwrap();
        let (_, v) = db.read(probe(Mode::Point)).await.unwrap();
        assert_eq!(v, 7);
        assert_eq!(db.metrics().read_transactions, kept + 1, "the commit ended the kept snapshot");
    }
}

both_backends! {
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn an_idle_threads_snapshot_ends_and_lets_a_truncating_checkpoint_through(backend) {
        let db = with_table(backend, |b| {
            b.read_snapshot_max_age(Duration::from_secs(60))
                .checkpointing(quicklite::Checkpointing::External)
        })
        .await;
        until_inline(&db).await;
        // A snapshot taken after this write pins the WAL it is in.
        db.execute("UPDATE t SET v = 1", ()).await.unwrap();
        let (thread, _) = db.read(probe(Mode::Point)).await.unwrap();
        assert_eq!(thread, here());
        // This thread reads no more: the snapshot must end by itself, or the checkpoint's busy handler waits out
        // the busy timeout and gives up.
        let (busy, log, copied): (i64, i64, i64) = db
            .with_write_connection(|c| {
                c.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |r| {
                    Ok((r.get(0)?, r.get(1)?, r.get(2)?))
                })
            })
            .await
            .unwrap();
        assert_eq!((busy, log, copied), (0, 0, 0), "the WAL was truncated");
        let wal = std::fs::metadata(wal_of(db.path())).unwrap().len();
        assert_eq!(wal, 0);
    }
}

both_backends! {
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_call_site_that_ran_long_goes_back_to_the_reader_threads(backend) {
        let db = with_table(backend, |b| b).await;
        until_inline(&db).await;
        let (thread, _) = db.read(probe(Mode::Sleep)).await.unwrap();
        assert_eq!(thread, here(), "a known-short site runs inline even when this read is long");
        // A run that long on a caller's thread keeps the site off them for ten seconds (`cost`'s tests): the
        // site's reads go to the threads, short or long.
        for mode in [Mode::Point, Mode::Sleep, Mode::Point] {
            let (thread, _) = db.read(probe(mode)).await.unwrap();
            assert_ne!(thread, here(), "the site ran long: its reads go to the threads");
        }
    }
}

both_backends! {
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_read_whose_first_runs_are_long_never_runs_inline(backend) {
        let db = with_table(backend, |b| b).await;
        for _ in 0..5 {
            let (thread, _) = db.read(probe(Mode::Long)).await.unwrap();
            assert_ne!(thread, here());
        }
        assert_eq!(db.metrics().inline_reads, 0);
    }
}

both_backends! {
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_panicking_inline_read_is_an_error_and_the_next_read_runs_inline_again(backend) {
        let db = with_table(backend, |b| b).await;
        until_inline(&db).await;
        let panics = db.metrics().panics;
        match db.read(probe(Mode::Panic)).await {
            Err(Error::Panic { message }) => assert_eq!(message, "a probe that panics"),
            other => panic!("expected a panic error, got {:?}", other.map(|(_, v)| v)),
        }
        assert_eq!(db.metrics().panics, panics + 1);
        db.execute("UPDATE t SET v = 3", ()).await.unwrap();
        let (thread, v) = db.read(probe(Mode::Point)).await.unwrap();
        assert_eq!((thread, v), (here(), 3));
    }
}

both_backends! {
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn an_inline_read_cannot_write(backend) {
        let db = with_table(backend, |b| b).await;
        until_inline(&db).await;
        match db.read(probe(Mode::Write)).await {
            Err(Error::Sqlite(rusqlite::Error::SqliteFailure(e, _))) => {
                assert_eq!(e.code, ErrorCode::ReadOnly);
            }
            other => panic!("expected SQLITE_READONLY, got {:?}", other.map(|(_, v)| v)),
        }
        let (thread, v) = db.read(probe(Mode::Point)).await.unwrap();
        assert_eq!((thread, v), (here(), 0), "nothing was written");
    }
}

both_backends! {
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn an_inline_read_past_its_deadline_is_interrupted(backend) {
        let db = with_table(backend, |b| b).await;
        // `read` and `read_with_timeout` of one closure type are one call site.
        until_inline(&db).await;
        let started = Instant::now();
        match db.read_with_timeout(Duration::from_millis(2), probe(Mode::Long)).await {
            Err(Error::Timeout { timeout, request, ran }) => {
                assert_eq!((timeout, request, ran), (Duration::from_millis(2), quicklite::RequestKind::Read, true));
            }
            other => panic!("expected a timeout, got {:?}", other.map(|(_, v)| v)),
        }
        assert!(started.elapsed() < Duration::from_secs(5), "interrupted, not run to its end");
    }
}

both_backends! {
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_connection_for_inline_reads_is_set_up_as_a_reader(backend) {
        use quicklite::ConnectionRole;
        use rusqlite::functions::FunctionFlags;
        let db = with_table(backend, |b| {
            b.on_connection(|c: &mut Connection, role| {
                let answer = match role {
                    ConnectionRole::Reader => 42,
                    ConnectionRole::Writer => 7,
                    _ => 0,
                };
                c.create_scalar_function("answer", 0, FunctionFlags::SQLITE_DETERMINISTIC, move |_| Ok(answer))
            })
        })
        .await;
        let start = Instant::now();
        loop {
            let (thread, answer) = db
                .read(|c| Ok((here(), c.query_row("SELECT answer()", [], |r| r.get::<_, i64>(0))?)))
                .await
                .unwrap();
            // The writer's connection, lent while the writer waits, answers 7; a connection for inline reads 42.
            assert!(answer == 42 || answer == 7, "a connection set up with no role: {answer}");
            if thread == here() && answer == 42 {
                break;
            }
            assert!(start.elapsed() < Duration::from_secs(10), "no read ran on its caller's thread in 10 s");
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    }
}

both_backends! {
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn turned_off_every_read_goes_to_the_reader_threads(backend) {
        let db = with_table(backend, |b| b.inline_reads(false)).await;
        for _ in 0..200 {
            let (thread, _) = db.read(probe(Mode::Point)).await.unwrap();
            assert_ne!(thread, here());
        }
        assert_eq!(db.metrics().inline_reads, 0);
    }
}

both_backends! {
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_statement_helpers_run_inline_per_sql_text(backend) {
        let db = with_table(backend, |b| b).await;
        let start = Instant::now();
        while db.metrics().inline_reads == 0 {
            let v: i64 = db.query_row("SELECT v FROM t", [], |r| r.get(0)).await.unwrap();
            assert_eq!(v, 0);
            assert!(start.elapsed() < Duration::from_secs(10), "no statement ran inline");
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        db.execute("UPDATE t SET v = 5", ()).await.unwrap();
        let v: i64 = db.query_row("SELECT v FROM t", [], |r| r.get(0)).await.unwrap();
        assert_eq!(v, 5, "read-your-writes");
    }
}

both_backends! {
    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn many_tasks_reading_inline_and_writing_see_an_exact_final_state(backend) {
        let db = with_table(backend, |b| b).await;
        until_inline(&db).await;
        let mut tasks = Vec::new();
        for _ in 0..16 {
            let db = db.clone();
            tasks.push(tokio::spawn(async move {
                let mut last = 0;
                for _ in 0..200 {
                    let (_, seen) = db.read(probe(Mode::Point)).await.unwrap();
                    assert!(seen >= last, "a read went back in time: {seen} after {last}");
                    db.execute("UPDATE t SET v = v + 1", ()).await.unwrap();
                    let (_, after) = db.read(probe(Mode::Point)).await.unwrap();
                    assert!(after > seen, "a task did not see its own write");
                    last = after;
                }
            }));
        }
        for t in tasks {
            t.await.unwrap();
        }
        let (_, v) = db.read(probe(Mode::Point)).await.unwrap();
        assert_eq!(v, 16 * 200);
        assert!(db.metrics().inline_reads > 0);
    }
}

both_backends! {
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn close_ends_kept_snapshots_and_truncates_the_wal(backend) {
        let db = with_table(backend, |b| b.read_snapshot_max_age(Duration::from_secs(60))).await;
        until_inline(&db).await;
        db.execute("UPDATE t SET v = 9", ()).await.unwrap();
        let (thread, _) = db.read(probe(Mode::Point)).await.unwrap();
        assert_eq!(thread, here());
        let path = db.path().to_path_buf();
        db.close().await;
        let wal = std::fs::metadata(wal_of(&path)).map_or(0, |m| m.len());
        assert_eq!(wal, 0, "the last checkpoint truncated the WAL");
        let v: i64 = Connection::open(&path)
            .unwrap()
            .query_row("SELECT v FROM t", [], |r| r.get(0))
            .unwrap();
        assert_eq!(v, 9);
    }
}

/// A statement helper's read of one call site whatever its SQL's parameter, returning the thread its row mapper ran
/// on (where the read ran) and `t`'s value: of the reads on callers' threads, only the statement helpers' may run
/// on the writer's connection.
async fn point(db: &Database) -> quicklite::Result<(ThreadId, i64)> {
    db.query_row("SELECT v FROM t", [], |r| Ok((here(), r.get(0)?)))
        .await
}

/// Writes, then runs `read` until one of the reads runs on the writer's connection, lent while the writer waits for
/// work (a standalone database's: its statement reads go there when their own connection's cache is cold after a
/// commit); returns every read's result. On a registry's database, whose writer lends no connection, one write and
/// one read. Fails after 10 s.
async fn until_on_writer<T, F>(
    db: &Database,
    backend: Backend,
    read: impl Fn() -> F,
) -> Vec<quicklite::Result<T>>
where
    F: std::future::Future<Output = quicklite::Result<T>>,
{
    let before = db.metrics().inline_reads_on_writer;
    let start = Instant::now();
    let mut results = Vec::new();
    loop {
        db.execute("UPDATE t SET v = v", ()).await.unwrap();
        results.push(read().await);
        if backend == Backend::Registry {
            assert_eq!(db.metrics().inline_reads_on_writer, 0);
            return results;
        }
        if db.metrics().inline_reads_on_writer > before {
            return results;
        }
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "no read ran on the writer's connection in 10 s"
        );
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
}

/// Reads with [`point`] until one runs on this thread.
async fn until_point_inline(db: &Database) {
    let start = Instant::now();
    while point(db).await.unwrap().0 != here() {
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "no read ran on its caller's thread in 10 s"
        );
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
}

fn assert_read_only<T: std::fmt::Debug>(result: quicklite::Result<T>) {
    match result {
        Err(Error::Sqlite(rusqlite::Error::SqliteFailure(e, _))) => {
            assert_eq!(e.code, ErrorCode::ReadOnly)
        }
        other => panic!("expected SQLITE_READONLY, got {other:?}"),
    }
}

both_backends! {
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_read_after_a_commit_may_run_on_the_writers_connection_and_sees_the_commit(backend) {
        let db = with_table(backend, |b| b).await;
        until_point_inline(&db).await;
        for i in 1..=20_i64 {
            db.execute("UPDATE t SET v = ?1", (i,)).await.unwrap();
            let (_, v) = point(&db).await.unwrap();
            assert_eq!(v, i, "read {i} saw an older snapshot");
        }
        for result in until_on_writer(&db, backend, || point(&db)).await {
            assert_eq!(result.unwrap(), (here(), 20));
        }
        db.execute("UPDATE t SET v = 21", ()).await.unwrap();
        let (_, v) = point(&db).await.unwrap();
        assert_eq!(v, 21, "the writer took its connection back and wrote");
    }
}

both_backends! {
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_read_closure_never_runs_on_the_writers_connection(backend) {
        let db = with_table(backend, |b| b).await;
        until_inline(&db).await;
        until_point_inline(&db).await;
        for _ in 0..200 {
            db.execute("UPDATE t SET v = v", ()).await.unwrap();
            let on_writer = db.metrics().inline_reads_on_writer;
            db.read(probe(Mode::Point)).await.unwrap();
            assert_eq!(db.metrics().inline_reads_on_writer, on_writer);
        }
    }
}

both_backends! {
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_read_on_the_writers_connection_cannot_write_nor_change_it(backend) {
        let db = with_table(backend, |b| b).await;
        until_point_inline(&db).await;
        // One call site whose SQL writes: rolled back, failed as on a reader's connection.
        let writes = || db.query_row("UPDATE t SET v = v + 1 RETURNING v", [], |r| r.get::<_, i64>(0));
        for result in until_on_writer(&db, backend, writes).await {
            assert_read_only(result);
        }
        // Nor change the writer's settings, nor leave `query_only` on for the writes that follow.
        let sets = || db.query_row("PRAGMA busy_timeout = 1", [], |r| r.get::<_, i64>(0));
        let results = until_on_writer(&db, backend, sets).await;
        if backend == Backend::Standalone {
            match results.last() {
                Some(Err(e)) => assert_eq!(e.sqlite_code(), Some(ErrorCode::AuthorizationForStatementDenied)),
                other => panic!("expected SQLITE_AUTH, got {other:?}"),
            }
        }
        let query_only = || db.query_row("SELECT 1 FROM pragma_query_only(1)", [], |r| r.get::<_, i64>(0));
        until_on_writer(&db, backend, query_only).await;
        let (_, v) = point(&db).await.unwrap();
        assert_eq!(v, 0, "nothing was written");
        db.execute("UPDATE t SET v = 5", ()).await.unwrap();
        let (_, v) = point(&db).await.unwrap();
        assert_eq!(v, 5, "the writer writes as before");
        assert_eq!(
            db.pragmas().get("busy_timeout").map(String::as_str),
            Some("5000"),
            "{:?}",
            db.pragmas()
        );
    }
}

both_backends! {
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn reads_between_writes_see_each_write_and_write_nothing_themselves(backend) {
        // One read after each write: on a standalone database's writer connection such a read runs as a transaction
        // of its own, with no snapshot kept (the next write would end it).
        let db = with_table(backend, |b| b).await;
        until_point_inline(&db).await;
        let on_writer = db.metrics().inline_reads_on_writer;
        for i in 1..=300_i64 {
            db.execute("UPDATE t SET v = ?1", (i,)).await.unwrap();
            match i % 3 {
                0 => assert_read_only(
                    db.query_row("UPDATE t SET v = -1 RETURNING v", [], |r| r.get::<_, i64>(0)).await,
                ),
                1 => assert_eq!(point(&db).await.unwrap().1, i, "read {i} missed the write before it"),
                _ => {
                    // A statement that leaves a transaction open behind it, which nothing may keep.
                    let _ = db.query_all("SAVEPOINT mine", [], |r| r.get::<_, i64>(0)).await;
                }
            }
        }
        let (_, v) = point(&db).await.unwrap();
        assert_eq!(v, 300, "a read wrote");
        db.execute("UPDATE t SET v = 301", ()).await.unwrap();
        assert_eq!(point(&db).await.unwrap().1, 301, "the writer writes as before");
        if backend == Backend::Standalone {
            assert!(db.metrics().inline_reads_on_writer > on_writer, "no read ran on the writer's connection");
        }
    }
}

both_backends! {
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_savepoint_a_read_left_open_on_the_reader_threads_holds_no_snapshot(backend) {
        // On the reader threads (one of them), a read alone in its batch runs without a transaction of its own: a
        // `SAVEPOINT` would begin one, and every read after it would see its snapshot.
        let db = with_table(backend, |b| b.inline_reads(false).readers(1)).await;
        for i in 1..=50_i64 {
            let _ = db.query_all("SAVEPOINT mine", [], |r| r.get::<_, i64>(0)).await;
            db.execute("UPDATE t SET v = ?1", (i,)).await.unwrap();
            assert_eq!(point(&db).await.unwrap().1, i, "read {i} missed the write before it");
        }
    }
}

both_backends! {
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_read_that_writes_then_panics_on_the_writers_connection_leaves_nothing_written(backend) {
        let db = with_table(backend, |b| b).await;
        // One call site: a row mapper told by a flag whether to panic, after a statement that writes.
        let read = |panics: bool| {
            db.query_row("UPDATE t SET v = 99 RETURNING v", [], move |r| {
                if panics {
                    panic!("wrote, then panicked");
                }
                r.get::<_, i64>(0)
            })
        };
        let start = Instant::now();
        while db.metrics().inline_reads == 0 {
            assert!(start.elapsed() < Duration::from_secs(10), "no read ran on its caller's thread in 10 s");
            let _ = read(false).await;
        }
        let results = until_on_writer(&db, backend, || read(true)).await;
        for result in results {
            match result {
                Err(Error::Panic { message }) => assert_eq!(message, "wrote, then panicked"),
                // On the reader threads the statement itself is refused.
                other => assert_read_only(other),
            }
        }
        let (_, v) = point(&db).await.unwrap();
        assert_eq!(v, 0, "a panicking read's write was kept");
        db.execute("UPDATE t SET v = 4", ()).await.unwrap();
        let (_, v) = point(&db).await.unwrap();
        assert_eq!(v, 4);
    }
}

both_backends! {
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_snapshot_kept_on_the_writers_connection_ends_when_idle(backend) {
        let db = with_table(backend, |b| {
            b.read_snapshot_max_age(Duration::from_secs(60))
                .checkpointing(quicklite::Checkpointing::External)
        })
        .await;
        until_point_inline(&db).await;
        until_on_writer(&db, backend, || point(&db)).await;
        // Another connection truncates the WAL: it waits for every snapshot in it to end, and the database's
        // writer never takes its connection back meanwhile (nothing is written).
        let other = Connection::open(db.path()).unwrap();
        other.busy_timeout(Duration::from_secs(5)).unwrap();
        let (busy, log, copied): (i64, i64, i64) = other
            .query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
            .unwrap();
        assert_eq!((busy, log, copied), (0, 0, 0), "the WAL was truncated");
    }
}

/// A registry's databases share one bound on connections for inline reads: past it, reads go to the pool.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_registrys_databases_share_a_bound_on_inline_connections() {
    let dir = tempfile::tempdir().unwrap();
    let registry = quicklite::Registry::builder(dir.path())
        .inline_connections(1)
        .configure(|b| {
            b.inline_read_max(Duration::from_millis(10))
                .inline_connections(4)
                .inline_read_closures(true)
        })
        .open()
        .await
        .unwrap();
    let (a, b) = (
        registry.get("a").await.unwrap(),
        registry.get("b").await.unwrap(),
    );
    for db in [&a, &b] {
        db.execute_batch("CREATE TABLE t (v INTEGER NOT NULL); INSERT INTO t VALUES (0);")
            .await
            .unwrap();
    }
    until_inline(&a).await;
    for _ in 0..200 {
        let (thread, _) = b.read(probe(Mode::Point)).await.unwrap();
        assert_ne!(thread, here(), "the one connection is a's");
        let (_, _) = a.read(probe(Mode::Point)).await.unwrap();
        tokio::task::yield_now().await;
    }
    assert_eq!(registry.metrics().inline_connections, 1);
    assert_eq!(b.metrics().inline_reads, 0);
    registry.close().await.unwrap();
}

/// A number for the thread this runs on.
#[cfg(feature = "serde")]
fn thread_tag() -> i64 {
    use std::hash::{Hash, Hasher};
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    here().hash(&mut hasher);
    (hasher.finish() >> 1) as i64
}

both_backends! {
    #[cfg(feature = "serde")]
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn typed_rows_run_inline_per_sql_text(backend) {
        #[derive(serde::Deserialize)]
        struct Tag {
            tag: i64,
        }
        let db = with_table(backend, |b| {
            b.on_connection(|c: &mut Connection, _| {
                c.create_scalar_function("thread_tag", 0, rusqlite::functions::FunctionFlags::SQLITE_UTF8, |_| {
                    Ok(thread_tag())
                })
            })
        })
        .await;
        let start = Instant::now();
        loop {
            let row: Tag = db.query_row_as("SELECT thread_tag() AS tag", []).await.unwrap();
            if row.tag == thread_tag() {
                break;
            }
            assert!(start.elapsed() < Duration::from_secs(10), "no typed read ran on its caller's thread in 10 s");
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        // Another query into the same type is a call site of its own: its first run goes to the reader threads.
        let row: Tag = db.query_row_as("SELECT thread_tag() AS tag, 1 AS other", []).await.unwrap();
        assert_ne!(row.tag, thread_tag());
    }
}

/// Reads of one call site each (a statement helper's, which may run on the writer's connection after a commit)
/// that make SQLite end the read's transaction — an `INSERT OR ROLLBACK` that conflicts, a trigger's
/// `RAISE(ROLLBACK)` — and then one that inserts: each fails, as reads cannot write, and the next must not run
/// in the autocommit mode SQLite left the connection in.
async fn end_the_transaction_then_insert(db: &Database, how: &'static str, key: i64) {
    let _ = db.query_row(how, [], |r| r.get::<_, i64>(0)).await;
    let _ = db
        .query_row(
            "INSERT INTO written_by_reads VALUES (?1) RETURNING key",
            [key],
            |r| r.get::<_, i64>(0),
        )
        .await;
}

/// [`end_the_transaction_then_insert`] in one read closure, whose errors it ignores, as careless code would.
async fn closure_ends_its_transaction_then_inserts(db: &Database, key: i64) {
    let _ = db
        .read(move |c| {
            let _ = c.execute("INSERT OR ROLLBACK INTO taken VALUES (1)", []);
            let _ = c.execute("INSERT INTO written_by_reads VALUES (?1)", [key]);
            Ok(())
        })
        .await;
}

both_backends! {
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_read_commits_nothing_even_when_sqlite_ends_its_transaction(backend) {
        let db = with_table(backend, |b| b).await;
        db.execute_batch(
            "CREATE TABLE taken (id INTEGER PRIMARY KEY); INSERT INTO taken VALUES (1);
             CREATE TABLE written_by_reads (key INTEGER PRIMARY KEY);
             CREATE TABLE undone (x);
             CREATE TRIGGER undo_all BEFORE INSERT ON undone BEGIN SELECT RAISE(ROLLBACK, 'undone'); END;",
        )
        .await
        .unwrap();
        until_point_inline(&db).await;
        let mut key = 0;
        for how in [
            "INSERT OR ROLLBACK INTO taken VALUES (1) RETURNING id",
            "INSERT INTO undone VALUES (1) RETURNING x",
        ] {
            // Each read right after a write: on a standalone database, statement reads whose connection is cold
            // after the commit take the writer's connection, lent while it waits.
            let on_writer = db.metrics().inline_reads_on_writer;
            for _ in 0..300 {
                db.execute("UPDATE t SET v = v", ()).await.unwrap();
                key += 1;
                end_the_transaction_then_insert(&db, how, key).await;
            }
            if backend == Backend::Standalone {
                assert!(db.metrics().inline_reads_on_writer > on_writer, "no read ran on the writer's connection");
            }
        }
        // The same with read closures, which may run on the database's own connections on their callers' threads.
        for _ in 0..300 {
            db.execute("UPDATE t SET v = v", ()).await.unwrap();
            key += 1;
            closure_ends_its_transaction_then_inserts(&db, key).await;
        }
        assert_eq!(common::count(&db, "written_by_reads").await, 0, "a read committed a write");
        let on_file: i64 = Connection::open(db.path())
            .unwrap()
            .query_row("SELECT count(*) FROM written_by_reads", [], |r| r.get(0))
            .unwrap();
        assert_eq!(on_file, 0, "a read committed a write to the file");
    }
}

/// A registry serves a database's reads on its writer's connection while the database needs no reader connection
/// of its own (with no budget for them, always): a read there writes nothing and commits nothing, as on a reader's
/// connection, whatever SQLite did to its transaction, and the writer writes on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_served_on_a_registrys_writer_connection_writes_and_commits_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let registry = quicklite::Registry::builder(dir.path())
        .max_reader_connections(0)
        .configure(|b| b.inline_reads(false))
        .open()
        .await
        .unwrap();
    let db = registry.get("t").await.unwrap();
    db.execute_batch(
        "CREATE TABLE t (v INTEGER NOT NULL); INSERT INTO t VALUES (0);
         CREATE TABLE taken (id INTEGER PRIMARY KEY); INSERT INTO taken VALUES (1);
         CREATE TABLE written_by_reads (key INTEGER PRIMARY KEY);",
    )
    .await
    .unwrap();
    for key in 0..100_i64 {
        db.execute("UPDATE t SET v = v", ()).await.unwrap();
        let wrote = db
            .read(move |c| {
                c.execute("INSERT INTO written_by_reads VALUES (?1)", [key])?;
                c.query_row("SELECT count(*) FROM written_by_reads", [], |r| {
                    r.get::<_, i64>(0)
                })
            })
            .await;
        assert_read_only(wrote);
        closure_ends_its_transaction_then_inserts(&db, key).await;
    }
    assert_eq!(
        registry.metrics().reader_connections,
        0,
        "the reads ran on the writer's connection"
    );
    assert_eq!(
        common::count(&db, "written_by_reads").await,
        0,
        "a read committed a write"
    );
    db.execute("UPDATE t SET v = 3", ()).await.unwrap();
    assert_eq!(
        point(&db).await.unwrap().1,
        3,
        "the writer writes as before"
    );
    registry.close().await.unwrap();
}

/// The first column of a row, as an `i64`: one function, so that every read with it is one call site.
fn first(row: &rusqlite::Row<'_>) -> rusqlite::Result<i64> {
    row.get(0)
}

both_backends! {
    // One worker: a read that held it would stall the runtime, its timers included.
    #[tokio::test(flavor = "multi_thread", worker_threads = 1)]
    async fn a_function_that_says_it_will_block_hands_the_runtime_worker_away_first(backend) {
        let db = with_blocking_function_run_inline(backend).await;
        let stop = Arc::new(AtomicU64::new(0));
        let late = common::ticker(stop.clone());
        tokio::time::sleep(Duration::from_millis(20)).await;
        // A read of the short site blocks for 200 ms (without the call: the ticker 200 ms late).
        let read = tokio::spawn({
            let db = db.db.clone();
            async move { db.query_row("SELECT wait_ms(?1)", (200,), first).await }
        });
        assert_eq!(read.await.unwrap().unwrap(), 200);
        stop.store(1, Ordering::SeqCst);
        let late = late.await.unwrap();
        assert!(late < Duration::from_millis(100), "the runtime's timer ran {late:?} late");
        // Outside a read on a caller's thread it does nothing.
        quicklite::about_to_block();
        assert_eq!(db.read(|c| c.query_row("SELECT wait_ms(1)", [], first)).await.unwrap(), 1);
        db.close().await;
    }
}

both_backends! {
    // One worker: a read that held it would stall the runtime, its timers included.
    #[tokio::test(flavor = "multi_thread", worker_threads = 1)]
    async fn a_function_about_to_block_while_every_cpu_is_busy_still_hands_the_worker_away(backend) {
        let db = with_blocking_function_run_inline(backend).await;
        // Threads that keep every CPU busy (from a while before the reads on): a thread the runtime starts to take
        // its worker waits milliseconds for one, and a read that gave up waiting for it would block holding the
        // worker.
        let busy = Arc::new(AtomicBool::new(true));
        let cpus = std::thread::available_parallelism().map_or(2, |n| n.get());
        let spinners: Vec<_> = (0..cpus * 2 + 1)
            .map(|_| {
                let busy = busy.clone();
                std::thread::spawn(move || while busy.load(Ordering::Relaxed) {})
            })
            .collect();
        tokio::time::sleep(Duration::from_millis(300)).await;
        // Each round on a runtime of its own, one worker: the threads that take the worker from the reads are ones
        // the runtime has to start, not ones it kept from an earlier round.
        let mut lateness = Vec::new();
        for round in 0..4 {
            // A call site of its own, run short: once a read of it ran long, its reads go to the reader threads.
            let sql = format!("SELECT wait_ms(?1) AS round_{round}");
            run_short_inline(&db, &sql).await;
            let db = db.db.clone();
            let late = tokio::task::spawn_blocking(move || {
                let runtime = tokio::runtime::Builder::new_multi_thread()
                    .worker_threads(1)
                    .enable_all()
                    .build()
                    .unwrap();
                runtime.block_on(async move {
                    let stop = Arc::new(AtomicU64::new(0));
                    let late = common::ticker(stop.clone());
                    tokio::time::sleep(Duration::from_millis(20)).await;
                    // Two at once: the second runs on the thread that took the worker from the first.
                    let reads: Vec<_> = (0..2)
                        .map(|_| {
                            let (db, sql) = (db.clone(), sql.clone());
                            tokio::spawn(async move { db.query_row(&sql, (150,), first).await })
                        })
                        .collect();
                    for read in reads {
                        assert_eq!(read.await.unwrap().unwrap(), 150);
                    }
                    stop.store(1, Ordering::SeqCst);
                    late.await.unwrap()
                })
            })
            .await
            .unwrap();
            lateness.push(late);
        }
        busy.store(false, Ordering::Relaxed);
        for spinner in spinners {
            spinner.join().unwrap();
        }
        assert!(
            lateness.iter().all(|late| *late < Duration::from_millis(75)),
            "the runtime's timer ran late by {lateness:?} (a read blocked holding its worker)"
        );
        db.close().await;
    }
}

/// A database whose connections have `wait_ms(n)`, a function that sleeps n ms as a function waiting for the network
/// would (SQLite's progress handler, which enforces the bound, is not called while it does), saying so first
/// ([`quicklite::about_to_block`]); its call site `SELECT wait_ms(?1)` has run short on callers' threads.
async fn with_blocking_function_run_inline(backend: Backend) -> common::TestDb {
    use quicklite::rusqlite::functions::FunctionFlags;
    let db = common::open(backend, |b| {
        b.inline_read_max(Duration::from_millis(10))
            .on_connection(|conn, _| {
                conn.create_scalar_function("wait_ms", 1, FunctionFlags::SQLITE_UTF8, |ctx| {
                    let ms = ctx.get::<i64>(0)?;
                    if ms > 0 {
                        quicklite::about_to_block();
                        std::thread::sleep(Duration::from_millis(ms as u64));
                    }
                    Ok(ms)
                })
            })
    })
    .await;
    run_short_inline(&db, "SELECT wait_ms(?1)").await;
    db
}

/// Reads `sql` (of one parameter, `wait_ms`'s) with `wait_ms(0)` until two in a row ran on the caller's thread.
async fn run_short_inline(db: &Database, sql: &str) {
    let start = Instant::now();
    let mut in_a_row = 0;
    while in_a_row < 2 {
        let before = db.metrics().inline_reads;
        db.query_row(sql, (0,), first).await.unwrap();
        in_a_row = if db.metrics().inline_reads > before {
            in_a_row + 1
        } else {
            0
        };
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "no read ran on its caller's thread in 10 s"
        );
    }
}

/// How many polls a read of `SELECT 1` took, and whether it ran on its caller's thread.
async fn polls_of_a_read(db: &Database) -> (u32, bool) {
    let before = db.metrics().inline_reads;
    let (polls, read) = common::polls(db.query_row("SELECT 1", [], first)).await;
    read.unwrap();
    (polls, db.metrics().inline_reads > before)
}

both_backends! {
    // One worker: every task's requests run on one thread.
    #[tokio::test(flavor = "multi_thread", worker_threads = 1)]
    async fn a_tasks_first_read_after_anothers_runs_at_once_and_a_second_in_a_row_takes_its_turn(backend) {
        let db = common::open(backend, |b| b).await;
        let start = Instant::now();
        while !polls_of_a_read(&db).await.1 {
            assert!(start.elapsed() < Duration::from_secs(10), "no read ran on its caller's thread in 10 s");
        }
        let (mut firsts, mut at_once, mut seconds) = (0, 0, 0);
        for _ in 0..20 {
            // Another task's read the last request run on the worker's thread.
            let db = db.db.clone();
            tokio::spawn({
                let db = db.clone();
                async move { polls_of_a_read(&db).await }
            })
            .await
            .unwrap();
            let (first, second) =
                tokio::spawn(async move { (polls_of_a_read(&db).await, polls_of_a_read(&db).await) })
                    .await
                    .unwrap();
            if first.1 {
                firsts += 1;
                // It was polled behind the other task: a yield would only wake the runtime to poll it again. (A
                // read that finds the writer at work of its own — truncating an idle database's WAL, now and then —
                // takes its turn behind the runtime's tasks, where the writer's answers wake theirs.)
                at_once += usize::from(first.0 == 1);
            }
            if second.1 {
                seconds += 1;
                // In the poll that ran its first: it goes behind the others ready to run before it runs.
                assert!(second.0 >= 2, "a task's second read in a row ran without a turn");
            }
        }
        assert!(firsts >= 15 && seconds >= 15, "{firsts} and {seconds} of 20 ran on the caller's thread");
        assert!(at_once >= 15, "{at_once} of {firsts} first reads after another task's ran without a turn");
    }
}
