//! quicklite writing a file that another process writes too: a Python `sqlite3` loop committing back to back
//! (`BEGIN IMMEDIATE`, one insert, `COMMIT`, its own 5 s busy timeout) while tasks write through quicklite (16 by
//! default, single-row inserts) and, with `--readers N`, other tasks read through the same handle (point reads by
//! primary key, every fourth one in a `db.read` closure of two). Prints quicklite's writes and reads per second, the
//! p50, p99, p999 and slowest write, the writes that gave up (`SQLITE_BUSY` after the busy timeout), the other
//! process's commits per second, and checks that every acknowledged write of either side is in the file exactly
//! once.
//!
//! `cargo run --release -p quicklite --example beside_another_writer [seconds] [--writers N] [--readers N]`
//! (needs `python3`); issue 45's case is `-- 10 --writers 8 --readers 8`.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use quicklite::Database;
use quicklite::rusqlite::ErrorCode;

/// Rows written before the run, which the readers read by primary key.
const SEEDED: i64 = 10_000;

const PYTHON: &str = r#"
import sqlite3, sys, time
db, seconds = sys.argv[1], float(sys.argv[2])
conn = sqlite3.connect(db, timeout=5.0, isolation_level=None)
end = time.monotonic() + seconds
n = gave_up = 0
while time.monotonic() < end:
    try:
        conn.execute("BEGIN IMMEDIATE")
        conn.execute("INSERT INTO t (source, n) VALUES ('python', ?)", (n,))
        conn.execute("COMMIT")
        n += 1
    except sqlite3.OperationalError:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        gave_up += 1
print(n, gave_up)
"#;

/// What the command line asks for.
struct Args {
    seconds: f64,
    writers: usize,
    readers: usize,
}

fn args() -> Result<Args, String> {
    let mut args = Args {
        seconds: 10.0,
        writers: 16,
        readers: 0,
    };
    let mut it = std::env::args().skip(1);
    while let Some(arg) = it.next() {
        let mut value = |name: &str| -> Result<usize, String> {
            let v = it.next().ok_or(format!("{name} needs a number"))?;
            v.parse().map_err(|e| format!("{name} {v}: {e}"))
        };
        match arg.as_str() {
            "--writers" => args.writers = value("--writers")?,
            "--readers" => args.readers = value("--readers")?,
            seconds => {
                args.seconds = seconds
                    .parse()
                    .map_err(|e| format!("seconds {seconds}: {e}"))?
            }
        }
    }
    Ok(args)
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let Args {
        seconds,
        writers,
        readers,
    } = args()?;
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("shared.db");
    let db = Database::open(&path).await?;
    db.execute_batch(
        "CREATE TABLE t (id INTEGER PRIMARY KEY, source TEXT NOT NULL, n INTEGER NOT NULL, UNIQUE (source, n))",
    )
    .await?;
    db.execute(
        "WITH RECURSIVE s(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM s WHERE n < ?1)
         INSERT INTO t (id, source, n) SELECT n, 'seed', n FROM s",
        (SEEDED,),
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
    let mut writing = Vec::new();
    for task in 0..writers {
        let db = db.clone();
        writing.push(tokio::spawn(async move {
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
    let mut reading = Vec::new();
    for task in 0..readers {
        let db = db.clone();
        reading.push(tokio::spawn(async move {
            // A SplitMix64 sequence per task picks the rows.
            let mut state = task as u64;
            let mut row = move || {
                state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
                let mut z = state;
                z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
                z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
                (z ^ (z >> 31)) % SEEDED as u64 + 1
            };
            let mut reads = 0_u64;
            while Instant::now() < end {
                let (a, b) = (row() as i64, row() as i64);
                let sum: i64 = if reads % 4 == 3 {
                    db.read(move |c| {
                        let mut point = c.prepare_cached("SELECT n FROM t WHERE id = ?1")?;
                        let x: i64 = point.query_row((a,), |r| r.get(0))?;
                        let y: i64 = point.query_row((b,), |r| r.get(0))?;
                        Ok(x + y)
                    })
                    .await?
                } else {
                    db.query_row("SELECT n FROM t WHERE id = ?1", (a,), |r| r.get(0))
                        .await?
                };
                assert!(sum >= a, "row {a} holds what was seeded");
                reads += 1;
            }
            Ok::<_, quicklite::Error>(reads)
        }));
    }
    let (mut latencies, mut gave_up) = (Vec::new(), 0);
    for task in writing {
        let (mine, busy) = task.await??;
        latencies.extend(mine);
        gave_up += busy;
    }
    let mut reads = 0;
    for task in reading {
        reads += task.await??;
    }
    let output = python.wait_with_output()?;
    let printed = String::from_utf8_lossy(&output.stdout);
    let (python_commits, python_gave_up) = printed
        .trim()
        .split_once(' ')
        .ok_or(format!("python printed {printed:?}"))?;
    let (python_commits, python_gave_up): (i64, i64) =
        (python_commits.parse()?, python_gave_up.parse()?);
    latencies.sort();
    let at = |q: f64| {
        latencies
            .get(((latencies.len() as f64 * q) as usize).min(latencies.len().saturating_sub(1)))
            .copied()
            .unwrap_or_default()
    };
    let ours = latencies.len() as i64;
    let metrics = db.metrics();
    let (in_file_ours, in_file_python): (i64, i64) = db
        .query_row(
            "SELECT count(*) FILTER (WHERE source = 'quicklite'), count(*) FILTER (WHERE source = 'python') FROM t",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .await?;
    println!(
        "quicklite: {ours} writes, {:.0}/s, p50 {:?}, p99 {:?}, p999 {:?}, max {:?}; {gave_up} gave up; busy retries \
         {}, timeouts {}; {reads} reads, {:.0}/s",
        ours as f64 / seconds,
        at(0.5),
        at(0.99),
        at(0.999),
        latencies.last().copied().unwrap_or_default(),
        metrics.busy_retries,
        metrics.busy_timeouts,
        reads as f64 / seconds,
    );
    println!(
        "python: {python_commits} commits, {:.0}/s, {python_gave_up} gave up; quicklite's share of the commits {:.0}%",
        python_commits as f64 / seconds,
        100.0 * ours as f64 / (ours + python_commits).max(1) as f64,
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
