//! 64 tasks reading and writing (nine point reads to one update) for a while, with inline reads on and off: how large
//! the WAL grows and how the managed checkpoints fare, since snapshots kept between reads could hold them back.
//!
//! `cargo run --release -p quicklite --example wal_under_mixed [-- SECONDS]` (60 by default).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use quicklite::Database;

const ROWS: i64 = 10_000;
const TASKS: usize = 64;

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> quicklite::Result<()> {
    let seconds: u64 = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(60);
    for inline in [true, false] {
        run(inline, Duration::from_secs(seconds)).await?;
    }
    Ok(())
}

async fn run(inline: bool, length: Duration) -> quicklite::Result<()> {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let path = dir.path().join("mixed.db");
    let db = Database::builder(&path).inline_reads(inline).open().await?;
    db.execute_batch(format!(
        "CREATE TABLE items (id INTEGER PRIMARY KEY, value INTEGER NOT NULL);
         WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < {ROWS})
         INSERT INTO items SELECT x, x FROM c;"
    ))
    .await?;
    let stop = Arc::new(AtomicBool::new(false));
    let ops = Arc::new(AtomicU64::new(0));
    let mut tasks = Vec::new();
    for task in 0..TASKS {
        let (db, stop, ops) = (db.clone(), stop.clone(), ops.clone());
        tasks.push(tokio::spawn(async move {
            let mut id = task as i64;
            let mut n = 0_u64;
            while !stop.load(Ordering::Relaxed) {
                id = (id * 7919 + 13) % ROWS + 1;
                if n % 10 == 9 {
                    db.execute("UPDATE items SET value = value + 1 WHERE id = ?1", [id])
                        .await
                        .expect("an update");
                } else {
                    let _: i64 = db
                        .query_row("SELECT value FROM items WHERE id = ?1", [id], |r| r.get(0))
                        .await
                        .expect("a point read");
                }
                n += 1;
                ops.fetch_add(1, Ordering::Relaxed);
            }
        }));
    }
    let mut wal = companion(&path);
    let (mut peak, mut sum, mut samples) = (0_u64, 0_u64, 0_u64);
    let started = std::time::Instant::now();
    while started.elapsed() < length {
        tokio::time::sleep(Duration::from_millis(100)).await;
        let size = std::fs::metadata(&wal).map_or(0, |m| m.len());
        peak = peak.max(size);
        sum += size;
        samples += 1;
    }
    stop.store(true, Ordering::Relaxed);
    for t in tasks {
        t.await.expect("a task");
    }
    let m = db.metrics();
    println!(
        "inline reads {}: {:.0} ops/s; WAL peak {:.1} MiB, mean {:.1} MiB; checkpoints {} ({} incomplete, {} gave up \
         waiting for readers); {} of {} reads inline",
        if inline { "on " } else { "off" },
        ops.load(Ordering::Relaxed) as f64 / length.as_secs_f64(),
        peak as f64 / (1 << 20) as f64,
        sum as f64 / samples.max(1) as f64 / (1 << 20) as f64,
        m.checkpoints,
        m.checkpoints_incomplete,
        m.checkpoint_reader_waits_given_up,
        m.inline_reads,
        m.reads,
    );
    db.close().await?;
    wal = companion(&path);
    println!(
        "  after close: WAL {} bytes",
        std::fs::metadata(&wal).map_or(0, |m| m.len())
    );
    Ok(())
}

fn companion(db: &std::path::Path) -> std::path::PathBuf {
    let mut wal = db.as_os_str().to_owned();
    wal.push("-wal");
    wal.into()
}
