//! Litestream, the real program, replicating quicklite's databases to an S3-compatible server (moto) on loopback:
//! a child process writes through quicklite (the default managed checkpoints) with readers beside it and prints
//! every write it had acknowledged; the parent kills it with SIGKILL, lets Litestream catch up, restores each
//! database elsewhere and checks that every acknowledged write is there, each whole, and `integrity_check` passes.
//! For a standalone database and for a registry's databases.
//!
//! Needs `litestream` (`scripts/install-litestream.sh` builds it from the Go module proxy; `QUICKLITE_LITESTREAM`
//! names it) and moto's server (`python3 -m moto.server`). Without them the test says what is missing and passes,
//! unless `QUICKLITE_LITESTREAM_REQUIRED=1` (as `scripts/test.sh` sets it), which makes it fail.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

mod common;

use common::litestream::{Tools, config_entry, start_s3};
use common::{Backend, PAIRED_TABLES, whole_writes, write_pair};

/// Set in the child's environment: the directory of the databases, and the backend to write through.
const CHILD_DIR: &str = "QUICKLITE_LITESTREAM_CHILD_DIR";
const CHILD_BACKEND: &str = "QUICKLITE_LITESTREAM_CHILD_BACKEND";

/// The databases written: one standalone, or three of a registry.
fn names(backend: Backend) -> &'static [&'static str] {
    match backend {
        Backend::Standalone => &["app"],
        Backend::Registry => &["tenant-0", "tenant-1", "tenant-2"],
    }
}

