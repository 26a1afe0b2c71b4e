//! Writes acknowledged once object storage holds them (`Acknowledge::Replicated`), with the real parts: Litestream
//! replicating to an S3-compatible server (moto) on loopback. A machine writing flat out is killed (SIGKILL) with
//! its Litestream and restored elsewhere: no acknowledged write is missing. Object storage stopped (SIGSTOP) for
//! five seconds: writes wait or fail with `Error::NotReplicated`, none is lost, and they are acknowledged again once
//! it answers. Both backends: a standalone database, and a registry's tenant.
//!
//! Needs `litestream` and moto's server (`scripts/install-litestream.sh`); without them the tests say what is
//! missing and pass, unless `QUICKLITE_LITESTREAM_REQUIRED=1` (as `scripts/test.sh` sets it).

use std::collections::BTreeSet;
use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use quicklite::litestream::Litestream;
use quicklite::{Acknowledge, Database, Error, Registry};

mod common;

use common::litestream::{BUCKET, Process, Tools, config_entry, signal, start_s3, until_listening};

/// Set in the child's environment: machine A's directory, and its backend.
const CHILD_DIR: &str = "QUICKLITE_ACKS_CHILD_DIR";
const CHILD_BACKEND: &str = "QUICKLITE_ACKS_CHILD_BACKEND";

/// Tasks writing at once.
const TASKS: usize = 16;

/// The replica's path in the bucket.
const REPLICA: &str = "acks";

/// The database (file `db.db` in `dir`) with its writes acknowledged once Litestream, at `dir/litestream.sock`, has
/// uploaded them: opened by itself (`registry` false) or as a registry's tenant `db` (the registry is returned too,
/// to keep it open).
async fn open_acked(
    dir: &Path,
    registry: bool,
    timeout: Option<Duration>,
) -> (Database, Option<Registry>) {
    let acknowledge = Acknowledge::Replicated(Litestream::socket(dir.join("litestream.sock")));
    if registry {
        let registry = Registry::builder(dir)
            .configure(move |b| b.acknowledge(acknowledge.clone()).write_timeout(timeout))
            .open()
            .await
            .unwrap();
        let db = registry.get("db").await.unwrap();
        (db, Some(registry))
    } else {
        let db = Database::builder(dir.join("db.db"))
            .acknowledge(acknowledge)
            .write_timeout(timeout)
            .open()
            .await
            .unwrap();
        (db, None)
    }
}

/// Creates `dir/db.db` with its table, starts an S3 server and Litestream replicating the file to it, with its
/// control socket at `dir/litestream.sock`. Returns the S3 server, its endpoint and Litestream.
fn replicated(tools: &Tools, dir: &Path) -> (Process, String, Process) {
    let conn = rusqlite::Connection::open(dir.join("db.db")).unwrap();
    conn.execute_batch("PRAGMA journal_mode = WAL; CREATE TABLE t(id INTEGER PRIMARY KEY)")
        .unwrap();
    drop(conn);
    let (s3, endpoint) = start_s3();
    let yaml = format!(
        "socket:\n  enabled: true\n  path: {}\ndbs:\n{}",
        dir.join("litestream.sock").display(),
        config_entry(&dir.join("db.db"), REPLICA, &endpoint)
    );
    std::fs::write(dir.join("litestream.yml"), yaml).unwrap();
    let litestream = tools.replicate(&dir.join("litestream.yml"));
    until_listening(&dir.join("litestream.sock"));
    (s3, endpoint, litestream)
}

/// The ids object storage holds: the replica restored into a new file.
fn restored_ids(tools: &Tools, endpoint: &str, into: &Path) -> BTreeSet<i64> {
    let url = format!(
        "s3://{BUCKET}/{REPLICA}?endpoint={endpoint}&region=us-east-1&force-path-style=true"
    );
    let out = tools
        .litestream()
        .env("AWS_ACCESS_KEY_ID", "test")
        .env("AWS_SECRET_ACCESS_KEY", "test")
        .arg("restore")
        .arg("-o")
        .arg(into)
        .arg(&url)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "litestream restore: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    ids(into)
}

fn ids(file: &Path) -> BTreeSet<i64> {
    let conn = rusqlite::Connection::open(file).unwrap();
    let mut stmt = conn.prepare("SELECT id FROM t").unwrap();
    stmt.query_map([], |r| r.get(0))
        .unwrap()
        .map(Result::unwrap)
        .collect()
}

