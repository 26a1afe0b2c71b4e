//! The handle's contract: concurrency with exact final state, profiles read back from SQLite, bad input, close.
//! Every test runs on a standalone database and on a registry's (see `common::both_backends`).

mod common;

use std::time::Duration;

use common::{Backend, both_backends};
use quicklite::rusqlite::{self, ErrorCode};
use quicklite::{Error, Profile, QueueFull};

both_backends! {
    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn concurrent_readers_and_writers_reach_the_exact_final_state(backend) {
        let db = common::open(backend, |b| b).await;
        db.execute_batch("CREATE TABLE acct (id INTEGER PRIMARY KEY, balance INTEGER NOT NULL)")
            .await
            .unwrap();
        db.execute_many(
            "INSERT INTO acct VALUES (?1, 0)",
            (0..10_i64).map(|i| (i,)).collect::<Vec<_>>(),
        )
        .await
        .unwrap();

        // Registry: the neighbour keeps closing the database's connections while the tasks run.
        let churn = db.churn();
        let mut tasks = Vec::new();
        for task in 0..32_i64 {
            let db = db.clone();
            tasks.push(tokio::spawn(async move {
                for i in 0..50_i64 {
                    let id = (task + i) % 10;
                    db.execute("UPDATE acct SET balance = balance + 1 WHERE id = ?1", (id,))
                        .await
                        .unwrap();
                    // A reader never sees a negative or torn total.
                    let total: i64 = db
                        .query_row("SELECT sum(balance) FROM acct", [], |r| r.get(0))
                        .await
                        .unwrap();
                    assert!((1..=32 * 50).contains(&total));
                }
            }));
        }
        for t in tasks {
            t.await.unwrap();
        }
        churn.stop().await;
        let total: i64 = db
            .query_row("SELECT sum(balance) FROM acct", [], |r| r.get(0))
            .await
            .unwrap();
        assert_eq!(total, 32 * 50);
        let rows: Vec<(i64, i64)> = db
            .query_all("SELECT id, balance FROM acct ORDER BY id", [], |r| {
                Ok((r.get(0)?, r.get(1)?))
            })
            .await
            .unwrap();
        assert_eq!(rows.len(), 10);
        assert!(rows.iter().all(|&(_, b)| b == 160));
        db.close().await;
    }
}

both_backends! {
    #[tokio::test]
    async fn server_profile_pragmas_are_applied(backend) {
        let db = common::open(backend, |b| b).await;
        let p = db.pragmas();
        assert_eq!(p["journal_mode"], "wal");
        assert_eq!(p["synchronous"], "1"); // NORMAL
        assert_eq!(p["busy_timeout"], "5000");
        assert_eq!(p["foreign_keys"], "1");
        assert_eq!(p["cache_size"], "-32000");
        assert_eq!(p["mmap_size"], "268435456");
        assert_eq!(p["temp_store"], "2"); // MEMORY
        assert_eq!(p["journal_size_limit"], "67108864");
        // And on the connections serving reads too, asked of SQLite directly (on a registry, after the neighbour
        // closed the connections the PRAGMAs were read back from).
        // (A registry's reads may run on the writer's connection, which is not `query_only` but lets them commit
        // nothing: tests/inline_reads.rs.)
        let (cache, fk): (i64, i64) = db
            .read(|c| {
                Ok((
                    c.pragma_query_value(None, "cache_size", |r| r.get(0))?,
                    c.pragma_query_value(None, "foreign_keys", |r| r.get(0))?,
                ))
            })
            .await
            .unwrap();
        assert_eq!((cache, fk), (-32000, 1));
        db.close().await;
    }
}

both_backends! {
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn reader_connections_drop_their_memory_map_while_the_database_is_written(backend) {
        const MAPPED: i64 = 268_435_456;
        // One reader, so that every read below meets the same connection (none on the callers' threads).
        let db = common::open(backend, |b| b.readers(1).inline_reads(false)).await;
        db.execute_batch("CREATE TABLE t (k INTEGER PRIMARY KEY)")
            .await
            .unwrap();
        // With the writer held, reads go to a reader connection on both backends (read-only, unlike the writer's).
        let on_a_reader = || async {
            db.read(|c| Ok((c.is_readonly("main")?, c.pragma_query_value(None, "mmap_size", |r| r.get(0))?)))
                .await
                .unwrap()
        };
        let (release, blocker) = common::hold_writer(&db).await;
        assert!(on_a_reader().await.0);
        // Nothing commits while the writer is held: after a quiet spell the reader maps the file again.
        tokio::time::sleep(Duration::from_millis(1_300)).await;
        assert_eq!(on_a_reader().await, (true, MAPPED));
        release.send(()).unwrap();
        blocker.await.unwrap();
        // A commit since its last batch: the reader reads without a map.
        let (release, blocker) = common::hold_writer(&db).await;
        assert_eq!(on_a_reader().await, (true, 0));
        release.send(()).unwrap();
        blocker.await.unwrap();
        // The writer's connection keeps its map.
        assert_eq!(db.pragmas()["mmap_size"], MAPPED.to_string());
        db.close().await;
    }
}

