//! The columns of a summary table as text, shared by the Markdown, HTML and ASCII reports so they agree.

use crate::summary::Table;
use crate::{format, wal_reset_bug};

/// One rendered table: headers, whether each column is numeric (right-aligned), and cell text.
pub struct Columns {
    /// Column headings.
    pub headers: Vec<String>,
    /// `true` for numeric columns.
    pub numeric: Vec<bool>,
    /// One entry per row, one string per column.
    pub cells: Vec<Vec<String>>,
}

/// The heading of the column of CPU time per operation.
pub const CPU_PER_OP: &str = "CPU/op";

/// The heading of the column of CPU time in the idle window after the measured one, as a share of one core.
pub const IDLE_CPU: &str = "idle CPU (% of a core)";

/// The headings of an open-loop table's own columns: the rate achieved, the requests dropped past the bound in
/// flight, and latency percentiles from the scheduled times.
pub const OPEN_LOOP: [&str; 5] = ["achieved/s", "dropped", "p50", "p99", "p99.9"];

/// An open-loop row's cells under [`OPEN_LOOP`]; "—" where the runner reported none.
fn open_loop_cells(figures: Option<quicklite_lab_core::OpenLoop>) -> Vec<String> {
    let Some(o) = figures else {
        return vec![not_reported(); OPEN_LOOP.len()];
    };
    let dropped = if o.dropped == 0 || o.due == 0 {
        o.dropped.to_string()
    } else {
        let share = o.dropped as f64 / o.due as f64;
        format!("{} ({})", o.dropped, format::measured_share(share))
    };
    vec![
        format::ops(o.achieved_per_sec),
        dropped,
        format::latency_us(o.p50_us),
        format::latency_us(o.p99_us),
        format::latency_us(o.p999_us),
    ]
}

/// The headings of a `long-read` table's long reads: how many completed in the window, and their median time.
pub const LONG_READS: [&str; 2] = ["long reads", "long read p50"];

/// The heading of a `long-read` table's slowest write, timed from its due instant.
pub const WRITE_MAX: &str = "write max";

/// The headings of a `long-read` table's tail of the ticker's lateness, beside its p99.
pub const LATENESS_TAIL: [&str; 2] = ["lateness p99.9", "lateness max"];

/// A `long-read` row's cells under [`LONG_READS`]; "—" where the runner reported none.
fn long_read_cells(long: Option<&quicklite_lab_core::NamedOp>) -> Vec<String> {
    match long {
        Some(op) => vec![
            op.stats.ops.to_string(),
            if op.stats.ops > 0 {
                format::latency_us(op.stats.p50_us)
            } else {
                not_reported()
            },
        ],
        None => vec![not_reported(); LONG_READS.len()],
    }
}

/// The text of a figure a runner did not report, in a column other rows fill.
fn not_reported() -> String {
    "—".to_owned()
}

