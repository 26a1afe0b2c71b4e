//! Change notifications: every committed write group told once and in order with what it changed, nothing of a
//! write that failed or a transaction rolled back, a subscriber that falls behind told how many it missed, the
//! stream ended at close; on both backends (a registry's database keeps its subscribers across a reopen).

mod common;

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use common::{Backend, both_backends};
use quicklite::{Commit, Notice, TableChange};

/// A database with a table `t (id INTEGER PRIMARY KEY, v TEXT)`.
async fn with_table(
    backend: Backend,
    configure: fn(quicklite::Builder) -> quicklite::Builder,
) -> common::TestDb {
    let db = common::open(backend, configure).await;
    db.execute_batch(
        "CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT); CREATE TABLE u (id INTEGER PRIMARY KEY)",
    )
    .await
    .unwrap();
    db
}

/// The next notice, a commit.
async fn next_commit(changes: &mut quicklite::Subscription) -> Arc<Commit> {
    match tokio::time::timeout(std::time::Duration::from_secs(30), changes.next()).await {
        Ok(Some(Notice::Committed(commit))) => commit,
        other => panic!("expected a commit, got {other:?}"),
    }
}

fn table(name: &str, rowids: Option<&[i64]>) -> TableChange {
    TableChange {
        table: name.into(),
        rowids: rowids.map(<[i64]>::to_vec),
    }
}

/// Rows of `t` a failing write inserted before it failed: none may be told.
const FAILED_FROM: i64 = 1_000_000;

both_backends! {
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn every_committed_group_is_told_once_in_order_and_nothing_of_a_failed_write(backend) {
        let db = with_table(backend, |b| b.change_rowids(100_000).subscription_capacity(100_000)).await;
        // The row a failing statement below collides with.
        db.execute("INSERT INTO t VALUES (-1, 'there before')", ()).await.unwrap();
        let mut changes = db.subscribe();
        let before = db.metrics().commits;
        let mut tasks = Vec::new();
        for task in 0..32_i64 {
            let db = db.db.clone();
            tasks.push(tokio::spawn(async move {
                for i in 0..20_i64 {
                    let id = task * 100 + i;
                    match i % 4 {
                        // A statement of its own, grouped without a savepoint.
                        0 => {
                            db.execute("INSERT INTO t VALUES (?1, 'statement')", (id,)).await.unwrap();
                        }
                        // A closure that inserts, then fails: rolled back to its savepoint.
                        1 => {
                            let e = db
                                .write(move |c| {
                                    c.execute("INSERT INTO t VALUES (?1, 'failed')", (FAILED_FROM + id,))?;
                                    c.execute("INSERT INTO no_such_table VALUES (1)", [])
                                })
                                .await;
                            assert!(e.is_err());
                            db.write(move |c| c.execute("INSERT INTO t VALUES (?1, 'closure')", (id,)))
                                .await
                                .unwrap();
                        }
                        // One statement that inserts a row, then fails on the next: SQLite undoes the first.
                        2 => {
                            let e = db
                                .execute("INSERT INTO t VALUES (?1, 'undone'), (-1, 'duplicate')", (FAILED_FROM + id,))
                                .await;
                            assert!(e.is_err());
                            db.execute("INSERT INTO t VALUES (?1, 'statement')", (id,)).await.unwrap();
                        }
                        // A transaction of its own, and one rolled back.
                        _ => {
                            let e = db
                                .transaction(move |c| {
                                    c.execute("INSERT INTO u VALUES (?1)", (id,))?;
                                    Err::<(), _>(rusqlite::Error::InvalidQuery)
                                })
                                .await;
                            assert!(e.is_err());
                            db.transaction(move |c| c.execute("INSERT INTO t VALUES (?1, 'transaction')", (id,)))
                                .await
                                .unwrap();
                        }
                    }
                }
            }));
        }
        for t in tasks {
            t.await.unwrap();
        }
        let after = db.metrics().commits;
        let mut told = Vec::new();
        let mut seq = before;
        while seq < after {
            let commit = next_commit(&mut changes).await;
            assert_eq!(commit.seq, seq + 1, "in order, none missed");
            seq = commit.seq;
            for change in &commit.tables {
                assert_eq!(change.table, "t", "nothing of the rolled-back transactions on u: {commit:?}");
                told.extend(change.rowids.clone().expect("within the bound"));
            }
        }
        let ids: Vec<i64> = db.query_all("SELECT id FROM t WHERE id >= 0 ORDER BY id", [], |r| r.get(0)).await.unwrap();
        assert!(ids.iter().all(|&id| id < FAILED_FROM));
        assert_eq!(ids.len(), 32 * 20);
        let told_set: BTreeSet<i64> = told.iter().copied().collect();
        assert_eq!(told.len(), told_set.len(), "each row told once");
        assert_eq!(told_set.into_iter().collect::<Vec<_>>(), ids, "every committed row told, no failed one");
        db.close().await;
    }
}

