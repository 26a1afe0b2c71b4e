//! End-to-end: pipe tiny cells to the built runner binary and check the results it prints, then the files it left
//! (read back through Turso).

use quicklite_lab_core::runner_testing::{
    assert_queue_measured, crate_version, run_runner, tiny_cell, tiny_custom_cell,
    tiny_throughput_cell,
};
use serde_json::{Value, json};

/// Runs this workspace's runner binary on `cell`.
fn run(cell: &Value) -> Value {
    run_runner(env!("CARGO_BIN_EXE_runner-turso"), cell)
}

/// The journal mode each approach reads back.
fn journal_mode(approach: &str) -> &'static str {
    match approach {
        "turso-mvcc" => "mvcc",
        _ => "wal",
    }
}

/// A result without failure or errors, from turso 0.8, with the SQLite version it is compatible with and the
/// `server` profile's PRAGMAs read back: those Turso has as asked, those it lacks said so.
fn assert_clean(result: &Value, approach: &str) {
    assert_eq!(result["failure"], Value::Null, "{result:#}");
    assert_eq!(result["errors"], 0, "{result:#}");
    assert!(crate_version(result, "turso").starts_with("0.8"));
    let env = &result["env"];
    let version = env["sqlite_version"].as_str().unwrap();
    assert!(
        version.starts_with("3.") && version.contains("(turso 0.8"),
        "{version}"
    );
    let pragmas = &env["pragmas"];
    assert_eq!(
        pragmas["journal_mode"],
        journal_mode(approach),
        "{pragmas:#}"
    );
    assert_eq!(pragmas["busy_timeout"], "5000", "{pragmas:#}");
    assert_eq!(pragmas["mmap_size"], "unsupported by turso", "{pragmas:#}");
    assert!(
        result["cpu_per_op_us"].as_f64().unwrap() > 0.0,
        "{result:#}"
    );
}

/// Operations of one kind (`reads` or `writes`) the result counted.
fn ops(result: &Value, kind: &str) -> u64 {
    result[kind]["ops"].as_u64().unwrap()
}

/// The integers of the first row `sql` returns from the database file `name` of `dir`, read through Turso.
fn query(dir: &std::path::Path, name: &str, sql: &str) -> Vec<i64> {
    let path = dir.join(name);
    tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap()
        .block_on(async {
            let db = turso::Builder::new_local(path.to_str().unwrap())
                .build()
                .await
                .unwrap();
            let conn = db.connect().unwrap();
            let row = conn
                .prepare(sql)
                .await
                .unwrap()
                .query_row(())
                .await
                .unwrap();
            (0..row.column_count())
                .map(|i| row.get::<i64>(i).unwrap())
                .collect()
        })
}

const APPROACHES: [&str; 2] = ["turso", "turso-mvcc"];

#[test]
fn point_read() {
    for approach in APPROACHES {
        let dir = tempfile::tempdir().unwrap();
        let result = run(&tiny_cell(approach, "point-read", dir.path()));
        assert_clean(&result, approach);
        assert!(ops(&result, "reads") > 0, "{result:#}");
        assert_eq!(result["env"]["pragmas"]["synchronous"], "1", "NORMAL");
    }
}

#[test]
fn insert_leaves_every_counted_row_in_the_file() {
    for approach in APPROACHES {
        let dir = tempfile::tempdir().unwrap();
        let result = run(&tiny_cell(approach, "insert", dir.path()));
        assert_clean(&result, approach);
        let writes = ops(&result, "writes");
        assert!(writes > 0, "{result:#}");
        // The counted inserts are in the file (with those of the warm-up), beside the 200 seeded rows.
        let rows = query(dir.path(), "items.db", "SELECT count(*) FROM items")[0];
        assert!(rows - 200 >= writes as i64, "{rows} rows: {result:#}");
    }
}

#[test]
fn mixed_and_write_read() {
    for approach in APPROACHES {
        for workload in ["mixed", "write-read"] {
            let dir = tempfile::tempdir().unwrap();
            let result = run(&tiny_cell(approach, workload, dir.path()));
            assert_clean(&result, approach);
            let (reads, writes) = (ops(&result, "reads"), ops(&result, "writes"));
            assert!(reads > 0 && writes > 0, "{approach} {workload}: {result:#}");
            if workload == "write-read" {
                // Each read follows its write; the window may close between the two on each of the 4 tasks.
                assert!(
                    reads.abs_diff(writes) <= 4,
                    "{reads} reads, {writes} writes"
                );
            }
        }
    }
}

#[test]
fn queue_cycles_leave_the_backlog() {
    for approach in APPROACHES {
        let dir = tempfile::tempdir().unwrap();
        let result = run(&tiny_cell(approach, "queue", dir.path()));
        assert_queue_measured(&result);
        assert_clean(&result, approach);
        let jobs = query(
            dir.path(),
            "queue.db",
            "SELECT count(*), count(claimed_by) FROM jobs",
        );
        assert_eq!(
            jobs,
            [200, 0],
            "{approach}: the backlog, nothing left claimed"
        );
    }
}

#[test]
fn throughput_checks_every_acknowledged_row() {
    for approach in APPROACHES {
        let dir = tempfile::tempdir().unwrap();
        let result = run(&tiny_throughput_cell(approach, dir.path()));
        assert_clean(&result, approach);
        assert_eq!(result["env"]["pragmas"]["synchronous"], "2", "FULL");
        let transactions = ops(&result, "writes");
        assert!(transactions > 0, "{result:#}");
        let rows = query(dir.path(), "items.db", "SELECT count(*) FROM items")[0];
        assert!(
            rows as u64 >= 200 + 100 * transactions,
            "{rows} rows for {transactions} transactions"
        );
    }
}

#[test]
fn custom_workload() {
    for approach in APPROACHES {
        let dir = tempfile::tempdir().unwrap();
        let result = run(&tiny_custom_cell(approach, dir.path()));
        assert_clean(&result, approach);
        let operations = result["operations"].as_array().unwrap();
        assert_eq!(operations[0]["stats"]["ops"], result["reads"]["ops"]);
        assert_eq!(operations[1]["stats"]["ops"], result["writes"]["ops"]);
        assert!(ops(&result, "writes") > 0, "{result:#}");
        let rows = query(dir.path(), "custom.db", "SELECT count(*) FROM orders")[0];
        let inserted = query(
            dir.path(),
            "custom.db",
            "SELECT count(*) FROM orders WHERE id >= 1000",
        )[0];
        assert!(inserted > 0, "{approach}: nothing inserted");
        assert_eq!(rows, 200 + inserted, "{approach}");
    }
}

#[test]
fn what_turso_lacks_fails_the_cell_with_the_reason() {
    let dir = tempfile::tempdir().unwrap();
    let mut cell = tiny_cell("turso", "point-read", dir.path());
    cell["synchronous"] = json!("extra");
    let failure = run(&cell)["failure"].as_str().unwrap().to_owned();
    assert!(
        failure.contains("unsupported") && failure.contains("EXTRA"),
        "{failure}"
    );
    let mut cell = tiny_cell("turso", "point-read", dir.path());
    cell["mutex"] = json!("fullmutex");
    let failure = run(&cell)["failure"].as_str().unwrap().to_owned();
    assert!(failure.contains("unsupported"), "{failure}");
    let cell = tiny_cell("turso-mvcc", "multi-db", dir.path());
    let failure = run(&cell)["failure"].as_str().unwrap().to_owned();
    assert!(
        failure.contains("unsupported") && failure.contains("multi-db"),
        "{failure}"
    );
}
