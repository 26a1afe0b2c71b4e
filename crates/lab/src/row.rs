//! One CSV row per cell: a [`CellResult`] flattened so that the CSV alone can rebuild every report.
//!
//! Lists and maps are joined into one field (`;` between items, `=` between key and value), because
//! `quicklite report <csv>` must show the environment — compile options, PRAGMAs, crate versions — without the JSON.

use std::collections::BTreeMap;

use quicklite_lab_core::{
    Cell, CellResult, Completion, DEFAULT_BUILD_PROFILE, DEFAULT_WRITE_PPM, Environment, IdleCpu,
    Lateness, LongReads, MultiDb, NamedOp, OpStats, OpenLoop, WriteMode,
};
use serde::{Deserialize, Serialize};

/// The CSV header, in column order (kept equal to [`CsvRow`]'s fields by a test).
pub const COLUMNS: &[&str] = &[
    "workload",
    "approach",
    "status",
    "duration_ms",
    "warmup_ms",
    "concurrency",
    "worker_threads",
    "profile",
    "synchronous",
    "memstatus",
    "mutex",
    "rows",
    "num_databases",
    "readers",
    "write_delay_ms",
    "write_mode",
    "total_readers",
    "seed",
    "reads_ops",
    "reads_ops_per_sec",
    "reads_avg_us",
    "reads_p50_us",
    "reads_p99_us",
    "reads_max_us",
    "writes_ops",
    "writes_ops_per_sec",
    "writes_avg_us",
    "writes_p50_us",
    "writes_p99_us",
    "writes_max_us",
    "writes_expected",
    "writes_completed",
    "write_completion",
    "errors",
    "error_samples",
    "wall_secs",
    "cpu_secs",
    "threads",
    "rss_bytes",
    "open_databases",
    "database_opens",
    "build_profile",
    "operations",
    "window_allocations",
    "window_alloc_bytes",
    "lateness_p50_us",
    "lateness_p99_us",
    "lateness_p999_us",
    "lateness_max_us",
    "lateness_ticks",
    "cpu_per_op_us",
    "idle_secs",
    "idle_cpu_secs",
    "mmap_size",
    "repetition",
    "think_us",
    "write_ppm",
    "long_read_every",
    "long_read_min_ms",
    "long_read_max_ms",
    "rate",
    "open_due",
    "open_issued",
    "open_dropped",
    "open_completed",
    "open_failed",
    "open_unfinished",
    "open_achieved_per_sec",
    "open_p50_us",
    "open_p99_us",
    "open_p999_us",
    "open_max_us",
    "send_lateness_p50_us",
    "send_lateness_p99_us",
    "failure",
    "runner",
    "sqlite_version",
    "compile_options",
    "pragmas",
    "crate_versions",
    "memstatus_effective",
    "cpu_model",
    "cpus",
    "open_files_limit",
    "core_round_trip_before_ns",
    "core_round_trip_after_ns",
    "allocator",
    "kernel",
    "date",
];