both_backends! {
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_rolled_back_transaction_is_not_told(backend) {
        let db = with_table(backend, |b| b).await;
        let mut changes = db.subscribe();
        let before = db.metrics().commits;
        assert!(
            db.transaction(|c| {
                c.execute("INSERT INTO t VALUES (5, 'rolled back')", [])?;
                Err::<(), _>(rusqlite::Error::InvalidQuery)
            })
            .await
            .is_err()
        );
        // Code that runs its own transaction and rolls it back: a commit of nothing.
        db.with_write_connection(|c| c.execute_batch("BEGIN; INSERT INTO t VALUES (6, 'x'); ROLLBACK"))
            .await
            .unwrap();
        db.execute("INSERT INTO u VALUES (7)", ()).await.unwrap();
        let first = next_commit(&mut changes).await;
        assert_eq!((first.seq, first.tables.clone()), (before + 1, vec![]));
        let second = next_commit(&mut changes).await;
        assert_eq!((second.seq, second.tables.clone()), (before + 2, vec![table("u", Some(&[7]))]));
        db.close().await;
    }
}

both_backends! {
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_commit_lists_its_tables_with_rowids_up_to_the_bound(backend) {
        let db = with_table(backend, |b| b.change_rowids(2)).await;
        let mut changes = db.subscribe();
        db.execute_batch(
            "INSERT INTO u VALUES (1); INSERT INTO t VALUES (1, 'a'), (2, 'b'), (3, 'c'); UPDATE u SET id = 2",
        )
        .await
        .unwrap();
        let commit = next_commit(&mut changes).await;
        // u: row 1 inserted, then the update (a rowid change: row 1 deleted, row 2 inserted).
        assert_eq!(commit.tables, [table("u", Some(&[1, 2])), table("t", None)]);
        db.close().await;
    }
}

both_backends! {
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_subscriber_that_falls_behind_is_told_how_many_it_missed(backend) {
        let db = with_table(backend, |b| b.subscription_capacity(4)).await;
        let mut changes = db.subscribe();
        for id in 0..20 {
            db.execute("INSERT INTO t VALUES (?1, 'x')", (id,)).await.unwrap();
        }
        let last = db.metrics().commits;
        assert_eq!(changes.next().await, Some(Notice::Lagged { missed: 16 }));
        for seq in last - 3..=last {
            assert_eq!(next_commit(&mut changes).await.seq, seq);
        }
        db.close().await;
    }
}

both_backends! {
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn subscribers_are_told_across_a_reopen_and_their_stream_ends_at_close(backend) {
        let db = with_table(backend, |b| b).await;
        let mut changes = db.subscribe();
        let mut others: Vec<_> = (0..100).map(|_| db.subscribe()).collect();
        db.execute("INSERT INTO t VALUES (1, 'before')", ()).await.unwrap();
        // Registry: the connections close; the writer's reopen gets the hooks again.
        db.evict().await;
        db.execute("INSERT INTO t VALUES (2, 'after')", ()).await.unwrap();
        for expected in [1, 2] {
            assert_eq!(next_commit(&mut changes).await.tables, [table("t", Some(&[expected]))]);
        }
        db.close().await;
        assert_eq!(changes.next().await, None, "the stream ends at close");
        for other in &mut others {
            assert_eq!(next_commit(other).await.tables, [table("t", Some(&[1]))]);
            assert_eq!(next_commit(other).await.tables, [table("t", Some(&[2]))]);
            assert_eq!(other.next().await, None);
        }
        assert_eq!(db.subscribe().next().await, None, "a closed database's subscription ends at once");
    }
}

