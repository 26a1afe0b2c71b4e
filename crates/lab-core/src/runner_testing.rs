//! Helpers for the runners' end-to-end tests, shared by every runner workspace (feature `runner-testing`): a tiny
//! cell, a way to pipe it to a runner binary, and the checks every successful result must pass.

use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};

use serde_json::{Value, json};

/// A tiny cell: 300 ms measured after 100 ms of warm-up, 4 tasks, 200 rows; `multi-db` gets 2 databases with
/// 2 readers each and a 20 ms write delay.
pub fn tiny_cell(approach: &str, workload: &str, dir: &Path) -> Value {
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

/// Runs the runner `program` on `cell`, asserting it exits 0 and prints exactly one JSON document.
pub fn run_runner(program: &str, cell: &Value) -> Value {
    let mut child = Command::new(program)
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

/// Checks a result measured under the `server` profile: no failure, no errors, reads counted, the runtime's
/// lateness measured over the whole window, a CPU time per operation and an idle window's CPU reported, the
/// environment filled in (with the cross-core round trips on a machine
/// of two CPUs or more), and WAL read back from SQLite.
pub fn assert_measured(result: &Value) {
    assert_eq!(result["failure"], Value::Null, "{result:#}");
    assert_eq!(result["errors"], 0, "{result:#}");
    assert!(result["reads"]["ops"].as_u64().unwrap() > 0, "{result:#}");
    // The ticker beside the workload: one tick per millisecond of the window, every one accounted for, however
    // late (how late is the machine's business, not a test's).
    let lateness = &result["lateness"];
    assert_eq!(
        lateness["ticks"], result["cell"]["duration_ms"],
        "{result:#}"
    );
    let percentile = |name: &str| lateness[name].as_f64().unwrap();
    assert!(
        percentile("p50_us") <= percentile("p99_us")
            && percentile("p99_us") <= percentile("max_us"),
        "{lateness:#}"
    );
    // The runner's own CPU accounting: some CPU for every operation, and an idle window after the measured one (how
    // much is the machine's business).
    assert!(
        result["cpu_per_op_us"].as_f64().unwrap() > 0.0,
        "{result:#}"
    );
    let idle = &result["idle_cpu"];
    assert!(idle["secs"].as_f64().unwrap() > 0.0, "{idle:#}");
    assert!(idle["cpu_secs"].as_f64().unwrap() >= 0.0, "{idle:#}");
    let env = &result["env"];
    assert!(
        !env["sqlite_version"].as_str().unwrap().is_empty(),
        "{env:#}"
    );
    assert!(
        !env["compile_options"].as_array().unwrap().is_empty(),
        "{env:#}"
    );
    assert_eq!(env["pragmas"]["journal_mode"], "wal", "{env:#}");
    if env["cpus"].as_u64().unwrap() >= 2 {
        for edge in ["core_round_trip_before_ns", "core_round_trip_after_ns"] {
            assert!(env[edge].as_f64().unwrap() > 0.0, "{edge}: {env:#}");
        }
    }
}

/// Checks a `multi-db` result of [`tiny_cell`] (300 ms, 20 ms write delay, 2 databases): no failure, no errors,
/// 30 paced writes expected, and the completed count agreeing with the write statistics.
///
/// How many writes finish inside a 300 ms window depends on the machine's load (tests run several unoptimized
/// runners at once), so the count is checked against itself, not against a floor; that the writers wrote at all
/// is for the caller to check in the database files, where timing does not matter.
pub fn assert_write_completion(result: &Value) {
    assert_completion(result, 30);
}

/// Checks a `multi-db` result whose writers were expected to complete `expected` writes: no failure, no errors,
/// the expected count as given, and the completed count at most that and equal to the writes counted.
///
/// `expected` is `duration / delay × databases`; in the `paced` write mode a write counts only if it was due
/// inside the window, so the completed count can never exceed it.
pub fn assert_completion(result: &Value, expected: u64) {
    assert_eq!(result["failure"], Value::Null, "{result:#}");
    assert_eq!(result["errors"], 0, "{result:#}");
    let completion = &result["write_completion"];
    assert_eq!(completion["expected"], expected, "{result:#}");
    let completed = completion["completed"].as_u64().unwrap();
    assert_eq!(
        completed,
        result["writes"]["ops"].as_u64().unwrap(),
        "{result:#}"
    );
    assert!(completed <= expected, "{result:#}");
    let ratio = completion["ratio"].as_f64().unwrap();
    assert!(
        (ratio - completed as f64 / expected as f64).abs() < 1e-9,
        "{result:#}"
    );
}

/// [`tiny_cell`]'s `multi-db` with `databases` databases, paced writers (one write every 20 ms each) and
/// `total_readers` readers over all of them.
pub fn tiny_paced_cell(approach: &str, dir: &Path, databases: u32, total_readers: u32) -> Value {
    let mut cell = tiny_cell(approach, "multi-db", dir);
    cell["multi_db"] = json!({
        "num_databases": databases,
        "readers": 0,
        "write_delay_ms": 20,
        "write_mode": "paced",
        "total_readers": total_readers,
    });
    cell
}

/// The ledger database files of a [`tiny_cell`] `multi-db` run in `dir`.
pub fn ledger_files(dir: &Path) -> Vec<std::path::PathBuf> {
    ledger_files_of(dir, 2)
}

/// The files of a `multi-db` run with `databases` databases in `dir`.
pub fn ledger_files_of(dir: &Path, databases: usize) -> Vec<std::path::PathBuf> {
    (0..databases)
        .map(|db| dir.join(format!("ledger-{db:04}.db")))
        .collect()
}

/// The version of `krate` the runner reports, for checks such as "this runner really links rusqlite 0.40".
pub fn crate_version<'r>(result: &'r Value, krate: &str) -> &'r str {
    result["env"]["crate_versions"][krate]
        .as_str()
        .unwrap_or_else(|| panic!("no version of {krate} in {result:#}"))
}