both_backends! {
    #[tokio::test]
    async fn durable_profile_syncs_fully_and_overrides_win(backend) {
        let db = common::open(backend, |b| {
            b.profile(Profile::Durable)
                .pragma("cache_size", "-1000")
                .busy_timeout(Duration::from_millis(1234))
        })
        .await;
        let p = db.pragmas();
        assert_eq!(p["journal_mode"], "wal");
        assert_eq!(p["synchronous"], "2"); // FULL
        assert_eq!(p["cache_size"], "-1000");
        assert_eq!(p["busy_timeout"], "1234");
        let sync: i64 = db
            .with_write_connection(|c| c.pragma_query_value(None, "synchronous", |r| r.get(0)))
            .await
            .unwrap();
        assert_eq!(sync, 2);
        // Still so on connections opened again.
        db.evict().await;
        let (sync, cache): (i64, i64) = db
            .with_write_connection(|c| {
                Ok((
                    c.pragma_query_value(None, "synchronous", |r| r.get(0))?,
                    c.pragma_query_value(None, "cache_size", |r| r.get(0))?,
                ))
            })
            .await
            .unwrap();
        assert_eq!((sync, cache), (2, -1000));
        db.close().await;
    }
}

both_backends! {
    #[tokio::test]
    async fn sqlite_default_profile_touches_nothing(backend) {
        let db = common::open(backend, |b| b.profile(Profile::SqliteDefault)).await;
        let p = db.pragmas();
        assert_eq!(p["journal_mode"], "delete");
        assert_eq!(p["synchronous"], "2");
        assert_eq!(p["cache_size"], "-2000");
        assert_eq!(p["mmap_size"], "0");
        // Still fully usable, with readers and the writer sharing a rollback journal.
        db.execute_batch("CREATE TABLE t (x)").await.unwrap();
        db.execute("INSERT INTO t VALUES (1)", ()).await.unwrap();
        db.evict().await;
        let n = common::count(&db, "t").await;
        assert_eq!(n, 1);
        db.close().await;
    }
}

both_backends! {
    #[tokio::test]
    async fn connections_are_nomutex_and_memory_statistics_are_off(backend) {
        let db = common::open(backend, |b| b).await;
        // SAFETY (in the closures): sqlite3_db_mutex only reads the connection's mutex pointer, which is NULL for
        // connections opened in multi-thread mode (SQLITE_OPEN_NOMUTEX).
        let reader_mutex_is_null = db
            .read(|c| Ok(unsafe { rusqlite::ffi::sqlite3_db_mutex(c.handle()).is_null() }))
            .await
            .unwrap();
        let writer_mutex_is_null = db
            .write(|c| Ok(unsafe { rusqlite::ffi::sqlite3_db_mutex(c.handle()).is_null() }))
            .await
            .unwrap();
        assert!(reader_mutex_is_null && writer_mutex_is_null);
        let report = quicklite::setup::sqlite_setup();
        assert!(report.memory_statistics_off, "{}", report.detail);
        assert!(report.applied, "{}", report.detail);
        let info = quicklite::setup::sqlite_info().unwrap();
        assert!(info.version.starts_with('3'));
        assert!(
            info.compile_options
                .iter()
                .any(|o| o.starts_with("THREADSAFE="))
        );
        db.close().await;
    }
}

both_backends! {
    #[tokio::test]
    async fn fullmutex_can_be_asked_for(backend) {
        use rusqlite::OpenFlags;
        let db = common::open(backend, |b| {
            b.open_flags(
                OpenFlags::SQLITE_OPEN_READ_WRITE
                    | OpenFlags::SQLITE_OPEN_CREATE
                    | OpenFlags::SQLITE_OPEN_FULL_MUTEX,
            )
        })
        .await;
        // SAFETY: see above; serialized connections have a mutex.
        let has_mutex = db
            .read(|c| Ok(!unsafe { rusqlite::ffi::sqlite3_db_mutex(c.handle()).is_null() }))
            .await
            .unwrap();
        assert!(has_mutex);
        let writer_has_mutex = db
            .write(|c| Ok(!unsafe { rusqlite::ffi::sqlite3_db_mutex(c.handle()).is_null() }))
            .await
            .unwrap();
        assert!(writer_has_mutex);
        db.close().await;
    }
}

