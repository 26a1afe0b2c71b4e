//! Point reads from 64 tasks with a 50 ms scan among them once a second, and how late a 1 ms ticker on the same
//! runtime fires: the point reads run on their callers' threads, the scan (a call site that runs long) on the
//! reader threads, so the runtime keeps its timers.
//!
//! `cargo run --release -p quicklite --example scan_among_reads [-- SECONDS]` prints the ticker's lateness
//! (p50, p99, max) and the reads per second, before the scan's first run and after it, for inline reads on and off.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use quicklite::Database;

const ROWS: i64 = 10_000;
const TASKS: usize = 64;

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> quicklite::Result<()> {
    let seconds: u64 = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(6);
    for inline in [true, false] {
        run(inline, Duration::from_secs(seconds)).await?;
    }
    Ok(())
}

async fn run(inline: bool, length: Duration) -> quicklite::Result<()> {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let db = Database::builder(dir.path().join("scan.db"))
        .inline_reads(inline)
        .open()
        .await?;
    db.execute_batch(format!(
        "CREATE TABLE items (id INTEGER PRIMARY KEY, name TEXT NOT NULL, value INTEGER NOT NULL);
         WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < {ROWS})
         INSERT INTO items SELECT x, 'item-' || x, x * 7 FROM c;"
    ))
    .await?;
    let stop = Arc::new(AtomicBool::new(false));
    let reads = Arc::new(AtomicU64::new(0));
    let mut tasks = Vec::new();
    for task in 0..TASKS {
        let (db, stop, reads) = (db.clone(), stop.clone(), reads.clone());
        tasks.push(tokio::spawn(async move {
            let mut id = task as i64;
            while !stop.load(Ordering::Relaxed) {
                id = (id * 7919 + 13) % ROWS + 1;
                let _: i64 = db
                    .query_row("SELECT value FROM items WHERE id = ?1", [id], |r| r.get(0))
                    .await
                    .expect("a point read");
                reads.fetch_add(1, Ordering::Relaxed);
            }
        }));
    }
    // The scan: a recursive count that runs about 50 ms, once a second.
    let scanned = Arc::new(AtomicBool::new(false));
    let scan = {
        let (db, stop, scanned) = (db.clone(), stop.clone(), scanned.clone());
        tokio::spawn(async move {
            let mut took = Duration::ZERO;
            while !stop.load(Ordering::Relaxed) {
                let started = Instant::now();
                let _: i64 = db
                    .read(|c| {
                        c.query_row(
                            "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 240000) \
                             SELECT count(*) FROM c",
                            [],
                            |r| r.get(0),
                        )
                    })
                    .await
                    .expect("the scan");
                took = started.elapsed();
                scanned.store(true, Ordering::Relaxed);
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
            took
        })
    };
    // The ticker: due every millisecond from its start; each tick's lateness against its own due time.
    let ticker = {
        let (stop, scanned) = (stop.clone(), scanned.clone());
        tokio::spawn(async move {
            let start = tokio::time::Instant::now();
            let (mut before, mut after) = (Vec::new(), Vec::new());
            let mut due = start;
            let mut reads_at_scan = None;
            while !stop.load(Ordering::Relaxed) {
                due += Duration::from_millis(1);
                tokio::time::sleep_until(due).await;
                let late = tokio::time::Instant::now().saturating_duration_since(due);
                if scanned.load(Ordering::Relaxed) {
                    reads_at_scan.get_or_insert(due.duration_since(start));
                    after.push(late);
                } else {
                    before.push(late);
                }
            }
            (before, after, reads_at_scan)
        })
    };
    tokio::time::sleep(length).await;
    stop.store(true, Ordering::Relaxed);
    for t in tasks {
        t.await.expect("a reading task");
    }
    let scan_took = scan.await.expect("the scan task");
    let (before, after, _) = ticker.await.expect("the ticker");
    let total = reads.load(Ordering::Relaxed);
    let metrics = db.metrics();
    println!(
        "inline reads {}: {:.0} reads/s ({} of {} inline), one scan {:.1} ms",
        if inline { "on " } else { "off" },
        total as f64 / length.as_secs_f64(),
        metrics.inline_reads,
        metrics.reads,
        scan_took.as_secs_f64() * 1e3,
    );
    for (when, ticks) in [("before the first scan", before), ("after it", after)] {
        println!("  ticker lateness {when}: {}", summary(ticks));
    }
    db.close().await
}

fn summary(mut ticks: Vec<Duration>) -> String {
    if ticks.is_empty() {
        return "no ticks".into();
    }
    ticks.sort();
    let at = |q: f64| ticks[((ticks.len() - 1) as f64 * q) as usize];
    format!(
        "p50 {:?}, p99 {:?}, max {:?} over {} ticks",
        at(0.5),
        at(0.99),
        ticks[ticks.len() - 1],
        ticks.len()
    )
}
