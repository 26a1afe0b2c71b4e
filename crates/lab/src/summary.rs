//! The summary every report shares: results grouped into tables, ranked by throughput, with ratios.
//!
//! A table holds the cells of one workload that ran under the same load (concurrency, worker threads, profile,
//! `synchronous`, databases, …), so its numbers compare approaches and nothing else. Memory statistics and the
//! mutex mode may differ inside a table: they are process set-up choices of one approach, shown in the row's label
//! (`quicklite · memstatus on`) when they differ from the table's usual value.

use quicklite_lab_core::{Cell, CellResult, Workload};

use crate::format;
use crate::row::on_off;

/// Every result, grouped into comparable tables.
#[derive(Debug, Clone)]
pub struct Summary {
    /// The approach ratios are computed against, as requested.
    pub baseline: String,
    /// Tables in the order their first cell ran.
    pub tables: Vec<Table>,
}

/// The cells of one workload under one load, ranked.
#[derive(Debug, Clone)]
pub struct Table {
    /// Workload name.
    pub workload: String,
    /// Heading: the workload, plus whatever tells it apart from the workload's other tables.
    pub title: String,
    /// The settings every row shares (label, value), so the numbers never travel without them.
    pub settings: Vec<(String, String)>,
    /// Successful cells, fastest first.
    pub rows: Vec<Row>,
    /// Cells that failed, with the reason.
    pub failures: Vec<Failure>,
    /// What the ratios are against; `None` when no cell succeeded.
    pub baseline: Option<Baseline>,
    /// Whether any row did reads, writes, or paced writes, so empty columns are left out.
    pub has_reads: bool,
    /// See `has_reads`.
    pub has_writes: bool,
    /// See `has_reads`.
    pub has_completion: bool,
    /// Whether the table shows the process's threads and memory: `multi-db`, where a thread per database is
    /// the claim under test (seed 004).
    pub has_process: bool,
    /// Whether any row knows its open databases, so memory per open database can be shown.
    pub has_open_databases: bool,
    /// Whether the rows have named operations (`queue`): per-operation latency and allocation columns.
    pub has_operations: bool,
    /// Whether the table is the ORM suite's: suite times instead of rates.
    pub is_orm: bool,
}

/// One successful cell in a table.
#[derive(Debug, Clone)]
pub struct Row {
    /// Approach, plus the set-up knobs that differ from the table's usual values.
    pub label: String,
    /// The full result.
    pub result: CellResult,
    /// Reads + writes per second (queue cycles per second for the queue): the ranking key.
    pub throughput: f64,
    /// `throughput / baseline throughput`, if the baseline measured anything.
    pub ratio: Option<f64>,
    /// Whether this row is the baseline.
    pub is_baseline: bool,
}

/// The row ratios are computed against.
#[derive(Debug, Clone)]
pub struct Baseline {
    /// Its row label.
    pub label: String,
    /// `false` when the requested baseline did not run (or failed) and the slowest row stands in.
    pub requested: bool,
}

/// A cell that did not produce a number.
#[derive(Debug, Clone)]
pub struct Failure {
    /// Approach plus distinguishing knobs, as for rows.
    pub label: String,
    /// Why (runner crash, timeout, garbage on stdout, set-up error).
    pub message: String,
}

impl Table {
    /// hyperfine's closing line for the table: `quicklite is 5.92× faster than tokio-rusqlite`.
    ///
    /// It speaks of approaches at the table's usual set-up (a `· memstatus on` variant is a footnote, not the
    /// headline). When the baseline itself is fastest, it says so and names the runner-up.
    pub fn headline(&self) -> Option<String> {
        let baseline = self.baseline.as_ref()?;
        let plain: Vec<&Row> = self
            .rows
            .iter()
            .filter(|r| r.label == r.result.cell.approach)
            .collect();
        let candidates = if plain.is_empty() {
            self.rows.iter().collect()
        } else {
            plain
        };
        let fastest = candidates.first()?;
        if !fastest.is_baseline {
            return Some(format!(
                "{} is {}",
                fastest.label,
                fastest.ratio_text(baseline)
            ));
        }
        let runner_up = candidates.get(1)?;
        Some(format!(
            "{} is the fastest here; next, {} is {}",
            fastest.label,
            runner_up.label,
            runner_up.ratio_text(baseline)
        ))
    }
}