both_backends! {
    #[tokio::test]
    async fn malformed_sql_and_wrong_parameter_count_are_clear_errors(backend) {
        let db = common::open(backend, |b| b).await;
        db.execute_batch("CREATE TABLE t (a, b)").await.unwrap();
        db.execute("INSERT INTO t VALUES (1, 2)", ()).await.unwrap();

        let e = db
            .execute("INSRT INTO t VALUES (1, 2)", ())
            .await
            .unwrap_err();
        assert_eq!(e.sqlite_code(), Some(ErrorCode::Unknown), "{e}");
        assert!(e.to_string().contains("syntax error"), "{e}");

        let e = db
            .execute("INSERT INTO t VALUES (?1, ?2)", (1,))
            .await
            .unwrap_err();
        assert!(
            matches!(
                e,
                Error::Sqlite(rusqlite::Error::InvalidParameterCount(1, 2))
            ),
            "{e:?}"
        );
        let e = db
            .query_row("SELECT nope FROM t", [], |r| r.get::<_, i64>(0))
            .await
            .unwrap_err();
        assert!(e.to_string().contains("no such column"), "{e}");

        // The handle still works and nothing committed was lost.
        let n = common::count(&db, "t").await;
        assert_eq!(n, 1);
        db.close().await;
    }
}

both_backends! {
    #[tokio::test]
    async fn a_write_through_read_is_refused(backend) {
        let db = common::open(backend, |b| b).await;
        db.execute_batch("CREATE TABLE t (a)").await.unwrap();
        let e = db
            .read(|c| c.execute("INSERT INTO t VALUES (1)", []))
            .await
            .unwrap_err();
        assert_eq!(e.sqlite_code(), Some(ErrorCode::ReadOnly), "{e}");
        // Turning query_only off does not help: the connection itself is read-only. (On a registry, the first read
        // after the connections reopen runs on the writer's connection, made read-only for the batch.)
        db.evict().await;
        let e = db
            .read(|c| {
                c.execute_batch("PRAGMA query_only = OFF")?;
                c.execute("INSERT INTO t VALUES (1)", [])
            })
            .await
            .unwrap_err();
        assert_eq!(e.sqlite_code(), Some(ErrorCode::ReadOnly), "{e}");
        // Nor does it leave the writer read-only.
        db.execute("INSERT INTO t VALUES (2)", ()).await.unwrap();
        let n = common::count(&db, "t").await;
        assert_eq!(n, 1);
        db.close().await;
    }
}

both_backends! {
    #[tokio::test]
    async fn closures_cannot_end_the_managed_transaction(backend) {
        let db = common::open(backend, |b| b).await;
        db.execute_batch("CREATE TABLE t (a)").await.unwrap();
        for sql in ["COMMIT", "ROLLBACK", "BEGIN", "RELEASE quicklite_write"] {
            let e = db.write(move |c| c.execute_batch(sql)).await.unwrap_err();
            assert_eq!(
                e.sqlite_code(),
                Some(ErrorCode::AuthorizationForStatementDenied),
                "{sql}: {e}"
            );
            // The message says why, and what to use instead.
            let message = e.to_string();
            assert!(
                message.contains("transaction quicklite manages") && message.contains("Database::transaction"),
                "{message}"
            );
            let e = db.read(move |c| c.execute_batch(sql)).await.unwrap_err();
            assert_eq!(
                e.sqlite_code(),
                Some(ErrorCode::AuthorizationForStatementDenied),
                "{sql}: {e}"
            );
        }
        // Connections opened again refuse it too.
        db.evict().await;
        let e = db.write(|c| c.execute_batch("COMMIT")).await.unwrap_err();
        assert_eq!(
            e.sqlite_code(),
            Some(ErrorCode::AuthorizationForStatementDenied),
            "{e}"
        );
        // Nested savepoints of the caller's own are fine.
        db.write(|c| c.execute_batch("SAVEPOINT mine; INSERT INTO t VALUES (1); RELEASE mine"))
            .await
            .unwrap();
        // Manual transaction control is available through with_write_connection.
        db.with_write_connection(|c| c.execute_batch("BEGIN; INSERT INTO t VALUES (2); COMMIT"))
            .await
            .unwrap();
        let e = db
            .with_write_connection(|c| c.execute_batch("BEGIN; INSERT INTO t VALUES (3)"))
            .await
            .unwrap_err();
        assert!(matches!(e, Error::TransactionLeftOpen), "{e:?}");
        let n = common::count(&db, "t").await;
        assert_eq!(n, 2);
        db.close().await;
    }
}