/// Machine A: [`TASKS`] tasks inserting ids 1, 2, … as fast as their acknowledgements allow, each printing
/// `ack <id>` once its write returned. Prints `ready` first.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "machine A of `acknowledged_writes_survive_the_machine`, which runs it"]
async fn acks_machine_a_child() {
    let dir = PathBuf::from(std::env::var(CHILD_DIR).expect("run by the test"));
    let registry = std::env::var(CHILD_BACKEND).unwrap() == "registry";
    let (db, _registry) = open_acked(&dir, registry, None).await;
    println!("ready");
    let next = Arc::new(AtomicI64::new(1));
    let mut tasks = Vec::new();
    for _ in 0..TASKS {
        let (db, next) = (db.clone(), next.clone());
        tasks.push(tokio::spawn(async move {
            loop {
                let id = next.fetch_add(1, Ordering::Relaxed);
                db.execute("INSERT INTO t(id) VALUES (?1)", [id])
                    .await
                    .unwrap();
                println!("ack {id}");
            }
        }));
    }
    // The writers loop until the process is killed.
    futures::future::join_all(tasks).await;
}

/// Machine A writing under replicated acknowledgements for `time`, then killed (SIGKILL) together with its
/// Litestream, as a machine dies; object storage goes on. Returns the ids it acknowledged.
fn run_machine_a(dir: &Path, registry: bool, litestream: Process, time: Duration) -> BTreeSet<i64> {
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "acks_machine_a_child",
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD_DIR, dir)
        .env(
            CHILD_BACKEND,
            if registry { "registry" } else { "standalone" },
        )
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let acked = Arc::new(Mutex::new(BTreeSet::new()));
    let (ready_tx, ready_rx) = std::sync::mpsc::channel();
    let stdout = child.stdout.take().unwrap();
    let reader = std::thread::spawn({
        let acked = acked.clone();
        move || {
            for line in std::io::BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if line.ends_with("ready") {
                    let _ = ready_tx.send(());
                } else if let Some(id) = line.strip_prefix("ack ") {
                    acked.lock().unwrap().insert(id.parse::<i64>().unwrap());
                }
            }
        }
    });
    ready_rx
        .recv_timeout(Duration::from_secs(120))
        .expect("machine A never got ready");
    std::thread::sleep(time);
    // The machine dies: everything on it at once.
    let litestream_pid = litestream.0.id();
    signal(litestream_pid, "KILL");
    child.kill().unwrap();
    child.wait().unwrap();
    drop(litestream);
    reader.join().unwrap();
    Arc::try_unwrap(acked).unwrap().into_inner().unwrap()
}

fn acknowledged_writes_survive_the_machine(registry: bool) {
    let Some(tools) = Tools::require(false) else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("a");
    std::fs::create_dir_all(&dir).unwrap();
    let (_s3, endpoint, litestream) = replicated(&tools, &dir);
    let acked = run_machine_a(&dir, registry, litestream, Duration::from_secs(3));
    let restored = restored_ids(&tools, &endpoint, &tmp.path().join("b.db"));
    let missing: Vec<_> = acked.difference(&restored).collect();
    println!(
        "{}: {} writes acknowledged in 3 s by {TASKS} tasks, {} restored, {} acknowledged but missing",
        if registry { "registry" } else { "standalone" },
        acked.len(),
        restored.len(),
        missing.len()
    );
    assert!(acked.len() > 100, "too few writes to tell: {}", acked.len());
    assert!(
        missing.is_empty(),
        "acknowledged writes missing: {missing:?}"
    );
}

#[test]
fn acknowledged_writes_survive_the_machine_standalone() {
    acknowledged_writes_survive_the_machine(false);
}

#[test]
fn acknowledged_writes_survive_the_machine_registry() {
    acknowledged_writes_survive_the_machine(true);
}

/// What the writers of [`object_storage_stopped`] saw: writes acknowledged, and told `NotReplicated`, by id.
#[derive(Default)]
struct Outcomes {
    acked: Mutex<Vec<(Instant, i64)>>,
    not_replicated: Mutex<Vec<i64>>,
}

