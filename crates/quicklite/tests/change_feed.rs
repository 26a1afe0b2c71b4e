//! The change feed (issue 49): every committed change of the tables asked for, recorded with the row before and
//! after in the same transaction, in commit order, read from a cursor that survives a restart, including what
//! another process committed; bounded by retention, with a clear error for a cursor it no longer serves, one from
//! the future, and a table it cannot record. On both backends.

mod common;

use std::time::Duration;

use common::{Backend, both_backends};
use quicklite::{Builder, Change, ChangeStream, Cursor, Error, Notice, Op};
use serde_json::json;

/// The schema of the tests: `t` is recorded, `quiet` is not.
const SCHEMA: &str = "CREATE TABLE IF NOT EXISTS t (id INTEGER PRIMARY KEY, v TEXT, n INTEGER);
                      CREATE TABLE IF NOT EXISTS quiet (id INTEGER PRIMARY KEY)";

/// A builder with the schema made by the migration and `t` recorded.
fn fed(b: Builder) -> Builder {
    b.migrate(|c| c.execute_batch(SCHEMA))
        .change_feed(["t"])
        // Commits from other processes are found within a few milliseconds.
        .notice_external_commits(Duration::from_millis(10))
}

/// The next change of `stream`, which must come.
async fn next(stream: &mut ChangeStream) -> Change {
    match tokio::time::timeout(Duration::from_secs(30), stream.next()).await {
        Ok(Some(Ok(change))) => change,
        other => panic!("expected a change, got {other:?}"),
    }
}

/// The next `n` changes of `stream`.
async fn take(stream: &mut ChangeStream, n: usize) -> Vec<Change> {
    let mut changes = Vec::with_capacity(n);
    for _ in 0..n {
        changes.push(next(stream).await);
    }
    changes
}

/// The error `stream` fails with first.
async fn error_of(mut stream: ChangeStream) -> Error {
    match tokio::time::timeout(Duration::from_secs(30), stream.next()).await {
        Ok(Some(Err(e))) => e,
        other => panic!("expected an error, got {other:?}"),
    }
}

/// The ids (rowids) of `changes`.
fn rowids(changes: &[Change]) -> Vec<i64> {
    changes.iter().map(|c| c.rowid).collect()
}

both_backends! {
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn inserts_updates_and_deletes_are_recorded_with_the_row_before_and_after(backend) {
        let db = common::open(backend, fed).await;
        let mut notices = db.subscribe();
        db.execute("INSERT INTO t VALUES (1, 'one', 10)", ()).await.unwrap();
        db.execute("UPDATE t SET v = 'uno' WHERE id = 1", ()).await.unwrap();
        db.execute("INSERT INTO quiet VALUES (1)", ()).await.unwrap();
        db.execute("DELETE FROM t WHERE id = 1", ()).await.unwrap();
        let mut stream = db.changes_since(Cursor::BEGINNING);
        let changes = take(&mut stream, 3).await;
        let ops: Vec<_> = changes.iter().map(|c| (c.table.as_str(), c.rowid, c.op)).collect();
        assert_eq!(ops, [("t", 1, Op::Insert), ("t", 1, Op::Update), ("t", 1, Op::Delete)]);
        let one = json!({"id": 1, "v": "one", "n": 10});
        let uno = json!({"id": 1, "v": "uno", "n": 10});
        assert_eq!((&changes[0].before, &changes[0].after), (&None, &Some(one.clone())));
        assert_eq!((&changes[1].before, &changes[1].after), (&Some(one), &Some(uno.clone())));
        assert_eq!((&changes[2].before, &changes[2].after), (&Some(uno), &None));
        assert!(changes.windows(2).all(|w| w[0].cursor < w[1].cursor));
        assert_eq!(stream.cursor(), changes[2].cursor);
        // The feed's own rows are no application's change: the notices name `t` (and `quiet`) only.
        let mut tables = Vec::new();
        while tables.len() < 4 {
            match notices.next().await {
                Some(Notice::Committed(commit)) => {
                    tables.extend(commit.tables.iter().map(|t| t.table.clone()))
                }
                // A registry's database reopened under the test looks afresh.
                Some(Notice::External) => {}
                other => panic!("{other:?}"),
            }
        }
        assert_eq!(tables, ["t", "t", "quiet", "t"]);
    }
}