/// Whether the row `id` of `t` is committed: read by a connection of its own, outside the handle.
fn committed(db: &common::TestDb, id: i64) -> bool {
    let outside = rusqlite::Connection::open(db.path()).unwrap();
    outside
        .query_row("SELECT count(*) FROM t WHERE a = ?1", [id], |r| {
            r.get::<_, i64>(0)
        })
        .unwrap()
        == 1
}

both_backends! {
    // Two workers: `execute`'s statements may run on their callers' threads as well as on the writer.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn transaction_control_is_refused_through_the_statement_cache_and_execute_too(backend) {
        let db = common::open(backend, |b| b).await;
        db.execute_batch("CREATE TABLE t (a)").await.unwrap();
        let mut id = 0;
        // The handle's own statements are in the statement cache: a statement found there is not prepared again,
        // so the authorizer would not see it.
        for sql in [
            "COMMIT",
            "ROLLBACK",
            "BEGIN",
            "BEGIN IMMEDIATE",
            "END",
            "RELEASE quicklite_write",
            "ROLLBACK TO quicklite_write",
            "SAVEPOINT quicklite_write",
        ] {
            for _ in 0..3 {
                let e = db.execute(sql, ()).await.unwrap_err();
                assert_eq!(e.sqlite_code(), Some(ErrorCode::AuthorizationForStatementDenied), "{sql}: {e}");
                let e = db
                    .write(move |c| c.prepare_cached(sql)?.execute([]))
                    .await
                    .unwrap_err();
                assert_eq!(e.sqlite_code(), Some(ErrorCode::AuthorizationForStatementDenied), "{sql}: {e}");
                // The next write commits when it is answered.
                db.execute("INSERT INTO t VALUES (?1)", (id,)).await.unwrap();
                assert!(committed(&db, id), "after {sql}, an answered insert was not committed");
                id += 1;
            }
        }
        // A savepoint of the caller's own as a statement: by itself it would begin a transaction and leave it
        // open (the writes after it would run in it, answered before anything committed them); in a group, a later
        // `ROLLBACK TO` would undo the writes between. Refused also once a closure (which may take one) has put the
        // statement in the cache, where the authorizer does not see it again.
        db.write(|c| c.prepare_cached("SAVEPOINT mine")?.execute([])).await.unwrap();
        for sql in ["SAVEPOINT mine", " -- mine\n /* too */ savepoint mine", "RELEASE mine", "ROLLBACK TO mine"] {
            for _ in 0..20 {
                let e = db.execute(sql, ()).await.unwrap_err();
                assert_eq!(e.sqlite_code(), Some(ErrorCode::AuthorizationForStatementDenied), "{sql}: {e}");
                db.execute("INSERT INTO t VALUES (?1)", (id,)).await.unwrap();
                assert!(committed(&db, id), "after {sql}, an answered insert was not committed");
                id += 1;
            }
        }
        assert_eq!(common::count(&db, "t").await, id);
        db.close().await;
    }
}

both_backends! {
    #[tokio::test]
    async fn a_panicking_closure_does_not_kill_the_threads(backend) {
        let db = common::open(backend, |b| b).await;
        db.execute_batch("CREATE TABLE t (a)").await.unwrap();
        let e = db
            .write(|c| -> rusqlite::Result<()> {
                c.execute("INSERT INTO t VALUES (1)", [])?;
                panic!("write went wrong")
            })
            .await
            .unwrap_err();
        assert!(
            matches!(&e, Error::Panic { message } if message == "write went wrong"),
            "{e:?}"
        );
        let e = db
            .read(|_| -> rusqlite::Result<()> { panic!("read went wrong") })
            .await
            .unwrap_err();
        assert!(
            matches!(&e, Error::Panic { message } if message == "read went wrong"),
            "{e:?}"
        );
        db.execute("INSERT INTO t VALUES (2)", ()).await.unwrap();
        let all: Vec<i64> = db
            .query_all("SELECT a FROM t", [], |r| r.get(0))
            .await
            .unwrap();
        assert_eq!(
            all,
            vec![2],
            "the panicking write's insert must be rolled back"
        );
        assert_eq!(db.metrics().panics, 2);
        db.close().await;
    }
}

