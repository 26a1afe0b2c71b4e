//! The handle's contract: concurrency with exact final state, profiles read back from SQLite, bad input, close.

mod common;

use common::temp_db;
use quicklite::rusqlite::{self, ErrorCode};
use quicklite::{Database, Error, Profile, QueueFull};

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_readers_and_writers_reach_the_exact_final_state() {
    let t = temp_db();
    let db = Database::open(&t.path).await.unwrap();
    db.execute_batch("CREATE TABLE acct (id INTEGER PRIMARY KEY, balance INTEGER NOT NULL)")
        .await
        .unwrap();
    db.execute_many(
        "INSERT INTO acct VALUES (?1, 0)",
        (0..10_i64).map(|i| (i,)).collect::<Vec<_>>(),
    )
    .await
    .unwrap();

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
    db.close().await.unwrap();
}

#[tokio::test]
async fn server_profile_pragmas_are_applied() {
    let t = temp_db();
    let db = Database::open(&t.path).await.unwrap();
    let p = db.pragmas();
    assert_eq!(p["journal_mode"], "wal");
    assert_eq!(p["synchronous"], "1"); // NORMAL
    assert_eq!(p["busy_timeout"], "5000");
    assert_eq!(p["foreign_keys"], "1");
    assert_eq!(p["cache_size"], "-32000");
    assert_eq!(p["mmap_size"], "268435456");
    assert_eq!(p["temp_store"], "2"); // MEMORY
    assert_eq!(p["journal_size_limit"], "67108864");
    // And on the readers' connections too, asked of SQLite directly.
    let (cache, fk, query_only): (i64, i64, i64) = db
        .read(|c| {
            Ok((
                c.pragma_query_value(None, "cache_size", |r| r.get(0))?,
                c.pragma_query_value(None, "foreign_keys", |r| r.get(0))?,
                c.pragma_query_value(None, "query_only", |r| r.get(0))?,
            ))
        })
        .await
        .unwrap();
    assert_eq!((cache, fk, query_only), (-32000, 1, 1));
}

#[tokio::test]
async fn durable_profile_syncs_fully_and_overrides_win() {
    let t = temp_db();
    let db = Database::builder(&t.path)
        .profile(Profile::Durable)
        .pragma("cache_size", "-1000")
        .busy_timeout(std::time::Duration::from_millis(1234))
        .open()
        .await
        .unwrap();
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
}

#[tokio::test]
async fn sqlite_default_profile_touches_nothing() {
    let t = temp_db();
    let db = Database::builder(&t.path)
        .profile(Profile::SqliteDefault)
        .open()
        .await
        .unwrap();
    let p = db.pragmas();
    assert_eq!(p["journal_mode"], "delete");
    assert_eq!(p["synchronous"], "2");
    assert_eq!(p["cache_size"], "-2000");
    assert_eq!(p["mmap_size"], "0");
    // Still fully usable, with readers and the writer sharing a rollback journal.
    db.execute_batch("CREATE TABLE t (x)").await.unwrap();
    db.execute("INSERT INTO t VALUES (1)", ()).await.unwrap();
    let n = common::count(&db, "t").await;
    assert_eq!(n, 1);
}

#[tokio::test]
async fn connections_are_nomutex_and_memory_statistics_are_off() {
    let t = temp_db();
    let db = Database::open(&t.path).await.unwrap();
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
    let report = quicklite::sqlite_setup();
    assert!(report.memory_statistics_off, "{}", report.detail);
    assert!(report.applied, "{}", report.detail);
    let info = quicklite::sqlite_info().unwrap();
    assert!(info.version.starts_with('3'));
    assert!(
        info.compile_options
            .iter()
            .any(|o| o.starts_with("THREADSAFE="))
    );
}

#[tokio::test]
async fn fullmutex_can_be_asked_for() {
    use rusqlite::OpenFlags;
    let t = temp_db();
    let db = Database::builder(&t.path)
        .open_flags(
            OpenFlags::SQLITE_OPEN_READ_WRITE
                | OpenFlags::SQLITE_OPEN_CREATE
                | OpenFlags::SQLITE_OPEN_FULL_MUTEX,
        )
        .open()
        .await
        .unwrap();
    // SAFETY: see above; serialized connections have a mutex.
    let has_mutex = db
        .read(|c| Ok(!unsafe { rusqlite::ffi::sqlite3_db_mutex(c.handle()).is_null() }))
        .await
        .unwrap();
    assert!(has_mutex);
}

#[tokio::test]
async fn malformed_sql_and_wrong_parameter_count_are_clear_errors() {
    let t = temp_db();
    let db = Database::open(&t.path).await.unwrap();
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
}

#[tokio::test]
async fn a_write_through_read_is_refused() {
    let t = temp_db();
    let db = Database::open(&t.path).await.unwrap();
    db.execute_batch("CREATE TABLE t (a)").await.unwrap();
    let e = db
        .read(|c| c.execute("INSERT INTO t VALUES (1)", []))
        .await
        .unwrap_err();
    assert_eq!(e.sqlite_code(), Some(ErrorCode::ReadOnly), "{e}");
    // Turning query_only off does not help: the connection itself is read-only.
    let e = db
        .read(|c| {
            c.execute_batch("PRAGMA query_only = OFF")?;
            c.execute("INSERT INTO t VALUES (1)", [])
        })
        .await
        .unwrap_err();
    assert_eq!(e.sqlite_code(), Some(ErrorCode::ReadOnly), "{e}");
    let n = common::count(&db, "t").await;
    assert_eq!(n, 0);
}

