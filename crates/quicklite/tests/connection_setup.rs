//! The application's own set-up on every connection (`Builder::on_connection`) and its migration
//! (`Builder::migrate`), on both backends.

use std::sync::{Arc, Mutex};

use quicklite::{Builder, ConnectionRole, Error};

mod common;

use common::{Backend, NAME, both_backends};

/// What the set-up functions and migrations of a test saw, in order: the role of each connection of the test
/// database they prepared, and `None` for a migration.
type Log = Arc<Mutex<Vec<Option<ConnectionRole>>>>;

/// Whether `conn` is a connection to the test database (a registry also opens its neighbour).
fn is_test_database(conn: &quicklite::rusqlite::Connection) -> bool {
    conn.path()
        .is_some_and(|p| p.ends_with(&format!("{NAME}.db")))
}

/// Attaches `<dir>/aux.db` as `aux` on every connection, and logs each connection of the test database.
fn attach_aux(b: Builder, dir: &std::path::Path, log: &Log) -> Builder {
    let aux = dir.join("aux.db");
    let log = log.clone();
    b.on_connection(move |conn, role| {
        if is_test_database(conn) {
            log.lock().unwrap().push(Some(role));
        }
        conn.execute("ATTACH DATABASE ?1 AS aux", [aux.to_str().unwrap()])
            .map(|_| ())
    })
}

/// Creates `<dir>/aux.db` with one row.
fn make_aux(dir: &std::path::Path) {
    let aux = quicklite::rusqlite::Connection::open(dir.join("aux.db")).unwrap();
    aux.execute_batch("CREATE TABLE kv (k TEXT, v INTEGER); INSERT INTO kv VALUES ('answer', 42);")
        .unwrap();
}

both_backends! {
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn set_up_runs_on_every_connection_and_again_when_it_reopens(backend) {
        let dir = tempfile::tempdir().unwrap();
        make_aux(dir.path());
        let log = Log::default();
        let (d, l) = (dir.path().to_path_buf(), log.clone());
        // Without connections for reads on callers' threads, whose number depends on how soon a read counts as
        // short (tests/inline_reads.rs sets them up).
        let db = common::open_in(backend, dir.path(), move |b| attach_aux(b, &d, &l).inline_reads(false)).await;
        db.execute_batch("CREATE TABLE t (v INTEGER)").await.unwrap();
        // The attached database is there for writes and for reads.
        db.execute("INSERT INTO t SELECT v FROM aux.kv", ()).await.unwrap();
        let read = || db.query_row("SELECT v FROM aux.kv JOIN t USING (v)", [], |r| r.get::<_, i64>(0));
        assert_eq!(read().await.unwrap(), 42);
        // Registry: the connections close, and reopen with the set-up done again.
        db.evict().await;
        assert_eq!(read().await.unwrap(), 42);
        db.execute("INSERT INTO t SELECT v + 1 FROM aux.kv", ()).await.unwrap();
        let dest = dir.path().join("copy.db");
        db.backup(&dest).await.unwrap();

        let roles = log.lock().unwrap().clone();
        let count = |role| roles.iter().filter(|r| **r == Some(role)).count();
        assert_eq!(count(ConnectionRole::Backup), 1, "{roles:?}");
        match backend {
            // One writer, its checkpointer, and every reader, opened once.
            Backend::Standalone => {
                assert_eq!(count(ConnectionRole::Writer), 1, "{roles:?}");
                assert_eq!(count(ConnectionRole::Checkpointer), 1, "{roles:?}");
                assert_eq!(count(ConnectionRole::Reader), db.readers(), "{roles:?}");
            }
            // The writer opened for `get`, again at the test's first request (opening the neighbour closed it), and
            // after the eviction; reads may run on it, so reader connections are not counted.
            Backend::Registry => assert_eq!(count(ConnectionRole::Writer), 3, "{roles:?}"),
        }
        db.close().await;
    }
}

both_backends! {
    #[tokio::test]
    async fn a_failing_set_up_fails_the_open_and_leaves_nothing_open(backend) {
        let dir = tempfile::tempdir().unwrap();
        let refused = common::try_open_in(backend, dir.path(), |b| {
            b.on_connection(|conn, role| {
                if is_test_database(conn) && role == ConnectionRole::Writer {
                    Err("the key is wrong")
                } else {
                    Ok(())
                }
            })
        })
        .await;
        match refused {
            Err(Error::Setup { stage, connection, message }) => {
                assert_eq!((stage, connection), ("connection set-up", "writer"));
                assert_eq!(message, "the key is wrong");
            }
            Err(other) => panic!("unexpected error: {other}"),
            Ok(_) => panic!("the open succeeded"),
        }
        // Nothing holds the file: the database opens without the failing function and takes writes.
        let db = common::open_in(backend, dir.path(), |b| b).await;
        db.execute_batch("CREATE TABLE t (a); INSERT INTO t VALUES (1)").await.unwrap();
        assert_eq!(common::count(&db, "t").await, 1);
        db.close().await;
    }
}

/// A migration to version 1: a table, in one transaction.
fn version_1(conn: &mut quicklite::rusqlite::Connection) -> quicklite::rusqlite::Result<()> {
    let tx = conn.transaction()?;
    let version: i64 = tx.query_row("PRAGMA user_version", [], |r| r.get(0))?;
    if version < 1 {
        tx.execute_batch("CREATE TABLE item (id INTEGER PRIMARY KEY, name TEXT NOT NULL); PRAGMA user_version = 1;")?;
    }
    tx.commit()
}