both_backends! {
    #[tokio::test]
    async fn a_directory_is_not_a_database(backend) {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join(format!("{}.db", common::NAME))).unwrap();
        let e = common::try_open_in(backend, dir.path(), |b| b)
            .await
            .err()
            .expect("a directory was opened as a database");
        match backend {
            Backend::Standalone => assert_eq!(e.sqlite_code(), Some(ErrorCode::CannotOpen), "{e}"),
            // A registry looks at the file before SQLite does, and refuses anything but a regular file.
            Backend::Registry => assert!(
                matches!(&e, Error::InvalidName { reason, .. } if reason.contains("not a regular file")),
                "{e:?}"
            ),
        }
    }
}

both_backends! {
    #[tokio::test]
    async fn a_file_that_is_not_a_database_is_refused_and_left_alone(backend) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(format!("{}.db", common::NAME));
        let junk =
            b"this is a text file, not an SQLite database; it must not be modified.\n".repeat(100);
        std::fs::write(&path, &junk).unwrap();
        let e = common::try_open_in(backend, dir.path(), |b| b)
            .await
            .err()
            .expect("junk was opened as a database");
        assert_eq!(e.sqlite_code(), Some(ErrorCode::NotADatabase), "{e}");
        assert!(e.to_string().contains("file is not a database"), "{e}");
        assert_eq!(std::fs::read(&path).unwrap(), junk);
    }
}

both_backends! {
    #[tokio::test]
    async fn a_read_only_location_is_a_clear_error(backend) {
        // /proc refuses file creation even to root.
        let e = common::try_open_in(backend, std::path::Path::new("/proc"), |b| b)
            .await
            .err()
            .expect("a database was created in /proc");
        assert_eq!(e.sqlite_code(), Some(ErrorCode::CannotOpen), "{e}");
        if backend == Backend::Standalone {
            // Only a standalone database takes a path: a registry's names cannot spell `:memory:` (hostile.rs).
            let e = quicklite::Database::open(":memory:").await.unwrap_err();
            assert!(matches!(e, Error::InvalidConfig(_)), "{e:?}");
        }
    }
}

/// Queues `n` inserts of `first..first + n` behind a held writer; returns the held writer's release and the
/// inserts' tasks.
async fn queue_inserts_behind_held_writer(
    db: &quicklite::Database,
    first: i64,
    n: i64,
) -> (
    std::sync::mpsc::Sender<()>,
    tokio::task::JoinHandle<()>,
    Vec<tokio::task::JoinHandle<quicklite::Result<usize>>>,
) {
    let (release, blocker) = common::hold_writer(db).await;
    let mut pending = Vec::new();
    for i in first..first + n {
        let db = db.clone();
        pending.push(tokio::spawn(async move {
            db.execute("INSERT INTO t VALUES (?1)", (i,)).await
        }));
    }
    common::until_write_queue_holds(db, n as usize).await;
    (release, blocker, pending)
}

both_backends! {
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn close_drains_queued_work_then_refuses_new_work(backend) {
        let t = common::open(backend, |b| b).await;
        let db = t.db.clone();
        db.execute_batch("CREATE TABLE t (a)").await.unwrap();
        // Registry: first, the neighbour asks for the connections while writes are queued behind the held writer
        // and while they are served.
        let (release, blocker, pending) = queue_inserts_behind_held_writer(&db, 0, 100).await;
        let churn = t.churn();
        release.send(()).unwrap();
        blocker.await.unwrap();
        for p in pending {
            p.await.unwrap().unwrap();
        }
        churn.stop().await;

        let (release, blocker, pending) = queue_inserts_behind_held_writer(&db, 100, 100).await;
        let closer = {
            let db = db.clone();
            tokio::spawn(async move { db.close().await })
        };
        release.send(()).unwrap();
        blocker.await.unwrap();
        for p in pending {
            p.await.unwrap().expect("queued before close, so served");
        }
        closer.await.unwrap().unwrap();
        assert!(matches!(
            db.execute("INSERT INTO t VALUES (0)", ()).await,
            Err(Error::Closed)
        ));
        assert!(matches!(db.read(|_| Ok(())).await, Err(Error::Closed)));
        // close checkpointed the WAL into the file.
        let wal = t.path().with_extension("db-wal");
        assert!(
            std::fs::metadata(&wal)
                .map(|m| m.len() == 0)
                .unwrap_or(true)
        );
        // Opened anew (on a registry: by a new registry on the same directory).
        let reopened = t.reopen().await;
        let n = common::count(&reopened, "t").await;
        assert_eq!(n, 200);
        reopened.close().await;
    }
}