/// Checks a `queue` result of [`tiny_cell`]: no failure, no errors, every cycle counted with its three operations,
/// and allocations counted (every runner installs the counting allocator), per operation and in the window.
pub fn assert_queue_measured(result: &Value) {
    assert_eq!(result["failure"], Value::Null, "{result:#}");
    assert_eq!(result["errors"], 0, "{result:#}");
    let operations = result["operations"].as_array().expect("operations");
    let names: Vec<&str> = operations
        .iter()
        .map(|o| o["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["publish", "claim", "ack", "cycle"], "{result:#}");
    let cycles = operations[3]["stats"]["ops"].as_u64().unwrap();
    assert!(cycles > 0, "{result:#}");
    for op in operations {
        assert_eq!(op["stats"]["ops"].as_u64(), Some(cycles), "{op:#}");
        assert!(op["allocs_per_op"].as_f64().is_some(), "{op:#}");
    }
    // A cycle crosses threads and channels: it allocates.
    assert!(operations[3]["allocs_per_op"].as_f64().unwrap() > 0.0);
    assert!(
        result["window_allocations"].as_u64().unwrap() > 0,
        "{result:#}"
    );
}

/// The queue database's jobs after a `queue` cell: `(jobs, claimed jobs)`. Every cycle publishes one job and
/// acknowledges one, and the runner waits for its cycles to end, so a finished cell leaves exactly the backlog,
/// none of it claimed.
pub fn queue_jobs_sql() -> &'static str {
    "SELECT count(*), count(claimed_by) FROM jobs"
}

/// Checks what [`queue_jobs_sql`] read after a queue cell of [`tiny_cell`]: the 200-job backlog, none claimed.
pub fn assert_queue_backlog(jobs_and_claimed: (i64, i64)) {
    assert_eq!(
        jobs_and_claimed,
        (200, 0),
        "the backlog, nothing left claimed"
    );
}

/// Checks an `orm` result of [`tiny_cell`]: no failure, no errors, and every operation of the suite (the threading
/// rounds included) measured without and with a wrapping transaction.
pub fn assert_orm_measured(result: &Value) {
    assert_eq!(result["failure"], Value::Null, "{result:#}");
    assert_eq!(result["errors"], 0, "{result:#}");
    let operations = result["operations"].as_array().expect("operations");
    assert_eq!(
        operations.len(),
        2 * (crate::orm::OrmOp::ALL.len() + crate::orm::ORM_THREADING.len()),
        "{result:#}"
    );
    assert_eq!(operations.last().unwrap()["name"], "heavy_threading (txn)");
    for op in operations {
        assert!(op["stats"]["ops"].as_u64().unwrap() > 0, "{op:#}");
    }
    assert_eq!(operations[1]["name"], "model_object_creation (txn)");
}

/// A tiny `long-read` cell: [`tiny_cell`] with one read in 10 of the window long, each made to take 5 to 10 ms.
pub fn tiny_long_read_cell(approach: &str, dir: &Path) -> Value {
    let mut cell = tiny_cell(approach, "long-read", dir);
    cell["long_reads"] = json!({"every": 10, "min_ms": 5, "max_ms": 10});
    cell
}

/// Checks a result of [`tiny_long_read_cell`]: measured as any cell ([`assert_measured`]: the short reads counted),
/// the ticker's p99.9 among its figures, the long reads counted under their own name, and the writer's inserts
/// beside them, one due every millisecond of the window and each one done counted.
pub fn assert_long_read_measured(result: &Value) {
    assert_measured(result);
    let lateness = &result["lateness"];
    assert!(
        lateness["p999_us"].as_f64().unwrap() <= lateness["max_us"].as_f64().unwrap(),
        "{lateness:#}"
    );
    let operations = result["operations"].as_array().expect("operations");
    assert_eq!(operations.len(), 1, "{result:#}");
    assert_eq!(
        operations[0]["name"],
        crate::driver::LONG_READ,
        "{result:#}"
    );
    assert!(
        operations[0]["stats"]["ops"].as_u64().unwrap() > 0,
        "{result:#}"
    );
    assert!(result["writes"]["ops"].as_u64().unwrap() > 0, "{result:#}");
    assert_completion(result, 300);
}

/// A tiny `throughput` cell: [`tiny_cell`] with a think time and `synchronous=FULL`, as the lab sends them.
pub fn tiny_throughput_cell(approach: &str, dir: &Path) -> Value {
    let mut cell = tiny_cell(approach, "throughput", dir);
    cell["think_us"] = json!(100);
    cell["synchronous"] = json!("full");
    cell
}

/// Checks a successful `throughput` result (the runner checked the row count itself, or it would have failed the
/// cell): transactions counted, no error, `synchronous` as asked; and that `rows_in_file` holds at least the seeded
/// rows plus those of every counted transaction.
pub fn assert_throughput_measured(result: &Value, rows_in_file: u64) {
    assert_eq!(
        (&result["failure"], &result["errors"]),
        (&Value::Null, &Value::from(0)),
        "{result:#}"
    );
    let transactions = result["writes"]["ops"].as_u64().unwrap();
    assert!(transactions > 0, "{result:#}");
    assert_eq!(result["env"]["pragmas"]["synchronous"], "2", "FULL");
    assert!(
        rows_in_file >= 200 + 100 * transactions,
        "{rows_in_file} rows for {transactions} transactions"
    );
}

/// A tiny `held-tx` cell: [`tiny_cell`] with a think time of 200 µs between each transaction's read and its write.
pub fn tiny_held_tx_cell(approach: &str, dir: &Path) -> Value {
    let mut cell = tiny_cell(approach, "held-tx", dir);
    cell["think_us"] = json!(200);
    cell
}

/// Checks a successful `held-tx` result (the runner checked the log itself, or it would have failed the cell):
/// transactions counted as writes, no read, no error, a CPU time per transaction; and that `logged`, the rows of the
/// file's `item_log`, holds at least one change per counted transaction, each a transaction that thought at least
/// the cell's think time.
pub fn assert_held_tx_measured(result: &Value, logged: u64) {
    assert_eq!(
        (&result["failure"], &result["errors"]),
        (&Value::Null, &Value::from(0)),
        "{result:#}"
    );
    let transactions = result["writes"]["ops"].as_u64().unwrap();
    assert!(transactions > 0, "{result:#}");
    assert_eq!(result["reads"]["ops"], 0, "{result:#}");
    assert!(
        result["cpu_per_op_us"].as_f64().unwrap() > 0.0,
        "{result:#}"
    );
    assert!(
        logged >= transactions,
        "{logged} changes logged for {transactions} transactions"
    );
    let think_us = result["cell"]["think_us"].as_f64().unwrap();
    assert!(
        result["writes"]["p50_us"].as_f64().unwrap() >= think_us,
        "{result:#}"
    );
}

/// The rows of `held-tx`'s log, to read from the file after a cell.
pub fn item_log_sql() -> &'static str {
    "SELECT count(*) FROM item_log"
}

/// A tiny custom cell ([`tiny_cell`]'s settings): a shop's `orders` table of 200 rows with an index, a read
/// transaction of two statements (an order by id, then a range of a customer's orders) and a write transaction of
/// two (an insert, then an update of the same customer's newest order), 3 to 1.
pub fn tiny_custom_cell(approach: &str, dir: &Path) -> Value {
    let mut cell = tiny_cell(approach, "tiny-shop", dir);
    cell["custom"] = json!({
        "name": "tiny-shop",
        "schema": [
            "CREATE TABLE orders (id INTEGER PRIMARY KEY, customer INTEGER NOT NULL, note TEXT NOT NULL, total INTEGER NOT NULL)",
            "CREATE INDEX orders_by_customer ON orders (customer, id)",
        ],
        "seed": [{
            "table": "orders",
            "rows": 200,
            "columns": [
                {"name": "id", "values": {"kind": "sequence", "start": 1}},
                {"name": "customer", "values": {"kind": "zipf", "min": 1, "max": 20, "exponent": 1.0}},
                {"name": "note", "values": {"kind": "text", "min_len": 5, "max_len": 20}},
                {"name": "total", "values": {"kind": "uniform", "min": 100, "max": 10000}},
            ],
        }],
        "transactions": [
            {
                "name": "order page",
                "weight": 3,
                "writes": false,
                "params": [
                    {"kind": "uniform", "min": 1, "max": 200},
                    {"kind": "zipf", "min": 1, "max": 20, "exponent": 1.0},
                ],
                "statements": [
                    {"sql": "SELECT * FROM orders WHERE id = :id", "binds": [0]},
                    {"sql": "SELECT id, total FROM orders WHERE customer = :customer ORDER BY id DESC LIMIT 5", "binds": [1]},
                ],
            },
            {
                "name": "place order",
                "weight": 1,
                "writes": true,
                "params": [
                    {"kind": "sequence", "start": 1000},
                    {"kind": "zipf", "min": 1, "max": 20, "exponent": 1.0},
                    {"kind": "choice", "options": ["gift", "express"]},
                ],
                "statements": [
                    {"sql": "INSERT INTO orders (id, customer, note, total) VALUES (:id, :customer, :note, 0)", "binds": [0, 1, 2]},
                    {"sql": "UPDATE orders SET total = total + 1 WHERE id = (SELECT max(id) FROM orders WHERE customer = :customer)", "binds": [1]},
                ],
            },
        ],
    });
    cell
}

/// A cell of `examples/workloads/transfers-with-reads.toml` in small: 200 accounts of 1,000 each, transfers of one
/// between two accounts drawn from the post's power law (`pareto`) in one transaction of two `UPDATE`s, and three
/// point reads of such accounts for each transfer.
pub fn tiny_transfers_cell(approach: &str, dir: &Path) -> Value {
    let mut cell = tiny_cell(approach, "tiny-transfers", dir);
    cell["custom"] = json!({
        "name": "tiny-transfers",
        "schema": ["CREATE TABLE account (id PRIMARY KEY, balance INT)"],
        "seed": [{
            "table": "account",
            "rows": 200,
            "columns": [
                {"name": "id", "values": {"kind": "sequence", "start": 0}},
                {"name": "balance", "values": {"kind": "integer", "value": 1000}},
            ],
        }],
        "transactions": [{
            "name": "read",
            "weight": 3,
            "writes": false,
            "params": [{"kind": "pareto", "min": 0, "max": 199, "p": 0.9}],
            "statements": [
                {"sql": "SELECT * FROM account WHERE id = :id LIMIT 1", "binds": [0]},
            ],
        }, {
            "name": "transfer",
            "weight": 1,
            "writes": true,
            "params": [
                {"kind": "pareto", "min": 0, "max": 199, "p": 0.9},
                {"kind": "pareto", "min": 0, "max": 199, "p": 0.9},
            ],
            "statements": [
                {"sql": "UPDATE account SET balance = balance - 1.00 WHERE id = :from", "binds": [0]},
                {"sql": "UPDATE account SET balance = balance + 1.00 WHERE id = :to", "binds": [1]},
            ],
        }],
    });
    cell
}

/// The accounts of a [`tiny_transfers_cell`]: how many, their total, and how many no longer hold 1,000.
pub fn transfers_sql() -> &'static str {
    "SELECT count(*), sum(balance), count(*) FILTER (WHERE balance != 1000) FROM account"
}

