//! Rows streamed a chunk at a time (`Database::stream`, `stream_as`): every row once, in key order; a slow
//! consumer holds no snapshot and at most two chunks; a failure ends the stream with its error; on both backends.

use std::time::Duration;

use futures::StreamExt;
use quicklite::{Error, Keyset};

mod common;

use common::both_backends;

/// A database with `t (id INTEGER PRIMARY KEY, v TEXT)` holding ids `1..=rows`.
async fn numbered(backend: common::Backend, rows: i64) -> common::TestDb {
    let db = common::open(backend, |b| b).await;
    db.execute_batch("CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT NOT NULL)")
        .await
        .unwrap();
    db.execute_many(
        "INSERT INTO t VALUES (?1, 'row ' || ?1)",
        (1..=rows).map(|i| (i,)),
    )
    .await
    .unwrap();
    db
}

const BY_ID: &str = "SELECT id, v FROM t WHERE id > ?1 ORDER BY id";

fn id_and_v(row: &rusqlite::Row<'_>) -> rusqlite::Result<(i64, String)> {
    Ok((row.get(0)?, row.get(1)?))
}

both_backends! {
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn every_row_comes_once_in_key_order_one_read_per_chunk(backend) {
        let db = numbered(backend, 5_000).await;
        let reads_before = db.metrics().reads;
        let mut rows = db.stream(Keyset::new(BY_ID, 0).chunk_rows(100), id_and_v);
        let mut ids = Vec::new();
        while let Some(row) = rows.next().await {
            let (id, v) = row.unwrap();
            assert_eq!(v, format!("row {id}"));
            ids.push(id);
        }
        assert_eq!(ids, (1..=5_000).collect::<Vec<_>>());
        // 50 full chunks, then one that finds no row.
        assert_eq!(db.metrics().reads - reads_before, 51);
        // As a `futures::Stream`, resuming after a key of its own.
        let tail: Vec<i64> = db
            .stream(Keyset::new(BY_ID, 4_990).chunk_rows(3), |r| r.get::<_, i64>(0))
            .map(|row| row.unwrap())
            .collect()
            .await;
        assert_eq!(tail, (4_991..=5_000).collect::<Vec<_>>());
        db.close().await;
    }
}

both_backends! {
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_slow_consumer_holds_no_snapshot_and_at_most_two_chunks(backend) {
        let db = numbered(backend, 10_000).await;
        let reads_before = db.metrics().reads;
        let mut rows = db.stream(Keyset::new(BY_ID, 0).chunk_rows(100), id_and_v);
        assert_eq!(rows.next().await.unwrap().unwrap().0, 1);
        // The consumer pauses: only the next chunk is read ahead.
        tokio::time::sleep(Duration::from_millis(200)).await;
        assert!(db.metrics().reads - reads_before <= 2, "{} reads", db.metrics().reads - reads_before);
        // Meanwhile the database is written, and a checkpoint that waits for every reader folds the whole WAL back
        // and truncates it: the paused stream holds no snapshot.
        db.execute("UPDATE t SET v = 'changed' WHERE id = 50", ()).await.unwrap();
        db.execute_many("INSERT INTO t VALUES (?1, 'row ' || ?1)", (10_001..=10_100).map(|i| (i,)))
            .await
            .unwrap();
        let (busy, wal_frames): (i64, i64) = db
            .with_write_connection(|c| {
                c.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |r| Ok((r.get(0)?, r.get(1)?)))
            })
            .await
            .unwrap();
        assert_eq!((busy, wal_frames), (0, 0), "the checkpoint was blocked by a reader");
        assert_eq!(std::fs::metadata(db.path().with_extension("db-wal")).unwrap().len(), 0);
        // The rest: the rows read ahead as they were, every later chunk from its own snapshot, so the rows
        // committed past the last key read appear.
        let mut ids = vec![1];
        let mut changed = Vec::new();
        while let Some(row) = rows.next().await {
            let (id, v) = row.unwrap();
            if v == "changed" {
                changed.push(id);
            }
            ids.push(id);
        }
        assert_eq!(ids, (1..=10_100).collect::<Vec<_>>());
        assert!(changed.is_empty(), "row 50 was read before it changed, and only once");
        db.close().await;
    }
}