/// The CSV schema. Field order is column order; the names are the header. Columns added since the first
/// release are `#[serde(default)]`, so older CSVs still load.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[allow(missing_docs)] // Each field mirrors the `Cell` / `CellResult` / `Environment` field it is named after.
pub struct CsvRow {
    pub workload: String,
    pub approach: String,
    pub status: String,
    pub duration_ms: u64,
    pub warmup_ms: u64,
    pub concurrency: u32,
    pub worker_threads: u32,
    pub profile: String,
    /// Empty: the profile's own value.
    pub synchronous: Option<String>,
    /// `on` / `off`.
    pub memstatus: String,
    pub mutex: String,
    pub rows: u64,
    pub num_databases: Option<u32>,
    pub readers: Option<u32>,
    pub write_delay_ms: Option<u64>,
    /// `blocking` / `paced` for multi-db; empty otherwise.
    #[serde(default)]
    pub write_mode: String,
    #[serde(default)]
    pub total_readers: Option<u32>,
    pub seed: u64,
    pub reads_ops: u64,
    pub reads_ops_per_sec: f64,
    pub reads_avg_us: f64,
    pub reads_p50_us: f64,
    pub reads_p99_us: f64,
    pub reads_max_us: f64,
    pub writes_ops: u64,
    pub writes_ops_per_sec: f64,
    pub writes_avg_us: f64,
    pub writes_p50_us: f64,
    pub writes_p99_us: f64,
    pub writes_max_us: f64,
    pub writes_expected: Option<u64>,
    pub writes_completed: Option<u64>,
    pub write_completion: Option<f64>,
    pub errors: u64,
    /// `|`-separated.
    pub error_samples: String,
    pub wall_secs: f64,
    pub cpu_secs: f64,
    pub threads: Option<u64>,
    pub rss_bytes: Option<u64>,
    #[serde(default)]
    pub open_databases: Option<u64>,
    #[serde(default)]
    pub database_opens: Option<u64>,
    /// Empty in CSVs written before build profiles existed: `tuned`.
    #[serde(default)]
    pub build_profile: String,
    /// The named operations (`queue`) as a JSON array; empty for the other workloads.
    #[serde(default)]
    pub operations: String,
    #[serde(default)]
    pub window_allocations: Option<u64>,
    #[serde(default)]
    pub window_alloc_bytes: Option<u64>,
    /// The runtime's lateness (`CellResult::lateness`); empty from the Go and Node runners and in CSVs written
    /// before it was measured.
    #[serde(default)]
    pub lateness_p50_us: Option<f64>,
    #[serde(default)]
    pub lateness_p99_us: Option<f64>,
    /// Empty also in CSVs written before the ticker reported it.
    #[serde(default)]
    pub lateness_p999_us: Option<f64>,
    #[serde(default)]
    pub lateness_max_us: Option<f64>,
    #[serde(default)]
    pub lateness_ticks: Option<u64>,
    /// CPU time per operation (`CellResult::cpu_per_op_us`); empty where the runner did not report it and in CSVs
    /// written before it was.
    #[serde(default)]
    pub cpu_per_op_us: Option<f64>,
    /// The idle window after the measured one (`CellResult::idle_cpu`): its length and the CPU time in it; empty
    /// where the runner did not measure it and in CSVs written before it was.
    #[serde(default)]
    pub idle_secs: Option<f64>,
    #[serde(default)]
    pub idle_cpu_secs: Option<f64>,
    /// Empty in CSVs written before the knob existed: the profile's value.
    #[serde(default)]
    pub mmap_size: Option<u64>,
    /// `0` for the first repetition of a cell, and in CSVs written before repetitions existed.
    #[serde(default)]
    pub repetition: u32,
    /// `throughput`'s think time; `0` for the other workloads and in CSVs written before it existed.
    #[serde(default)]
    pub think_us: u64,
    /// `mixed`'s share of writes in parts per million (`1000`: 0.1%); empty for the other workloads, which have
    /// none, and in CSVs written before the knob existed, when `mixed` wrote 10%.
    #[serde(default)]
    pub write_ppm: Option<u32>,
    /// `long-read`'s long reads (`Cell::long_reads`): one in `long_read_every` reads, made to take
    /// `long_read_min_ms` to `long_read_max_ms`; empty for the other workloads and in CSVs written before it existed.
    #[serde(default)]
    pub long_read_every: Option<u32>,
    #[serde(default)]
    pub long_read_min_ms: Option<u64>,
    #[serde(default)]
    pub long_read_max_ms: Option<u64>,
    /// The offered load of an open-loop cell, in requests per second; empty for a closed-loop cell and in CSVs
    /// written before open loops existed. The `open_*` and `send_lateness_*` columns are its figures
    /// ([`OpenLoop`]), empty likewise.
    #[serde(default)]
    pub rate: Option<u64>,
    #[serde(default)]
    pub open_due: Option<u64>,
    #[serde(default)]
    pub open_issued: Option<u64>,
    #[serde(default)]
    pub open_dropped: Option<u64>,
    #[serde(default)]
    pub open_completed: Option<u64>,
    #[serde(default)]
    pub open_failed: Option<u64>,
    #[serde(default)]
    pub open_unfinished: Option<u64>,
    #[serde(default)]
    pub open_achieved_per_sec: Option<f64>,
    #[serde(default)]
    pub open_p50_us: Option<f64>,
    #[serde(default)]
    pub open_p99_us: Option<f64>,
    #[serde(default)]
    pub open_p999_us: Option<f64>,
    #[serde(default)]
    pub open_max_us: Option<f64>,
    #[serde(default)]
    pub send_lateness_p50_us: Option<f64>,
    #[serde(default)]
    pub send_lateness_p99_us: Option<f64>,
    pub failure: String,
    pub runner: String,
    pub sqlite_version: String,
    /// `;`-separated.
    pub compile_options: String,
    /// `name=value;…`.
    pub pragmas: String,
    /// `crate=version;…`.
    pub crate_versions: String,
    pub memstatus_effective: String,
    pub cpu_model: String,
    pub cpus: u32,
    #[serde(default)]
    pub open_files_limit: Option<u64>,
    #[serde(default)]
    pub core_round_trip_before_ns: Option<f64>,
    #[serde(default)]
    pub core_round_trip_after_ns: Option<f64>,
    #[serde(default)]
    pub allocator: Option<String>,
    pub kernel: String,
    pub date: String,
}

