//! Writes on their callers' threads against none, in one process: `tasks` tasks insert one row per `execute` for
//! two seconds, with `Builder::inline_writes` on and off in turn (three rounds each), and each round prints the
//! inserts per second, the process's CPU per insert, the share of writes run on callers' threads and the mean
//! group. Linux only (the CPU time comes from `/proc/self/stat`).
//!
//! ```sh
//! cargo run --release -p quicklite --example inline_writes_ab -- 64
//! ```

use std::time::{Duration, Instant};

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> quicklite::Result<()> {
    let tasks: usize = std::env::args()
        .nth(1)
        .map_or(64, |a| a.parse().expect("a number of tasks"));
    for round in 0..6 {
        let inline = round % 2 == 0;
        let dir = tempfile::tempdir().expect("a temporary directory");
        let db = quicklite::Database::builder(dir.path().join("ab.db"))
            .inline_writes(inline)
            .open()
            .await?;
        db.execute_batch(
            "CREATE TABLE item (id INTEGER PRIMARY KEY, name TEXT, value INTEGER, payload BLOB)",
        )
        .await?;
        let warm = Instant::now() + Duration::from_millis(500);
        let stop = warm + Duration::from_secs(2);
        let handles: Vec<_> = (0..tasks)
            .map(|_| {
                let db = db.clone();
                tokio::spawn(async move {
                    let mut counted = 0_u64;
                    while Instant::now() < stop {
                        db.execute(
                            "INSERT INTO item (name, value, payload) VALUES (?1, ?2, ?3)",
                            ("name".to_string(), 7_i64, vec![0_u8; 100]),
                        )
                        .await
                        .expect("an insert");
                        if Instant::now() > warm {
                            counted += 1;
                        }
                        tokio::task::yield_now().await;
                    }
                    counted
                })
            })
            .collect();
        tokio::time::sleep_until(warm.into()).await;
        let (before, cpu_before) = (db.metrics(), cpu_seconds());
        let mut inserts = 0;
        for handle in handles {
            inserts += handle.await.expect("a task");
        }
        let (after, cpu) = (db.metrics(), cpu_seconds() - cpu_before);
        let writes = (after.writes - before.writes).max(1);
        let groups = (after.write_batch.count - before.write_batch.count).max(1);
        println!(
            "inline_writes({inline}): {:.0}k inserts/s, {:.2} µs CPU each, {:.1}% on callers' threads, mean group {:.1}",
            inserts as f64 / 2000.0,
            cpu * 1e6 / inserts.max(1) as f64,
            100.0 * (after.inline_writes - before.inline_writes) as f64 / writes as f64,
            (after.write_batch.sum - before.write_batch.sum) as f64 / groups as f64,
        );
        db.close().await?;
    }
    Ok(())
}

/// The process's CPU time so far (user and system), in seconds.
fn cpu_seconds() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").expect("/proc/self/stat");
    let fields: Vec<&str> = stat
        .rsplit(')')
        .next()
        .unwrap_or("")
        .split_whitespace()
        .collect();
    let ticks = |i: usize| {
        fields
            .get(i)
            .and_then(|f| f.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    (ticks(11) + ticks(12)) / 100.0
}
