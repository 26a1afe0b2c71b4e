//! How soon a subscriber hears of a commit made by another connection on the same file
//! (`Builder::notice_external_commits`): a plain rusqlite connection commits a row at random moments, and the time
//! from its `COMMIT` returning to the `Notice::External` arriving is recorded — for a standalone database and for a
//! registry's, idle and beside a task writing through quicklite all the while.
//!
//! `cargo run --release -p quicklite --example external_commits [-- INTERVAL_MS COMMITS]` prints, per setting, the
//! median, 99th percentile and largest delay against the interval, and how many commits went untold.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use quicklite::{Database, Notice, Registry, Subscription};

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> quicklite::Result<()> {
    let mut args = std::env::args().skip(1);
    let interval = Duration::from_millis(args.next().and_then(|s| s.parse().ok()).unwrap_or(50));
    let commits: usize = args.next().and_then(|s| s.parse().ok()).unwrap_or(50);
    println!("interval {interval:?}, {commits} commits from another connection per setting");
    for registry in [false, true] {
        for busy in [false, true] {
            let dir = tempfile::tempdir().expect("a temporary directory");
            let (db, registry_handle) = if registry {
                let r = Registry::builder(dir.path())
                    .idle_timeout(Duration::from_millis(100))
                    .configure(move |b| b.notice_external_commits(interval))
                    .open()
                    .await?;
                (r.get("outside").await?, Some(r))
            } else {
                let db = Database::builder(dir.path().join("outside.db"))
                    .notice_external_commits(interval)
                    .open()
                    .await?;
                (db, None)
            };
            let path = dir.path().join("outside.db");
            db.execute_batch("CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT)")
                .await?;
            let changes = db.subscribe();
            let stop = Arc::new(AtomicBool::new(false));
            let writer = busy.then(|| {
                let (db, stop) = (db.clone(), stop.clone());
                tokio::spawn(async move {
                    let mut id = 1_000_000_i64;
                    while !stop.load(Ordering::Relaxed) {
                        let _ = db.execute("INSERT INTO t VALUES (?1, 'own')", (id,)).await;
                        id += 1;
                    }
                })
            });
            let (mut delays, untold) = delays(changes, path, interval, commits).await;
            stop.store(true, Ordering::Relaxed);
            if let Some(writer) = writer {
                let _ = writer.await;
            }
            db.close().await?;
            if let Some(r) = registry_handle {
                r.close().await?;
            }
            delays.sort();
            let at = |q: f64| delays[((delays.len() - 1) as f64 * q).round() as usize];
            println!(
                "{} {}: median {:.1} ms, p99 {:.1} ms, max {:.1} ms ({:.2}, {:.2}, {:.2} intervals); {untold} untold",
                if registry { "registry  " } else { "standalone" },
                if busy { "busy" } else { "idle" },
                ms(at(0.5)),
                ms(at(0.99)),
                ms(at(1.0)),
                at(0.5).as_secs_f64() / interval.as_secs_f64(),
                at(0.99).as_secs_f64() / interval.as_secs_f64(),
                at(1.0).as_secs_f64() / interval.as_secs_f64(),
            );
        }
    }
    Ok(())
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// Commits `commits` rows from another connection, each at a random moment after the last was told, and returns
/// the delays from each `COMMIT` to its notice, and how many were not told within ten intervals.
async fn delays(
    mut changes: Subscription,
    path: std::path::PathBuf,
    interval: Duration,
    commits: usize,
) -> (Vec<Duration>, usize) {
    let other = Arc::new(std::sync::Mutex::new(
        rusqlite::Connection::open(&path).expect("another connection"),
    ));
    other
        .lock()
        .unwrap()
        .busy_timeout(Duration::from_secs(30))
        .unwrap();
    let mut delays = Vec::with_capacity(commits);
    let mut untold = 0;
    let mut seed = 0x9E37_79B9_7F4A_7C15_u64;
    for id in 0..commits as i64 {
        // A moment anywhere within the next interval and a half, so the commits fall at every phase of the looks.
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        tokio::time::sleep(interval.mul_f64((seed % 1000) as f64 / 1000.0 * 1.5)).await;
        let conn = other.clone();
        let committed = tokio::task::spawn_blocking(move || {
            let conn = conn.lock().unwrap();
            conn.execute("INSERT INTO t VALUES (?1, 'outside')", (id,))
                .expect("insert from outside");
            Instant::now()
        })
        .await
        .expect("the other connection's commit");
        let told = tokio::time::timeout(interval * 10, async {
            loop {
                match changes.next().await {
                    Some(Notice::External) => return Instant::now(),
                    Some(_) => {}
                    None => panic!("the database closed"),
                }
            }
        })
        .await;
        match told {
            Ok(at) => delays.push(at.saturating_duration_since(committed)),
            Err(_) => untold += 1,
        }
    }
    (delays, untold)
}