async fn object_storage_stopped(registry: bool) {
    let Some(tools) = Tools::require(false) else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().to_path_buf();
    let (s3, endpoint, _litestream) = replicated(&tools, &dir);
    let (db, _registry) = open_acked(&dir, registry, Some(Duration::from_secs(1))).await;
    let outcomes = Arc::new(Outcomes::default());
    let next = Arc::new(AtomicI64::new(1));
    let mut tasks = Vec::new();
    let run_until = Instant::now() + Duration::from_secs(9);
    for _ in 0..TASKS {
        let (db, next, outcomes) = (db.clone(), next.clone(), outcomes.clone());
        tasks.push(tokio::spawn(async move {
            while Instant::now() < run_until {
                let id = next.fetch_add(1, Ordering::Relaxed);
                match db.execute("INSERT INTO t(id) VALUES (?1)", [id]).await {
                    Ok(_) => outcomes.acked.lock().unwrap().push((Instant::now(), id)),
                    Err(Error::NotReplicated { .. }) => {
                        outcomes.not_replicated.lock().unwrap().push(id)
                    }
                    Err(e) => panic!("write {id}: {e}"),
                }
            }
        }));
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    let s3_pid = s3.0.id();
    let stopped = Instant::now();
    signal(s3_pid, "STOP");
    tokio::time::sleep(Duration::from_secs(5)).await;
    signal(s3_pid, "CONT");
    let resumed = Instant::now();
    for task in tasks {
        task.await.unwrap();
    }
    let acked = outcomes.acked.lock().unwrap().clone();
    let not_replicated = outcomes.not_replicated.lock().unwrap().clone();
    // Acknowledged while object storage was stopped: only writes whose upload had finished as it stopped.
    let during = acked
        .iter()
        .filter(|(at, _)| *at > stopped + Duration::from_millis(500) && *at < resumed)
        .count();
    let before = acked.iter().filter(|(at, _)| *at < stopped).count();
    let after = acked.iter().filter(|(at, _)| *at > resumed).count();
    let m = db.metrics();
    println!(
        "{}: acknowledged {before} in the 2 s before object storage stopped, {during} while it was stopped, \
         {after} in the 2 s after it came back; {} told NotReplicated; uploads {} ok, {} failed",
        if registry { "registry" } else { "standalone" },
        not_replicated.len(),
        m.replication_syncs,
        m.replication_sync_failures,
    );
    assert!(
        before > 0 && after > 0,
        "throughput returns when object storage does"
    );
    assert_eq!(during, 0, "acknowledged while object storage was stopped");
    assert!(
        !not_replicated.is_empty(),
        "writes past their deadline are told"
    );
    assert_eq!(m.writes_not_replicated, not_replicated.len() as u64);
    // None lost: every write acknowledged or told NotReplicated is here, and once replicated, in object storage.
    db.until_replicated().await.unwrap();
    let here: BTreeSet<i64> = db
        .query_all("SELECT id FROM t", [], |r| r.get(0))
        .await
        .unwrap()
        .into_iter()
        .collect();
    let restored = restored_ids(&tools, &endpoint, &tmp.path().join("restored.db"));
    for id in acked.iter().map(|(_, id)| id).chain(&not_replicated) {
        assert!(here.contains(id), "write {id} is not in the database");
        assert!(restored.contains(id), "write {id} is not in object storage");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writes_wait_while_object_storage_is_stopped_and_none_is_lost_standalone() {
    object_storage_stopped(false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writes_wait_while_object_storage_is_stopped_and_none_is_lost_registry() {
    object_storage_stopped(true).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn until_replicated_waits_for_what_reads_can_see() {
    let Some(tools) = Tools::require(false) else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().to_path_buf();
    let (_s3, endpoint, _litestream) = replicated(&tools, &dir);
    let (db, _) = open_acked(&dir, false, None).await;
    // A write made by another connection: no acknowledgement of ours covered it.
    let other = rusqlite::Connection::open(dir.join("db.db")).unwrap();
    other.execute("INSERT INTO t(id) VALUES (42)", []).unwrap();
    db.execute("INSERT INTO t(id) VALUES (43)", [])
        .await
        .unwrap();
    let position = db.until_replicated().await.unwrap();
    assert!(position.txid() > 0);
    // A transaction held across awaits: its commit's answer waits for its upload too; its steps' do not.
    let mut tx = db.begin().await.unwrap();
    tx.execute("INSERT INTO t(id) VALUES (44)", [])
        .await
        .unwrap();
    let waited = db.metrics().replication_wait_us.count;
    tx.commit().await.unwrap();
    assert_eq!(db.metrics().replication_wait_us.count, waited + 1);
    let restored = restored_ids(&tools, &endpoint, &tmp.path().join("restored.db"));
    for id in [42, 43, 44] {
        assert!(
            restored.contains(&id),
            "{id} not in object storage: {restored:?}"
        );
    }

    // Without replicated acknowledgements, there is nothing to wait for.
    let plain = Database::builder(tmp.path().join("plain.db"))
        .open()
        .await
        .unwrap();
    assert!(matches!(
        plain.until_replicated().await,
        Err(Error::InvalidConfig(_))
    ));
}

#[tokio::test]
async fn a_socket_nothing_listens_on_is_refused_at_open() {
    let dir = tempfile::tempdir().unwrap();
    let nowhere = Acknowledge::Replicated(Litestream::socket(dir.path().join("no.sock")));
    let refused = Database::builder(dir.path().join("db.db"))
        .acknowledge(nowhere.clone())
        .open()
        .await;
    match refused {
        Err(Error::InvalidConfig(message)) => assert!(message.contains("no.sock"), "{message}"),
        other => panic!("{other:?}"),
    }
    let registry = Registry::builder(dir.path().join("tenants"))
        .configure(move |b| b.acknowledge(nowhere.clone()))
        .open()
        .await
        .unwrap();
    assert!(matches!(
        registry.get("t").await,
        Err(Error::InvalidConfig(_))
    ));
}