both_backends! {
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_group_records_its_writes_in_commit_order_and_nothing_of_a_write_that_failed(backend) {
        let db = common::open(backend, fed).await;
        let results = common::one_group(&db, 6, |i| {
            move |c: &quicklite::rusqlite::Connection| {
                c.execute("INSERT INTO t (id, n) VALUES (?1, ?1)", [i])?;
                c.execute("UPDATE t SET v = 'seen' WHERE id = ?1", [i])?;
                if i % 3 == 1 {
                    // Fails after changing rows: rolled back to its savepoint, records with it.
                    c.execute("INSERT INTO t (id) VALUES (?1)", [i])?;
                }
                Ok(())
            }
        })
        .await;
        let failed: Vec<bool> = results.iter().map(|r| r.is_err()).collect();
        assert_eq!(failed, [false, true, false, false, true, false]);
        assert_eq!(db.metrics().write_batch.max, 6, "one group");
        let mut stream = db.changes_since(Cursor::BEGINNING);
        let changes = take(&mut stream, 8).await;
        let seen: Vec<_> = changes.iter().map(|c| (c.rowid, c.op)).collect();
        let expected: Vec<_> = [0, 2, 3, 5]
            .into_iter()
            .flat_map(|i| [(i, Op::Insert), (i, Op::Update)])
            .collect();
        assert_eq!(seen, expected);
        // Nothing more: the stream waits for the next commit, which brings the next change.
        db.execute("INSERT INTO t (id) VALUES (100)", ()).await.unwrap();
        assert_eq!(next(&mut stream).await.rowid, 100);
    }
}

both_backends! {
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_consumer_resumes_from_its_cursor_after_the_database_is_reopened(backend) {
        let db = common::open(backend, fed).await;
        for id in 1..=3 {
            db.execute("INSERT INTO t (id) VALUES (?1)", (id,)).await.unwrap();
        }
        let mut stream = db.changes_since(Cursor::BEGINNING);
        let stored = take(&mut stream, 2).await[1].cursor.to_string();
        drop(stream);
        db.close().await;
        let db = db.reopen().await;
        for id in 4..=5 {
            db.execute("INSERT INTO t (id) VALUES (?1)", (id,)).await.unwrap();
        }
        let mut stream = db.changes_since(stored.parse().unwrap());
        assert_eq!(rowids(&take(&mut stream, 3).await), [3, 4, 5]);
    }
}

both_backends! {
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_stream_follows_live_commits(backend) {
        let db = common::open(backend, fed).await;
        let mut stream = db.changes_since(Cursor::BEGINNING);
        let writer = {
            let db = db.db.clone();
            tokio::spawn(async move {
                for id in 1..=600 {
                    db.execute("INSERT INTO t (id) VALUES (?1)", (id,)).await.unwrap();
                }
            })
        };
        // More than a page, some caught up with, some read as they come.
        let changes = take(&mut stream, 600).await;
        assert_eq!(rowids(&changes), (1..=600).collect::<Vec<i64>>());
        writer.await.unwrap();
    }
}

