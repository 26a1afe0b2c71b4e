//! Bad input exits non-zero with a message that says what to do, before anything is built or written.

use std::path::Path;

use assert_cmd::Command;
use predicates::prelude::*;

fn quicklite() -> Command {
    Command::cargo_bin("quicklite").expect("the quicklite binary is built for its tests")
}

/// Runs `bench` with `args` into a fresh directory and checks that it fails with `message` and leaves no
/// results directory behind.
///
/// The runner named is a program that does not exist, so input the lab wrongly accepted fails fast (on the
/// runner) instead of building and running a whole benchmark.
fn rejects(args: &[&str], message: &str) {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("run");
    quicklite()
        .arg("bench")
        .args(args)
        .args(["--no-build", "--runner", "/nonexistent/runner", "--output"])
        .arg(&out)
        .timeout(std::time::Duration::from_secs(60))
        .assert()
        .failure()
        .stderr(predicate::str::contains(message));
    assert!(!out.exists(), "{args:?} created {}", out.display());
}

#[test]
fn unknown_approach_lists_the_valid_ones() {
    let valid = "[possible values: ceiling, direct-blocking, spawn-blocking, per-request, tokio-rusqlite, \
                 deadpool-sqlite, async-sqlite, sqlx, trailbase-sqlite, turso, quicklite, go-mattn, go-modernc, \
                 go-zombiezen, node-better-sqlite3, node-sqlite, quicklite-timeouts, quicklite-writes-first, \
                 quicklite-no-inline, quicklite-subscribed, quicklite-subscribed-100, quicklite-closure, quicklite-feed, \
                 turso-mvcc, ceiling-async, postgres]";
    rejects(
        &["--approaches", "quicklite,tokio-sqlite"],
        "invalid value 'tokio-sqlite' for '--approaches <NAMES>'",
    );
    rejects(&["--approaches", "quicklite,tokio-sqlite"], valid);
    rejects(
        &["--baseline", "tokio"],
        "invalid value 'tokio' for '--baseline <APPROACH>'",
    );
    rejects(&["--baseline", "tokio"], valid);
}

#[test]
fn unknown_workload_lists_the_valid_ones() {
    rejects(
        &["--workloads", "reads"],
        "unknown workload `reads` (valid workloads: point-read, insert, mixed, write-read, multi-db, queue, http, orm, \
         throughput, long-read, held-tx)",
    );
}

#[test]
fn contradictory_options_name_the_option() {
    rejects(
        &["--quick", "--readers", "0"],
        "invalid --readers: multi-db needs at least one reader",
    );
    rejects(
        &["--duration", "0"],
        "invalid --duration: must be greater than zero",
    );
    rejects(&["--duration", "-1"], "error");
    rejects(&["--workers", "0"], "invalid --workers");
    rejects(&["--num-databases", "0"], "invalid --num-databases");
    rejects(
        &["--profiles", "fast"],
        "unknown value `fast` (valid: server, sqlite-default)",
    );
    rejects(&["--synchronous", "extra-full"], "invalid --synchronous");
    rejects(
        &["--approaches", "postgres"],
        "`postgres` needs a server: add --with-postgres or --postgres-url URL",
    );
    rejects(
        &["--build-profiles", "tuned,fastest"],
        "invalid --build-profiles: unknown profile `fastest` (valid: default, tuned, threadsafe2",
    );
    rejects(&["--mutex", "none"], "invalid --mutex");
    rejects(&["--memstatus", "maybe"], "invalid value 'maybe'");
    rejects(&["--timeout", "0"], "invalid --timeout");
    rejects(
        &["--write-ratio", "0.01,2"],
        "`2` is more than every operation (at most 1 or 100%)",
    );
    rejects(
        &["--rate", "1000,fast"],
        "`fast` is not a rate in requests per second",
    );
    rejects(
        &["--rate", "0"],
        "a rate is at least one request per second",
    );
    rejects(
        &["--rate", "1000", "--workloads", "point-read,queue"],
        "invalid --rate: queue cannot run at a fixed rate (only point-read, insert, mixed can)",
    );
    rejects(
        &["--long-read-ms", "300-100"],
        "`300-100`: the shortest time comes first (100-300)",
    );
    rejects(
        &["--long-read-ms", "100-300,soon"],
        "`soon` is not a time in milliseconds or a range of them",
    );
    rejects(
        &["--long-read-every", "1"],
        "invalid --long-read-every: one read in 1 long leaves no short read",
    );
    rejects(
        &["--long-read-every", "100,often"],
        "invalid value 'often' for '--long-read-every <N,N>'",
    );
    rejects(
        &["--long-read-ms", "100-2000", "--duration", "1"],
        "invalid --long-read-ms: a long read of up to 2000 ms does not fit the measured window of 1 s (--duration)",
    );
    rejects(
        &["--long-read-every", "100", "--rate", "1000"],
        "invalid --rate: long-read cannot run at a fixed rate",
    );
    rejects(
        &["--write-mode", "lazy"],
        "invalid --write-mode: unknown value `lazy` (valid: blocking, paced)",
    );
    rejects(
        &["--workloads", "multi-db", "--total-readers", "0"],
        "invalid --total-readers",
    );
    rejects(
        &["--readers", "3", "--total-readers", "8"],
        "cannot be used with",
    );
}