/// The interval at which the tests' databases look for commits from outside.
const LOOK_EVERY: Duration = Duration::from_millis(20);

/// The next notice, which must come within 30 s.
async fn next_notice(changes: &mut quicklite::Subscription) -> Notice {
    match tokio::time::timeout(Duration::from_secs(30), changes.next()).await {
        Ok(Some(notice)) => notice,
        other => panic!("expected a notice, got {other:?}"),
    }
}

/// Inserts `id` into `t` from another process: Python's sqlite3, on the same file.
fn insert_from_another_process(path: &std::path::Path, id: i64) {
    let out = std::process::Command::new("python3")
        .args([
            "-c",
            "import sqlite3, sys; c = sqlite3.connect(sys.argv[1], timeout=30); \
             c.execute('INSERT INTO t VALUES (?, ?)', (int(sys.argv[2]), 'outside')); c.commit(); c.close()",
        ])
        .arg(path)
        .arg(id.to_string())
        .output()
        .expect("python3 (scripts/install-test-deps.sh installs it)");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Subscribes; then, on a registry, closes the database and writes once, which reopens it: what was committed from
/// outside while it was closed went unseen, which its subscribers are told.
async fn subscribed(db: &common::TestDb) -> quicklite::Subscription {
    let mut changes = db.subscribe();
    if db.backend() == Backend::Registry {
        db.evict().await;
        db.execute("INSERT INTO u VALUES (1)", ()).await.unwrap();
        assert_eq!(
            next_notice(&mut changes).await,
            Notice::External,
            "the reopen is told"
        );
        assert_eq!(
            next_commit(&mut changes).await.tables,
            [table("u", Some(&[1]))]
        );
    }
    changes
}

both_backends! {
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_commit_by_another_process_is_told_and_the_databases_own_are_not(backend) {
        let db = with_table(backend, |b| b.notice_external_commits(LOOK_EVERY)).await;
        let mut changes = subscribed(&db).await;
        let before = db.metrics().external_commits;
        insert_from_another_process(db.path(), 1);
        assert_eq!(next_notice(&mut changes).await, Notice::External);
        assert_eq!(db.metrics().external_commits, before + 1);
        // The row is there for the database's reads.
        let v: String = db.query_row("SELECT v FROM t WHERE id = 1", (), |r| r.get(0)).await.unwrap();
        assert_eq!(v, "outside");
        // The database's own commits are told as commits, and nothing else comes while several looks pass.
        for id in 2..12 {
            db.execute("INSERT INTO t VALUES (?1, 'own')", (id,)).await.unwrap();
        }
        for id in 2..12 {
            assert_eq!(next_commit(&mut changes).await.tables, [table("t", Some(&[id]))]);
        }
        let quiet = tokio::time::timeout(LOOK_EVERY * 10, changes.next()).await;
        assert!(quiet.is_err(), "nothing more: {quiet:?}");
        assert_eq!(db.metrics().external_commits, before + 1);
        db.close().await;
    }
}

both_backends! {
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_commit_from_outside_is_told_while_the_writer_is_busy(backend) {
        // Room for every notice of the busy writer's commits while this task, on a loaded machine, takes them
        // slowly: one lagging would miss the notice looked for.
        let db = with_table(backend, |b| b.notice_external_commits(LOOK_EVERY).subscription_capacity(1 << 16)).await;
        let mut changes = subscribed(&db).await;
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let writing = {
            let (db, stop) = (db.db.clone(), stop.clone());
            tokio::spawn(async move {
                let mut id = 1_000;
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    db.execute("INSERT INTO t VALUES (?1, 'own')", (id,)).await.unwrap();
                    id += 1;
                }
            })
        };
        let path = db.path().to_path_buf();
        tokio::task::spawn_blocking(move || {
            let other = rusqlite::Connection::open(path).unwrap();
            other.busy_timeout(Duration::from_secs(30)).unwrap();
            other.execute("INSERT INTO t VALUES (1, 'outside')", []).unwrap();
        })
        .await
        .unwrap();
        let told = tokio::time::timeout(Duration::from_secs(30), async {
            loop {
                match next_notice(&mut changes).await {
                    Notice::Committed(_) => {}
                    Notice::External => break,
                    other => panic!("{other:?}"),
                }
            }
        })
        .await;
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        assert!(told.is_ok(), "no notice of the commit from outside in 30 s of the database's own");
        writing.await.unwrap();
        db.close().await;
    }
}

