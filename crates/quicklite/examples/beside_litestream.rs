//! quicklite beside Litestream, the real program: 16 tasks writing and 4 reading for a while, with Litestream
//! replicating the database to a directory, and the same load without it. Prints, for each run, the writes per
//! second, the p999 and slowest write, the checkpoints that gave up waiting for readers (each a stall of the
//! writer), whether the writer deferred to Litestream, and the largest WAL seen.
//!
//! `cargo run --release -p quicklite --example beside_litestream [seconds] [writes-per-second] [litestream]`
//! (writes per second 0, the default: as fast as they go; litestream by default
//! `target/tools/litestream/litestream`, which `scripts/install-litestream.sh` builds).

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use quicklite::{Checkpointing, Database};

const WRITERS: usize = 16;
const READERS: usize = 4;

/// Litestream replicating `db` to a directory next to it, stopped when dropped.
struct Litestream(Child);

impl Litestream {
    fn start(program: &Path, db: &Path) -> Result<Litestream, Box<dyn std::error::Error>> {
        let dir = db.parent().ok_or("no directory")?;
        let config = dir.join("litestream.yml");
        std::fs::write(
            &config,
            format!(
                "dbs:\n  - path: {}\n    replica:\n      type: file\n      path: {}\n",
                db.display(),
                dir.join("replica").display()
            ),
        )?;
        let child = Command::new(program)
            .arg("replicate")
            .arg("-config")
            .arg(&config)
            .env_remove("AWS_CA_BUNDLE")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()?;
        // Started once its tables are in the database.
        let conn = rusqlite::Connection::open(db)?;
        let deadline = Instant::now() + Duration::from_secs(30);
        while conn.query_row(
            "SELECT count(*) FROM sqlite_master WHERE name = '_litestream_lock'",
            [],
            |r| r.get::<_, i64>(0),
        )? == 0
        {
            if Instant::now() > deadline {
                return Err("Litestream did not start".into());
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        Ok(Litestream(child))
    }
}

impl Litestream {
    /// CPU seconds Litestream has used (user and system), from `/proc`.
    fn cpu_seconds(&self) -> f64 {
        let stat =
            std::fs::read_to_string(format!("/proc/{}/stat", self.0.id())).unwrap_or_default();
        // The fields after the command name (which ends with ')'): utime and stime are the 12th and 13th.
        let fields: Vec<&str> = stat
            .rsplit_once(')')
            .map_or(Vec::new(), |(_, rest)| rest.split_whitespace().collect());
        let ticks: f64 = [11, 12]
            .iter()
            .filter_map(|&i| fields.get(i).and_then(|f| f.parse::<f64>().ok()))
            .sum();
        ticks / 100.0
    }
}

impl Drop for Litestream {
    fn drop(&mut self) {
        let _ = Command::new("kill")
            .arg("-TERM")
            .arg(self.0.id().to_string())
            .status();
        let _ = self.0.wait();
    }
}

/// One run's figures.
struct Figures {
    writes_per_sec: f64,
    p999: Duration,
    max: Duration,
    give_ups: u64,
    deferred: bool,
    wal_max: u64,
}

async fn run(
    path: &Path,
    checkpointing: Checkpointing,
    seconds: f64,
    rate: f64,
) -> Result<Figures, Box<dyn std::error::Error>> {
    let db = Database::builder(path)
        .checkpointing(checkpointing)
        .open()
        .await?;
    let stop = Arc::new(AtomicBool::new(false));
    let mut tasks = Vec::new();
    for _ in 0..WRITERS {
        let (db, stop) = (db.clone(), stop.clone());
        tasks.push(tokio::spawn(async move {
            let mut latencies = Vec::new();
            // Paced: each writer its share of the rate, on a schedule (a late write does not delay the next ones).
            let every = (rate > 0.0).then(|| Duration::from_secs_f64(WRITERS as f64 / rate));
            let first = Instant::now();
            while !stop.load(Ordering::Relaxed) {
                if let Some(every) = every {
                    let due = first + every * latencies.len() as u32;
                    tokio::time::sleep_until(due.into()).await;
                }
                let started = Instant::now();
                db.execute("INSERT INTO t (body) VALUES (randomblob(100))", ())
                    .await
                    .expect("insert");
                latencies.push(started.elapsed());
            }
            latencies
        }));
    }
    let reads = Arc::new(AtomicU64::new(0));
    let mut readers = Vec::new();
    for _ in 0..READERS {
        let (db, stop, reads) = (db.clone(), stop.clone(), reads.clone());
        readers.push(tokio::spawn(async move {
            while !stop.load(Ordering::Relaxed) {
                db.query_row("SELECT max(id) FROM t", [], |r| r.get::<_, Option<i64>>(0))
                    .await
                    .expect("read");
                reads.fetch_add(1, Ordering::Relaxed);
            }
        }));
    }
    let wal = PathBuf::from(format!("{}-wal", path.display()));
    let started = Instant::now();
    let mut wal_max = 0;
    while started.elapsed().as_secs_f64() < seconds {
        wal_max = wal_max.max(std::fs::metadata(&wal).map_or(0, |m| m.len()));
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    stop.store(true, Ordering::Relaxed);
    let took = started.elapsed();
    let mut latencies = Vec::new();
    for t in tasks {
        latencies.extend(t.await?);
    }
    for r in readers {
        r.await?;
    }
    latencies.sort_unstable();
    let metrics = db.metrics();
    db.close().await?;
    Ok(Figures {
        writes_per_sec: latencies.len() as f64 / took.as_secs_f64(),
        p999: latencies[latencies.len() * 999 / 1000],
        max: *latencies.last().ok_or("no write")?,
        give_ups: metrics.checkpoint_reader_waits_given_up,
        deferred: metrics.another_checkpointer,
        wal_max,
    })
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let seconds: f64 = args.first().map_or(Ok(10.0), |s| s.parse())?;
    let rate: f64 = args.get(1).map_or(Ok(0.0), |s| s.parse())?;
    let program = args.get(2).map_or_else(
        || Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/tools/litestream/litestream"),
        PathBuf::from,
    );
    let scenarios = [
        ("managed, no Litestream", Checkpointing::managed(), false),
        ("managed, Litestream", Checkpointing::managed(), true),
        ("External, Litestream", Checkpointing::External, true),
    ];
    println!(
        "| run | writes/s | p999 | max | checkpoint waits given up | deferred to Litestream | largest WAL | Litestream's CPU |"
    );
    println!("|---|---|---|---|---|---|---|---|");
    for (label, checkpointing, with_litestream) in scenarios {
        let dir = tempfile::tempdir()?;
        let path = dir.path().join("app.db");
        {
            let conn = rusqlite::Connection::open(&path)?;
            conn.execute_batch(
                "PRAGMA journal_mode = WAL; CREATE TABLE t (id INTEGER PRIMARY KEY, body BLOB)",
            )?;
        }
        let litestream = if with_litestream {
            Some(Litestream::start(&program, &path)?)
        } else {
            None
        };
        let cpu_before = litestream.as_ref().map_or(0.0, Litestream::cpu_seconds);
        let f = run(&path, checkpointing, seconds, rate).await?;
        let cpu = litestream
            .as_ref()
            .map_or(0.0, |l| l.cpu_seconds() - cpu_before);
        println!(
            "| {label} | {:.0} | {:.1?} | {:.1?} | {} | {} | {:.1} MiB | {cpu:.1} s |",
            f.writes_per_sec,
            f.p999,
            f.max,
            f.give_ups,
            f.deferred,
            f.wal_max as f64 / (1024.0 * 1024.0)
        );
    }
    Ok(())
}