#[test]
fn an_unwritable_results_directory_is_reported_before_any_cell_runs() {
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("a-file");
    std::fs::write(&file, "not a directory").unwrap();
    quicklite()
        .args([
            "bench",
            "--quick",
            "--no-build",
            "--runner",
            "/nonexistent/runner",
            "--output",
        ])
        .arg(file.join("run"))
        .assert()
        .failure()
        .stderr(predicate::str::contains("is not writable"));
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "not a directory");
}

#[test]
fn a_missing_runner_program_leaves_no_results_directory() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("run");
    quicklite()
        .args([
            "bench",
            "--approaches",
            "quicklite",
            "--runner",
            "/nonexistent/runner",
            "--output",
        ])
        .arg(&out)
        .assert()
        .failure()
        .stderr(predicate::str::contains("cannot start it"));
    assert!(!out.exists());
}

#[test]
fn report_on_a_missing_csv_says_which_file() {
    quicklite()
        .args(["report", "/nonexistent/results.csv"])
        .assert()
        .failure()
        .stderr(predicate::str::contains("/nonexistent/results.csv"));
}

#[test]
fn report_on_a_malformed_csv_names_the_record_and_writes_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let csv = tmp.path().join("results.csv");
    std::fs::write(&csv, "workload,approach\npoint-read,quicklite\n").unwrap();
    quicklite()
        .arg("report")
        .arg(&csv)
        .assert()
        .failure()
        .stderr(predicate::str::contains("record 1"));
    let files: Vec<_> = std::fs::read_dir(tmp.path()).unwrap().collect();
    assert_eq!(files.len(), 1, "only the CSV itself");
    assert!(Path::new(&csv).exists());
}

/// Writes a workload file with `replace` applied to a good one, and checks that `bench` refuses it with `message`
/// (its line named) before anything runs.
fn rejects_workload_file(replace: (&str, &str), message: &str) {
    const GOOD: &str = r#"schema = "CREATE TABLE t (id INTEGER PRIMARY KEY, name TEXT)"

[[seed]]
table = "t"
rows = 100
columns = { id = { sequence = 1 }, name = { text = 8 } }

[[transaction]]
name = "read"
weight = 3
params = { id = { uniform = [1, 100] } }
sql = "SELECT name FROM t WHERE id = :id"
"#;
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("bad.toml");
    std::fs::write(&file, GOOD.replace(replace.0, replace.1)).unwrap();
    assert_ne!(
        GOOD.replace(replace.0, replace.1),
        GOOD,
        "{replace:?} changes nothing"
    );
    rejects(&["--workload-file", file.to_str().unwrap()], message);
}

#[test]
fn a_bad_workload_file_is_refused_at_its_line_before_anything_runs() {
    rejects_workload_file(
        ("weight = 3", "wieght = 3"),
        "bad.toml:10: unknown field `wieght`",
    );
    rejects_workload_file(
        ("WHERE id = :id", "WHER id = :id"),
        "bad.toml:12: transaction `read` fails: near \"id\": syntax error",
    );
    rejects_workload_file(
        ("WHERE id = :id", "WHERE id = :key"),
        "bad.toml:12: parameter `:key` of transaction `read` never gets a value",
    );
    rejects_workload_file(
        ("weight = 3", "weight = 0"),
        "bad.toml:10: transaction `read` has a weight of 0",
    );
    rejects_workload_file(
        (
            "name = { text = 8 }",
            "name = { text = 8 }, nmae = { text = 3 }",
        ),
        "bad.toml:4: cannot seed table `t`: table t has no column named nmae",
    );
}