both_backends! {
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn without_the_setting_commits_from_outside_are_not_looked_for(backend) {
        let db = with_table(backend, |b| b).await;
        let mut changes = db.subscribe();
        db.execute("INSERT INTO u VALUES (1)", ()).await.unwrap();
        assert_eq!(next_commit(&mut changes).await.tables, [table("u", Some(&[1]))]);
        insert_from_another_process(db.path(), 1);
        let quiet = tokio::time::timeout(Duration::from_millis(300), changes.next()).await;
        assert!(quiet.is_err(), "nothing: {quiet:?}");
        assert_eq!(db.metrics().external_commits, 0);
        db.close().await;
    }
}

/// A registry's database whose subscribers hear of commits from outside stays open when idle, and keeps looking;
/// one nobody subscribes to closes as usual.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_registry_database_looked_after_stays_open_when_idle() {
    let dir = tempfile::tempdir().unwrap();
    let registry = quicklite::Registry::builder(dir.path())
        .idle_timeout(Duration::from_millis(50))
        .configure(|b| b.notice_external_commits(LOOK_EVERY))
        .open()
        .await
        .unwrap();
    let watched = registry.get("watched").await.unwrap();
    // Subscribed before its first write: no idle timeout passes between that write and the subscription, however
    // slowly the other database opens.
    let mut changes = watched.subscribe();
    let unwatched = registry.get("unwatched").await.unwrap();
    for db in [&watched, &unwatched] {
        db.execute_batch("CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT)")
            .await
            .unwrap();
    }
    let created = next_notice(&mut changes).await;
    assert!(matches!(created, Notice::Committed(_)), "{created:?}");
    // Idle for many idle timeouts: one of the two closed, and (told below) not the one looked after.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let m = registry.metrics();
    assert_eq!((m.open_databases, m.idle_closes), (1, 1), "{m:?}");
    // A closed database does not look: the notice comes from the open one's looks.
    insert_from_another_process(&dir.path().join("watched.db"), 1);
    assert_eq!(next_notice(&mut changes).await, Notice::External);
    // Without subscribers it closes when idle again.
    drop(changes);
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while registry.metrics().open_databases > 0 {
        assert!(
            std::time::Instant::now() < deadline,
            "still open: {:?}",
            registry.metrics()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(registry.metrics().idle_closes, 2);
    drop((watched, unwatched));
    registry.close().await.unwrap();
}

/// A registry's housekeeping wakes the writer of every open database that looks for commits from outside; one
/// closed meanwhile (evicted by a neighbour) is not opened again for that: nothing waits for it, and its subscribers
/// are told of commits from outside when it next opens.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_database_closed_to_make_room_is_not_reopened_to_look_for_commits_from_outside() {
    let dir = tempfile::tempdir().unwrap();
    let registry = quicklite::Registry::builder(dir.path())
        .max_open(1)
        .configure(|b| b.notice_external_commits(Duration::from_millis(1)))
        .open()
        .await
        .unwrap();
    let (watched, neighbour) = (
        registry.get("watched").await.unwrap(),
        registry.get("neighbour").await.unwrap(),
    );
    let _changes = watched.subscribe();
    for round in 0..500 {
        watched.write(|_| Ok(())).await.unwrap();
        // Opens the neighbour, closing the watched database to make room, while housekeeping ticks every
        // millisecond for the watched database's looks.
        neighbour.write(|_| Ok(())).await.unwrap();
        let opens = registry.metrics().opens;
        tokio::time::sleep(Duration::from_millis(3)).await;
        assert_eq!(
            registry.metrics().opens,
            opens,
            "round {round}: a database was opened with nothing to do"
        );
    }
    registry.close().await.unwrap();
}

/// `t` holds rows 1 and 2 with `v` unique: `UPDATE OR FAIL` setting both to one value changes row 1, then fails on
/// row 2 — and, by SQLite's `FAIL` semantics, keeps what it changed. Returns the statement.
async fn two_rows_unique(db: &common::TestDb) -> &'static str {
    db.execute_batch("CREATE UNIQUE INDEX t_v ON t (v); INSERT INTO t VALUES (1, 'a'), (2, 'b');")
        .await
        .unwrap();
    "UPDATE OR FAIL t SET v = 'x' WHERE id IN (1, 2)"
}

