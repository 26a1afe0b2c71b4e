//! quicklite writing a file that another process writes too: a Python `sqlite3` loop committing back to back
//! (`BEGIN IMMEDIATE`, one insert, `COMMIT`, its own 5 s busy timeout) while 16 tasks write through quicklite.
//! Prints quicklite's writes per second, p99, p999 and slowest write, the writes that gave up (`SQLITE_BUSY` after
//! the busy timeout), the other process's commits per second, and checks that every acknowledged write of either
//! side is in the file exactly once.
//!
//! `cargo run --release -p quicklite --example beside_another_writer [seconds]` (needs `python3`).

use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use quicklite::Database;
use quicklite::rusqlite::ErrorCode;

const TASKS: usize = 16;

const PYTHON: &str = r#"
import sqlite3, sys, time
db, seconds = sys.argv[1], float(sys.argv[2])
conn = sqlite3.connect(db, timeout=5.0, isolation_level=None)
end = time.monotonic() + seconds
n = 0
while time.monotonic() < end:
    conn.execute("BEGIN IMMEDIATE")
    conn.execute("INSERT INTO t (source, n) VALUES ('python', ?)", (n,))
    conn.execute("COMMIT")
    n += 1
print(n)
"#;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let seconds: f64 = std::env::args()
        .nth(1)
        .map_or(Ok(10.0), |s| s.parse())
        .map_err(|e| format!("seconds: {e}"))?;
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("shared.db");
    let db = Database::open(&path).await?;
    db.execute_batch(
        "CREATE TABLE t (id INTEGER PRIMARY KEY, source TEXT NOT NULL, n INTEGER NOT NULL, UNIQUE (source, n))",
    )
    .await?;

    let python = Command::new("python3")
        .arg("-c")
        .arg(PYTHON)
        .arg(&path)
        .arg(seconds.to_string())
        .stdout(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot start python3: {e}"))?;
    let end = Instant::now() + Duration::from_secs_f64(seconds);
    let mut tasks = Vec::new();
    for task in 0..TASKS {
        let db = db.clone();
        tasks.push(tokio::spawn(async move {
            let (mut latencies, mut gave_up) = (Vec::new(), 0_u64);
            let mut n = 0_i64;
            while Instant::now() < end {
                let started = Instant::now();
                let key = (task as i64) << 32 | n;
                n += 1;
                match db
                    .execute("INSERT INTO t (source, n) VALUES ('quicklite', ?1)", (key,))
                    .await
                {
                    Ok(_) => latencies.push(started.elapsed()),
                    Err(e) if e.sqlite_code() == Some(ErrorCode::DatabaseBusy) => gave_up += 1,
                    Err(e) => return Err(e),
                }
            }
            Ok::<_, quicklite::Error>((latencies, gave_up))
        }));
    }
    let (mut latencies, mut gave_up) = (Vec::new(), 0);
    for task in tasks {
        let (mine, busy) = task.await??;
        latencies.extend(mine);
        gave_up += busy;
    }
    let output = python.wait_with_output()?;
    let python_commits: i64 = String::from_utf8_lossy(&output.stdout).trim().parse()?;
    latencies.sort();
    let at = |q: f64| latencies[((latencies.len() as f64 * q) as usize).min(latencies.len() - 1)];
    let ours = latencies.len() as i64;
    let metrics = Arc::new(db.metrics());
    let (in_file_ours, in_file_python): (i64, i64) = db
        .query_row(
            "SELECT count(*) FILTER (WHERE source = 'quicklite'), count(*) FILTER (WHERE source = 'python') FROM t",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .await?;
    println!(
        "quicklite: {ours} writes, {:.0}/s, p50 {:?}, p99 {:?}, p999 {:?}, max {:?}; {gave_up} gave up; busy retries \
         {}, timeouts {}",
        ours as f64 / seconds,
        at(0.5),
        at(0.99),
        at(0.999),
        latencies.last().copied().unwrap_or_default(),
        metrics.busy_retries,
        metrics.busy_timeouts,
    );
    println!(
        "python: {python_commits} commits, {:.0}/s",
        python_commits as f64 / seconds
    );
    // UNIQUE (source, n) refuses a duplicate; every acknowledged write must be there.
    assert_eq!(
        in_file_ours, ours,
        "quicklite's acknowledged writes in the file"
    );
    assert_eq!(
        in_file_python, python_commits,
        "python's commits in the file"
    );
    println!("in the file: every acknowledged write of both, once");
    db.close().await?;
    Ok(())
}
