//! A registry's restore of a tenant when object storage stops answering, when the caller gives up, and after a crash
//! left a restore unfinished: the real Litestream restores from an S3-compatible server (moto) on loopback, which
//! the tests stop (SIGSTOP) and let go on (SIGCONT). A `get` never waits past the restore's bound, no `litestream`
//! outlives the `get`s that wait for it, and nothing of an unfinished restore stays in the registry's directory.
//!
//! The tests with object storage need `litestream` and moto's server (`scripts/install-litestream.sh`); without them
//! they say what is missing and pass, unless `QUICKLITE_LITESTREAM_REQUIRED=1` (as `scripts/test.sh` sets it).

use std::io::Read;
use std::path::{Path, PathBuf};
use std::time::Duration;

use quicklite::litestream::{Litestream, Restore};
use quicklite::{Error, Registry};

mod common;

use common::litestream::{BUCKET, Process, Tools, config_entry, signal, start_s3, until_listening};

/// Rows in the replicated tenant.
const ROWS: i64 = 100;

/// Object storage with one tenant, `t`, replicated (`ROWS` rows), and the URL a registry restores tenants from.
struct Replicated {
    s3: Process,
    url: String,
}

/// Starts the S3 server and has Litestream replicate tenant `t`, written in `dir`, to it; Litestream is stopped once
/// object storage holds the tenant.
async fn replicated(tools: &Tools, dir: &Path) -> Replicated {
    let primary = dir.join("primary");
    std::fs::create_dir_all(&primary).unwrap();
    let db = primary.join("t.db");
    let conn = rusqlite::Connection::open(&db).unwrap();
    conn.execute_batch(&format!(
        "PRAGMA journal_mode = WAL; CREATE TABLE t(id INTEGER PRIMARY KEY);
         WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < {ROWS})
         INSERT INTO t SELECT i FROM n;"
    ))
    .unwrap();
    drop(conn);
    let (s3, endpoint) = start_s3();
    let socket = primary.join("litestream.sock");
    let config = primary.join("litestream.yml");
    std::fs::write(
        &config,
        format!(
            "socket:\n  enabled: true\n  path: {}\ndbs:\n{}",
            socket.display(),
            config_entry(&db, "tenants/t", &endpoint)
        ),
    )
    .unwrap();
    let replicating = tools.replicate(&config);
    until_listening(&socket);
    Litestream::socket(&socket)
        .sync(&db, Duration::from_secs(30))
        .await
        .unwrap();
    drop(replicating);
    Replicated {
        s3,
        url: format!(
            "s3://{BUCKET}/tenants/{{name}}?endpoint={endpoint}&region=us-east-1&force-path-style=true"
        ),
    }
}

/// The `litestream` a registry runs: a script that notes its pid in `runs` (a line per run) and, with `fifo`, opens
/// that FIFO for writing as its descriptor 3 (waiting for a reader), then becomes `litestream` (`exec`: the same
/// process, which keeps the descriptor until it dies), with the server's credentials.
fn wrapper(dir: &Path, tools: &Tools, fifo: Option<&Path>) -> PathBuf {
    let script = dir.join("litestream.sh");
    let fifo = fifo
        .map(|fifo| format!("exec 3> {}\n", fifo.display()))
        .unwrap_or_default();
    std::fs::write(
        &script,
        format!(
            "#!/bin/sh\necho $$ >> {runs}\n{fifo}export AWS_ACCESS_KEY_ID=test AWS_SECRET_ACCESS_KEY=test\n\
             unset AWS_CA_BUNDLE\nexec {litestream} \"$@\"\n",
            runs = dir.join("runs").display(),
            litestream = tools.litestream.display(),
        ),
    )
    .unwrap();
    let mut permissions = std::fs::metadata(&script).unwrap().permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut permissions, 0o755);
    std::fs::set_permissions(&script, permissions).unwrap();
    script
}

/// The pids of the `litestream` runs the wrapper in `dir` noted.
fn runs(dir: &Path) -> Vec<u32> {
    std::fs::read_to_string(dir.join("runs"))
        .unwrap_or_default()
        .lines()
        .map(|pid| pid.parse().unwrap())
        .collect()
}

/// Whether process `pid` is gone: not running, and not a zombie either (reaped).
fn gone(pid: u32) -> bool {
    !Path::new(&format!("/proc/{pid}")).exists()
}

/// The scratch directories of restores in `dir`.
fn scratch_dirs(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|name| name.starts_with(".restoring-") || name.starts_with(".comparing-"))
        .collect()
}

