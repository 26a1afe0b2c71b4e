//! End-to-end: pipe tiny cells to the built runner binary and check the results it prints.

use std::io::Write;
use std::process::{Command, Stdio};

use serde_json::{Value, json};

/// A tiny cell: 300 ms measured after 100 ms of warm-up, 4 tasks, 200 rows.
fn tiny_cell(approach: &str, workload: &str, dir: &std::path::Path) -> Value {
    json!({
        "workload": workload,
        "approach": approach,
        "duration_ms": 300,
        "warmup_ms": 100,
        "concurrency": 4,
        "worker_threads": 2,
        "profile": "server",
        "synchronous": null,
        "memstatus": false,
        "mutex": "nomutex",
        "rows": 200,
        "multi_db": if workload == "multi-db" {
            json!({"num_databases": 2, "readers": 2, "write_delay_ms": 20})
        } else {
            Value::Null
        },
        "dir": dir.to_str().expect("temporary directories have UTF-8 paths here"),
        "seed": 7,
    })
}

/// Runs the runner on `cell`, asserting it exits 0 and prints one JSON document.
fn run(cell: &Value) -> Value {
    let mut child = Command::new(env!("CARGO_BIN_EXE_runner-rusqlite040"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the runner binary starts");
    child
        .stdin
        .take()
        .expect("stdin is piped")
        .write_all(cell.to_string().as_bytes())
        .expect("the runner reads its cell");
    let output = child.wait_with_output().expect("the runner finishes");
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).expect("stdout is one JSON document")
}

fn assert_measured(result: &Value) {
    assert_eq!(result["failure"], Value::Null, "{result:#}");
    assert_eq!(result["errors"], 0, "{result:#}");
    assert!(result["reads"]["ops"].as_u64().unwrap() > 0, "{result:#}");
    assert_eq!(result["env"]["pragmas"]["journal_mode"], "wal");
    assert!(
        result["env"]["crate_versions"]["rusqlite"]
            .as_str()
            .unwrap()
            .starts_with("0.40")
    );
}

#[test]
fn tokio_rusqlite_point_read() {
    let dir = tempfile::tempdir().unwrap();
    assert_measured(&run(&tiny_cell("tokio-rusqlite", "point-read", dir.path())));
}

#[test]
fn deadpool_sqlite_multi_db() {
    let dir = tempfile::tempdir().unwrap();
    let result = run(&tiny_cell("deadpool-sqlite", "multi-db", dir.path()));
    assert_measured(&result);
    assert!(result["writes"]["ops"].as_u64().unwrap() > 0, "{result:#}");
}

#[test]
fn deadpool_sqlite_refuses_fullmutex() {
    let dir = tempfile::tempdir().unwrap();
    let mut cell = tiny_cell("deadpool-sqlite", "point-read", dir.path());
    cell["mutex"] = json!("fullmutex");
    let result = run(&cell);
    assert!(
        result["failure"].as_str().unwrap().contains("fullmutex"),
        "{result:#}"
    );
}