impl Summary {
    /// Groups `results` into tables and ranks them against `baseline`.
    pub fn new(results: &[CellResult], baseline: &str) -> Self {
        let mut groups: Vec<(Cell, Vec<&CellResult>)> = Vec::new();
        for result in results {
            let key = load_key(&result.cell);
            match groups.iter_mut().find(|(k, _)| *k == key) {
                Some((_, members)) => members.push(result),
                None => groups.push((key, vec![result])),
            }
        }
        let mut tables: Vec<Table> = groups
            .iter()
            .map(|(_, members)| table(members, baseline))
            .collect();
        distinguish_titles(&mut tables);
        Self {
            baseline: baseline.to_owned(),
            tables,
        }
    }

    /// All failures, with the title of their table.
    pub fn failures(&self) -> impl Iterator<Item = (&str, &Failure)> {
        self.tables
            .iter()
            .flat_map(|t| t.failures.iter().map(move |f| (t.title.as_str(), f)))
    }
}

impl Row {
    /// `5.92× faster than tokio-rusqlite`, `baseline`, or empty.
    pub fn ratio_text(&self, baseline: &Baseline) -> String {
        match (self.is_baseline, self.ratio) {
            (true, _) => "baseline".to_owned(),
            (false, Some(ratio)) => format::ratio(ratio, &baseline.label),
            (false, None) => String::new(),
        }
    }

    /// `5.92× faster`, `baseline`, or empty: for a column headed with the baseline's name.
    pub fn ratio_short(&self) -> String {
        match (self.is_baseline, self.ratio) {
            (true, _) => "baseline".to_owned(),
            (false, Some(ratio)) => format::ratio_short(ratio),
            (false, None) => String::new(),
        }
    }
}

/// The cell with everything that may differ inside one table blanked out.
fn load_key(cell: &Cell) -> Cell {
    Cell {
        approach: String::new(),
        memstatus: false,
        mutex: String::new(),
        mmap_size: None,
        dir: String::new(),
        build_profile: String::new(),
        postgres_url: None,
        ..cell.clone()
    }
}

fn table(members: &[&CellResult], baseline_name: &str) -> Table {
    let first = &members[0].cell;
    let memstatus = majority(members.iter().map(|r| r.cell.memstatus));
    let mutex = majority(members.iter().map(|r| r.cell.mutex.clone()));
    let build_profile = majority(members.iter().map(|r| r.cell.build_profile.clone()));
    let mmap_size = majority(members.iter().map(|r| r.cell.mmap_size));
    let label = |cell: &Cell| {
        let mut label = cell.approach.clone();
        if cell.build_profile != build_profile {
            label.push_str(&format!(" · build {}", cell.build_profile));
        }
        if cell.memstatus != memstatus {
            label.push_str(&format!(" · memstatus {}", on_off(cell.memstatus)));
        }
        if cell.mutex != mutex {
            label.push_str(&format!(" · {}", cell.mutex));
        }
        if cell.mmap_size != mmap_size {
            label.push_str(&format!(" · mmap {}", mmap_text(cell.mmap_size)));
        }
        label
    };
    let mut rows: Vec<Row> = members
        .iter()
        .filter(|r| r.failure.is_none())
        .map(|r| Row {
            label: label(&r.cell),
            result: (*r).clone(),
            throughput: throughput(r),
            ratio: None,
            is_baseline: false,
        })
        .collect();
    rows.sort_by(|a, b| b.throughput.total_cmp(&a.throughput));
    let failures = members
        .iter()
        .filter_map(|r| {
            r.failure.as_ref().map(|message| Failure {
                label: label(&r.cell),
                message: message.clone(),
            })
        })
        .collect();
    // Prefer the baseline approach at the table's usual set-up (its label is the bare name).
    let named = rows
        .iter()
        .position(|r| r.label == baseline_name)
        .or_else(|| {
            rows.iter()
                .position(|r| r.result.cell.approach == baseline_name)
        });
    let chosen = named.or_else(|| rows.len().checked_sub(1));
    let baseline = chosen.map(|i| {
        rows[i].is_baseline = true;
        Baseline {
            label: rows[i].label.clone(),
            requested: named.is_some(),
        }
    });
    if let Some(base) = chosen.map(|i| rows[i].throughput).filter(|t| *t > 0.0) {
        for row in &mut rows {
            row.ratio = Some(row.throughput / base);
        }
    }
    Table {
        workload: first.workload.clone(),
        title: first.workload.clone(),
        settings: settings(first, memstatus, &mutex, mmap_size, &build_profile),
        has_operations: rows.iter().any(|r| r.result.operation("cycle").is_some()),
        is_orm: is_orm(first),
        has_reads: rows.iter().any(|r| r.result.reads.ops > 0),
        has_writes: rows.iter().any(|r| r.result.writes.ops > 0),
        has_completion: rows.iter().any(|r| r.result.write_completion.is_some()),
        has_process: first.multi_db.is_some(),
        has_open_databases: first.multi_db.is_some()
            && rows.iter().any(|r| r.result.open_databases.is_some()),
        rows,
        failures,
        baseline,
    }
}

