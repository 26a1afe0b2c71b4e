//! Change notifications: every committed write group told once and in order with what it changed, nothing of a
//! write that failed or a transaction rolled back, a subscriber that falls behind told how many it missed, the
//! stream ended at close; on both backends (a registry's database keeps its subscribers across a reopen).

mod common;

use std::collections::BTreeSet;
use std::sync::Arc;

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