both_backends! {
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_dropped_stream_reads_nothing_more(backend) {
        let db = numbered(backend, 1_000).await;
        let reads_before = db.metrics().reads;
        let mut rows = db.stream(Keyset::new(BY_ID, 0).chunk_rows(10), id_and_v);
        for _ in 0..15 {
            rows.next().await.unwrap().unwrap();
        }
        drop(rows);
        tokio::time::sleep(Duration::from_millis(100)).await;
        let metrics = db.metrics();
        // The first chunk, the second (being taken), and at most the third, read ahead.
        assert!(metrics.reads + metrics.abandoned_reads - reads_before <= 3);
        db.close().await;
    }
}

both_backends! {
    #[tokio::test]
    async fn a_failure_ends_the_stream_with_its_error(backend) {
        let db = numbered(backend, 100).await;
        // A query that does not prepare.
        let mut rows = db.stream(Keyset::new("SELECT id FROM nowhere WHERE id > ?1", 0), |r| r.get::<_, i64>(0));
        assert!(matches!(rows.next().await, Some(Err(Error::Sqlite(_)))));
        assert!(rows.next().await.is_none());
        // A parameter the query does not have.
        let mut rows = db.stream(Keyset::new(BY_ID, 0).param(7), id_and_v);
        let e = rows.next().await.unwrap().unwrap_err();
        assert!(e.to_string().contains("parameter"), "{e}");
        // The caller's closure fails in the second chunk: the first chunk's rows, then the error, then the end.
        let mut rows = db.stream(Keyset::new(BY_ID, 0).chunk_rows(10), |r| {
            let id: i64 = r.get(0)?;
            if id == 15 {
                return Err(rusqlite::Error::InvalidColumnType(1, "v".into(), rusqlite::types::Type::Null));
            }
            Ok(id)
        });
        let mut taken = Vec::new();
        let error = loop {
            match rows.next().await.unwrap() {
                Ok(id) => taken.push(id),
                Err(e) => break e,
            }
        };
        assert_eq!(taken, (1..=10).collect::<Vec<_>>());
        assert!(matches!(error, Error::Sqlite(rusqlite::Error::InvalidColumnType(..))), "{error}");
        assert!(rows.next().await.is_none());
        // The handle goes on.
        assert_eq!(common::count(&db, "t").await, 100);
        db.close().await;
    }
}

#[cfg(feature = "serde")]
both_backends! {
    #[tokio::test]
    async fn rows_stream_into_the_callers_types_by_a_key_of_two_columns(backend) {
        #[derive(Debug, serde::Deserialize)]
        struct Sale {
            day: String,
            shop: i64,
            total: f64,
            note: Option<String>,
        }
        let db = common::open(backend, |b| b).await;
        db.execute_batch("CREATE TABLE sale (day TEXT NOT NULL, shop INTEGER NOT NULL, total REAL, note TEXT)")
            .await
            .unwrap();
        // Many sales share a day: the day alone is not a key, the day with the rowid is.
        db.execute_many(
            "INSERT INTO sale VALUES (?1, ?2, ?3, NULL)",
            (0..600_i64).map(|i| (format!("2026-11-{:02}", 1 + i % 6), i % 3, i as f64)),
        )
        .await
        .unwrap();
        let keyset = Keyset::new(
            "SELECT day, rowid, shop, total, note FROM sale \
             WHERE shop = ?3 AND (day, rowid) > (?1, ?2) ORDER BY day, rowid",
            "",
        )
        .and_key(0)
        .param(1)
        .chunk_rows(7);
        let sales: Vec<Sale> = db.stream_as(keyset).map(|s| s.unwrap()).collect().await;
        assert_eq!(sales.len(), 200);
        assert!(sales.iter().all(|s| s.shop == 1 && s.note.is_none()));
        assert!(sales.windows(2).all(|w| w[0].day <= w[1].day));
        let mut totals: Vec<i64> = sales.iter().map(|s| s.total as i64).collect();
        totals.sort_unstable();
        assert_eq!(totals, (0..600).filter(|i| i % 3 == 1).collect::<Vec<_>>());
        // A column that does not fit its field, named.
        #[derive(Debug, serde::Deserialize)]
        #[allow(dead_code)]
        struct Wrong {
            day: i64,
        }
        let mut wrong = db.stream_as::<Wrong>(Keyset::new(
            "SELECT day, rowid FROM sale WHERE (day, rowid) > (?1, ?2) ORDER BY day, rowid",
            "",
        ).and_key(0));
        let e = wrong.next().await.unwrap().unwrap_err();
        assert!(matches!(&e, Error::Decode { column: Some(c), .. } if c == "day"), "{e}");
        db.close().await;
    }
}