/// `ok` or `failed`, the `status` column.
fn status(result: &CellResult) -> &'static str {
    if result.failure.is_some() {
        "failed"
    } else {
        "ok"
    }
}

impl From<&CellResult> for CsvRow {
    fn from(r: &CellResult) -> Self {
        let c = &r.cell;
        let m = c.multi_db.as_ref();
        let w = r.write_completion.as_ref();
        Self {
            workload: c.workload.clone(),
            approach: c.approach.clone(),
            status: status(r).to_owned(),
            duration_ms: c.duration_ms,
            warmup_ms: c.warmup_ms,
            concurrency: c.concurrency,
            worker_threads: c.worker_threads,
            profile: c.profile.clone(),
            synchronous: c.synchronous.clone(),
            memstatus: on_off(c.memstatus).to_owned(),
            mutex: c.mutex.clone(),
            rows: c.rows,
            num_databases: m.map(|m| m.num_databases),
            readers: m.map(|m| m.readers),
            write_delay_ms: m.map(|m| m.write_delay_ms),
            write_mode: m.map(|m| m.write_mode.to_string()).unwrap_or_default(),
            total_readers: m.and_then(|m| m.total_readers),
            seed: c.seed,
            reads_ops: r.reads.ops,
            reads_ops_per_sec: r.reads.ops_per_sec,
            reads_avg_us: r.reads.avg_us,
            reads_p50_us: r.reads.p50_us,
            reads_p99_us: r.reads.p99_us,
            reads_max_us: r.reads.max_us,
            writes_ops: r.writes.ops,
            writes_ops_per_sec: r.writes.ops_per_sec,
            writes_avg_us: r.writes.avg_us,
            writes_p50_us: r.writes.p50_us,
            writes_p99_us: r.writes.p99_us,
            writes_max_us: r.writes.max_us,
            writes_expected: w.map(|w| w.expected),
            writes_completed: w.map(|w| w.completed),
            write_completion: w.map(|w| w.ratio),
            errors: r.errors,
            error_samples: r.error_samples.join(" | "),
            wall_secs: r.wall_secs,
            cpu_secs: r.cpu_secs,
            threads: r.threads,
            rss_bytes: r.rss_bytes,
            open_databases: r.open_databases,
            database_opens: r.database_opens,
            build_profile: c.build_profile.clone(),
            operations: if r.operations.is_empty() {
                String::new()
            } else {
                // Plain data: serializing it cannot fail.
                serde_json::to_string(&r.operations).unwrap_or_default()
            },
            window_allocations: r.window_allocations,
            window_alloc_bytes: r.window_alloc_bytes,
            lateness_p50_us: r.lateness.map(|l| l.p50_us),
            lateness_p99_us: r.lateness.map(|l| l.p99_us),
            lateness_p999_us: r.lateness.and_then(|l| l.p999_us),
            lateness_max_us: r.lateness.map(|l| l.max_us),
            lateness_ticks: r.lateness.map(|l| l.ticks),
            cpu_per_op_us: r.cpu_per_op_us,
            idle_secs: r.idle_cpu.map(|i| i.secs),
            idle_cpu_secs: r.idle_cpu.map(|i| i.cpu_secs),
            mmap_size: c.mmap_size,
            repetition: c.repetition,
            think_us: c.think_us,
            write_ppm: (c.workload == crate::catalog::MIXED).then_some(c.write_ppm),
            long_read_every: c.long_reads.map(|l| l.every),
            long_read_min_ms: c.long_reads.map(|l| l.min_ms),
            long_read_max_ms: c.long_reads.map(|l| l.max_ms),
            rate: c.rate,
            open_due: r.open_loop.map(|o| o.due),
            open_issued: r.open_loop.map(|o| o.issued),
            open_dropped: r.open_loop.map(|o| o.dropped),
            open_completed: r.open_loop.map(|o| o.completed),
            open_failed: r.open_loop.map(|o| o.failed),
            open_unfinished: r.open_loop.map(|o| o.unfinished),
            open_achieved_per_sec: r.open_loop.map(|o| o.achieved_per_sec),
            open_p50_us: r.open_loop.map(|o| o.p50_us),
            open_p99_us: r.open_loop.map(|o| o.p99_us),
            open_p999_us: r.open_loop.map(|o| o.p999_us),
            open_max_us: r.open_loop.map(|o| o.max_us),
            send_lateness_p50_us: r.open_loop.map(|o| o.send_lateness_p50_us),
            send_lateness_p99_us: r.open_loop.map(|o| o.send_lateness_p99_us),
            failure: r.failure.clone().unwrap_or_default(),
            runner: r.env.runner.clone(),
            sqlite_version: r.env.sqlite_version.clone(),
            compile_options: r.env.compile_options.join(";"),
            pragmas: join_map(&r.env.pragmas),
            crate_versions: join_map(&r.env.crate_versions),
            memstatus_effective: r.env.memstatus.clone(),
            cpu_model: r.env.cpu_model.clone(),
            cpus: r.env.cpus,
            open_files_limit: r.env.open_files_limit,
            core_round_trip_before_ns: r.env.core_round_trip_before_ns,
            core_round_trip_after_ns: r.env.core_round_trip_after_ns,
            allocator: r.env.allocator.clone(),
            kernel: r.env.kernel.clone(),
            date: r.env.date.clone(),
        }
    }
}