both_backends! {
    #[tokio::test]
    async fn close_folds_the_wal_into_the_file_even_after_the_connections_closed(backend) {
        let t = common::open(backend, |b| b).await;
        t.execute_batch("CREATE TABLE t (a)").await.unwrap();
        t.execute("INSERT INTO t VALUES (1)", ()).await.unwrap();
        let wal = t.path().with_extension("db-wal");
        assert!(std::fs::metadata(&wal).unwrap().len() > 0, "the insert is in the WAL");
        // Registry: the connections close (idle or evicted) with the WAL kept for a quick reopen.
        t.evict().await;
        t.db.close().await.unwrap();
        let left = std::fs::metadata(&wal).map_or(0, |m| m.len());
        assert_eq!(left, 0, "close left {left} bytes of WAL");
    }
}

both_backends! {
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn every_statement_of_a_read_sees_one_snapshot_even_when_the_read_is_alone(backend) {
        let db = common::open(backend, |b| b).await;
        db.execute_batch("CREATE TABLE t (a); INSERT INTO t VALUES (1)").await.unwrap();
        let (counted_tx, counted_rx) = std::sync::mpsc::channel::<()>();
        let (written_tx, written_rx) = std::sync::mpsc::channel::<()>();
        // The only read queued: between its two statements, a write commits.
        let read = {
            let db = db.db.clone();
            tokio::spawn(async move {
                db.read(move |c| {
                    let before: i64 = c.query_row("SELECT count(*) FROM t", [], |r| r.get(0))?;
                    counted_tx.send(()).unwrap();
                    written_rx.recv().unwrap();
                    let after: i64 = c.query_row("SELECT count(*) FROM t", [], |r| r.get(0))?;
                    Ok((before, after))
                })
                .await
            })
        };
        // Another program's write (a registry may serve the read on its writer's connection, which a write through
        // the handle would then wait for).
        let path = db.path().to_path_buf();
        tokio::task::spawn_blocking(move || {
            counted_rx.recv().unwrap();
            let other = rusqlite::Connection::open(path).unwrap();
            other.execute("INSERT INTO t VALUES (2)", []).unwrap();
        })
        .await
        .unwrap();
        written_tx.send(()).unwrap();
        assert_eq!(read.await.unwrap().unwrap(), (1, 1), "both statements in the snapshot the read began with");
        assert_eq!(common::count(&db, "t").await, 2);
        db.close().await;
    }
}

both_backends! {
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_write_whose_caller_gave_up_before_it_started_is_not_run(backend) {
        use futures::FutureExt;
        const ABANDONED: i64 = 10_000;
        let db = common::open(backend, |b| b.write_queue_capacity(12_000)).await;
        db.execute_batch("CREATE TABLE t (a)").await.unwrap();
        let (release, blocker) = common::hold_writer(&db).await;
        for i in 0..ABANDONED {
            // Polled once: the write is queued, then its caller goes away before the writer gets to it.
            assert!(
                db.execute("INSERT INTO t VALUES (?1)", (i,))
                    .now_or_never()
                    .is_none()
            );
        }
        // Callers that keep waiting, queued behind them.
        let waiting: Vec<_> = (ABANDONED..ABANDONED + 10)
            .map(|i| {
                let db = db.db.clone();
                tokio::spawn(async move { db.execute("INSERT INTO t VALUES (?1)", (i,)).await })
            })
            .collect();
        common::until_write_queue_holds(&db, ABANDONED as usize + 10).await;
        release.send(()).unwrap();
        blocker.await.unwrap();
        for w in waiting {
            assert_eq!(w.await.unwrap().unwrap(), 1);
        }
        // Acknowledged ⇒ committed; abandoned before it started ⇒ not run, counted, and out of the queue.
        let rows = db
            .query_all("SELECT a FROM t ORDER BY a", [], |r| r.get::<_, i64>(0))
            .await
            .unwrap();
        assert_eq!(rows, (ABANDONED..ABANDONED + 10).collect::<Vec<_>>());
        let metrics = db.metrics();
        assert_eq!(metrics.abandoned_writes, ABANDONED as u64);
        assert_eq!(metrics.write_queue_depth, 0);
        db.close().await;
    }
}

