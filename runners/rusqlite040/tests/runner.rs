//! End-to-end: pipe tiny cells to the built runner binary and check the results it prints.

use quicklite_lab_core::LEDGER_SEED_BLOCKS;
use quicklite_lab_core::runner_testing::{
    assert_completion, assert_custom_measured, assert_custom_rows, assert_long_read_measured,
    assert_measured, assert_orm_measured, assert_queue_backlog, assert_queue_measured,
    assert_throughput_measured, assert_transfers, assert_write_completion, crate_version,
    custom_orders_sql, ledger_files, ledger_files_of, queue_jobs_sql, run_runner, tiny_cell,
    tiny_custom_cell, tiny_long_read_cell, tiny_paced_cell, tiny_throughput_cell,
    tiny_transfers_cell, transfers_sql,
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
fn throughput_checks_every_acknowledged_row() {
    for approach in ["tokio-rusqlite", "deadpool-sqlite"] {
        let dir = tempfile::tempdir().unwrap();
        let result = run(&tiny_throughput_cell(approach, dir.path()));
        let conn = rusqlite::Connection::open(dir.path().join("items.db")).unwrap();
        let rows: i64 = conn
            .query_row("SELECT count(*) FROM items", [], |r| r.get(0))
            .unwrap();
        assert_throughput_measured(&result, rows as u64);
    }
}

#[test]
fn long_reads_run_beside_the_writer() {
    for approach in ["tokio-rusqlite", "deadpool-sqlite"] {
        let dir = tempfile::tempdir().unwrap();
        let result = run(&tiny_long_read_cell(approach, dir.path()));
        assert_long_read_measured(&result);
        assert!(crate_version(&result, "rusqlite").starts_with("0.40"));
    }
}

#[test]
fn tokio_rusqlite_queue() {
    let dir = tempfile::tempdir().unwrap();
    let result = run(&tiny_cell("tokio-rusqlite", "queue", dir.path()));
    assert_queue_measured(&result);
    assert!(crate_version(&result, "rusqlite").starts_with("0.40"));
    let conn = rusqlite::Connection::open(dir.path().join("queue.db")).unwrap();
    assert_queue_backlog(
        conn.query_row(queue_jobs_sql(), [], |r| Ok((r.get(0)?, r.get(1)?)))
            .unwrap(),
    );
}

#[test]
fn tokio_rusqlite_orm() {
    let dir = tempfile::tempdir().unwrap();
    assert_orm_measured(&run(&tiny_cell("tokio-rusqlite", "orm", dir.path())));
}

/// Runs a custom workload on `approach`: seeded from the cell, each transaction timed as a read or a write and by
/// name, and the writes in the file afterwards.
fn assert_custom_runs(approach: &str) {
    let dir = tempfile::tempdir().unwrap();
    let result = run(&tiny_custom_cell(approach, dir.path()));
    assert_custom_measured(&result);
    assert!(crate_version(&result, "rusqlite").starts_with("0.40"));
    let conn = rusqlite::Connection::open(dir.path().join("custom.db")).unwrap();
    let rows = conn
        .query_row(custom_orders_sql(), [], |r| Ok((r.get(0)?, r.get(1)?)))
        .unwrap();
    assert_custom_rows(approach, rows);
}

/// The post's transfers (`examples/workloads/transfers.toml`, in small) on tokio-rusqlite and deadpool-sqlite: two
/// `UPDATE`s of accounts drawn from the power law in one write; money moves and none is made or lost.
#[test]
fn transfers_between_power_law_accounts_keep_the_total() {
    for approach in ["tokio-rusqlite", "deadpool-sqlite"] {
        let dir = tempfile::tempdir().unwrap();
        let result = run(&tiny_transfers_cell(approach, dir.path()));
        let conn = rusqlite::Connection::open(dir.path().join("custom.db")).unwrap();
        let accounts = conn
            .query_row(transfers_sql(), [], |r| {
                Ok((r.get(0)?, r.get(1)?, r.get(2)?))
            })
            .unwrap();
        assert_transfers(approach, &result, accounts);
    }
}

#[test]
fn tokio_rusqlite_custom() {
    assert_custom_runs("tokio-rusqlite");
}

#[test]
fn deadpool_sqlite_custom() {
    assert_custom_runs("deadpool-sqlite");
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
fn tokio_rusqlite_paced_multi_db_has_a_thread_per_connection() {
    let dir = tempfile::tempdir().unwrap();
    let databases = 6;
    let result = run(&tiny_paced_cell("tokio-rusqlite", dir.path(), databases, 4));
    assert_measured_040(&result);
    // 300 ms window, one write every 20 ms on each database.
    assert_completion(&result, 300 / 20 * u64::from(databases));
    assert_eq!(result["open_databases"], databases, "{result:#}");
    // A reader and a writer connection per database, each with its own thread.
    let threads = result["threads"].as_u64().unwrap();
    assert!(threads >= 2 * u64::from(databases), "{threads} threads");
    // The counted writes are in the files (with those of the warm-up and the window's edges).
    let written: i64 = ledger_files_of(dir.path(), databases as usize)
        .iter()
        .map(|path| {
            let conn = rusqlite::Connection::open(path).unwrap();
            let blocks: i64 = conn
                .query_row("SELECT count(*) FROM blocks", [], |row| row.get(0))
                .unwrap();
            blocks - LEDGER_SEED_BLOCKS
        })
        .sum();
    let completed = result["write_completion"]["completed"].as_i64().unwrap();
    assert!(
        written >= completed,
        "{written} written, {completed} counted"
    );
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
