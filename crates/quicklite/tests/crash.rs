//! Process crash: a child process writes through quicklite from many tasks and prints every write it had
//! acknowledged; the parent kills it with SIGKILL at a random moment, reopens the database and checks that every
//! acknowledged write is there, that every write is all-or-nothing, and that `integrity_check` passes. Many rounds,
//! each on the database the previous ones left behind.
//!
//! Under both profiles a process crash loses nothing that was acknowledged: a commit is in the WAL, in the
//! operating system's cache, before `COMMIT` returns; only a power cut can lose what was not yet synced.

use std::collections::BTreeSet;
use std::path::Path;
use std::time::Duration;

mod common;

use common::{Backend, PAIRED_TABLES, both_backends, whole_writes, write_pair};
use quicklite::Profile;

/// Set in the child's environment: the directory of the database to write to, the backend to open it through,
/// and the round (ids are unique per round).
const CHILD_DIR: &str = "QUICKLITE_CRASH_CHILD_DIR";
const CHILD_BACKEND: &str = "QUICKLITE_CRASH_CHILD_BACKEND";
const CHILD_ROUND: &str = "QUICKLITE_CRASH_CHILD_ROUND";
const CHILD_PROFILE: &str = "QUICKLITE_CRASH_CHILD_PROFILE";

/// Tasks writing concurrently in the child.
const TASKS: i64 = 16;

/// The child: writes until killed, printing `ack <id>` after each acknowledged write. Each write inserts the
/// same id into two tables, so a half-applied write would show as an id in one table only.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "the child process of `acknowledged_writes_survive_sigkill`, which runs it"]
async fn crash_child() {
    let dir = std::env::var(CHILD_DIR).expect("run by acknowledged_writes_survive_sigkill");
    let backend = Backend::from_name(&std::env::var(CHILD_BACKEND).unwrap());
    let round: i64 = std::env::var(CHILD_ROUND).unwrap().parse().unwrap();
    let profile = match std::env::var(CHILD_PROFILE).unwrap().as_str() {
        "durable" => Profile::Durable,
        _ => Profile::Server,
    };
    let db = common::open_in(backend, Path::new(&dir), move |b| b.profile(profile)).await;
    db.execute_batch(PAIRED_TABLES).await.unwrap();
    // Registry: the neighbour keeps closing the database's connections until the kill, which may come in the
    // middle of a close or an open.
    let _churn = db.churn();
    println!("ready");
    let mut tasks = Vec::new();
    for t in 0..TASKS {
        let db = db.clone();
        tasks.push(tokio::spawn(async move {
            for i in 0.. {
                let id = round * 100_000_000 + t * 1_000_000 + i;
                write_pair(&db, id).await.unwrap();
                // Line-buffered: the parent sees the line as soon as it is printed.
                println!("ack {id}");
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
}

/// Runs one child until it is killed `after` it is ready; returns the ids it acknowledged.
fn crash_round(
    backend: Backend,
    dir: &Path,
    round: i64,
    profile: &str,
    after: Duration,
) -> BTreeSet<i64> {
    let envs = [
        (CHILD_DIR, dir.display().to_string()),
        (CHILD_BACKEND, backend.name().to_string()),
        (CHILD_ROUND, round.to_string()),
        (CHILD_PROFILE, profile.to_string()),
    ];
    let mut acked = BTreeSet::new();
    common::run_child_until_killed("crash_child", &envs, after, |line| {
        if let Some(id) = line.strip_prefix("ack ") {
            acked.insert(id.parse::<i64>().unwrap());
        }
    });
    acked
}

/// Checks the database after a crash: integrity, each write whole, every acknowledged id present.
fn check_after_crash(path: &Path, acked: &BTreeSet<i64>) -> usize {
    let stored = whole_writes(path);
    let lost: Vec<_> = acked.difference(&stored).take(10).collect();
    assert!(lost.is_empty(), "acknowledged writes lost: {lost:?}");
    stored.len()
}

fn rounds(backend: Backend, profile: &str, rounds: i64) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(format!("{}.db", common::NAME));
    // A fixed pseudo-random schedule of kill times (10–250 ms), so a failure can be replayed.
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut total_acked = 0;
    let mut rows = 0;
    for round in 1..=rounds {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let after = Duration::from_millis(10 + x % 240);
        let acked = crash_round(backend, dir.path(), round, profile, after);
        total_acked += acked.len();
        rows = check_after_crash(&path, &acked);
    }
    println!(
        "{backend:?}, {profile}: {rounds} SIGKILL rounds, {total_acked} acknowledged writes, none lost; {rows} rows"
    );
    assert!(total_acked > 0, "the children acknowledged writes");
}

both_backends! {
    #[test]
    fn acknowledged_writes_survive_sigkill(backend) {
        rounds(backend, "server", 20);
        rounds(backend, "durable", 10);
    }
}