/// A bound no test should reach: a `get` still waiting then hangs.
const HANG: Duration = Duration::from_secs(120);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restore_object_storage_does_not_answer_times_out_kills_litestream_and_leaves_nothing() {
    let Some(tools) = Tools::require(false) else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let object_storage = replicated(&tools, tmp.path()).await;
    let program = wrapper(tmp.path(), &tools, None);
    let dir = tmp.path().join("machine");
    let timeout = Duration::from_secs(3);
    let registry = Registry::builder(&dir)
        .restore_missing(Restore::litestream(&program, &object_storage.url).timeout(timeout))
        .open()
        .await
        .unwrap();

    signal(object_storage.s3.0.id(), "STOP");
    // Two gets of the tenant at once: one restore, whose outcome both get.
    let (first, second) = tokio::time::timeout(HANG, async {
        tokio::join!(registry.get("t"), registry.get("t"))
    })
    .await
    .expect("a get waited past its restore's bound");
    for outcome in [first, second] {
        match outcome {
            Err(
                ref e @ Error::RestoreTimedOut {
                    ref name,
                    ref command,
                    timeout: t,
                },
            ) => {
                assert_eq!(
                    (name.as_str(), command.as_str(), t),
                    ("t", "restore", timeout)
                );
                let message = e.to_string();
                assert!(
                    message.contains("timed out") && message.contains("the tenant was not opened"),
                    "{message}"
                );
            }
            other => panic!("not a restore that timed out: {other:?}"),
        }
    }
    let pids = runs(tmp.path());
    assert_eq!(pids.len(), 1, "one restore for both gets: {pids:?}");
    assert!(gone(pids[0]), "litestream ({}) outlived the get", pids[0]);
    assert_eq!(scratch_dirs(&dir), Vec::<String>::new());
    assert!(!dir.join("t.db").exists());

    // Object storage answers again: the next get restores the tenant.
    signal(object_storage.s3.0.id(), "CONT");
    let db = tokio::time::timeout(HANG, registry.get("t"))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        db.query_row("SELECT count(*) FROM t", [], |r| r.get::<_, i64>(0))
            .await
            .unwrap(),
        ROWS
    );
    assert_eq!(runs(tmp.path()).len(), 2);
    assert_eq!(scratch_dirs(&dir), Vec::<String>::new());
    registry.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_get_given_up_kills_its_restore_and_leaves_nothing() {
    let Some(tools) = Tools::require(false) else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let object_storage = replicated(&tools, tmp.path()).await;
    let fifo = tmp.path().join("alive");
    let made = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap();
    assert!(made.success());
    let program = wrapper(tmp.path(), &tools, Some(&fifo));
    let dir = tmp.path().join("machine");
    // Far beyond the test: only the caller giving up can end the restore.
    let registry = Registry::builder(&dir)
        .restore_missing(
            Restore::litestream(&program, &object_storage.url).timeout(Duration::from_secs(3600)),
        )
        .open()
        .await
        .unwrap();

    signal(object_storage.s3.0.id(), "STOP");
    let get = tokio::spawn({
        let registry = registry.clone();
        async move { registry.get("t").await }
    });
    // The restore's `litestream` holds the FIFO open for writing from before it starts until it dies: reading it
    // to its end waits for its death.
    let (opened_tx, opened) = std::sync::mpsc::channel();
    let (died_tx, died) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut alive = std::fs::File::open(&fifo).unwrap();
        opened_tx.send(()).unwrap();
        let _ = alive.read_to_end(&mut Vec::new());
        let _ = died_tx.send(());
    });
    opened
        .recv_timeout(HANG)
        .expect("the restore ran litestream");
    get.abort();
    assert!(get.await.unwrap_err().is_cancelled());
    died.recv_timeout(HANG)
        .expect("litestream outlived the get that gave up");
    // Closing joins the restore's thread, which reaps its child and removes its directory after the kill.
    registry.close().await.unwrap();
    let pids = runs(tmp.path());
    assert_eq!(pids.len(), 1, "{pids:?}");
    assert!(gone(pids[0]), "litestream ({}) was not reaped", pids[0]);
    assert_eq!(scratch_dirs(&dir), Vec::<String>::new());
    assert!(!dir.join("t.db").exists());
    signal(object_storage.s3.0.id(), "CONT");
}

#[tokio::test]
async fn a_restore_s_directory_left_by_a_crash_is_removed_when_the_registry_opens() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    // What a process killed in the middle of a restore and of a comparison leaves: a download each.
    for left in [".restoring-8fQ2xa", ".comparing-Zk31pq"] {
        std::fs::create_dir(dir.join(left)).unwrap();
        std::fs::write(dir.join(left).join("restored.db"), vec![0; 4096]).unwrap();
    }
    let acme = rusqlite::Connection::open(dir.join("acme.db")).unwrap();
    acme.execute_batch("CREATE TABLE t(id INTEGER PRIMARY KEY); INSERT INTO t VALUES (1);")
        .unwrap();
    drop(acme);

    let registry = Registry::open(dir).await.unwrap();
    assert_eq!(scratch_dirs(dir), Vec::<String>::new());
    let acme = registry.get("acme").await.unwrap();
    assert_eq!(
        acme.query_row("SELECT count(*) FROM t", [], |r| r.get::<_, i64>(0))
            .await
            .unwrap(),
        1
    );
    registry.close().await.unwrap();
}
