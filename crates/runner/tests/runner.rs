//! End-to-end: pipe a tiny cell to the built runner binary and check the result it prints.

use std::process::Command;

use quicklite_lab_core::LEDGER_SEED_BLOCKS;
use quicklite_lab_core::runner_testing::{
    assert_completion, assert_custom_measured, assert_custom_rows, assert_held_tx_measured,
    assert_long_read_measured, assert_measured, assert_orm_measured, assert_queue_backlog,
    assert_queue_measured, assert_throughput_measured, assert_transfers, assert_write_completion,
    crate_version, custom_orders_sql, item_log_sql, ledger_files, ledger_files_of, queue_jobs_sql,
    run_runner, tiny_cell, tiny_custom_cell, tiny_held_tx_cell, tiny_long_read_cell,
    tiny_paced_cell, tiny_throughput_cell, tiny_transfers_cell, transfers_sql,
};
use serde_json::{Value, json};

/// Runs this workspace's runner binary on `cell`.
fn run(cell: &Value) -> Value {
    run_runner(env!("CARGO_BIN_EXE_quicklite-runner"), cell)
}

/// Checks a successful point-read result: the shared checks, plus this workspace's rusqlite and the rest of the
/// server profile read back.
fn assert_measured_with_server_profile(result: &Value) {
    assert_measured(result);
    let env = &result["env"];
    assert!(crate_version(result, "rusqlite").starts_with("0.41"));
    let pragmas = &env["pragmas"];
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
fn the_ceiling_through_the_runtime_runs_its_workloads_with_the_cells_settings() {
    let dir = tempfile::tempdir().unwrap();
    let result = run(&tiny_cell("ceiling-async", "point-read", dir.path()));
    assert_measured_with_server_profile(&result);
    for workload in ["insert", "mixed", "write-read"] {
        let dir = tempfile::tempdir().unwrap();
        let result = run(&tiny_cell("ceiling-async", workload, dir.path()));
        assert_eq!(result["failure"], Value::Null, "{workload}: {result:#}");
        assert_eq!(result["errors"], 0, "{workload}: {result:#}");
        assert!(
            result["writes"]["ops"].as_u64().unwrap() > 0,
            "{workload}: {result:#}"
        );
        if workload != "insert" {
            assert!(
                result["reads"]["ops"].as_u64().unwrap() > 0,
                "{workload}: {result:#}"
            );
        }
    }
}

/// Runs a tiny queue cell with `approach` and checks the result and what is left in the queue.
fn queue_round_trip(approach: &str) {
    let dir = tempfile::tempdir().unwrap();
    let result = run(&tiny_cell(approach, "queue", dir.path()));
    assert_queue_measured(&result);
    let conn = rusqlite::Connection::open(dir.path().join("queue.db")).unwrap();
    assert_queue_backlog(
        conn.query_row(queue_jobs_sql(), [], |r| Ok((r.get(0)?, r.get(1)?)))
            .unwrap(),
    );
}

#[test]
fn quicklite_queue() {
    queue_round_trip("quicklite");
}

#[test]
fn direct_blocking_queue() {
    queue_round_trip("direct-blocking");
}

#[test]
fn http_is_served_to_a_load_generator_in_another_process() {
    for approach in ["quicklite", "per-request"] {
        let dir = tempfile::tempdir().unwrap();
        let result = run(&tiny_cell(approach, "http", dir.path()));
        // Requests are counted by the load generator (a second process of this executable), CPU by the service.
        assert_measured_with_server_profile(&result);
        assert!(result["cpu_secs"].as_f64().unwrap() > 0.0, "{result:#}");
    }
}

#[test]
fn the_orm_suite_runs_every_operation_both_ways() {
    for approach in ["direct-blocking", "quicklite"] {
        let dir = tempfile::tempdir().unwrap();
        let result = run(&tiny_cell(approach, "orm", dir.path()));
        assert_orm_measured(&result);
    }
}

#[test]
fn quicklite_point_read() {
    let dir = tempfile::tempdir().unwrap();
    let result = run(&tiny_cell("quicklite", "point-read", dir.path()));
    assert_measured_with_server_profile(&result);
}

#[test]
fn quicklite_with_timeouts_reads_and_writes() {
    let dir = tempfile::tempdir().unwrap();
    let result = run(&tiny_cell("quicklite-timeouts", "point-read", dir.path()));
    assert_measured_with_server_profile(&result);
    let memstatus = result["env"]["memstatus"].as_str().unwrap();
    assert!(
        memstatus.contains("quicklite::setup::configure"),
        "{memstatus}"
    );
    let dir = tempfile::tempdir().unwrap();
    let result = run(&tiny_cell("quicklite-timeouts", "insert", dir.path()));
    assert_eq!(
        (&result["failure"], &result["errors"]),
        (&Value::Null, &Value::from(0)),
        "{result}"
    );
    assert!(result["writes"]["ops"].as_u64().unwrap() > 0, "{result}");
}

#[test]
fn quicklite_write_read_times_each_write_and_the_read_after_it() {
    let dir = tempfile::tempdir().unwrap();
    let result = run(&tiny_cell("quicklite", "write-read", dir.path()));
    assert_eq!(result["errors"], 0, "{result}");
    let (reads, writes) = (
        result["reads"]["ops"].as_u64().unwrap(),
        result["writes"]["ops"].as_u64().unwrap(),
    );
    assert!(writes > 0, "{result}");
    // Each read follows its write; the window may close between the two on each of the 4 tasks.
    assert!(
        reads.abs_diff(writes) <= 4,
        "{reads} reads, {writes} writes"
    );
}

#[test]
fn the_ceiling_reads_and_writes_on_plain_connections() {
    let dir = tempfile::tempdir().unwrap();
    let result = run(&tiny_cell("ceiling", "point-read", dir.path()));
    assert_measured_with_server_profile(&result);

    let dir = tempfile::tempdir().unwrap();
    let result = run(&tiny_cell("ceiling", "insert", dir.path()));
    assert_eq!(
        (&result["failure"], &result["errors"]),
        (&Value::Null, &Value::from(0)),
        "{result}"
    );
    let inserted = result["writes"]["ops"].as_u64().unwrap();
    assert!(inserted > 0, "{result}");
    // Every counted insert is in the file (and those that completed outside the window too).
    let conn = rusqlite::Connection::open(dir.path().join("items.db")).unwrap();
    let rows: i64 = conn
        .query_row("SELECT count(*) FROM items", [], |r| r.get(0))
        .unwrap();
    let rows = rows as u64;
    let seeded = tiny_cell("ceiling", "insert", dir.path())["rows"]
        .as_u64()
        .unwrap();
    assert!(rows >= seeded + inserted, "{rows} rows, {inserted} inserts");

    let dir = tempfile::tempdir().unwrap();
    let result = run(&tiny_cell("ceiling", "mixed", dir.path()));
    assert_eq!(result["errors"], 0, "{result}");
    assert!(result["writes"]["ops"].as_u64().unwrap() > 0, "{result}");

    let dir = tempfile::tempdir().unwrap();
    let result = run(&tiny_cell("ceiling", "orm", dir.path()));
    let failure = result["failure"].as_str().unwrap();
    assert!(failure.contains("not for orm"), "{failure}");
}

#[test]
fn the_ceiling_runs_queue_cycles_and_leaves_no_job_claimed() {
    let dir = tempfile::tempdir().unwrap();
    let result = run(&tiny_cell("ceiling", "queue", dir.path()));
    assert_eq!(
        (&result["failure"], &result["errors"]),
        (&Value::Null, &Value::from(0)),
        "{result}"
    );
    let operations = result["operations"].as_array().unwrap();
    let cycles = operations
        .iter()
        .find(|op| op["name"] == "cycle")
        .and_then(|op| op["stats"]["ops"].as_u64())
        .unwrap();
    assert!(cycles > 0, "{result}");
    // Each cycle published a job and acknowledged the one it claimed: the backlog is as seeded, none claimed.
    let conn = rusqlite::Connection::open(dir.path().join("queue.db")).unwrap();
    let (jobs, claimed): (i64, i64) = conn
        .query_row("SELECT count(*), count(claimed_by) FROM jobs", [], |r| {
            Ok((r.get(0)?, r.get(1)?))
        })
        .unwrap();
    assert_eq!(claimed, 0);
    let seeded = tiny_cell("ceiling", "queue", dir.path())["rows"]
        .as_i64()
        .unwrap();
    assert_eq!(jobs, seeded, "{result}");
}

/// Every approach of this runner that runs arbitrary SQL runs a custom workload: seeded from the cell, each
/// transaction timed as a read or a write and by name, and the writes in the file afterwards.
#[test]
fn custom_workloads_run_on_every_sqlite_approach_and_the_ceiling() {
    for approach in [
        "quicklite",
        "direct-blocking",
        "spawn-blocking",
        "per-request",
        "async-sqlite",
        "ceiling",
    ] {
        let dir = tempfile::tempdir().unwrap();
        let result = run(&tiny_custom_cell(approach, dir.path()));
        assert_custom_measured(&result);
        let conn = rusqlite::Connection::open(dir.path().join("custom.db")).unwrap();
        let rows = conn
            .query_row(custom_orders_sql(), [], |r| Ok((r.get(0)?, r.get(1)?)))
            .unwrap();
        assert_custom_rows(approach, rows);
    }
}

/// The post's transfers (`examples/workloads/transfers.toml`, in small): two `UPDATE`s of accounts drawn from the
/// power law in one write, on every approach of this runner; money moves and none is made or lost.
#[test]
fn transfers_between_power_law_accounts_keep_the_total() {
    for approach in [
        "quicklite",
        "direct-blocking",
        "spawn-blocking",
        "per-request",
        "async-sqlite",
        "ceiling",
    ] {
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
fn throughput_checks_every_acknowledged_row() {
    for approach in ["quicklite", "direct-blocking", "spawn-blocking"] {
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
fn held_transactions_think_between_statements_and_lose_no_update() {
    for approach in ["quicklite", "quicklite-closure", "quicklite-feed"] {
        let dir = tempfile::tempdir().unwrap();
        let result = run(&tiny_held_tx_cell(approach, dir.path()));
        let conn = rusqlite::Connection::open(dir.path().join("items.db")).unwrap();
        let logged: i64 = conn.query_row(item_log_sql(), [], |r| r.get(0)).unwrap();
        assert_held_tx_measured(&result, logged as u64);
    }
}

#[test]
fn the_feed_records_every_insert_in_the_same_transaction() {
    let dir = tempfile::tempdir().unwrap();
    let result = run(&tiny_cell("quicklite-feed", "insert", dir.path()));
    assert_eq!(
        (&result["failure"], &result["errors"]),
        (&Value::Null, &Value::from(0)),
        "{result:#}"
    );
    let conn = rusqlite::Connection::open(dir.path().join("items.db")).unwrap();
    let (rows, changes): (i64, i64) = conn
        .query_row(
            "SELECT (SELECT count(*) FROM items), (SELECT count(*) FROM _quicklite_changes)",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .unwrap();
    // The seeded rows came before the feed: every insert since is one change.
    assert!(changes > 0, "{result:#}");
    assert_eq!(rows - 200, changes);
}

#[test]
fn a_variant_for_one_question_refuses_the_other_workloads() {
    for (approach, workload) in [
        ("quicklite-closure", "insert"),
        ("quicklite-feed", "point-read"),
        ("quicklite-feed", "multi-db"),
        ("ceiling-async", "queue"),
        ("ceiling-async", "multi-db"),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let result = run(&tiny_cell(approach, workload, dir.path()));
        let failure = result["failure"].as_str().unwrap_or_default();
        assert!(
            failure.contains(&format!(
                "`{approach}` does not run the {workload} workload"
            )),
            "{approach} on {workload}: {result:#}"
        );
    }
}

#[test]
fn long_reads_run_beside_the_writer_on_every_approach_of_this_runner() {
    for approach in [
        "quicklite",
        "quicklite-no-inline",
        "direct-blocking",
        "spawn-blocking",
        "per-request",
        "async-sqlite",
    ] {
        let dir = tempfile::tempdir().unwrap();
        let result = run(&tiny_long_read_cell(approach, dir.path()));
        assert_long_read_measured(&result);
        // Every write counted was an insert into the file, beside the seeded rows.
        let conn = rusqlite::Connection::open(dir.path().join("items.db")).unwrap();
        let rows: i64 = conn
            .query_row("SELECT count(*) FROM items", [], |r| r.get(0))
            .unwrap();
        assert!(
            rows as u64 >= 200 + result["writes"]["ops"].as_u64().unwrap(),
            "{approach}: {rows} rows"
        );
    }
}

#[test]
fn spawn_blocking_multi_db_reports_write_completion() {
    let dir = tempfile::tempdir().unwrap();
    let result = run(&tiny_cell("spawn-blocking", "multi-db", dir.path()));
    assert_write_completion(&result);
    // That the writers wrote at all (warm-up included) is not a matter of timing: every database has blocks
    // beyond the seeded ones.
    for path in ledger_files(dir.path()) {
        assert!(written_blocks(&path) > 0, "{}", path.display());
    }
}

/// Blocks each database file holds beyond the seeded ones.
fn written_blocks(path: &std::path::Path) -> i64 {
    let conn = rusqlite::Connection::open(path).unwrap();
    let blocks: i64 = conn
        .query_row("SELECT count(*) FROM blocks", [], |row| row.get(0))
        .unwrap();
    blocks - LEDGER_SEED_BLOCKS
}

#[test]
fn quicklite_multi_db_is_served_by_one_registry_on_a_bounded_pool() {
    let dir = tempfile::tempdir().unwrap();
    let databases = 64;
    let result = run(&tiny_paced_cell("quicklite", dir.path(), databases, 4));
    assert_measured(&result);
    // 300 ms window, one write every 20 ms on each of 64 databases.
    assert_completion(&result, 300 / 20 * u64::from(databases));
    // A thread (or three) per database would need more threads than databases; the registry's pool does not
    // grow with them. (On a loaded machine it may grow by some: write threads added while blocked writes hold the
    // others, tokio threads taking a worker's place while a read runs long; 24 databases once saw 32 threads.)
    let threads = result["threads"].as_u64().unwrap();
    assert!(threads < u64::from(databases), "{threads} threads");
    assert_eq!(result["open_databases"], databases, "{result:#}");
    assert!(result["env"]["open_files_limit"].as_u64().unwrap() > 0);
    // Every database is a seeded copy the registry opened under the lab's file name, and the writes counted are
    // in the files (those of the warm-up and the window's edges too, so at least as many).
    let files = ledger_files_of(dir.path(), databases as usize);
    let written: i64 = files.iter().map(|path| written_blocks(path)).sum();
    let completed = result["write_completion"]["completed"].as_i64().unwrap();
    assert!(
        written >= completed,
        "{written} blocks written, {completed} counted"
    );
    for path in &files {
        assert!(written_blocks(path) >= 0, "{}", path.display());
    }
}

#[test]
fn quicklite_multi_db_blocking_writes_stay_the_default() {
    let dir = tempfile::tempdir().unwrap();
    let result = run(&tiny_cell("quicklite", "multi-db", dir.path()));
    assert_write_completion(&result);
    assert_eq!(result["cell"]["multi_db"]["write_mode"], "blocking");
    assert_eq!(result["open_databases"], 2, "{result:#}");
}

#[test]
fn quicklite_writes_first_serves_multi_db_and_a_single_database() {
    let dir = tempfile::tempdir().unwrap();
    let result = run(&tiny_cell("quicklite-writes-first", "multi-db", dir.path()));
    assert_write_completion(&result);
    let dir = tempfile::tempdir().unwrap();
    let result = run(&tiny_cell(
        "quicklite-writes-first",
        "point-read",
        dir.path(),
    ));
    assert_measured_with_server_profile(&result);
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
fn mixed_takes_its_share_of_writes_from_the_cell() {
    // No writes at all, then nothing but writes: the share reaches the runner's driver, whatever the timing.
    for (write_ppm, reads, writes) in [(0, true, false), (1_000_000, false, true)] {
        let dir = tempfile::tempdir().unwrap();
        let mut cell = tiny_cell("quicklite", "mixed", dir.path());
        cell["write_ppm"] = json!(write_ppm);
        let result = run(&cell);
        assert_eq!(
            (&result["failure"], &result["errors"]),
            (&Value::Null, &Value::from(0)),
            "{result:#}"
        );
        assert_eq!(result["cell"]["write_ppm"], write_ppm, "echoed as sent");
        assert_eq!(
            result["reads"]["ops"].as_u64().unwrap() > 0,
            reads,
            "{result:#}"
        );
        assert_eq!(
            result["writes"]["ops"].as_u64().unwrap() > 0,
            writes,
            "{result:#}"
        );
    }
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
        "ceiling",
        "direct-blocking",
        "spawn-blocking",
        "per-request",
        "async-sqlite",
        "quicklite",
    ] {
        assert!(names.iter().any(|n| n == name), "{names:?}");
    }
}

/// The `postgres` approach end to end: a throwaway server started by the lab's own script (PostgreSQL is installed
/// by scripts/install-test-deps.sh), a tiny orm cell through tokio-postgres, the server stopped.
#[test]
fn postgres_runs_the_orm_suite_on_a_throwaway_server() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let script = root.join("scripts/postgres.sh");
    let dir = tempfile::tempdir().unwrap();
    let server = dir.path().join("server");
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let started = Command::new("bash")
        .arg(&script)
        .arg("start")
        .arg(&server)
        .arg(port.to_string())
        .output()
        .unwrap();
    assert!(
        started.status.success(),
        "{}",
        String::from_utf8_lossy(&started.stderr)
    );
    let url = String::from_utf8(started.stdout).unwrap().trim().to_owned();
    let mut cell = tiny_cell("postgres", "orm", dir.path());
    cell["postgres_url"] = json!(url);
    let result = run(&cell);
    let stopped = Command::new("bash")
        .arg(&script)
        .arg("stop")
        .arg(&server)
        .status()
        .unwrap();
    assert_orm_measured(&result);
    assert!(
        result["env"]["sqlite_version"]
            .as_str()
            .unwrap()
            .starts_with("PostgreSQL "),
        "{result:#}"
    );
    assert!(stopped.success());
    assert!(!server.exists(), "the server's files are removed");
}

#[test]
fn an_open_loop_cell_accounts_for_every_request_due_in_its_window() {
    for (approach, workload) in [
        ("quicklite", "point-read"),
        ("direct-blocking", "insert"),
        ("spawn-blocking", "mixed"),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let mut cell = tiny_cell(approach, workload, dir.path());
        cell["rate"] = json!(2_000);
        let result = run(&cell);
        assert_eq!(result["failure"], Value::Null, "{result:#}");
        assert_eq!(result["cell"]["rate"], 2_000, "echoed as sent");
        let open = &result["open_loop"];
        let count = |name: &str| {
            open[name]
                .as_u64()
                .unwrap_or_else(|| panic!("{name}: {result:#}"))
        };
        // 300 ms at 2,000 requests a second, whatever the timing.
        assert_eq!(count("due"), 600, "{result:#}");
        assert_eq!(
            count("due"),
            count("issued") + count("dropped"),
            "{result:#}"
        );
        assert_eq!(
            count("issued"),
            count("completed") + count("failed") + count("unfinished"),
            "{result:#}"
        );
        let ops =
            result["reads"]["ops"].as_u64().unwrap() + result["writes"]["ops"].as_u64().unwrap();
        assert_eq!(count("completed"), ops, "{result:#}");
        assert_eq!(
            count("failed"),
            result["errors"].as_u64().unwrap(),
            "{result:#}"
        );
        assert!(count("completed") > 0, "{result:#}");
        let p = |name: &str| open[name].as_f64().unwrap();
        assert!(
            p("p50_us") <= p("p99_us")
                && p("p99_us") <= p("p999_us")
                && p("p999_us") <= p("max_us")
        );
        assert!(result["cpu_per_op_us"].as_f64().is_some(), "{result:#}");
    }
}

#[test]
fn a_closed_loop_result_has_no_open_loop_figures() {
    let dir = tempfile::tempdir().unwrap();
    let result = run(&tiny_cell("direct-blocking", "point-read", dir.path()));
    assert!(result.get("open_loop").is_none(), "{result:#}");
    assert!(result["cell"].get("rate").is_none(), "{result:#}");
}

#[test]
fn a_rate_for_a_workload_without_an_open_loop_fails_the_cell_with_a_clear_reason() {
    let dir = tempfile::tempdir().unwrap();
    let mut cell = tiny_cell("quicklite", "queue", dir.path());
    cell["rate"] = json!(1_000);
    let result = run(&cell);
    let failure = result["failure"].as_str().unwrap_or_default();
    assert!(
        failure.contains("queue has no open-loop driver"),
        "{result:#}"
    );
}