/// Renders `table`, leaving out columns no row has a value for.
pub fn columns(table: &Table) -> Columns {
    let mut headers: Vec<(String, bool)> = vec![("approach".to_owned(), false)];
    let repeated = table.repetitions > 1;
    if repeated {
        headers.push(("repetitions: range".to_owned(), true));
    }
    let has_errors = table.rows.iter().any(|r| r.result.errors > 0);
    if table.has_operations {
        for h in [
            "cycles/s",
            "publish mean",
            "claim mean",
            "ack mean",
            "cycle mean",
            "cycle p99",
            "allocs/cycle",
            "allocs/cycle under load",
        ] {
            headers.push((h.to_owned(), true));
        }
    }
    if table.is_orm {
        for h in [
            "suite",
            "suite, each operation in a transaction",
            "slowest operation",
        ] {
            headers.push((h.to_owned(), h != "slowest operation"));
        }
    }
    if table.is_open_loop {
        // Latency from each request's scheduled time, reads and writes together.
        for h in OPEN_LOOP {
            headers.push((h.to_owned(), true));
        }
    }
    if table.has_reads {
        for h in ["reads/s", "read p50", "read p99", "read max"] {
            headers.push((h.to_owned(), true));
        }
    }
    if table.is_long_read {
        for h in LONG_READS {
            headers.push((h.to_owned(), true));
        }
    }
    if table.has_writes {
        // `held-tx`'s writes are its transactions (a read, a think, two writes and a commit each).
        let names = if table.is_held_tx {
            ["transactions/s", "transaction p50", "transaction p99"]
        } else {
            ["writes/s", "write p50", "write p99"]
        };
        for h in names {
            headers.push((h.to_owned(), true));
        }
        if table.is_long_read {
            headers.push((WRITE_MAX.to_owned(), true));
        }
    }
    if table.is_throughput {
        headers.push(("rows/s".to_owned(), true));
        headers.push(("CPU / transaction".to_owned(), true));
    }
    if table.has_completion {
        headers.push(("write completion".to_owned(), true));
    }
    if has_errors {
        headers.push(("errors".to_owned(), true));
    }
    headers.push(("CPU".to_owned(), true));
    // The runner's CPU time per operation and while idle after the window: every Rust runner reports both, the Go
    // and Node runners CPU per operation only ("—" where a runner did not report one); results from before them
    // have no column. `throughput` shows its CPU per operation as `CPU / transaction`.
    let has_cpu_per_op =
        !table.is_throughput && table.rows.iter().any(|r| r.result.cpu_per_op_us.is_some());
    if has_cpu_per_op {
        headers.push((CPU_PER_OP.to_owned(), true));
    }
    let has_idle_cpu = table.rows.iter().any(|r| r.result.idle_cpu.is_some());
    if has_idle_cpu {
        headers.push((IDLE_CPU.to_owned(), true));
    }
    // Every Rust runner measures how late its runtime wakes a ticker; the Go and Node runners do not (blank), and
    // results from before the ticker have no column at all.
    let has_lateness = table.rows.iter().any(|r| r.result.lateness.is_some());
    if has_lateness {
        headers.push(("lateness p99".to_owned(), true));
        if table.is_long_read {
            for h in LATENESS_TAIL {
                headers.push((h.to_owned(), true));
            }
        }
    }
    let has_round_trips = table.rows.iter().any(|r| {
        r.result.env.core_round_trip_before_ns.is_some()
            || r.result.env.core_round_trip_after_ns.is_some()
    });
    if has_round_trips {
        headers.push(("core round trip".to_owned(), true));
    }
    if table.has_process {
        headers.push(("threads".to_owned(), true));
        headers.push(("RSS".to_owned(), true));
    }
    if table.has_open_databases {
        headers.push(("open DBs".to_owned(), true));
        headers.push(("RSS / open DB".to_owned(), true));
        headers.push(("DB opens".to_owned(), true));
    }
    if let Some(baseline) = &table.baseline {
        headers.push((format!("vs {}", baseline.label), false));
    }
    if table.has_ceiling {
        headers.push(("of ceiling".to_owned(), true));
    }
    let cells = table
        .rows
        .iter()
        .map(|row| {
            let r = &row.result;
            let mut cells = vec![if wal_reset_bug::affected(&r.env.sqlite_version) {
                format!("{} {}", row.label, wal_reset_bug::MARK)
            } else {
                row.label.clone()
            }];
            if repeated {
                cells.push(row.spread_text());
            }
            if table.has_operations {
                let op = |name: &str| r.operation(name);
                let mean = |name: &str| {
                    op(name)
                        .map(|o| format::latency_us(o.stats.avg_us))
                        .unwrap_or_default()
                };
                cells.push(
                    op("cycle")
                        .map(|o| format::ops(o.stats.ops_per_sec))
                        .unwrap_or_default(),
                );
                for name in ["publish", "claim", "ack", "cycle"] {
                    cells.push(mean(name));
                }
                cells.push(
                    op("cycle")
                        .map(|o| format::latency_us(o.stats.p99_us))
                        .unwrap_or_default(),
                );
                cells.push(
                    op("cycle")
                        .and_then(|o| o.allocs_per_op)
                        .map(|a| format!("{a:.1}"))
                        .unwrap_or_default(),
                );
                cells.push(
                    r.window_allocations
                        .zip(op("cycle").map(|o| o.stats.ops).filter(|&n| n > 0))
                        .map(|(allocs, cycles)| format!("{:.1}", allocs as f64 / cycles as f64))
                        .unwrap_or_default(),
                );
            }
            if table.is_orm {
                for txn in [false, true] {
                    cells.push(
                        crate::summary::orm_suite_us(r, txn)
                            .map(format::latency_us)
                            .unwrap_or_default(),
                    );
                }
                cells.push(
                    r.operations
                        .iter()
                        .max_by(|a, b| a.stats.avg_us.total_cmp(&b.stats.avg_us))
                        .map(|o| format!("{} ({})", o.name, format::latency_us(o.stats.avg_us)))
                        .unwrap_or_default(),
                );
            }
            if table.is_open_loop {
                cells.extend(open_loop_cells(r.open_loop));
            }
            if table.has_reads {
                cells.push(format::ops(r.reads.ops_per_sec));
                cells.push(format::latency_us(r.reads.p50_us));
                cells.push(format::latency_us(r.reads.p99_us));
                cells.push(format::latency_us(r.reads.max_us));
            }
            if table.is_long_read {
                cells.extend(long_read_cells(r.operation(quicklite_lab_core::LONG_READ)));
            }
            if table.has_writes {
                cells.push(format::ops(r.writes.ops_per_sec));
                cells.push(format::latency_us(r.writes.p50_us));
                cells.push(format::latency_us(r.writes.p99_us));
                if table.is_long_read {
                    cells.push(format::latency_us(r.writes.max_us));
                }
            }
            if table.is_throughput {
                let rows = quicklite_lab_core::THROUGHPUT_ROWS_PER_TRANSACTION as f64;
                cells.push(format::ops(r.writes.ops_per_sec * rows));
                cells.push(if r.writes.ops > 0 {
                    format::latency_us(r.cpu_secs * 1e6 / r.writes.ops as f64)
                } else {
                    String::new()
                });
            }
            if table.has_completion {
                cells.push(
                    r.write_completion
                        .as_ref()
                        .map(|c| {
                            format!(
                                "{} ({}/{})",
                                format::percent(c.ratio),
                                c.completed,
                                c.expected
                            )
                        })
                        .unwrap_or_default(),
                );
            }
            if has_errors {
                cells.push(r.errors.to_string());
            }
            cells.push(format!("{:.1} s", r.cpu_secs));
            if has_cpu_per_op {
                cells.push(r.cpu_per_op_us.map_or_else(not_reported, format::cpu_us));
            }
            if has_idle_cpu {
                cells.push(
                    r.idle_cpu
                        .map_or_else(not_reported, |idle| format::core_percent(idle.core_share())),
                );
            }
            if has_lateness {
                cells.push(
                    r.lateness
                        .map(|l| format::latency_us(l.p99_us))
                        .unwrap_or_default(),
                );
                if table.is_long_read {
                    cells.push(
                        r.lateness
                            .and_then(|l| l.p999_us)
                            .map_or_else(not_reported, format::latency_us),
                    );
                    cells.push(
                        r.lateness
                            .map(|l| format::latency_us(l.max_us))
                            .unwrap_or_default(),
                    );
                }
            }
            if has_round_trips {
                cells.push(format::round_trip_ns(
                    r.env.core_round_trip_before_ns,
                    r.env.core_round_trip_after_ns,
                ));
            }
            if table.has_process {
                cells.push(r.threads.map(|t| t.to_string()).unwrap_or_default());
                cells.push(r.rss_bytes.map(format::bytes).unwrap_or_default());
            }
            if table.has_open_databases {
                cells.push(r.open_databases.map(|n| n.to_string()).unwrap_or_default());
                cells.push(
                    r.rss_bytes
                        .zip(r.open_databases.filter(|&n| n > 0))
                        .map(|(rss, n)| format::bytes(rss / n))
                        .unwrap_or_default(),
                );
                cells.push(r.database_opens.map(|n| n.to_string()).unwrap_or_default());
            }
            if table.baseline.is_some() {
                cells.push(row.ratio_short());
            }
            if table.has_ceiling {
                cells.push(row.of_ceiling_text());
            }
            cells
        })
        .collect();
    let (headers, numeric) = headers.into_iter().unzip();
    Columns {
        headers,
        numeric,
        cells,
    }
}