/// The open-loop figures of a row, when its CSV has them all.
fn open_loop_of(row: &CsvRow) -> Option<OpenLoop> {
    Some(OpenLoop {
        due: row.open_due?,
        issued: row.open_issued?,
        dropped: row.open_dropped?,
        completed: row.open_completed?,
        failed: row.open_failed?,
        unfinished: row.open_unfinished?,
        achieved_per_sec: row.open_achieved_per_sec?,
        p50_us: row.open_p50_us?,
        p99_us: row.open_p99_us?,
        p999_us: row.open_p999_us?,
        max_us: row.open_max_us?,
        send_lateness_p50_us: row.send_lateness_p50_us?,
        send_lateness_p99_us: row.send_lateness_p99_us?,
    })
}

impl From<CsvRow> for CellResult {
    fn from(row: CsvRow) -> Self {
        let multi_db = match (row.num_databases, row.readers, row.write_delay_ms) {
            (Some(num_databases), Some(readers), Some(write_delay_ms)) => Some(MultiDb {
                num_databases,
                readers,
                write_delay_ms,
                // Empty in CSVs written before the knob existed, when every writer blocked.
                write_mode: WriteMode::parse(&row.write_mode).unwrap_or_default(),
                total_readers: row.total_readers,
            }),
            _ => None,
        };
        let write_completion = match (
            row.writes_expected,
            row.writes_completed,
            row.write_completion,
        ) {
            (Some(expected), Some(completed), Some(ratio)) => Some(Completion {
                expected,
                completed,
                ratio,
            }),
            _ => None,
        };
        let lateness = match (
            row.lateness_p50_us,
            row.lateness_p99_us,
            row.lateness_max_us,
            row.lateness_ticks,
        ) {
            (Some(p50_us), Some(p99_us), Some(max_us), Some(ticks)) => Some(Lateness {
                p50_us,
                p99_us,
                p999_us: row.lateness_p999_us,
                max_us,
                ticks,
            }),
            _ => None,
        };
        let open_loop = open_loop_of(&row);
        let long_reads = match (
            row.long_read_every,
            row.long_read_min_ms,
            row.long_read_max_ms,
        ) {
            (Some(every), Some(min_ms), Some(max_ms)) => Some(LongReads {
                every,
                min_ms,
                max_ms,
            }),
            _ => None,
        };
        let idle_cpu = row
            .idle_secs
            .zip(row.idle_cpu_secs)
            .map(|(secs, cpu_secs)| IdleCpu { secs, cpu_secs });
        // A failed cell whose runner gave no reason still counts as failed.
        let failure = match (row.status.as_str(), row.failure.is_empty()) {
            (_, false) => Some(row.failure),
            ("failed", true) => Some("failed".to_owned()),
            _ => None,
        };
        Self {
            cell: Cell {
                workload: row.workload,
                approach: row.approach,
                duration_ms: row.duration_ms,
                warmup_ms: row.warmup_ms,
                concurrency: row.concurrency,
                worker_threads: row.worker_threads,
                profile: row.profile,
                synchronous: row.synchronous.filter(|s| !s.is_empty()),
                memstatus: row.memstatus == "on",
                mutex: row.mutex,
                mmap_size: row.mmap_size,
                rows: row.rows,
                multi_db,
                think_us: row.think_us,
                write_ppm: row.write_ppm.unwrap_or(DEFAULT_WRITE_PPM),
                rate: row.rate,
                long_reads,
                // The cell's directory is deleted after the run; it is not part of the record.
                dir: String::new(),
                seed: row.seed,
                repetition: row.repetition,
                build_profile: if row.build_profile.is_empty() {
                    DEFAULT_BUILD_PROFILE.to_owned()
                } else {
                    row.build_profile
                },
                // The server lived only for the run; it is not part of the record.
                postgres_url: None,
                // The workload file is not part of the record: its name is.
                custom: None,
            },
            failure,
            reads: OpStats {
                ops: row.reads_ops,
                ops_per_sec: row.reads_ops_per_sec,
                avg_us: row.reads_avg_us,
                p50_us: row.reads_p50_us,
                p99_us: row.reads_p99_us,
                max_us: row.reads_max_us,
            },
            writes: OpStats {
                ops: row.writes_ops,
                ops_per_sec: row.writes_ops_per_sec,
                avg_us: row.writes_avg_us,
                p50_us: row.writes_p50_us,
                p99_us: row.writes_p99_us,
                max_us: row.writes_max_us,
            },
            write_completion,
            errors: row.errors,
            error_samples: split(&row.error_samples, " | "),
            wall_secs: row.wall_secs,
            cpu_secs: row.cpu_secs,
            threads: row.threads,
            rss_bytes: row.rss_bytes,
            open_databases: row.open_databases,
            database_opens: row.database_opens,
            operations: parse_operations(&row.operations),
            window_allocations: row.window_allocations,
            window_alloc_bytes: row.window_alloc_bytes,
            lateness,
            cpu_per_op_us: row.cpu_per_op_us,
            idle_cpu,
            open_loop,
            env: Environment {
                runner: row.runner,
                sqlite_version: row.sqlite_version,
                compile_options: split(&row.compile_options, ";"),
                pragmas: split_map(&row.pragmas),
                crate_versions: split_map(&row.crate_versions),
                memstatus: row.memstatus_effective,
                cpu_model: row.cpu_model,
                cpus: row.cpus,
                open_files_limit: row.open_files_limit,
                core_round_trip_before_ns: row.core_round_trip_before_ns,
                core_round_trip_after_ns: row.core_round_trip_after_ns,
                allocator: row.allocator,
                kernel: row.kernel,
                date: row.date,
            },
        }
    }
}