/// Checks a result of [`tiny_transfers_cell`] and what [`transfers_sql`] read from its file afterwards: transfers
/// were measured as writes beside the reads, and they moved money between accounts without making or losing any.
pub fn assert_transfers(approach: &str, result: &Value, (rows, total, moved): (i64, i64, i64)) {
    assert_measured(result);
    assert!(
        result["writes"]["ops"].as_u64() > Some(0),
        "{approach}: {result:#}"
    );
    assert_eq!(
        (
            &result["operations"][0]["name"],
            &result["operations"][1]["name"]
        ),
        (&json!("read"), &json!("transfer")),
        "{approach}: {result:#}"
    );
    assert_eq!((rows, total), (200, 200_000), "{approach}");
    assert!(moved > 0, "{approach}: no balance changed");
}

/// Checks a result of [`tiny_custom_cell`]: measured as any cell ([`assert_measured`]), writes counted too, and each
/// transaction's own figures, in the workload's order, adding up to the reads and the writes.
pub fn assert_custom_measured(result: &Value) {
    assert_measured(result);
    let (reads, writes) = (
        result["reads"]["ops"].as_u64().unwrap(),
        result["writes"]["ops"].as_u64().unwrap(),
    );
    assert!(writes > 0, "{result:#}");
    let operations = result["operations"].as_array().unwrap();
    let names: Vec<&str> = operations
        .iter()
        .map(|op| op["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["order page", "place order"], "{result:#}");
    assert_eq!(operations[0]["stats"]["ops"], reads, "{result:#}");
    assert_eq!(operations[1]["stats"]["ops"], writes, "{result:#}");
}

/// The rows of `tiny-shop`'s `orders` table, and those a [`tiny_custom_cell`]'s writes inserted (ids from 1000).
pub fn custom_orders_sql() -> &'static str {
    "SELECT count(*), count(*) FILTER (WHERE id >= 1000) FROM orders"
}

/// Checks what [`custom_orders_sql`] read from the file after `approach` ran a [`tiny_custom_cell`]: its writes
/// inserted rows, and the file holds the seeded ones besides.
pub fn assert_custom_rows(approach: &str, (rows, inserted): (i64, i64)) {
    assert!(inserted > 0, "{approach}: nothing inserted");
    assert_eq!(rows, 200 + inserted, "{approach}");
}