/// The value of row 1 of `t`, read through the handle.
async fn row_one(db: &common::TestDb) -> String {
    db.query_row("SELECT v FROM t WHERE id = 1", [], |r| r.get(0))
        .await
        .unwrap()
}

both_backends! {
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_statement_that_commits_part_of_its_work_while_failing_is_published_and_told(backend) {
        let db = with_table(backend, |b| b).await;
        let statement = two_rows_unique(&db).await;
        // Reads of this site keep a snapshot from one read to the next: the one after the statement must not go
        // back to it.
        for _ in 0..200 {
            assert_eq!(row_one(&db).await, "a");
        }
        let mut changes = db.subscribe();
        let commits = db.metrics().commits;
        let failed = db.execute(statement, ()).await;
        assert!(
            matches!(&failed, Err(e) if e.sqlite_code() == Some(quicklite::rusqlite::ErrorCode::ConstraintViolation)),
            "{failed:?}"
        );
        let on_file: String = quicklite::rusqlite::Connection::open(db.path())
            .unwrap()
            .query_row("SELECT v FROM t WHERE id = 1", [], |r| r.get(0))
            .unwrap();
        assert_eq!(on_file, "x", "SQLite committed the first row");
        assert_eq!(row_one(&db).await, "x", "a read after the statement went back");
        assert_eq!(db.metrics().commits, commits + 1, "the commit was not counted");
        let commit = next_commit(&mut changes).await;
        assert_eq!(commit.tables, [table("t", Some(&[1]))]);
    }
}

both_backends! {
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_statement_that_keeps_part_of_its_work_while_failing_in_a_group_is_told(backend) {
        let db = with_table(backend, |b| b).await;
        let statement = two_rows_unique(&db).await;
        let mut changes = db.subscribe();
        let (release, blocker) = common::hold_writer(&db).await;
        let failing = tokio::spawn({
            let db = db.db.clone();
            async move { db.execute(statement, ()).await }
        });
        common::until_write_queue_holds(&db, 1).await;
        let other = tokio::spawn({
            let db = db.db.clone();
            async move { db.execute("INSERT INTO u VALUES (7)", ()).await }
        });
        common::until_write_queue_holds(&db, 2).await;
        release.send(()).unwrap();
        blocker.await.unwrap();
        assert!(failing.await.unwrap().is_err());
        assert_eq!(other.await.unwrap().unwrap(), 1);
        assert_eq!(row_one(&db).await, "x", "the statement's first row committed with its group");
        // The held write's empty commit, then the group's.
        let mut told = Vec::new();
        while told.len() < 2 {
            told.extend(next_commit(&mut changes).await.tables.clone());
        }
        assert_eq!(told, [table("t", Some(&[1])), table("u", Some(&[7]))]);
    }
}

both_backends! {
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_commits_notice_is_there_before_its_write_returns_and_commit_seq_names_it(backend) {
        use futures::FutureExt;

        let db = with_table(backend, |b| b).await;
        let mut changes = db.subscribe();
        // Writers beside, so that writes share groups and other commits come between.
        let others: Vec<_> = (0..4)
            .map(|w| {
                let db = db.clone();
                tokio::spawn(async move {
                    for i in 0..200 {
                        db.execute("INSERT INTO u VALUES (?1)", (10_000 + w * 1_000 + i,)).await.unwrap();
                    }
                })
            })
            .collect();
        let mut told = 0;
        for id in 1..=200 {
            db.execute("INSERT INTO t VALUES (?1, 'mine')", (id,)).await.unwrap();
            let seq = db.commit_seq();
            // Every notice up to `seq` can be taken now, without waiting, and one of them tells this row.
            let mut mine = false;
            loop {
                let notice = changes.next().now_or_never().flatten();
                let Some(Notice::Committed(commit)) = notice else {
                    panic!("write {id}: the notices up to commit {seq} were not all there: {notice:?} after {told}");
                };
                told = commit.seq;
                mine |= commit.tables.contains(&table("t", Some(&[id])));
                if commit.seq == seq {
                    break;
                }
            }
            assert!(mine, "write {id}: its row was in none of the notices up to commit {seq}");
        }
        for other in others {
            other.await.unwrap();
        }
        db.close().await;
    }
}