/// The `operations` column back into named operations; an unreadable field reads as none (the report then says
/// the figures are missing rather than inventing them).
fn parse_operations(field: &str) -> Vec<NamedOp> {
    if field.is_empty() {
        return Vec::new();
    }
    serde_json::from_str(field).unwrap_or_default()
}

/// `on` / `off` for a boolean knob.
pub fn on_off(value: bool) -> &'static str {
    if value { "on" } else { "off" }
}

fn join_map(map: &BTreeMap<String, String>) -> String {
    map.iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(";")
}

fn split(field: &str, separator: &str) -> Vec<String> {
    if field.is_empty() {
        return Vec::new();
    }
    field.split(separator).map(str::to_owned).collect()
}

fn split_map(field: &str) -> BTreeMap<String, String> {
    split(field, ";")
        .into_iter()
        .map(|item| match item.split_once('=') {
            Some((k, v)) => (k.to_owned(), v.to_owned()),
            None => (item, String::new()),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixtures;

    #[test]
    fn a_result_survives_the_csv_round_trip() {
        for result in fixtures::results() {
            let back = CellResult::from(CsvRow::from(&result));
            let expected = CellResult {
                cell: Cell {
                    dir: String::new(),
                    ..result.cell.clone()
                },
                ..result.clone()
            };
            assert_eq!(back, expected);
        }
    }

    #[test]
    fn a_closed_loop_result_is_written_as_before_open_loops_existed() {
        let results = fixtures::results();
        let closed = results.iter().find(|r| r.cell.rate.is_none()).unwrap();
        let json = serde_json::to_string(closed).unwrap();
        assert!(
            !json.contains("\"rate\"") && !json.contains("open_loop"),
            "{json}"
        );
        let open = results.iter().find(|r| r.cell.rate.is_some()).unwrap();
        let json = serde_json::to_string(open).unwrap();
        assert!(
            json.contains("\"rate\":1000") && json.contains("\"open_loop\""),
            "{json}"
        );
        assert_eq!(serde_json::from_str::<CellResult>(&json).unwrap(), *open);
    }
}