/// The settings as one line: `concurrency 64 tasks · profile server · …`.
pub fn settings_line(table: &Table) -> String {
    table
        .settings
        .iter()
        .map(|(k, v)| format!("{k} {v}"))
        .collect::<Vec<_>>()
        .join(" · ")
}

#[cfg(test)]
mod tests {
    use quicklite_lab_core::ApproachName;

    use super::*;
    use crate::fixtures;
    use crate::summary::Summary;

    /// The `lateness p99` cells of the table whose title is `title`, by row label; `None` without the column.
    fn lateness(
        results: &[quicklite_lab_core::CellResult],
        title: &str,
    ) -> Option<Vec<(String, String)>> {
        let summary = Summary::new(results, ApproachName::TokioRusqlite);
        let table = summary.tables.iter().find(|t| t.title == title).unwrap();
        let cols = columns(table);
        let at = cols.headers.iter().position(|h| h == "lateness p99")?;
        Some(
            table
                .rows
                .iter()
                .zip(&cols.cells)
                .map(|(row, cells)| (row.label.clone(), cells[at].clone()))
                .collect(),
        )
    }

    #[test]
    fn lateness_is_a_column_where_a_runner_measured_it_and_blank_where_one_did_not() {
        let mut results = fixtures::results();
        // A runner that does not measure it (Go, Node) beside two that do.
        let mut go = results
            .iter()
            .find(|r| r.cell.workload == "point-read" && r.cell.approach == "tokio-rusqlite")
            .unwrap()
            .clone();
        go.cell.approach = "go-mattn".to_owned();
        go.lateness = None;
        results.push(go);
        let cells = lateness(&results, "point-read").unwrap();
        let cell = |label: &str| cells.iter().find(|(l, _)| l == label).unwrap().1.as_str();
        assert_eq!(cell("direct-blocking"), "14.20 ms");
        assert_eq!(cell("quicklite"), "1.12 ms");
        assert_eq!(cell("go-mattn"), "");
        // Results from before the ticker: no column at all.
        assert_eq!(lateness(&results, "insert"), None);
    }

