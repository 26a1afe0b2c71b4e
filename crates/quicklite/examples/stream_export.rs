//! Streaming a large table to a slow consumer while the database is written: `Database::stream` reads 10 million
//! rows a chunk at a time, the consumer sleeps a millisecond after every thousand rows, and four tasks insert
//! rows meanwhile. Prints the resident memory before and during the stream (peak), the largest the WAL grew, the
//! checkpoints run, and checks that every row came once and in order.
//!
//! `cargo run --release -p quicklite --example stream_export [rows] [--held]`
//!
//! `--held` reads the same rows in one read that keeps its statement (and snapshot) open for the whole export,
//! for comparison: what a cursor held by a slow consumer does to the WAL.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use quicklite::{Database, Keyset};

/// Kibibytes of resident memory, from `/proc/self/status`.
fn resident_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmRSS:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        })
        .unwrap_or(0)
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let rows: i64 = args
        .iter()
        .find(|a| !a.starts_with("--"))
        .map_or(Ok(10_000_000), |s| s.parse())
        .map_err(|e| format!("rows: {e}"))?;
    let held = args.iter().any(|a| a == "--held");
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("export.db");
    let db = Database::open(&path).await?;
    db.execute_batch(
        "CREATE TABLE t (id INTEGER PRIMARY KEY, body TEXT NOT NULL);
         CREATE TABLE log (id INTEGER PRIMARY KEY, body TEXT NOT NULL);",
    )
    .await?;
    let started = Instant::now();
    db.transaction(move |c| {
        c.execute(
            "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ?1)
             INSERT INTO t SELECT i, hex(randomblob(12)) FROM n",
            (rows,),
        )
    })
    .await?;
    db.with_write_connection(|c| c.execute_batch("PRAGMA wal_checkpoint(TRUNCATE)"))
        .await?;
    println!("{rows} rows written in {:.1?}", started.elapsed());

    // The writers, and the sampler of memory and WAL size.
    let stop = Arc::new(AtomicBool::new(false));
    let writes = Arc::new(AtomicU64::new(0));
    let mut writers = Vec::new();
    for _ in 0..4 {
        let (db, stop, writes) = (db.clone(), stop.clone(), writes.clone());
        writers.push(tokio::spawn(async move {
            while !stop.load(Ordering::Relaxed) {
                db.execute("INSERT INTO log (body) VALUES (hex(randomblob(100)))", ())
                    .await
                    .expect("insert");
                writes.fetch_add(1, Ordering::Relaxed);
            }
        }));
    }
    let before_kib = resident_kib();
    let wal = path.with_extension("db-wal");
    let sampler = {
        let stop = stop.clone();
        tokio::spawn(async move {
            let (mut peak_kib, mut wal_max) = (0, 0);
            while !stop.load(Ordering::Relaxed) {
                peak_kib = peak_kib.max(resident_kib());
                wal_max = wal_max.max(std::fs::metadata(&wal).map_or(0, |m| m.len()));
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            (peak_kib, wal_max)
        })
    };
    let checkpoints_before = db.metrics().checkpoints;

    let started = Instant::now();
    let (count, in_order) = if held {
        // One read: its statement, and so its snapshot, stays open until the last row.
        db.read(|c| {
            let mut stmt = c.prepare("SELECT id, body FROM t ORDER BY id")?;
            let mut rows = stmt.query([])?;
            let (mut count, mut last, mut in_order) = (0_i64, 0_i64, true);
            while let Some(row) = rows.next()? {
                let id: i64 = row.get(0)?;
                let _body: String = row.get(1)?;
                in_order &= id == last + 1;
                (last, count) = (id, count + 1);
                if count % 1000 == 0 {
                    std::thread::sleep(Duration::from_millis(1));
                }
            }
            Ok((count, in_order))
        })
        .await?
    } else {
        let mut stream = db.stream(
            Keyset::new("SELECT id, body FROM t WHERE id > ?1 ORDER BY id", 0),
            |r| Ok((r.get::<_, i64>(0)?, r.get::<_, String>(1)?)),
        );
        let (mut count, mut last, mut in_order) = (0_i64, 0_i64, true);
        while let Some(row) = stream.next().await {
            let (id, _body) = row?;
            in_order &= id == last + 1;
            (last, count) = (id, count + 1);
            if count % 1000 == 0 {
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
        }
        (count, in_order)
    };
    let took = started.elapsed();
    stop.store(true, Ordering::Relaxed);
    for w in writers {
        w.await?;
    }
    let (peak_kib, wal_max) = sampler.await?;
    let metrics = db.metrics();
    println!(
        "{}: {count} rows in {took:.1?}, every row once and in order: {}",
        if held { "one held read" } else { "stream" },
        count == rows && in_order
    );
    println!(
        "resident memory: {:.1} MiB before, peak {:.1} MiB during",
        before_kib as f64 / 1024.0,
        peak_kib as f64 / 1024.0
    );
    println!(
        "concurrent writes: {} ({:.0}/s); largest WAL {:.1} MiB; checkpoints {}",
        writes.load(Ordering::Relaxed),
        writes.load(Ordering::Relaxed) as f64 / took.as_secs_f64(),
        wal_max as f64 / (1024.0 * 1024.0),
        metrics.checkpoints - checkpoints_before
    );
    db.close().await?;
    if count != rows || !in_order {
        return Err("rows missing or out of order".into());
    }
    Ok(())
}
