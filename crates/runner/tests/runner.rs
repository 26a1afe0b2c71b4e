//! End-to-end: pipe a tiny cell to the built runner binary and check the result it prints.

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

/// Runs the runner on `cell`, asserting it exits 0 and prints exactly one JSON document.
fn run(cell: &Value) -> Value {
    let mut child = Command::new(env!("CARGO_BIN_EXE_quicklite-runner"))
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
        "runner failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).expect("stdout is one JSON document")
}

/// Checks a successful point-read result: operations, no errors, and the server profile read back.
fn assert_measured_with_server_profile(result: &Value) {
    assert_eq!(result["failure"], Value::Null, "{result:#}");
    assert!(result["reads"]["ops"].as_u64().unwrap() > 0, "{result:#}");
    assert_eq!(result["errors"], 0, "{result:#}");
    let env = &result["env"];
    assert!(!env["sqlite_version"].as_str().unwrap().is_empty());
    assert!(!env["compile_options"].as_array().unwrap().is_empty());
    assert!(
        env["crate_versions"]["rusqlite"]
            .as_str()
            .unwrap()
            .starts_with("0.41")
    );
    let pragmas = &env["pragmas"];
    assert_eq!(pragmas["journal_mode"], "wal", "{pragmas:#}");
    assert_eq!(pragmas["synchronous"], "1", "NORMAL; {pragmas:#}");
    assert_eq!(pragmas["busy_timeout"], "5000", "{pragmas:#}");
    assert_eq!(pragmas["cache_size"], "-32000", "{pragmas:#}");
    assert!(
        env["memstatus"].as_str().unwrap().starts_with("off"),
        "{env:#}"
    );
}

#[test]
fn direct_blocking_point_read() {
    let dir = tempfile::tempdir().unwrap();
    let result = run(&tiny_cell("direct-blocking", "point-read", dir.path()));
    assert_measured_with_server_profile(&result);
}

#[test]
fn quicklite_point_read() {
    let dir = tempfile::tempdir().unwrap();
    let result = run(&tiny_cell("quicklite", "point-read", dir.path()));
    assert_measured_with_server_profile(&result);
}

#[test]
fn spawn_blocking_multi_db_reports_write_completion() {
    let dir = tempfile::tempdir().unwrap();
    let result = run(&tiny_cell("spawn-blocking", "multi-db", dir.path()));
    assert_eq!(result["failure"], Value::Null, "{result:#}");
    assert_eq!(result["errors"], 0, "{result:#}");
    assert!(result["writes"]["ops"].as_u64().unwrap() > 0, "{result:#}");
    // 300 ms / 20 ms × 2 databases.
    assert_eq!(result["write_completion"]["expected"], 30, "{result:#}");
}

#[test]
fn sqlite_default_profile_touches_no_pragma() {
    let dir = tempfile::tempdir().unwrap();
    let mut cell = tiny_cell("direct-blocking", "mixed", dir.path());
    cell["profile"] = json!("sqlite-default");
    let result = run(&cell);
    assert_eq!(result["failure"], Value::Null, "{result:#}");
    assert_eq!(result["env"]["pragmas"]["journal_mode"], "delete");
}

#[test]
fn unknown_approach_is_a_failed_result() {
    let dir = tempfile::tempdir().unwrap();
    let result = run(&tiny_cell("carrier-pigeon", "point-read", dir.path()));
    let failure = result["failure"].as_str().expect("failure is set");
    assert!(
        failure.contains("unknown approach `carrier-pigeon`"),
        "{failure}"
    );
    assert_eq!(result["reads"]["ops"], 0);
}

#[test]
fn unknown_workload_is_a_failed_result() {
    let dir = tempfile::tempdir().unwrap();
    let result = run(&tiny_cell("direct-blocking", "full-scan", dir.path()));
    let failure = result["failure"].as_str().expect("failure is set");
    assert!(
        failure.contains("unknown workload `full-scan`"),
        "{failure}"
    );
}

#[test]
fn approaches_flag_lists_every_approach() {
    let output = Command::new(env!("CARGO_BIN_EXE_quicklite-runner"))
        .arg("--approaches")
        .output()
        .expect("the runner binary starts");
    assert!(output.status.success());
    let names: Vec<String> = serde_json::from_slice(&output.stdout).expect("a JSON list");
    for name in [
        "direct-blocking",
        "spawn-blocking",
        "per-request",
        "async-sqlite",
        "quicklite",
    ] {
        assert!(names.iter().any(|n| n == name), "{names:?}");
    }
}