    /// The cells of column `heading` in the table whose title is `title`, by row label; `None` without the column.
    fn column(
        results: &[quicklite_lab_core::CellResult],
        title: &str,
        heading: &str,
    ) -> Option<Vec<(String, String)>> {
        let summary = Summary::new(results, ApproachName::TokioRusqlite);
        let table = summary.tables.iter().find(|t| t.title == title).unwrap();
        let cols = columns(table);
        let at = cols.headers.iter().position(|h| h == heading)?;
        Some(
            table
                .rows
                .iter()
                .zip(&cols.cells)
                .map(|(row, cells)| (row.label.clone(), cells[at].clone()))
                .collect(),
        )
    }

    #[test]
    fn a_long_read_table_shows_its_long_reads_the_slowest_write_and_the_tickers_tail() {
        let results = fixtures::results();
        let title = "long-read";
        let cell = |heading: &str, label: &str| {
            column(&results, title, heading)
                .unwrap_or_else(|| panic!("no column {heading}"))
                .into_iter()
                .find(|(l, _)| l == label)
                .unwrap()
                .1
        };
        assert_eq!(cell("reads/s", "quicklite"), "900k");
        assert_eq!(cell("long reads", "quicklite"), "1800");
        assert_eq!(cell("long read p50", "tokio-rusqlite"), "199.00 ms");
        assert_eq!(cell("write p99", "tokio-rusqlite"), "250.00 ms");
        assert_eq!(cell(WRITE_MAX, "quicklite-no-inline"), "4.10 ms");
        assert_eq!(cell("lateness p99", "quicklite"), "180.00 ms");
        assert_eq!(cell("lateness p99.9", "quicklite"), "280.00 ms");
        assert_eq!(cell("lateness max", "quicklite-no-inline"), "3.00 ms");
        assert_eq!(cell("write completion", "quicklite"), "100% (2000/2000)");
        // The other tables keep their columns.
        for heading in ["long reads", WRITE_MAX, "lateness p99.9", "lateness max"] {
            assert_eq!(column(&results, "point-read", heading), None, "{heading}");
        }
    }

    #[test]
    fn cpu_per_op_and_idle_cpu_are_columns_with_a_dash_where_a_runner_did_not_report_them() {
        let mut results = fixtures::results();
        // A runner that reports CPU per operation but measures no idle window (Go, Node).
        let mut go = results
            .iter()
            .find(|r| r.cell.workload == "point-read" && r.cell.approach == "tokio-rusqlite")
            .unwrap()
            .clone();
        go.cell.approach = "go-mattn".to_owned();
        go.idle_cpu = None;
        go.cpu_per_op_us = Some(9.75);
        results.push(go);
        let per_op = column(&results, "point-read", CPU_PER_OP).unwrap();
        let idle = column(&results, "point-read", IDLE_CPU).unwrap();
        let cell = |cells: &[(String, String)], label: &str| {
            cells.iter().find(|(l, _)| l == label).unwrap().1.clone()
        };
        // 3.5 s of CPU over 2.84M reads; 12.5 ms of CPU in a 0.5 s idle window.
        assert_eq!(cell(&per_op, "quicklite"), "1.2 µs");
        assert_eq!(cell(&idle, "quicklite"), "2.5%");
        assert_eq!(cell(&idle, "tokio-rusqlite"), "0.20%");
        assert_eq!(cell(&per_op, "go-mattn"), "9.8 µs");
        assert_eq!(cell(&idle, "go-mattn"), "—");
        // Results from before the figures: no column at all.
        assert_eq!(column(&results, "insert", CPU_PER_OP), None);
        assert_eq!(column(&results, "insert", IDLE_CPU), None);
    }
}
