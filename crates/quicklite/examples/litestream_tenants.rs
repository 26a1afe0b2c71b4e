//! Litestream replicating many tenant databases of one `Registry`: N databases in a directory, Litestream watching
//! the directory (`dir:` with a pattern, a file replica), then writes spread over every tenant at a paced rate.
//! Prints how long Litestream took to take up every database, and its resident memory, CPU and open files while
//! idle and while the tenants are written; then checks the registry's writes were served.
//!
//! `cargo run --release -p quicklite --example litestream_tenants [databases] [seconds] [writes-per-second]
//! [litestream]` (by default 1000, 20, 2000 and `target/tools/litestream/litestream`).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use quicklite::{Checkpointing, Registry};

/// A process's resident memory (MiB), CPU seconds (user and system) and open files, from `/proc`.
fn usage(pid: u32) -> (f64, f64, usize) {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let rss_kib: f64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0.0);
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .map_or(Vec::new(), |(_, rest)| rest.split_whitespace().collect());
    let ticks: f64 = [11, 12]
        .iter()
        .filter_map(|&i| fields.get(i).and_then(|f| f.parse::<f64>().ok()))
        .sum();
    let files = std::fs::read_dir(format!("/proc/{pid}/fd")).map_or(0, |d| d.count());
    (rss_kib / 1024.0, ticks / 100.0, files)
}

/// Databases whose Litestream tables exist.
fn taken_up(dir: &Path, databases: usize) -> usize {
    (0..databases)
        .filter(|i| {
            rusqlite::Connection::open(dir.join(format!("tenant-{i}.db")))
                .and_then(|c| {
                    c.query_row(
                        "SELECT count(*) FROM sqlite_master WHERE name = '_litestream_lock'",
                        [],
                        |r| r.get::<_, i64>(0),
                    )
                })
                .is_ok_and(|n| n > 0)
        })
        .count()
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let databases: usize = args.first().map_or(Ok(1000), |s| s.parse())?;
    let seconds: f64 = args.get(1).map_or(Ok(20.0), |s| s.parse())?;
    let rate: f64 = args.get(2).map_or(Ok(2000.0), |s| s.parse())?;
    let program = args.get(3).map_or_else(
        || Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/tools/litestream/litestream"),
        PathBuf::from,
    );
    let tmp = tempfile::tempdir()?;
    let dir = tmp.path().join("tenants");
    std::fs::create_dir_all(&dir)?;
    for i in 0..databases {
        let conn = rusqlite::Connection::open(dir.join(format!("tenant-{i}.db")))?;
        conn.execute_batch(
            "PRAGMA journal_mode = WAL; CREATE TABLE t (id INTEGER PRIMARY KEY, body BLOB)",
        )?;
    }
    let config = tmp.path().join("litestream.yml");
    std::fs::write(
        &config,
        format!(
            "dbs:\n  - dir: {}\n    pattern: \"*.db\"\n    replica:\n      type: file\n      path: {}\n",
            dir.display(),
            tmp.path().join("replica").display()
        ),
    )?;
    let started = Instant::now();
    let mut litestream = Command::new(&program)
        .arg("replicate")
        .arg("-config")
        .arg(&config)
        .env_remove("AWS_CA_BUNDLE")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()?;
    let pid = litestream.id();
    let deadline = started + Duration::from_secs(600);
    let mut ready = 0;
    while ready < databases && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(500)).await;
        ready = taken_up(&dir, databases);
    }
    println!(
        "{databases} databases: Litestream took up {ready} in {:.1?}",
        started.elapsed()
    );
    let (rss, cpu0, files) = usage(pid);
    tokio::time::sleep(Duration::from_secs_f64(seconds)).await;
    let (rss_idle, cpu1, _) = usage(pid);
    println!(
        "idle {seconds} s: Litestream {rss_idle:.0} MiB resident ({rss:.0} at start), CPU {:.1}% of a core, {files} open files",
        (cpu1 - cpu0) / seconds * 100.0
    );

    // Every tenant open at once (the open-file limit permitting), so that the figures are Litestream's, not the
    // registry's reopening.
    let registry = Registry::builder(&dir)
        .max_open(databases)
        .configure(|b| b.checkpointing(Checkpointing::managed()))
        .open()
        .await?;
    let every = Duration::from_secs_f64(1.0 / rate);
    let begun = Instant::now();
    let mut written = 0_u64;
    let mut pending = Vec::new();
    while begun.elapsed().as_secs_f64() < seconds {
        let due = begun + every * written as u32;
        tokio::time::sleep_until(due.into()).await;
        let name = format!("tenant-{}", written as usize % databases);
        let db = registry
            .get(&name)
            .await
            .map_err(|e| format!("opening {name}: {e}"))?;
        pending.push(tokio::spawn(async move {
            db.execute("INSERT INTO t (body) VALUES (randomblob(100))", ())
                .await
                .map_err(|e| format!("writing to {name}: {e}"))
        }));
        written += 1;
        if pending.len() >= 256 {
            for p in pending.drain(..) {
                p.await??;
            }
        }
    }
    for p in pending {
        p.await??;
    }
    let took = begun.elapsed().as_secs_f64();
    let (rss_busy, cpu2, files_busy) = usage(pid);
    println!(
        "{written} writes over {databases} tenants in {took:.1} s ({:.0}/s): Litestream {rss_busy:.0} MiB resident, \
         CPU {:.1}% of a core, {files_busy} open files",
        written as f64 / took,
        (cpu2 - cpu1) / took * 100.0
    );
    let m = registry.metrics();
    println!(
        "registry: {} open databases, {} opens",
        m.open_databases, m.opens
    );
    registry.close().await?;
    let _ = Command::new("kill")
        .arg("-TERM")
        .arg(pid.to_string())
        .status();
    litestream.wait()?;
    Ok(())
}
