//! Soak: a mixed workload for a given time, reporting throughput and resident memory every interval, to show
//! both stay flat (no slow leak, no creeping slowdown, a bounded WAL).
//!
//! ```text
//! cargo run --release -p quicklite --example soak -- [SECONDS] [INTERVAL_SECONDS]
//! ```
//!
//! 64 tasks: 80% point reads, 10% updates, 10% appends to a log table that a trimming task keeps at about
//! 50,000 rows, on a temporary database with the `Server` profile.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use quicklite::Database;

const ROWS: i64 = 10_000;
const TASKS: u64 = 64;

/// Resident memory of this process, in bytes (Linux).
fn rss_bytes() -> u64 {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap_or_default();
    let pages: u64 = statm
        .split_whitespace()
        .nth(1)
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    pages * 4096
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let mut args = std::env::args().skip(1);
    let seconds: u64 = args.next().map_or(Ok(60), |a| a.parse())?;
    let interval: u64 = args.next().map_or(Ok(5), |a| a.parse())?;
    let dir = tempfile::tempdir()?;
    let db = Database::open(dir.path().join("soak.db")).await?;
    db.execute_batch(
        "CREATE TABLE item (id INTEGER PRIMARY KEY, value INTEGER NOT NULL, name TEXT NOT NULL);
         CREATE TABLE log (id INTEGER PRIMARY KEY, item INTEGER NOT NULL, body BLOB NOT NULL);",
    )
    .await?;
    db.execute_many(
        "INSERT INTO item VALUES (?1, 0, 'item ' || ?1)",
        (1..=ROWS).map(|i| (i,)),
    )
    .await?;

    let reads = Arc::new(AtomicU64::new(0));
    let writes = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let mut tasks = Vec::new();
    for t in 0..TASKS {
        let (db, reads, writes, stop) = (db.clone(), reads.clone(), writes.clone(), stop.clone());
        tasks.push(tokio::spawn(async move {
            let mut x = 0x9e37_79b9_7f4a_7c15_u64 ^ t;
            while !stop.load(Ordering::Relaxed) {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                let id = 1 + (x % ROWS as u64) as i64;
                match x % 10 {
                    0 => {
                        db.execute("UPDATE item SET value = value + 1 WHERE id = ?1", (id,))
                            .await?;
                        writes.fetch_add(1, Ordering::Relaxed);
                    }
                    1 => {
                        db.execute(
                            "INSERT INTO log (item, body) VALUES (?1, randomblob(100))",
                            (id,),
                        )
                        .await?;
                        writes.fetch_add(1, Ordering::Relaxed);
                    }
                    _ => {
                        db.query_row("SELECT value, name FROM item WHERE id = ?1", (id,), |r| {
                            Ok((r.get::<_, i64>(0)?, r.get::<_, String>(1)?))
                        })
                        .await?;
                        reads.fetch_add(1, Ordering::Relaxed);
                    }
                }
            }
            anyhow::Ok(())
        }));
    }
    // Keeps the log table at about 50,000 rows, as a retention job would.
    let trimmer = tokio::spawn({
        let (db, stop) = (db.clone(), stop.clone());
        async move {
            while !stop.load(Ordering::Relaxed) {
                tokio::time::sleep(Duration::from_millis(500)).await;
                db.execute(
                    "DELETE FROM log WHERE id <= (SELECT max(id) FROM log) - 50000",
                    (),
                )
                .await?;
            }
            anyhow::Ok(())
        }
    });

    println!("  time   reads/s  writes/s   RSS MiB   WAL KiB  file MiB");
    let started = Instant::now();
    let rss_start = rss_bytes();
    let (mut first, mut last) = (None, (0.0, 0.0));
    let (mut last_reads, mut last_writes) = (0, 0);
    let mut rss_max = rss_start;
    while started.elapsed() < Duration::from_secs(seconds) {
        tokio::time::sleep(Duration::from_secs(interval)).await;
        let (r, w) = (
            reads.load(Ordering::Relaxed),
            writes.load(Ordering::Relaxed),
        );
        let rate = (
            (r - last_reads) as f64 / interval as f64,
            (w - last_writes) as f64 / interval as f64,
        );
        (last_reads, last_writes) = (r, w);
        first.get_or_insert(rate);
        last = rate;
        let rss = rss_bytes();
        rss_max = rss_max.max(rss);
        let m = db.metrics();
        let file = std::fs::metadata(db.file()).map_or(0, |m| m.len());
        println!(
            "{:>5}s {:>9.0} {:>9.0} {:>9.1} {:>9.0} {:>9.1}",
            started.elapsed().as_secs(),
            rate.0,
            rate.1,
            rss as f64 / 1048576.0,
            m.wal_bytes as f64 / 1024.0,
            file as f64 / 1048576.0
        );
    }
    stop.store(true, Ordering::Relaxed);
    for t in tasks {
        t.await??;
    }
    trimmer.await??;
    let first = first.unwrap_or_default();
    let m = db.metrics();
    println!(
        "summary: {seconds} s; reads/s first {:.0} last {:.0}; writes/s first {:.0} last {:.0}; RSS start {:.1} MiB, \
         end {:.1} MiB, max {:.1} MiB; {} checkpoints, {} commits, {} errors",
        first.0,
        last.0,
        first.1,
        last.1,
        rss_start as f64 / 1048576.0,
        rss_bytes() as f64 / 1048576.0,
        rss_max as f64 / 1048576.0,
        m.checkpoints,
        m.commits,
        m.write_errors + m.read_errors
    );
    db.close().await?;
    Ok(())
}
