//! End-to-end: pipe tiny cells to the built runner binary and check the results it prints.

use quicklite_lab_core::LEDGER_SEED_BLOCKS;
use quicklite_lab_core::runner_testing::{
    assert_custom_measured, assert_custom_rows, assert_held_tx_measured, assert_measured,
    assert_write_completion, crate_version, custom_orders_sql, item_log_sql, ledger_files,
    run_runner, tiny_cell, tiny_custom_cell, tiny_held_tx_cell,
};
use serde_json::{Value, json};
use sqlx::Connection;

/// Runs this workspace's runner binary on `cell`.
fn run(cell: &Value) -> Value {
    run_runner(env!("CARGO_BIN_EXE_runner-sqlx"), cell)
}

/// The shared checks, plus sqlx's version and the profile's `synchronous` applied through its connect options.
fn assert_measured_sqlx(result: &Value) {
    assert_measured(result);
    assert_eq!(result["env"]["pragmas"]["synchronous"], "1");
    assert!(crate_version(result, "sqlx").starts_with("0.9"));
}

#[test]
fn sqlx_point_read() {
    let dir = tempfile::tempdir().unwrap();
    assert_measured_sqlx(&run(&tiny_cell("sqlx", "point-read", dir.path())));
}

#[test]
fn sqlx_multi_db_sleeps_inside_the_write() {
    let dir = tempfile::tempdir().unwrap();
    let result = run(&tiny_cell("sqlx", "multi-db", dir.path()));
    assert_measured_sqlx(&result);
    assert_write_completion(&result);
    // Every write holds its transaction for the 20 ms delay (when any completed inside the loaded window).
    if result["writes"]["ops"].as_u64().unwrap() > 0 {
        assert!(
            result["writes"]["p50_us"].as_f64().unwrap() >= 20_000.0,
            "{result:#}"
        );
    }
    // The writers wrote (warm-up included): every database has blocks beyond the seeded ones.
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    for path in ledger_files(dir.path()) {
        let blocks: i64 = runtime.block_on(async {
            let url = format!("sqlite://{}", path.display());
            let mut conn = sqlx::SqliteConnection::connect(&url).await.unwrap();
            sqlx::query_scalar("SELECT count(*) FROM blocks")
                .fetch_one(&mut conn)
                .await
                .unwrap()
        });
        assert!(
            blocks > LEDGER_SEED_BLOCKS,
            "{}: {blocks} blocks",
            path.display()
        );
    }
}

/// A custom workload runs on sqlx: seeded from the cell, each transaction timed as a read or a write and by name,
/// and the writes in the file afterwards.
#[test]
fn sqlx_custom() {
    let dir = tempfile::tempdir().unwrap();
    let result = run(&tiny_custom_cell("sqlx", dir.path()));
    assert_custom_measured(&result);
    assert!(crate_version(&result, "sqlx").starts_with("0.9"));
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let rows: (i64, i64) = runtime.block_on(async {
        let url = format!("sqlite://{}", dir.path().join("custom.db").display());
        let mut conn = sqlx::SqliteConnection::connect(&url).await.unwrap();
        sqlx::query_as(custom_orders_sql())
            .fetch_one(&mut conn)
            .await
            .unwrap()
    });
    assert_custom_rows("sqlx", rows);
}

#[test]
fn sqlite_default_turns_sqlx_foreign_keys_back_off() {
    let dir = tempfile::tempdir().unwrap();
    let mut cell = tiny_cell("sqlx", "point-read", dir.path());
    cell["profile"] = json!("sqlite-default");
    let result = run(&cell);
    assert_eq!(result["env"]["pragmas"]["foreign_keys"], "0", "{result:#}");
    assert_eq!(
        result["env"]["pragmas"]["journal_mode"], "delete",
        "{result:#}"
    );
}

/// `held-tx` on sqlx: each transaction a pooled connection's `BEGIN IMMEDIATE`, the think awaited inside it, and the
/// log checked by the runner (no lost update) and here (a change per transaction).
#[test]
fn sqlx_held_tx() {
    let dir = tempfile::tempdir().unwrap();
    let result = run(&tiny_held_tx_cell("sqlx", dir.path()));
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let logged: i64 = runtime.block_on(async {
        let url = format!("sqlite://{}", dir.path().join("items.db").display());
        let mut conn = sqlx::SqliteConnection::connect(&url).await.unwrap();
        sqlx::query_scalar(item_log_sql())
            .fetch_one(&mut conn)
            .await
            .unwrap()
    });
    assert_held_tx_measured(&result, logged as u64);
}