/// The child: writes until killed, printing `ack <database> <id>` after each acknowledged write, with two
/// readers per database and, every 200 ms, `metrics <database> <another_checkpointer> <give-ups>`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "the child process of `litestream_restores_every_acknowledged_write`, which runs it"]
async fn litestream_child() {
    let dir = PathBuf::from(std::env::var(CHILD_DIR).expect("run by the Litestream test"));
    let backend = Backend::from_name(&std::env::var(CHILD_BACKEND).unwrap());
    let mut dbs = Vec::new();
    let _registry = match backend {
        Backend::Standalone => {
            let path = dir.join("app.db");
            dbs.push(("app", quicklite::Database::open(&path).await.unwrap()));
            None
        }
        Backend::Registry => {
            let registry = quicklite::Registry::open(&dir).await.unwrap();
            for name in names(backend) {
                dbs.push((name, registry.get(name).await.unwrap()));
            }
            Some(registry)
        }
    };
    println!("ready");
    let mut tasks = Vec::new();
    for (d, (name, db)) in dbs.iter().enumerate() {
        for t in 0..4_i64 {
            let (name, db) = (*name, db.clone());
            tasks.push(tokio::spawn(async move {
                for i in 0.. {
                    let id = d as i64 * 100_000_000 + t * 1_000_000 + i;
                    write_pair(&db, id).await.unwrap();
                    println!("ack {name} {id}");
                }
            }));
        }
        for _ in 0..2 {
            let db = db.clone();
            tasks.push(tokio::spawn(async move {
                loop {
                    db.query_row("SELECT count(*) FROM a", [], |r| r.get::<_, i64>(0))
                        .await
                        .unwrap();
                    tokio::time::sleep(Duration::from_millis(1)).await;
                }
            }));
        }
    }
    loop {
        for (name, db) in &dbs {
            let m = db.metrics();
            println!(
                "metrics {name} {} {}",
                m.another_checkpointer, m.checkpoint_reader_waits_given_up
            );
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Litestream's configuration: each database replicated to the bucket under its name, synced every 100 ms.
fn config(dir: &Path, backend: Backend, endpoint: &str) -> PathBuf {
    let mut yaml = String::from("dbs:\n");
    for name in names(backend) {
        yaml.push_str(&config_entry(
            &dir.join(format!("{name}.db")),
            name,
            endpoint,
        ));
    }
    let path = dir.join("litestream.yml");
    std::fs::write(&path, yaml).unwrap();
    path
}

/// Restores `name` into a new file in `into`; `None` if Litestream could not (yet).
fn restore(tools: &Tools, config: &Path, db: &Path, into: &Path, attempt: u32) -> Option<PathBuf> {
    let out = into.join(format!(
        "{}-{attempt}.db",
        db.file_stem().unwrap().to_string_lossy()
    ));
    let status = tools
        .litestream()
        .arg("restore")
        .arg("-config")
        .arg(config)
        .arg("-o")
        .arg(&out)
        .arg(db)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .unwrap();
    (status.success() && out.exists()).then_some(out)
}

fn litestream_restores_every_acknowledged_write(backend: Backend) {
    let Some(tools) = Tools::require(false) else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("live");
    let restored = tmp.path().join("restored");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::create_dir_all(&restored).unwrap();
    // The databases exist, in WAL mode, before Litestream starts watching them.
    for name in names(backend) {
        let conn = rusqlite::Connection::open(dir.join(format!("{name}.db"))).unwrap();
        conn.execute_batch("PRAGMA journal_mode = WAL").unwrap();
        conn.execute_batch(PAIRED_TABLES).unwrap();
    }
    let (_s3, endpoint) = start_s3();
    let config = config(&dir, backend, &endpoint);
    let mut replicating = tools.replicate(&config);
    // Litestream's tables appear once it has started on every database.
    let deadline = Instant::now() + Duration::from_secs(60);
    for name in names(backend) {
        let conn = rusqlite::Connection::open(dir.join(format!("{name}.db"))).unwrap();
        while !quicklite_has_litestream_tables(&conn) {
            assert!(
                Instant::now() < deadline,
                "Litestream did not start on {name}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    let (acked, metrics) = write_until_killed(&dir, backend, Duration::from_secs(3));
    // The writer is gone; Litestream goes on and replicates what it left in the WAL.
    let mut restores = BTreeMap::new();
    for name in names(backend) {
        let db = dir.join(format!("{name}.db"));
        let expected = &acked[*name];
        assert!(
            expected.len() > 100,
            "{name}: {} writes acknowledged",
            expected.len()
        );
        let deadline = Instant::now() + Duration::from_secs(30);
        let mut attempt = 0;
        let (path, missing) = loop {
            attempt += 1;
            if let Some(path) = restore(&tools, &config, &db, &restored, attempt) {
                let stored = whole_writes(&path);
                let missing = expected.difference(&stored).count();
                if missing == 0 || Instant::now() >= deadline {
                    break (path, missing);
                }
            }
            assert!(Instant::now() < deadline, "{name}: no restore succeeded");
            std::thread::sleep(Duration::from_millis(500));
        };
        assert_eq!(
            missing, 0,
            "{name}: acknowledged writes missing from the restore"
        );
        restores.insert(*name, (path, expected.len(), attempt));
    }
    // Stopped gracefully, Litestream syncs what is left and exits.
    Command::new("kill")
        .arg("-TERM")
        .arg(replicating.0.id().to_string())
        .status()
        .unwrap();
    let status = replicating.0.wait().unwrap();
    assert!(status.success(), "litestream exited with {status:?}");
    for (name, (path, writes, attempts)) in &restores {
        let (deferring, give_ups) = metrics[*name];
        println!(
            "{backend:?} {name}: {writes} acknowledged writes, all in the restore {} (restore attempt {attempts}); \
             writer deferred to Litestream: {deferring}, checkpoint waits given up: {give_ups}",
            path.display()
        );
        assert!(deferring, "{name}: the writer saw Litestream's tables");
        assert_eq!(
            give_ups, 0,
            "{name}: no checkpoint waited for Litestream's read"
        );
    }
}

fn quicklite_has_litestream_tables(conn: &rusqlite::Connection) -> bool {
    conn.query_row(
        "SELECT count(*) FROM sqlite_master WHERE name IN ('_litestream_seq', '_litestream_lock')",
        [],
        |r| r.get::<_, i64>(0),
    )
    .map(|n| n == 2)
    .unwrap_or(false)
}

/// The acknowledged ids of each database, and each database's last metrics (deferring, give-ups).
type Written = (
    BTreeMap<&'static str, BTreeSet<i64>>,
    BTreeMap<&'static str, (bool, u64)>,
);

/// Runs the child for `time` after it is ready, then kills it (SIGKILL).
fn write_until_killed(dir: &Path, backend: Backend, time: Duration) -> Written {
    let envs = [
        (CHILD_DIR, dir.display().to_string()),
        (CHILD_BACKEND, backend.name().to_string()),
    ];
    let mut acked: BTreeMap<&'static str, BTreeSet<i64>> = names(backend)
        .iter()
        .map(|n| (*n, BTreeSet::new()))
        .collect();
    let mut metrics = BTreeMap::new();
    let name = |w: &str| *names(backend).iter().find(|n| **n == w).unwrap();
    common::run_child_until_killed("litestream_child", &envs, time, |line| {
        match line.split_whitespace().collect::<Vec<_>>().as_slice() {
            ["ack", db, id] => {
                acked.get_mut(name(db)).unwrap().insert(id.parse().unwrap());
            }
            ["metrics", db, deferring, give_ups] => {
                metrics.insert(name(db), (*deferring == "true", give_ups.parse().unwrap()));
            }
            _ => {}
        }
    });
    (acked, metrics)
}

#[test]
fn litestream_restores_every_acknowledged_write_of_a_database() {
    litestream_restores_every_acknowledged_write(Backend::Standalone);
}

#[test]
fn litestream_restores_every_acknowledged_write_of_a_registry_s_databases() {
    litestream_restores_every_acknowledged_write(Backend::Registry);
}
