//! Many tasks reading and writing one database at once; prints what happened.
//!
//! ```text
//! cargo run --release -p quicklite --example concurrent [READERS]
//! QUICKLITE_KEY=secret cargo run --release -p quicklite --features sqlcipher --example concurrent   # encrypted
//! ```

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use quicklite::Database;

const ROWS: i64 = 10_000;
const TASKS: usize = 64;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("example.db");
    let mut builder = Database::builder(&path);
    if let Some(n) = std::env::args().nth(1) {
        builder = builder.readers(n.parse()?);
    }
    if let Ok(key) = std::env::var("QUICKLITE_KEY") {
        #[cfg(feature = "sqlcipher")]
        {
            builder = builder.key(key);
            println!("encrypted with SQLCipher");
        }
        #[cfg(not(feature = "sqlcipher"))]
        {
            drop(key);
            anyhow::bail!(
                "QUICKLITE_KEY is set, but this build has no encryption: add --features sqlcipher"
            );
        }
    }
    let db = builder.open().await?;
    db.transaction(|c| {
        c.execute_batch(
            "CREATE TABLE item (id INTEGER PRIMARY KEY, name TEXT NOT NULL, qty INTEGER NOT NULL)",
        )?;
        let mut insert = c.prepare("INSERT INTO item VALUES (?1, ?2, ?3)")?;
        for id in 0..ROWS {
            insert.execute((id, format!("item {id}"), id % 100))?;
        }
        Ok(())
    })
    .await?;
    let info = quicklite::setup::sqlite_info()?;
    println!("SQLite {} ({})", info.version, info.setup.detail);
    println!(
        "database {} with {ROWS} rows; PRAGMAs: {:?}",
        path.display(),
        db.pragmas()
    );

    let reads = run(&db, Duration::from_secs(2), |db, i| async move {
        let id = (i * 7919) % ROWS;
        db.query_row("SELECT qty FROM item WHERE id = ?1", (id,), |r| {
            r.get::<_, i64>(0)
        })
        .await
        .map(drop)
    })
    .await?;
    let writes = run(&db, Duration::from_secs(2), |db, i| async move {
        db.execute(
            "INSERT INTO item (name, qty) VALUES (?1, ?2)",
            (format!("new {i}"), i % 10),
        )
        .await
        .map(drop)
    })
    .await?;
    let m = db.metrics();
    println!("{TASKS} tasks, point reads by primary key: {reads:>10.0} reads/s");
    println!("{TASKS} tasks, single-row inserts:         {writes:>10.0} writes/s");
    println!(
        "reads per read transaction: {:.1} (max {}); writes per commit: {:.1} (max {}); commits: {}",
        m.read_batch.mean(),
        m.read_batch.max,
        m.write_batch.mean(),
        m.write_batch.max,
        m.commits
    );
    db.close().await?;
    Ok(())
}

/// Runs `op` from `TASKS` tasks for `duration`; returns operations per second.
async fn run<F, Fut>(db: &Database, duration: Duration, op: F) -> anyhow::Result<f64>
where
    F: Fn(Database, i64) -> Fut + Send + Sync + Copy + 'static,
    Fut: std::future::Future<Output = quicklite::Result<()>> + Send,
{
    let stop = Arc::new(AtomicBool::new(false));
    let done = Arc::new(AtomicU64::new(0));
    let started = Instant::now();
    let mut tasks: Vec<tokio::task::JoinHandle<quicklite::Result<()>>> = Vec::new();
    for t in 0..TASKS {
        let (db, stop, done) = (db.clone(), stop.clone(), done.clone());
        tasks.push(tokio::spawn(async move {
            let mut i = t as i64;
            while !stop.load(Ordering::Relaxed) {
                op(db.clone(), i).await?;
                done.fetch_add(1, Ordering::Relaxed);
                i += TASKS as i64;
            }
            Ok(())
        }));
    }
    tokio::time::sleep(duration).await;
    stop.store(true, Ordering::Relaxed);
    for t in tasks {
        t.await??;
    }
    Ok(done.load(Ordering::Relaxed) as f64 / started.elapsed().as_secs_f64())
}
