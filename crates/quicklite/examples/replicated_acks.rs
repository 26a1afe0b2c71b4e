//! Writes per second and their latency with writes acknowledged at their local commit or once object storage holds
//! them (`Acknowledge::Replicated`), `tasks` tasks inserting as fast as their answers allow for `seconds`. Litestream
//! must replicate `db` and listen at `socket`; `scripts/bench-replicated-acks.sh` sets that up (an S3 server on
//! loopback, optionally behind a proxy that delays every request).
//!
//! ```text
//! cargo run --release -p quicklite --example replicated_acks -- <db> <socket> <committed|replicated> <tasks> <seconds>
//! ```

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::{Duration, Instant};

use quicklite::litestream::Litestream;
use quicklite::{Acknowledge, Database};

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> quicklite::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [db, socket, mode, tasks, seconds] = args.as_slice() else {
        eprintln!("usage: replicated_acks <db> <socket> <committed|replicated> <tasks> <seconds>");
        std::process::exit(2);
    };
    let acknowledge = match mode.as_str() {
        "committed" => Acknowledge::Committed,
        "replicated" => Acknowledge::Replicated(Litestream::socket(socket)),
        other => panic!("unknown mode {other}"),
    };
    let tasks: usize = tasks.parse().expect("tasks");
    let time = Duration::from_secs_f64(seconds.parse().expect("seconds"));
    let db = Database::builder(db)
        .acknowledge(acknowledge)
        .open()
        .await?;
    db.execute_batch("CREATE TABLE IF NOT EXISTS t(id INTEGER PRIMARY KEY, body TEXT)")
        .await?;
    let next = Arc::new(AtomicI64::new(
        db.query_row("SELECT coalesce(max(id), 0) + 1 FROM t", [], |r| r.get(0))
            .await?,
    ));
    let started = Instant::now();
    let until = started + time;
    let mut handles = Vec::new();
    for _ in 0..tasks {
        let (db, next) = (db.clone(), next.clone());
        handles.push(tokio::spawn(async move {
            let mut latencies = Vec::new();
            while Instant::now() < until {
                let id = next.fetch_add(1, Ordering::Relaxed);
                let asked = Instant::now();
                db.execute("INSERT INTO t(id, body) VALUES (?1, 'x')", [id])
                    .await
                    .unwrap();
                latencies.push(asked.elapsed());
            }
            latencies
        }));
    }
    let mut latencies = Vec::new();
    for handle in handles {
        latencies.extend(handle.await.unwrap());
    }
    let elapsed = started.elapsed();
    latencies.sort();
    let at = |q: f64| latencies[((latencies.len() - 1) as f64 * q) as usize];
    let m = db.metrics();
    println!(
        "{mode} tasks={tasks} writes={} writes/s={:.0} p50_ms={:.2} p99_ms={:.2} uploads={} failed_uploads={}",
        latencies.len(),
        latencies.len() as f64 / elapsed.as_secs_f64(),
        at(0.5).as_secs_f64() * 1e3,
        at(0.99).as_secs_f64() * 1e3,
        m.replication_syncs,
        m.replication_sync_failures,
    );
    db.close().await
}