both_backends! {
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_migration_runs_on_the_writer_before_any_reader_opens(backend) {
        let dir = tempfile::tempdir().unwrap();
        make_aux(dir.path());
        let log = Log::default();
        let (d, l, m) = (dir.path().to_path_buf(), log.clone(), log.clone());
        let db = common::open_in(backend, dir.path(), move |b| {
            let m = m.clone();
            attach_aux(b, &d, &l).migrate(move |conn| {
                if is_test_database(conn) {
                    m.lock().unwrap().push(None);
                }
                version_1(conn)
            })
        })
        .await;
        db.execute("INSERT INTO item (name) VALUES ('first')", ()).await.unwrap();
        let version: i64 = db.query_row("PRAGMA user_version", [], |r| r.get(0)).await.unwrap();
        assert_eq!(version, 1);
        // Registry: reopening the connections is not a new open of the database; the migration does not run again.
        db.evict().await;
        assert_eq!(common::count(&db, "item").await, 1);

        let events = log.lock().unwrap().clone();
        let migrations: Vec<usize> =
            events.iter().enumerate().filter(|(_, e)| e.is_none()).map(|(i, _)| i).collect();
        assert_eq!(migrations.len(), 1, "{events:?}");
        // The writer was set up, then migrated, and only then did any reader open.
        assert_eq!(events[..migrations[0]], [Some(ConnectionRole::Writer)], "{events:?}");
        db.close().await;
    }
}

both_backends! {
    #[tokio::test]
    async fn a_failing_migration_applies_nothing_and_fails_the_open(backend) {
        let dir = tempfile::tempdir().unwrap();
        let refused = common::try_open_in(backend, dir.path(), |b| {
            b.migrate(|conn| {
                if !is_test_database(conn) {
                    return Ok(());
                }
                let tx = conn.transaction()?;
                tx.execute_batch("CREATE TABLE half (a); PRAGMA user_version = 7;")?;
                // Fails half-way: the transaction is dropped, and rolled back with it.
                tx.execute_batch("INSERT INTO nowhere VALUES (1)")
            })
        })
        .await;
        match refused {
            Err(Error::Setup { stage: "migration", connection: "writer", message }) => {
                assert!(message.contains("nowhere"), "{message}");
            }
            Err(other) => panic!("unexpected error: {other}"),
            Ok(_) => panic!("the open succeeded"),
        }
        let db = common::open_in(backend, dir.path(), |b| b).await;
        let (tables, version): (i64, i64) = db
            .read(|c| {
                let tables = c.query_row(
                    "SELECT count(*) FROM sqlite_schema WHERE name = 'half'",
                    [],
                    |r| r.get(0),
                )?;
                Ok((tables, c.query_row("PRAGMA user_version", [], |r| r.get(0))?))
            })
            .await
            .unwrap();
        assert_eq!((tables, version), (0, 0), "nothing of the migration was applied");
        db.close().await;
    }
}

both_backends! {
    #[tokio::test]
    async fn a_migration_that_leaves_a_transaction_open_is_rolled_back_and_fails(backend) {
        let dir = tempfile::tempdir().unwrap();
        let refused = common::try_open_in(backend, dir.path(), |b| {
            b.migrate(|conn| {
                if is_test_database(conn) {
                    conn.execute_batch("BEGIN; CREATE TABLE open_ended (a);")?;
                }
                Ok::<_, quicklite::rusqlite::Error>(())
            })
        })
        .await;
        assert!(
            matches!(&refused, Err(Error::Setup { stage: "migration", message, .. }) if message.contains("left a transaction open")),
            "{:?}",
            refused.as_ref().err()
        );
        let db = common::open_in(backend, dir.path(), |b| b).await;
        let tables: i64 = db
            .query_row("SELECT count(*) FROM sqlite_schema WHERE name = 'open_ended'", [], |r| r.get(0))
            .await
            .unwrap();
        assert_eq!(tables, 0);
        db.close().await;
    }
}

both_backends! {
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_function_registered_on_every_connection_survives_a_reopen(backend) {
        use quicklite::rusqlite::functions::FunctionFlags;
        let db = common::open(backend, |b| {
            b.on_connection(|conn, _| {
                conn.create_scalar_function(
                    "triple",
                    1,
                    FunctionFlags::SQLITE_UTF8 | FunctionFlags::SQLITE_DETERMINISTIC,
                    |ctx| Ok(ctx.get::<i64>(0)? * 3),
                )
            })
        })
        .await;
        db.execute_batch("CREATE TABLE t (a INTEGER)").await.unwrap();
        db.execute("INSERT INTO t VALUES (triple(2))", ()).await.unwrap();
        let read = || db.query_row("SELECT triple(a) FROM t", [], |r| r.get::<_, i64>(0));
        assert_eq!(read().await.unwrap(), 18);
        // Registry: closed and reopened; the function is registered again on the new connections.
        db.evict().await;
        assert_eq!(read().await.unwrap(), 18);
        db.execute("UPDATE t SET a = triple(a)", ()).await.unwrap();
        assert_eq!(read().await.unwrap(), 54);
        db.close().await;
    }
}