both_backends! {
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_read_whose_caller_gave_up_before_it_started_is_not_run(backend) {
        use futures::FutureExt;
        use std::sync::atomic::{AtomicUsize, Ordering};
        let db = common::open(backend, |b| b.readers(1)).await;
        db.execute_batch("CREATE TABLE t (a); INSERT INTO t VALUES (1)").await.unwrap();
        // Registry: with the connections closed, the holding read reopens the database on the read task, and
        // holds the only one.
        db.evict().await;
        let (release_tx, holder) = common::hold_reader(&db).await;
        let ran = std::sync::Arc::new(AtomicUsize::new(0));
        for _ in 0..20 {
            let ran = ran.clone();
            assert!(
                db.read(move |_| {
                    ran.fetch_add(1, Ordering::SeqCst);
                    Ok(())
                })
                .now_or_never()
                .is_none()
            );
        }
        let kept = {
            let db = db.db.clone();
            tokio::spawn(async move { db.query_row("SELECT a FROM t", [], |r| r.get::<_, i64>(0)).await })
        };
        // A hang guard, not a timing assertion.
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        while db.metrics().read_queue_depth < 21 {
            assert!(std::time::Instant::now() < deadline, "reads never queued");
            tokio::task::yield_now().await;
        }
        release_tx.send(()).unwrap();
        holder.await.unwrap();
        assert_eq!(kept.await.unwrap().unwrap(), 1);
        assert_eq!(ran.load(Ordering::SeqCst), 0, "no abandoned read ran");
        assert_eq!(db.metrics().abandoned_reads, 20);
        db.close().await;
    }
}

both_backends! {
    #[tokio::test]
    async fn fail_fast_mode_reports_overload_and_loses_nothing_accepted(backend) {
        let db = common::open(backend, |b| b.write_queue_capacity(8).on_full(QueueFull::Fail)).await;
        db.execute_batch("CREATE TABLE t (a)").await.unwrap();
        let (release, blocker) = common::hold_writer(&db).await;
        let mut pending = Vec::new();
        for i in 0..8_i64 {
            let db = db.clone();
            pending.push(tokio::spawn(async move {
                db.execute("INSERT INTO t VALUES (?1)", (i,)).await
            }));
        }
        common::until_write_queue_holds(&db, 8).await;
        let e = db
            .execute("INSERT INTO t VALUES (99)", ())
            .await
            .unwrap_err();
        assert!(
            matches!(
                e,
                Error::Overloaded {
                    queue: "write",
                    capacity: 8
                }
            ),
            "{e:?}"
        );
        release.send(()).unwrap();
        blocker.await.unwrap();
        for p in pending {
            p.await.unwrap().unwrap();
        }
        let n = common::count(&db, "t").await;
        assert_eq!(n, 8);
        assert_eq!(db.metrics().overloaded, 1);
        db.close().await;
    }
}

/// A cached statement keeps its plan: with the query planner stability guarantee on (the default of the Server
/// profile), binding new values never makes SQLite re-prepare it; the SQLite defaults may (this build re-prepares
/// this join on every new value, which is what the guarantee is for).
async fn reprepares(backend: Backend, profile: Profile) -> i32 {
    const JOIN: &str = "SELECT t.id, b.hash FROM tx AS t JOIN block AS b ON b.idx = t.block
                        WHERE t.account = ?1 ORDER BY t.block DESC LIMIT 20";
    let db = common::open(backend, move |b| b.profile(profile)).await;
    db.execute_batch(
        "CREATE TABLE block (idx INTEGER PRIMARY KEY, hash BLOB);
         CREATE TABLE tx (id INTEGER PRIMARY KEY, block INTEGER, account INTEGER);
         CREATE INDEX tx_account ON tx (account, block);
         WITH RECURSIVE c(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM c WHERE n < 2000)
         INSERT INTO tx SELECT n, n / 4, n % 97 FROM c;
         INSERT INTO block SELECT block, randomblob(32) FROM tx GROUP BY block;",
    )
    .await
    .unwrap();
    let n = db
        .read(|c| {
            for account in 0..50 {
                let mut stmt = c.prepare_cached(JOIN)?;
                let mut rows = stmt.query([account])?;
                while rows.next()?.is_some() {}
            }
            Ok(c.prepare_cached(JOIN)?
                .get_status(rusqlite::StatementStatus::RePrepare))
        })
        .await
        .unwrap();
    db.close().await;
    n
}

both_backends! {
    #[tokio::test]
    async fn cached_statements_are_not_reprepared_for_new_values(backend) {
        assert_eq!(reprepares(backend, Profile::Server).await, 0);
        println!(
            "re-prepares of 50 executions under the SQLite defaults: {}",
            reprepares(backend, Profile::SqliteDefault).await
        );
    }
}

