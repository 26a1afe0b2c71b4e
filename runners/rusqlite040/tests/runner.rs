//! End-to-end: pipe tiny cells to the built runner binary and check the results it prints.

use quicklite_lab_core::LEDGER_SEED_BLOCKS;
use quicklite_lab_core::runner_testing::{
    assert_measured, assert_write_completion, crate_version, ledger_files, run_runner, tiny_cell,
};
use serde_json::{Value, json};

/// Runs this workspace's runner binary on `cell`.
fn run(cell: &Value) -> Value {
    run_runner(env!("CARGO_BIN_EXE_runner-rusqlite040"), cell)
}

/// The shared checks, plus the rusqlite this runner must link.
fn assert_measured_040(result: &Value) {
    assert_measured(result);
    assert!(crate_version(result, "rusqlite").starts_with("0.40"));
}

#[test]
fn tokio_rusqlite_point_read() {
    let dir = tempfile::tempdir().unwrap();
    assert_measured_040(&run(&tiny_cell("tokio-rusqlite", "point-read", dir.path())));
}

#[test]
fn deadpool_sqlite_multi_db() {
    let dir = tempfile::tempdir().unwrap();
    let result = run(&tiny_cell("deadpool-sqlite", "multi-db", dir.path()));
    assert_measured_040(&result);
    assert_write_completion(&result);
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