/// The settings a table's rows share, in reading order.
fn settings(
    cell: &Cell,
    memstatus: bool,
    mutex: &str,
    mmap_size: Option<u64>,
    build_profile: &str,
) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = Vec::new();
    let mut push = |k: &str, v: String| out.push((k.to_owned(), v));
    match &cell.multi_db {
        Some(m) => {
            push("databases", m.num_databases.to_string());
            match m.total_readers {
                Some(total) => push(
                    "readers",
                    format!("{total} in all, random database per read"),
                ),
                None => push("readers per database", m.readers.to_string()),
            }
            push("write mode", m.write_mode.to_string());
            push("write delay", format::duration_ms(m.write_delay_ms));
        }
        None => push("concurrency", format!("{} tasks", cell.concurrency)),
    }
    push("tokio worker threads", cell.worker_threads.to_string());
    push("profile", cell.profile.clone());
    push(
        "synchronous",
        cell.synchronous
            .clone()
            .unwrap_or_else(|| "profile's".to_owned()),
    );
    push("memory statistics", on_off(memstatus).to_owned());
    push("mutex", mutex.to_owned());
    push("memory map", mmap_text(mmap_size));
    push("SQLite build", build_profile.to_owned());
    if matches!(
        cell.workload.as_str(),
        "point-read" | "mixed" | "write-read"
    ) {
        push("rows", cell.rows.to_string());
    }
    if cell.workload == "queue" {
        push("backlog", format!("{} jobs", cell.rows));
    }
    push(
        "measured",
        format!(
            "{} after {} warm-up",
            format::duration_ms(cell.duration_ms),
            format::duration_ms(cell.warmup_ms)
        ),
    );
    push("seed", cell.seed.to_string());
    out
}

/// Whether a cell runs the ORM suite, whose result is a suite time rather than a rate.
fn is_orm(cell: &Cell) -> bool {
    cell.workload == Workload::Orm.name()
}

/// The ranking key of a result: reads + writes per second, full queue cycles per second, or ORM suites per
/// second (one suite: each operation once, without a wrapping transaction).
pub fn throughput(result: &CellResult) -> f64 {
    if is_orm(&result.cell) {
        return orm_suite_us(result, false)
            .filter(|us| *us > 0.0)
            .map_or(0.0, |us| 1e6 / us);
    }
    match result.operation("cycle") {
        Some(cycle) => cycle.stats.ops_per_sec,
        None => result.reads.ops_per_sec + result.writes.ops_per_sec,
    }
}

