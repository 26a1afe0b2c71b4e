//! What change notifications cost the writer: single-row inserts from 64 tasks with no subscriber, one, and a
//! hundred (each taking every notice as it comes), in interleaved rounds so that each round compares the three on
//! the same machine state.
//!
//! `cargo run --release -p quicklite --example subscribers_cost [-- ROUNDS SECONDS]` prints each round's inserts per
//! second and, per setting, the median over the rounds of its ratio to the round's run without subscribers.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use quicklite::{Database, Notice};

const TASKS: usize = 64;
const SUBSCRIBERS: [usize; 3] = [0, 1, 100];

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> quicklite::Result<()> {
    let mut args = std::env::args().skip(1);
    let rounds: usize = args.next().and_then(|s| s.parse().ok()).unwrap_or(5);
    let seconds: u64 = args.next().and_then(|s| s.parse().ok()).unwrap_or(2);
    let mut ratios = vec![Vec::new(); SUBSCRIBERS.len()];
    for round in 1..=rounds {
        let mut rates = Vec::new();
        for subscribers in SUBSCRIBERS {
            rates.push(inserts_per_second(subscribers, Duration::from_secs(seconds)).await?);
        }
        println!(
            "round {round}: {}",
            SUBSCRIBERS
                .iter()
                .zip(&rates)
                .map(|(s, r)| format!("{s} subscribers {r:.0} inserts/s"))
                .collect::<Vec<_>>()
                .join(", ")
        );
        for (i, rate) in rates.iter().enumerate() {
            ratios[i].push(rate / rates[0]);
        }
    }
    for (subscribers, mut ratios) in SUBSCRIBERS.into_iter().zip(ratios) {
        ratios.sort_by(f64::total_cmp);
        println!(
            "{subscribers} subscribers: median {:.3} of the inserts without (range {:.3}–{:.3}, {} rounds)",
            ratios[ratios.len() / 2],
            ratios[0],
            ratios[ratios.len() - 1],
            ratios.len()
        );
    }
    Ok(())
}

/// Inserts per second from [`TASKS`] tasks for `length`, with `subscribers` taking every notice.
async fn inserts_per_second(subscribers: usize, length: Duration) -> quicklite::Result<f64> {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let db = Database::open(dir.path().join("inserts.db")).await?;
    db.execute_batch("CREATE TABLE events (id INTEGER PRIMARY KEY, body TEXT NOT NULL)")
        .await?;
    let told = Arc::new(AtomicU64::new(0));
    let listeners: Vec<_> = (0..subscribers)
        .map(|_| {
            let (mut changes, told) = (db.subscribe(), told.clone());
            tokio::spawn(async move {
                while let Some(notice) = changes.next().await {
                    if let Notice::Committed(commit) = notice {
                        told.fetch_add(commit.tables.len() as u64, Ordering::Relaxed);
                    }
                }
            })
        })
        .collect();
    let (stop, inserted) = (
        Arc::new(AtomicBool::new(false)),
        Arc::new(AtomicU64::new(0)),
    );
    let writers: Vec<tokio::task::JoinHandle<quicklite::Result<()>>> = (0..TASKS)
        .map(|task| {
            let (db, stop, inserted) = (db.clone(), stop.clone(), inserted.clone());
            tokio::spawn(async move {
                while !stop.load(Ordering::Relaxed) {
                    db.execute(
                        "INSERT INTO events (body) VALUES (?1)",
                        (format!("event of task {task}"),),
                    )
                    .await?;
                    inserted.fetch_add(1, Ordering::Relaxed);
                }
                quicklite::Result::Ok(())
            })
        })
        .collect();
    let started = Instant::now();
    tokio::time::sleep(length).await;
    stop.store(true, Ordering::Relaxed);
    let elapsed = started.elapsed();
    let count = inserted.load(Ordering::Relaxed);
    for writer in writers {
        writer.await.expect("a writer task")?;
    }
    db.close().await?;
    for listener in listeners {
        listener.await.expect("a subscriber task");
    }
    if subscribers > 0 {
        assert!(
            told.load(Ordering::Relaxed) > 0,
            "the subscribers were told"
        );
    }
    Ok(count as f64 / elapsed.as_secs_f64())
}