both_backends! {
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_change_committed_by_another_process_appears_in_the_stream(backend) {
        let db = common::open(backend, fed).await;
        db.execute("INSERT INTO t (id, v) VALUES (1, 'ours')", ()).await.unwrap();
        let mut stream = db.changes_since(Cursor::BEGINNING);
        assert_eq!(next(&mut stream).await.rowid, 1);
        // The stream has caught up and waits; another process commits through the file.
        let status = tokio::task::spawn_blocking({
            let path = db.path().to_path_buf();
            move || {
                std::process::Command::new("python3")
                    .args(["-c", "import sqlite3, sys
conn = sqlite3.connect(sys.argv[1], timeout=10, isolation_level=None)
conn.execute(\"INSERT INTO t (id, v, n) VALUES (2, 'theirs', 7)\")
conn.execute(\"UPDATE t SET n = 8 WHERE id = 2\")
conn.close()"])
                    .arg(path)
                    .status()
                    .expect("python3 (scripts/install-test-deps.sh installs it)")
            }
        })
        .await
        .unwrap();
        assert!(status.success());
        let theirs = take(&mut stream, 2).await;
        assert_eq!(
            theirs.iter().map(|c| (c.rowid, c.op)).collect::<Vec<_>>(),
            [(2, Op::Insert), (2, Op::Update)]
        );
        assert_eq!(theirs[1].after, Some(json!({"id": 2, "v": "theirs", "n": 8})));
    }
}

both_backends! {
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn retention_prunes_and_an_older_cursor_is_told_to_read_afresh(backend) {
        let db = common::open(backend, |b| fed(b).change_feed_max_changes(Some(3))).await;
        for id in 1..=10 {
            db.execute("INSERT INTO t (id) VALUES (?1)", (id,)).await.unwrap();
        }
        let cursors: Vec<Cursor> = take(&mut db.changes_since(Cursor::BEGINNING), 10)
            .await
            .iter()
            .map(|c| c.cursor)
            .collect();
        assert_eq!(db.prune_change_feed().await.unwrap(), 7);
        match error_of(db.changes_since(cursors[5])).await {
            Error::CursorPruned { cursor, pruned_through } => {
                assert_eq!((cursor, pruned_through), (cursors[5].get(), cursors[6].get()))
            }
            other => panic!("{other:?}"),
        }
        assert!(matches!(
            error_of(db.changes_since(Cursor::BEGINNING)).await,
            Error::CursorPruned { .. }
        ));
        let kept = take(&mut db.changes_since(cursors[6]), 3).await;
        assert_eq!(rowids(&kept), [8, 9, 10]);
        assert_eq!(db.prune_change_feed().await.unwrap(), 0, "nothing more to prune");
        // Read afresh: the rows and the cursor of one snapshot, then the feed from there.
        let (rows, latest) = db
            .read(|c| {
                let rows: i64 = c.query_row("SELECT count(*) FROM t", [], |r| r.get(0))?;
                Ok((rows, Cursor::latest(c)?))
            })
            .await
            .unwrap();
        assert_eq!((rows, latest), (10, cursors[9]));
        let mut stream = db.changes_since(latest);
        db.execute("INSERT INTO t (id) VALUES (11)", ()).await.unwrap();
        assert_eq!(next(&mut stream).await.rowid, 11);
    }
}

both_backends! {
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_writer_prunes_by_itself_and_an_empty_feed_still_tells_a_pruned_cursor(backend) {
        let dir = tempfile::tempdir().unwrap();
        let db = common::open_in(backend, dir.path(), fed).await;
        db.execute("INSERT INTO t (id) VALUES (1)", ()).await.unwrap();
        let first = next(&mut db.changes_since(Cursor::BEGINNING)).await.cursor;
        db.close().await;
        drop(db);
        // Reopened keeping nothing: at its first turn, the writer prunes every change (none is young enough). A
        // write's turn ends with the writer's housekeeping, which the next write's turn comes after.
        let db = common::open_in(backend, dir.path(), |b| {
            fed(b).change_feed_max_age(Some(Duration::ZERO))
        })
        .await;
        db.execute("INSERT INTO quiet VALUES (1)", ()).await.unwrap();
        db.execute("INSERT INTO quiet VALUES (2)", ()).await.unwrap();
        assert!(matches!(
            error_of(db.changes_since(Cursor::BEGINNING)).await,
            Error::CursorPruned { cursor: 0, pruned_through } if pruned_through == first.get()
        ));
        // The newest cursor stays good, and positions go on after it.
        let mut stream = db.changes_since(first);
        db.execute("INSERT INTO t (id) VALUES (2)", ()).await.unwrap();
        let change = next(&mut stream).await;
        assert_eq!((change.rowid, change.cursor > first), (2, true));
    }
}

both_backends! {
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_cursor_from_the_future_is_unknown(backend) {
        let db = common::open(backend, fed).await;
        db.execute("INSERT INTO t (id) VALUES (1)", ()).await.unwrap();
        let last = next(&mut db.changes_since(Cursor::BEGINNING)).await.cursor;
        match error_of(db.changes_since(Cursor::new(last.get() + 5))).await {
            Error::CursorUnknown { cursor, last: told } => {
                assert_eq!((cursor, told), (last.get() + 5, last.get()))
            }
            other => panic!("{other:?}"),
        }
    }
}

both_backends! {
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_table_the_feed_cannot_record_fails_the_open(backend) {
        let dir = tempfile::tempdir().unwrap();
        let opened = common::try_open_in(backend, dir.path(), |b| {
            b.migrate(|c| c.execute_batch("CREATE TABLE IF NOT EXISTS k (k TEXT PRIMARY KEY, v) WITHOUT ROWID"))
                .change_feed(["k"])
        })
        .await;
        match opened.err() {
            Some(Error::FeedTable { table, reason }) => {
                assert_eq!(table, "k");
                assert!(reason.contains("WITHOUT ROWID"), "{reason}");
            }
            other => panic!("{other:?}"),
        }
        let dir = tempfile::tempdir().unwrap();
        let opened = common::try_open_in(backend, dir.path(), |b| b.change_feed(["missing"])).await;
        assert!(
            matches!(opened.err(), Some(Error::FeedTable { ref table, .. }) if table == "missing")
        );
    }
}

both_backends! {
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_database_without_a_feed_says_so(backend) {
        let db = common::open(backend, |b| b).await;
        assert!(matches!(error_of(db.changes_since(Cursor::BEGINNING)).await, Error::NoChangeFeed));
        assert_eq!(db.read(Cursor::latest).await.unwrap(), Cursor::BEGINNING);
        assert!(matches!(db.prune_change_feed().await, Err(Error::NoChangeFeed)));
    }
}

/// A migration that adds a column has it recorded from then on; one that drops a recorded column drops the
/// table's triggers first, as the builder's documentation says, and the feed goes on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_migration_that_changes_the_columns_has_the_triggers_made_again() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db.db");
    let db = fed(quicklite::Database::builder(&path))
        .open()
        .await
        .unwrap();
    db.execute("INSERT INTO t (id, v) VALUES (1, 'a')", ())
        .await
        .unwrap();
    db.close().await.unwrap();
    let db = fed(quicklite::Database::builder(&path))
        .migrate(|c| {
            c.execute_batch(SCHEMA)?;
            c.execute_batch(
                "DROP TRIGGER IF EXISTS \"_quicklite_feed_insert_t\";
                 DROP TRIGGER IF EXISTS \"_quicklite_feed_update_t\";
                 DROP TRIGGER IF EXISTS \"_quicklite_feed_delete_t\";
                 ALTER TABLE t DROP COLUMN n;
                 ALTER TABLE t ADD COLUMN w TEXT",
            )
        })
        .open()
        .await
        .unwrap();
    db.execute("INSERT INTO t (id, v, w) VALUES (2, 'b', 'new')", ())
        .await
        .unwrap();
    let changes = take(&mut db.changes_since(Cursor::BEGINNING), 2).await;
    assert_eq!(
        changes[0].after,
        Some(json!({"id": 1, "v": "a", "n": null}))
    );
    assert_eq!(
        changes[1].after,
        Some(json!({"id": 2, "v": "b", "w": "new"}))
    );
    db.close().await.unwrap();
}

#[test]
fn a_cursor_is_a_plain_number() {
    assert_eq!("42".parse::<Cursor>().unwrap(), Cursor::new(42));
    assert_eq!(Cursor::new(42).to_string(), "42");
    assert_eq!(Cursor::BEGINNING.get(), 0);
    assert!("x".parse::<Cursor>().is_err());
    let _ = Backend::Standalone;
}

both_backends! {
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_stream_ends_when_the_database_closes(backend) {
        let db = common::open(backend, fed).await;
        db.execute("INSERT INTO t (id) VALUES (1)", ()).await.unwrap();
        let mut stream = db.changes_since(Cursor::BEGINNING);
        assert_eq!(next(&mut stream).await.rowid, 1);
        db.close().await;
        // Notices sent before the close wake it once more, to find nothing new; then it ends, without an error.
        match tokio::time::timeout(Duration::from_secs(30), stream.next()).await {
            Ok(None) => {}
            other => panic!("expected the end, got {other:?}"),
        }
    }
}

both_backends! {
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn writes_that_run_alone_are_recorded_only_if_they_commit(backend) {
        let db = common::open(backend, fed).await;
        db.transaction(|c| {
            c.execute("INSERT INTO t (id) VALUES (1)", [])?;
            c.execute("INSERT INTO t (id) VALUES (2)", [])
        })
        .await
        .unwrap();
        let failed = db
            .transaction(|c| {
                c.execute("INSERT INTO t (id) VALUES (3)", [])?;
                c.execute("INSERT INTO t (id) VALUES (1)", [])
            })
            .await;
        assert!(failed.is_err());
        db.with_write_connection(|c| c.execute_batch("DELETE FROM t WHERE id = 2"))
            .await
            .unwrap();
        // Without `WHERE`: SQLite's truncate optimization, which skips the rows, is off for a table with triggers.
        db.execute("DELETE FROM t", ()).await.unwrap();
        let changes = take(&mut db.changes_since(Cursor::BEGINNING), 4).await;
        let seen: Vec<_> = changes.iter().map(|c| (c.rowid, c.op)).collect();
        assert_eq!(seen, [(1, Op::Insert), (2, Op::Insert), (2, Op::Delete), (1, Op::Delete)]);
    }
}