/// The ORM suite's time in microseconds: the sum of every operation's mean, without (`txn = false`) or with a
/// wrapping transaction; `None` when an operation has no measurement, or for another workload (the queue's named
/// operations are no suite).
pub fn orm_suite_us(result: &CellResult, txn: bool) -> Option<f64> {
    if !is_orm(&result.cell) {
        return None;
    }
    let ops: Vec<_> = result
        .operations
        .iter()
        .filter(|o| o.name.ends_with(" (txn)") == txn)
        .collect();
    if ops.is_empty() || ops.iter().any(|o| o.stats.ops == 0) {
        return None;
    }
    Some(ops.iter().map(|o| o.stats.avg_us).sum())
}

/// When a workload has several tables, adds the settings that tell them apart to their titles.
fn distinguish_titles(tables: &mut [Table]) {
    let snapshot: Vec<(String, Vec<(String, String)>)> = tables
        .iter()
        .map(|t| (t.workload.clone(), t.settings.clone()))
        .collect();
    for table in tables.iter_mut() {
        let siblings: Vec<&Vec<(String, String)>> = snapshot
            .iter()
            .filter(|(w, _)| *w == table.workload)
            .map(|(_, s)| s)
            .collect();
        if siblings.len() < 2 {
            continue;
        }
        let differing: Vec<String> = table
            .settings
            .iter()
            .filter(|(k, v)| {
                siblings
                    .iter()
                    .any(|s| s.iter().any(|(k2, v2)| k2 == k && v2 != v))
            })
            .map(|(k, v)| format!("{k} {v}"))
            .collect();
        if !differing.is_empty() {
            table.title = format!("{} · {}", table.workload, differing.join(" · "));
        }
    }
}

/// The most common value; ties go to the one seen first.
/// An `mmap_size` override as the reports write it: `0`, `256 MiB`, or `profile's`.
pub fn mmap_text(mmap_size: Option<u64>) -> String {
    match mmap_size {
        None => "profile's".to_owned(),
        Some(0) => "0".to_owned(),
        Some(bytes) => format::bytes(bytes),
    }
}

fn majority<T: PartialEq + Clone + Default>(values: impl Iterator<Item = T>) -> T {
    let mut counts: Vec<(T, usize)> = Vec::new();
    for value in values {
        match counts.iter_mut().find(|(v, _)| *v == value) {
            Some((_, n)) => *n += 1,
            None => counts.push((value, 1)),
        }
    }
    let best = counts.iter().map(|(_, n)| *n).max().unwrap_or(0);
    counts
        .into_iter()
        .find(|(_, n)| *n == best)
        .map(|(v, _)| v)
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixtures;

    #[test]
    fn tables_rank_by_throughput_against_the_named_baseline() {
        let summary = Summary::new(&fixtures::results(), "tokio-rusqlite");
        let reads = &summary.tables[0];
        assert_eq!(reads.workload, "point-read");
        let labels: Vec<&str> = reads.rows.iter().map(|r| r.label.as_str()).collect();
        assert_eq!(
            labels,
            [
                "quicklite",
                "quicklite · mmap 0",
                "quicklite · memstatus on",
                "direct-blocking",
                "tokio-rusqlite"
            ]
        );
        let baseline = reads.baseline.as_ref().unwrap();
        assert!(baseline.requested);
        assert_eq!(
            reads.rows[0].ratio_text(baseline),
            "5.92× faster than tokio-rusqlite"
        );
        assert_eq!(reads.failures.len(), 1);
    }

    #[test]
    fn a_missing_baseline_falls_back_to_the_slowest() {
        let summary = Summary::new(&fixtures::results(), "tokio-rusqlite");
        let inserts = &summary.tables[1];
        let baseline = inserts.baseline.as_ref().unwrap();
        assert!(!baseline.requested);
        assert_eq!(baseline.label, "per-request");
    }

    #[test]
    fn only_an_orm_result_has_a_suite_time() {
        let results = fixtures::results();
        let workload = |name: &str| results.iter().find(|r| r.cell.workload == name).unwrap();
        assert!(orm_suite_us(workload("orm"), false).is_some());
        // The queue's publish, claim, ack and cycle are named operations too, but no suite (the progress line
        // called them "ORM suite").
        let queue = workload("queue");
        assert!(!queue.operations.is_empty());
        assert_eq!(orm_suite_us(queue, false), None);
        assert_eq!(orm_suite_us(queue, true), None);
    }
}