#[tokio::test]
async fn closures_cannot_end_the_managed_transaction() {
    let t = temp_db();
    let db = Database::open(&t.path).await.unwrap();
    db.execute_batch("CREATE TABLE t (a)").await.unwrap();
    for sql in ["COMMIT", "ROLLBACK", "BEGIN", "RELEASE quicklite_write"] {
        let e = db.write(move |c| c.execute_batch(sql)).await.unwrap_err();
        assert_eq!(
            e.sqlite_code(),
            Some(ErrorCode::AuthorizationForStatementDenied),
            "{sql}: {e}"
        );
        let e = db.read(move |c| c.execute_batch(sql)).await.unwrap_err();
        assert_eq!(
            e.sqlite_code(),
            Some(ErrorCode::AuthorizationForStatementDenied),
            "{sql}: {e}"
        );
    }
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
}

#[tokio::test]
async fn a_panicking_closure_does_not_kill_the_threads() {
    let t = temp_db();
    let db = Database::open(&t.path).await.unwrap();
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
}

#[tokio::test]
async fn a_directory_is_not_a_database() {
    let t = temp_db();
    let e = Database::open(t.dir.path()).await.unwrap_err();
    assert_eq!(e.sqlite_code(), Some(ErrorCode::CannotOpen), "{e}");
}

#[tokio::test]
async fn a_file_that_is_not_a_database_is_refused_and_left_alone() {
    let t = temp_db();
    let junk =
        b"this is a text file, not an SQLite database; it must not be modified.\n".repeat(100);
    std::fs::write(&t.path, &junk).unwrap();
    let e = Database::open(&t.path).await.unwrap_err();
    assert_eq!(e.sqlite_code(), Some(ErrorCode::NotADatabase), "{e}");
    assert!(e.to_string().contains("file is not a database"), "{e}");
    assert_eq!(std::fs::read(&t.path).unwrap(), junk);
}

#[tokio::test]
async fn a_read_only_location_is_a_clear_error() {
    // /proc refuses file creation even to root.
    let e = Database::open("/proc/quicklite-test.db").await.unwrap_err();
    assert_eq!(e.sqlite_code(), Some(ErrorCode::CannotOpen), "{e}");
    let e = Database::open(":memory:").await.unwrap_err();
    assert!(matches!(e, Error::InvalidConfig(_)), "{e:?}");
}

#[tokio::test]
async fn close_drains_queued_work_then_refuses_new_work() {
    let t = temp_db();
    let db = Database::open(&t.path).await.unwrap();
    db.execute_batch("CREATE TABLE t (a)").await.unwrap();
    let (release, blocker) = common::hold_writer(&db).await;
    let mut pending = Vec::new();
    for i in 0..100_i64 {
        let db = db.clone();
        pending.push(tokio::spawn(async move {
            db.execute("INSERT INTO t VALUES (?1)", (i,)).await
        }));
    }
    common::until_write_queue_holds(&db, 100).await;
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
    let wal = t.path.with_extension("db-wal");
    assert!(
        std::fs::metadata(&wal)
            .map(|m| m.len() == 0)
            .unwrap_or(true)
    );
    let reopened = Database::open(&t.path).await.unwrap();
    let n = common::count(&reopened, "t").await;
    assert_eq!(n, 100);
}

#[tokio::test]
async fn dropping_the_last_handle_with_work_in_flight_commits_it() {
    use futures::FutureExt;
    let t = temp_db();
    let db = Database::open(&t.path).await.unwrap();
    db.execute_batch("CREATE TABLE t (a)").await.unwrap();
    let (release, blocker) = common::hold_writer(&db).await;
    for i in 0..50_i64 {
        // Polled once: the write is queued, then its caller goes away. Queued writes still run.
        assert!(
            db.execute("INSERT INTO t VALUES (?1)", (i,))
                .now_or_never()
                .is_none()
        );
    }
    assert_eq!(db.metrics().write_queue_depth, 50);
    drop(db);
    release.send(()).unwrap();
    // The blocking write's task held the last clone: when it ends, the queues close with 50 writes in them.
    blocker.await.unwrap();

    // The old writer drains its queue in the background; a new handle sees the writes as they commit.
    let db = Database::open(&t.path).await.unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        let n = common::count(&db, "t").await;
        if n == 50 {
            break;
        }
        assert!(n < 50 && std::time::Instant::now() < deadline, "count {n}");
        tokio::task::yield_now().await;
    }
}

#[tokio::test]
async fn fail_fast_mode_reports_overload_and_loses_nothing_accepted() {
    let t = temp_db();
    let db = Database::builder(&t.path)
        .write_queue_capacity(8)
        .on_full(QueueFull::Fail)
        .open()
        .await
        .unwrap();
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
}

/// A cached statement keeps its plan: with the query planner stability guarantee on (the default of the Server
/// profile), binding new values never makes SQLite re-prepare it; the SQLite defaults may (this build re-prepares
/// this join on every new value, which is what the guarantee is for).
#[tokio::test]
async fn cached_statements_are_not_reprepared_for_new_values() {
    const JOIN: &str = "SELECT t.id, b.hash FROM tx AS t JOIN block AS b ON b.idx = t.block
                        WHERE t.account = ?1 ORDER BY t.block DESC LIMIT 20";
    async fn reprepares(profile: Profile) -> i32 {
        let t = common::temp_db();
        let db = Database::builder(&t.path)
            .profile(profile)
            .open()
            .await
            .unwrap();
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
        db.close().await.unwrap();
        n
    }
    assert_eq!(reprepares(Profile::Server).await, 0);
    println!(
        "re-prepares of 50 executions under the SQLite defaults: {}",
        reprepares(Profile::SqliteDefault).await
    );
}
