//! A full disk (SQLite's `max_page_count` as the disk's size): writers get a clear `SQLITE_FULL` error, exactly
//! the acknowledged writes are stored, the database stays intact, and the handle serves again once there is
//! room.

mod common;

use std::collections::BTreeSet;

use common::both_backends;
use quicklite::{Error, rusqlite};

both_backends! {
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_full_disk_fails_writes_clearly_and_loses_nothing_acknowledged(backend) {
        let db = common::open(backend, |b| b).await;
        db.execute_batch("CREATE TABLE t (id INTEGER PRIMARY KEY, body BLOB NOT NULL)")
            .await
            .unwrap();
        // The "disk" holds 40 more pages than the database uses now (max_page_count is per connection: the
        // writer's is the one that matters).
        let pages: i64 = db
            .with_write_connection(|c| {
                let pages: i64 = c.query_row("PRAGMA page_count", [], |r| r.get(0))?;
                c.query_row(
                    &format!("PRAGMA max_page_count = {}", pages + 40),
                    [],
                    |r| r.get(0),
                )
            })
            .await
            .unwrap();
        assert!(pages > 0);

        // Concurrent writers of 2 KB rows, far more than fit.
        let mut tasks = Vec::new();
        for id in 0..400_i64 {
            let db = db.clone();
            tasks.push(tokio::spawn(async move {
                let r = db
                    .execute("INSERT INTO t VALUES (?1, randomblob(2000))", (id,))
                    .await;
                (id, r)
            }));
        }
        let mut acked = BTreeSet::new();
        let mut full = 0;
        for task in tasks {
            let (id, r) = task.await.unwrap();
            match r {
                Ok(1) => {
                    acked.insert(id);
                }
                Err(e) => {
                    // Either its own statement hit the limit, or its group's commit (or SQLite's rollback of the
                    // group) did: each way it carries SQLITE_FULL, and it was not committed.
                    let full_error = e.sqlite_code() == Some(rusqlite::ErrorCode::DiskFull)
                        || matches!(&e, Error::RolledBack { reason } if reason.contains("full"));
                    assert!(full_error, "id {id}: {e}");
                    full += 1;
                }
                Ok(n) => panic!("id {id}: {n} rows"),
            }
        }
        assert!(full > 0, "the disk never filled");
        assert!(!acked.is_empty(), "nothing fit");
        // Registry: read back through connections opened again. (The writer's new connection no longer has the
        // small max_page_count, which belonged to the old one: the room is made again below all the same.)
        db.evict().await;

        let stored = stored_ids(&db).await;
        assert_eq!(
            stored, acked,
            "stored rows are exactly the acknowledged writes"
        );
        let integrity: String = db
            .query_row("PRAGMA integrity_check", [], |r| r.get(0))
            .await
            .unwrap();
        assert_eq!(integrity, "ok");

        // Room again: the same handle writes.
        db.with_write_connection(|c| {
            c.query_row("PRAGMA max_page_count = 1000000", [], |r| {
                r.get::<_, i64>(0)
            })
        })
        .await
        .unwrap();
        db.execute("INSERT INTO t VALUES (100000, randomblob(2000))", ())
            .await
            .unwrap();
        db.evict().await;
        acked.insert(100000);
        let stored = stored_ids(&db).await;
        assert_eq!(stored, acked);
        println!(
            "{} writes stored, {full} refused with SQLITE_FULL",
            acked.len()
        );
        db.close().await;
    }
}

/// The ids stored in `t`.
async fn stored_ids(db: &quicklite::Database) -> BTreeSet<i64> {
    db.query_all("SELECT id FROM t", [], |r| r.get(0))
        .await
        .unwrap()
        .into_iter()
        .collect()
}
