//! `quicklite doctor --replica`: a database Litestream replicates to an S3-compatible server (moto) on loopback, read
//! through Litestream's VFS; doctor reports the replica's position and tables, and a replica it cannot open is
//! "nothing to report on" (exit 2) with the reason.
//!
//! Needs `litestream`, moto's server and Litestream's VFS (`scripts/install-litestream.sh`,
//! `scripts/install-litestream-vfs.sh`); without them the test says what is missing and passes, unless
//! `QUICKLITE_LITESTREAM_REQUIRED=1` (as `scripts/test.sh` sets it).

use std::time::Duration;

use assert_cmd::Command;
use quicklite::litestream::Litestream;
use quicklite::rusqlite::Connection;
use serde_json::Value;

#[path = "../../quicklite/tests/common/litestream.rs"]
#[allow(dead_code)]
mod litestream;

use litestream::{Tools, config_entry, replica_url, start_s3, until_listening};

fn doctor_replica(url: &str, vfs: &std::path::Path) -> Command {
    let mut cmd =
        Command::cargo_bin("quicklite").expect("the quicklite binary is built for its tests");
    cmd.args(["doctor", "--json", "--replica", url, "--vfs"])
        .arg(vfs)
        // Litestream's VFS reads these from the environment the process starts with; its S3 client fails with
        // `AWS_CA_BUNDLE` set.
        .env("AWS_ACCESS_KEY_ID", "test")
        .env("AWS_SECRET_ACCESS_KEY", "test")
        .env_remove("AWS_CA_BUNDLE")
        .timeout(Duration::from_secs(120));
    cmd
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn doctor_reports_where_a_replica_stands() {
    let Some(tools) = Tools::require(true) else {
        return;
    };
    let vfs = tools.vfs.clone().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("app.db");
    let conn = Connection::open(&db).unwrap();
    conn.execute_batch(
        "PRAGMA journal_mode = WAL; CREATE TABLE item(id INTEGER PRIMARY KEY, name TEXT);
         INSERT INTO item(name) VALUES ('a'), ('b');",
    )
    .unwrap();
    let (_s3, endpoint) = start_s3();
    let config = dir.path().join("litestream.yml");
    let socket = dir.path().join("litestream.sock");
    std::fs::write(
        &config,
        format!(
            "socket:\n  enabled: true\n  path: {}\ndbs:\n{}",
            socket.display(),
            config_entry(&db, "app", &endpoint)
        ),
    )
    .unwrap();
    let _replicating = tools.replicate(&config);
    until_listening(&socket);
    conn.execute("INSERT INTO item(name) VALUES ('c')", [])
        .unwrap();
    let synced = Litestream::socket(&socket)
        .sync(&db, Duration::from_secs(30))
        .await
        .unwrap();

    let out = doctor_replica(&replica_url("app", &endpoint), &vfs)
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    let report: Value = serde_json::from_slice(&out).unwrap();
    let replica = &report["replica"];
    assert_eq!(replica["tables"], serde_json::json!(["item"]), "{replica}");
    let position = u64::from_str_radix(replica["position"].as_str().unwrap(), 16).unwrap();
    assert!(position >= synced.txid(), "{replica}");
    assert_eq!(report["summary"]["exit_status"], 0);

    // A bucket that does not exist: nothing to report on, and why.
    let missing = replica_url("app", &endpoint).replace("quicklite/app", "no-such-bucket/app");
    doctor_replica(&missing, &vfs)
        .assert()
        .code(2)
        .stderr(predicates::str::contains("cannot open the replica"));
}