both_backends! {
    #[tokio::test]
    async fn a_database_reopened_serves_everything_committed_before(backend) {
        // Reads through the reopened connections, none on the callers' threads (which need no reopening).
        let db = common::open(backend, |b| b.inline_reads(false)).await;
        db.execute_batch("CREATE TABLE t (a INTEGER PRIMARY KEY)").await.unwrap();
        for round in 0..5_i64 {
            db.execute_many(
                "INSERT INTO t VALUES (?1)",
                (round * 10..round * 10 + 10).map(|i| (i,)).collect::<Vec<_>>(),
            )
            .await
            .unwrap();
            let before = db.env.registry_metrics();
            // Registry: closes the connections (checked), so the read below reopens them.
            db.evict().await;
            assert_eq!(common::count(&db, "t").await, round * 10 + 10);
            if let (Some(before), Some(after)) = (before, db.env.registry_metrics()) {
                // The neighbour opened (evicting this database), then this database reopened (evicting it).
                assert_eq!(after.opens, before.opens + 2, "{after:?}");
                assert_eq!(after.evictions, before.evictions + 2, "{after:?}");
            }
        }
        let m = db.metrics();
        assert_eq!((m.writes, m.reads), (6, 5), "{m:?}");
        db.close().await;
    }
}

both_backends! {
    #[tokio::test]
    async fn closing_a_database_twice_returns_both_times(backend) {
        let db = common::open(backend, |b| b).await;
        db.execute_batch("CREATE TABLE t (a)").await.unwrap();
        // A hang guard, not a timing assertion: a close that never returns fails here instead of hanging.
        for attempt in ["first", "second"] {
            tokio::time::timeout(Duration::from_secs(30), db.db.close())
                .await
                .unwrap_or_else(|_| panic!("the {attempt} close never returned"))
                .unwrap();
        }
        assert!(matches!(db.execute("INSERT INTO t VALUES (1)", ()).await, Err(Error::Closed)));
    }
}

both_backends! {
    #[tokio::test]
    async fn a_database_closed_through_its_handle_can_be_opened_again(backend) {
        let db = common::open(backend, |b| b).await;
        db.execute_batch("CREATE TABLE t (a)").await.unwrap();
        db.execute("INSERT INTO t VALUES (1)", ()).await.unwrap();
        db.db.close().await.unwrap();
        // A standalone database opens the file again; a registry's `get` of the same name.
        let again = db.env.handle().await;
        again.execute("INSERT INTO t VALUES (2)", ()).await.unwrap();
        assert_eq!(common::count(&again, "t").await, 2);
    }
}

both_backends! {
    #[tokio::test]
    async fn sql_made_at_run_time_is_taken_by_reference(backend) {
        let db = common::open(backend, |b| b).await;
        let table = String::from("made_at_run_time");
        db.execute_batch(&format!("CREATE TABLE {table} (k INTEGER PRIMARY KEY, v TEXT)"))
            .await
            .unwrap();
        let insert = format!("INSERT INTO {table} VALUES (?1, ?2)");
        assert_eq!(db.execute(&insert, (1, "one")).await.unwrap(), 1);
        assert_eq!(
            db.execute_many(insert.as_str(), [(2, "two"), (3, "three")]).await.unwrap(),
            2
        );
        let one = format!("SELECT v FROM {table} WHERE k = ?1");
        let v: String = db.query_row(&one, [1], |r| r.get(0)).await.unwrap();
        assert_eq!(v, "one");
        let all = format!("SELECT k FROM {table} ORDER BY k");
        let keys: Vec<i64> = db.query_all(&all, [], |r| r.get(0)).await.unwrap();
        assert_eq!(keys, [1, 2, 3]);
        // Owned text works as before.
        let v: String = db.query_row(one.clone(), [3], |r| r.get(0)).await.unwrap();
        assert_eq!(v, "three");
        db.close().await;
    }
}

both_backends! {
    #[tokio::test]
    async fn optional_makes_no_row_none_and_keeps_every_other_error(backend) {
        use quicklite::OptionalExtension;

        let db = common::open(backend, |b| b).await;
        db.execute_batch("CREATE TABLE item (id INTEGER PRIMARY KEY, name TEXT); INSERT INTO item VALUES (1, 'tea')")
            .await
            .unwrap();
        let name = |id: i64| db.query_row("SELECT name FROM item WHERE id = ?1", (id,), |r| r.get::<_, String>(0));
        assert_eq!(name(1).await.optional().unwrap().as_deref(), Some("tea"));
        assert_eq!(name(2).await.optional().unwrap(), None);
        let e = db
            .query_row("SELECT nope FROM item", (), |r| r.get::<_, String>(0))
            .await
            .optional()
            .unwrap_err();
        assert!(e.to_string().contains("no such column"), "{e}");
        db.close().await;
    }
}
