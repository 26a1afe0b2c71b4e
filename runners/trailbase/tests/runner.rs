//! End-to-end: pipe tiny cells to the built runner binary and check the results it prints.

use quicklite_lab_core::LEDGER_SEED_BLOCKS;
use quicklite_lab_core::runner_testing::{
    assert_custom_measured, assert_custom_rows, assert_measured, assert_write_completion,
    crate_version, custom_orders_sql, ledger_files, run_runner, tiny_cell, tiny_custom_cell,
};
use serde_json::{Value, json};

/// Runs this workspace's runner binary on `cell`.
fn run(cell: &Value) -> Value {
    run_runner(env!("CARGO_BIN_EXE_runner-trailbase"), cell)
}

/// A result without failure or errors, from trailbase-sqlite 0.3 on the rusqlite it pins, with the `server`
/// profile's PRAGMAs read back (`busy_timeout` included, which trailbase-sqlite sets itself).
fn assert_clean(result: &Value) {
    assert_eq!(result["failure"], Value::Null, "{result:#}");
    assert_eq!(result["errors"], 0, "{result:#}");
    assert!(crate_version(result, "trailbase-sqlite").starts_with("0.3"));
    assert!(crate_version(result, "rusqlite").starts_with("0.36"));
    let pragmas = &result["env"]["pragmas"];
    assert_eq!(pragmas["journal_mode"], "wal", "{pragmas:#}");
    assert_eq!(pragmas["busy_timeout"], "5000", "{pragmas:#}");
    assert_eq!(pragmas["synchronous"], "1", "{pragmas:#}");
}

/// Operations of one kind (`reads` or `writes`) the result counted.
fn ops(result: &Value, kind: &str) -> u64 {
    result[kind]["ops"].as_u64().unwrap()
}

/// Rows in `items` of the single database of a cell run in `dir`.
fn items(dir: &std::path::Path) -> i64 {
    let conn = rusqlite::Connection::open(dir.join("items.db")).unwrap();
    conn.query_row("SELECT count(*) FROM items", [], |r| r.get(0))
        .unwrap()
}

#[test]
fn trailbase_sqlite_point_read() {
    let dir = tempfile::tempdir().unwrap();
    let result = run(&tiny_cell("trailbase-sqlite", "point-read", dir.path()));
    assert_measured(&result);
    assert_clean(&result);
}

#[test]
fn trailbase_sqlite_insert() {
    let dir = tempfile::tempdir().unwrap();
    let result = run(&tiny_cell("trailbase-sqlite", "insert", dir.path()));
    assert_clean(&result);
    assert!(ops(&result, "writes") > 0, "{result:#}");
    // The counted inserts are in the file (with those of the warm-up), beside the 200 seeded rows.
    let inserted = items(dir.path()) - 200;
    assert!(
        inserted >= ops(&result, "writes") as i64,
        "{inserted} rows inserted: {result:#}"
    );
}

#[test]
fn trailbase_sqlite_mixed() {
    let dir = tempfile::tempdir().unwrap();
    let result = run(&tiny_cell("trailbase-sqlite", "mixed", dir.path()));
    assert_measured(&result);
    assert_clean(&result);
    assert!(ops(&result, "writes") > 0, "{result:#}");
}

#[test]
fn trailbase_sqlite_write_read() {
    let dir = tempfile::tempdir().unwrap();
    let result = run(&tiny_cell("trailbase-sqlite", "write-read", dir.path()));
    assert_clean(&result);
    let (reads, writes) = (ops(&result, "reads"), ops(&result, "writes"));
    assert!(writes > 0, "{result:#}");
    // Each read follows its write; the window may close between the two on each of the 4 tasks.
    assert!(
        reads.abs_diff(writes) <= 4,
        "{reads} reads, {writes} writes"
    );
}

#[test]
fn trailbase_sqlite_multi_db_has_a_connection_per_database() {
    let dir = tempfile::tempdir().unwrap();
    let result = run(&tiny_cell("trailbase-sqlite", "multi-db", dir.path()));
    assert_measured(&result);
    assert_clean(&result);
    assert_write_completion(&result);
    assert_eq!(result["open_databases"], 2, "{result:#}");
    // Each database's `Connection` has a writer thread and at least two reader threads.
    let threads = result["threads"].as_u64().unwrap();
    assert!(threads >= 2 * 3, "{threads} threads");
    // The writers wrote (warm-up included): every database has blocks beyond the seeded ones.
    for path in ledger_files(dir.path()) {
        let conn = rusqlite::Connection::open(&path).unwrap();
        let blocks: i64 = conn
            .query_row("SELECT count(*) FROM blocks", [], |row| row.get(0))
            .unwrap();
        assert!(
            blocks > LEDGER_SEED_BLOCKS,
            "{}: {blocks} blocks",
            path.display()
        );
    }
}

/// A custom workload runs on trailbase-sqlite: seeded from the cell, each transaction timed as a read or a write and
/// by name, and the writes in the file afterwards.
#[test]
fn trailbase_sqlite_custom() {
    let dir = tempfile::tempdir().unwrap();
    let result = run(&tiny_custom_cell("trailbase-sqlite", dir.path()));
    assert_custom_measured(&result);
    assert_clean(&result);
    let conn = rusqlite::Connection::open(dir.path().join("custom.db")).unwrap();
    let rows = conn
        .query_row(custom_orders_sql(), [], |r| Ok((r.get(0)?, r.get(1)?)))
        .unwrap();
    assert_custom_rows("trailbase-sqlite", rows);
}

#[test]
fn sqlite_default_leaves_the_busy_timeout_at_sqlite_s_default() {
    let dir = tempfile::tempdir().unwrap();
    let mut cell = tiny_cell("trailbase-sqlite", "point-read", dir.path());
    cell["profile"] = json!("sqlite-default");
    let result = run(&cell);
    assert_eq!(result["failure"], Value::Null, "{result:#}");
    let pragmas = &result["env"]["pragmas"];
    assert_eq!(pragmas["busy_timeout"], "0", "{pragmas:#}");
    assert_eq!(pragmas["journal_mode"], "delete", "{pragmas:#}");
}

#[test]
fn a_fullmutex_cell_is_measured() {
    let dir = tempfile::tempdir().unwrap();
    let mut cell = tiny_cell("trailbase-sqlite", "mixed", dir.path());
    cell["mutex"] = json!("fullmutex");
    let result = run(&cell);
    assert_measured(&result);
    assert_clean(&result);
}
