//! The summary every report shares: results grouped into tables, ranked by throughput, with ratios.
//!
//! A table holds the cells of one workload that ran under the same load (concurrency, worker threads, profile,
//! `synchronous`, databases, …), so its numbers compare approaches and nothing else. Memory statistics and the
//! mutex mode may differ inside a table: they are process set-up choices of one approach, shown in the row's label
//! (`quicklite · memstatus on`) when they differ from the table's usual value.

use quicklite_lab_core::{Cell, CellResult, Workload};

use crate::repetitions::{Paired, Spread, by_cell};
use crate::row::on_off;
use crate::{catalog, format};

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
    /// Whether a row is the [`catalog::CEILING`]: every row then shows its share of it.
    pub has_ceiling: bool,
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
    /// Whether the table is `throughput`'s: each write is a transaction of many rows, with rows per second and CPU
    /// per transaction.
    pub is_throughput: bool,
    /// Whether the table's cells ran open loop at one offered rate: achieved rate, dropped requests and latency
    /// from the scheduled times instead of rates and ratios, rows ranked by p99 (every row offered the same load).
    pub is_open_loop: bool,
    /// The most repetitions any row has.
    pub repetitions: usize,
}

/// One cell of a table, every repetition that succeeded.
#[derive(Debug, Clone)]
pub struct Row {
    /// Approach, plus the set-up knobs that differ from the table's usual values.
    pub label: String,
    /// The median repetition (the lower middle one for an even count): its latencies, CPU time and environment
    /// stand for the row.
    pub result: CellResult,
    /// Every successful repetition, in repetition order.
    pub samples: Vec<CellResult>,
    /// Reads + writes per second (queue cycles per second for the queue) of the median repetition: the ranking
    /// key.
    pub throughput: f64,
    /// The median and range of the repetitions' throughput; `None` for a single repetition.
    pub spread: Option<Spread>,
    /// This row's throughput over the baseline's: the median of the ratios of repetitions from the same round
    /// (pairs in different placements set aside, [`Paired`]), or the ratio of the medians when no pair is left.
    pub ratio: Option<f64>,
    /// The median and range of those paired ratios, when there are two or more.
    pub ratio_spread: Option<Spread>,
    /// Pairs with the baseline set aside because their placements differ.
    pub pairs_set_aside: usize,
    /// Whether this row is the baseline.
    pub is_baseline: bool,
    /// Whether this row is the [`catalog::CEILING`], the reference every row is a share of.
    pub is_ceiling: bool,
    /// This row's throughput as a share of the ceiling's (paired as the ratio is), when the table has a ceiling.
    pub of_ceiling: Option<f64>,
    /// The median and range of those paired shares, when there are two or more.
    pub of_ceiling_spread: Option<Spread>,
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
        // The ceiling is a reference, not a way to use SQLite from async Rust.
        let approaches = || self.rows.iter().filter(|r| !r.is_ceiling);
        let plain: Vec<&Row> = approaches()
            .filter(|r| r.label == r.result.cell.approach)
            .collect();
        let candidates = if plain.is_empty() {
            approaches().collect()
        } else {
            plain
        };
        let fastest = candidates.first()?;
        if !fastest.is_baseline {
            return Some(format!(
                "{} is {}{}",
                fastest.label,
                fastest.ratio_text(baseline),
                fastest.interval_note()
            ));
        }
        let runner_up = candidates.get(1)?;
        Some(format!(
            "{} is the fastest here; next, {} is {}{}",
            fastest.label,
            runner_up.label,
            runner_up.ratio_text(baseline),
            runner_up.interval_note()
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

    /// `5.92× faster`, `5.92× faster (5.10–6.30×)` with repetitions, `baseline`, or empty: for a column headed
    /// with the baseline's name. A dagger marks a ratio some of whose pairs were set aside for their placement.
    pub fn ratio_short(&self) -> String {
        let dagger = if self.pairs_set_aside > 0 { " †" } else { "" };
        match (self.is_baseline, self.ratio, &self.ratio_spread) {
            (true, _, _) => "baseline".to_owned(),
            (false, Some(ratio), Some(s)) => format!(
                "{} ({}){dagger}",
                format::ratio_short(ratio),
                format::ratio_range(ratio, s.low, s.high)
            ),
            (false, Some(ratio), None) => format!("{}{dagger}", format::ratio_short(ratio)),
            (false, None, _) => String::new(),
        }
    }

    /// `41%`, or `41% (38–45%)` with repetitions: the row's share of the ceiling's throughput; `ceiling` for the
    /// ceiling itself; empty without one.
    pub fn of_ceiling_text(&self) -> String {
        if self.is_ceiling {
            return "ceiling".to_owned();
        }
        match (self.of_ceiling, &self.of_ceiling_spread) {
            (Some(share), Some(s)) => format!(
                "{} ({:.0}–{:.0}%)",
                format::percent(share),
                s.low * 100.0,
                s.high * 100.0
            ),
            (Some(share), None) => format::percent(share),
            (None, _) => String::new(),
        }
    }

    /// ` (5.10–6.30× over 5 paired repetitions)` when the ratio has a range, else empty.
    pub fn interval_note(&self) -> String {
        match (self.ratio, &self.ratio_spread) {
            (Some(ratio), Some(s)) => format!(
                " ({} over {} paired repetitions)",
                format::ratio_range(ratio, s.low, s.high),
                s.n
            ),
            _ => String::new(),
        }
    }

    /// `5: 1.10M–1.31M/s`: the repetitions and the range of their throughput; empty for one repetition.
    pub fn spread_text(&self) -> String {
        match &self.spread {
            Some(s) => format!("{}: {}–{}/s", s.n, format::ops(s.low), format::ops(s.high)),
            None => String::new(),
        }
    }
}

/// The cell with everything that may differ inside one table blanked out: the approach, its set-up knobs and the
/// repetition.
pub(crate) fn load_key(cell: &Cell) -> Cell {
    Cell {
        approach: String::new(),
        repetition: 0,
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
    let repeated = members.iter().any(|r| r.cell.repetition > 0);
    // One row per cell, its repetitions together.
    let samples = by_cell(members.iter().copied().filter(|r| r.failure.is_none()));
    let mut rows: Vec<Row> = samples
        .into_iter()
        .map(|(cell, list)| row(label(&cell), &list))
        .collect();
    let is_open_loop = first.rate.is_some();
    if is_open_loop {
        rows.sort_by(|a, b| open_loop_p99(a).total_cmp(&open_loop_p99(b)));
    } else {
        rows.sort_by(|a, b| b.throughput.total_cmp(&a.throughput));
    }
    let failures = members
        .iter()
        .filter_map(|r| {
            r.failure.as_ref().map(|message| Failure {
                label: if repeated {
                    format!("{} · repetition {}", label(&r.cell), r.cell.repetition + 1)
                } else {
                    label(&r.cell)
                },
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
    // Or the slowest approach (the ceiling is a reference, not an approach). At an offered rate every row
    // completes about the same number of requests: a ratio of throughputs would say nothing.
    let named = named.filter(|_| !is_open_loop);
    let chosen = named
        .or_else(|| rows.iter().rposition(|r| !r.is_ceiling))
        .filter(|_| !is_open_loop);
    let baseline = chosen.map(|i| {
        rows[i].is_baseline = true;
        Baseline {
            label: rows[i].label.clone(),
            requested: named.is_some(),
        }
    });
    if let Some(base) = chosen
        .map(|i| rows[i].clone())
        .filter(|b| b.throughput > 0.0)
    {
        for row in &mut rows {
            compare(row, &base);
        }
    }
    let ceiling = rows
        .iter()
        .find(|r| r.is_ceiling && r.throughput > 0.0)
        .cloned();
    if let Some(ceiling) = &ceiling {
        for row in &mut rows {
            let (share, spread, _) = paired_ratio(row, ceiling);
            row.of_ceiling = Some(share);
            row.of_ceiling_spread = spread;
        }
    }
    Table {
        workload: first.workload.clone(),
        title: match first.rate {
            Some(rate) => format!("{} · {}", first.workload, format::rate(rate)),
            None => first.workload.clone(),
        },
        settings: settings(first, memstatus, &mutex, mmap_size, &build_profile),
        has_operations: rows.iter().any(|r| r.result.operation("cycle").is_some()),
        is_orm: is_orm(first),
        is_throughput: first.workload == catalog::THROUGHPUT,
        is_open_loop,
        // An open-loop table shows reads and writes together, from their scheduled times.
        has_reads: !is_open_loop && rows.iter().any(|r| r.result.reads.ops > 0),
        has_writes: !is_open_loop && rows.iter().any(|r| r.result.writes.ops > 0),
        has_completion: rows.iter().any(|r| r.result.write_completion.is_some()),
        has_process: first.multi_db.is_some(),
        has_open_databases: first.multi_db.is_some()
            && rows.iter().any(|r| r.result.open_databases.is_some()),
        repetitions: rows.iter().map(|r| r.samples.len()).max().unwrap_or(0),
        has_ceiling: ceiling.is_some(),
        rows,
        failures,
        baseline,
    }
}

/// The row of one cell's successful repetitions (at least one).
fn row(label: String, samples: &[&CellResult]) -> Row {
    let mut by_throughput: Vec<&CellResult> = samples.to_vec();
    by_throughput.sort_by(|a, b| throughput(a).total_cmp(&throughput(b)));
    let median = by_throughput[(by_throughput.len() - 1) / 2];
    let mut samples: Vec<CellResult> = samples.iter().map(|r| (*r).clone()).collect();
    samples.sort_by_key(|r| r.cell.repetition);
    let throughputs: Vec<f64> = samples.iter().map(throughput).collect();
    Row {
        label,
        result: median.clone(),
        throughput: throughput(median),
        spread: Spread::of(&throughputs).filter(|s| s.n > 1),
        samples,
        ratio: None,
        ratio_spread: None,
        pairs_set_aside: 0,
        is_baseline: false,
        is_ceiling: median.cell.approach == catalog::CEILING,
        of_ceiling: None,
        of_ceiling_spread: None,
    }
}

/// Fills in `row`'s ratio to `base`: repetitions of the same round paired, or the medians when no pair is left.
fn compare(row: &mut Row, base: &Row) {
    if row.is_baseline {
        row.ratio = Some(1.0);
        return;
    }
    let (ratio, spread, set_aside) = paired_ratio(row, base);
    row.ratio = Some(ratio);
    row.ratio_spread = spread;
    row.pairs_set_aside = set_aside;
}

/// `row`'s throughput over `base`'s: the median of the ratios of repetitions from the same round (pairs in
/// different placements set aside) with their spread when there are two or more, or the ratio of the medians when
/// no pair is left; and how many pairs were set aside.
fn paired_ratio(row: &Row, base: &Row) -> (f64, Option<Spread>, usize) {
    let pairs = row.samples.iter().filter_map(|sample| {
        base.samples
            .iter()
            .find(|b| b.cell.repetition == sample.cell.repetition)
            .map(|b| (sample, b))
    });
    let paired = Paired::of(pairs, throughput);
    match paired.spread() {
        Some(spread) => (
            spread.median,
            Some(spread).filter(|s| s.n > 1),
            paired.set_aside,
        ),
        None => (row.throughput / base.throughput, None, paired.set_aside),
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
        None if cell.rate.is_some() => push(
            "requests in flight",
            format!("at most {}", cell.concurrency),
        ),
        None => push("concurrency", format!("{} tasks", cell.concurrency)),
    }
    if let Some(rate) = cell.rate {
        push("offered load", format::rate(rate));
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
    if cell.workload == catalog::MIXED {
        // A run may measure several shares: each is a table, its title naming the share (`mixed · writes 1%`).
        push("writes", format::share_ppm(cell.write_ppm));
    }
    if cell.workload == "queue" {
        push("backlog", format!("{} jobs", cell.rows));
    }
    if cell.workload == catalog::THROUGHPUT {
        push(
            "rows per transaction",
            quicklite_lab_core::THROUGHPUT_ROWS_PER_TRANSACTION.to_string(),
        );
        let think = match cell.think_us {
            0 => "none".to_owned(),
            us => format::latency_us(us as f64),
        };
        push("think time in each transaction", think);
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

/// What an open-loop table shows, for reports with one; `None` when every cell ran closed loop.
pub fn open_loop_note(results: &[CellResult]) -> Option<String> {
    results.iter().any(|r| r.cell.rate.is_some()).then(|| {
        "Tables titled with a rate (`· 1,000 req/s`) ran open loop: requests sent on a fixed schedule whatever \
         the answers did, at most the cell's concurrency in flight (a request due while that many were is \
         `dropped`); `achieved/s` counts the requests due in the window that succeeded, and p50, p99 and p99.9 run \
         from each request's scheduled time, reads and writes together. Rows rank by p99; with every row offered \
         the same load, a throughput ratio would say nothing, so there is none: compare latency and `CPU/op`."
            .to_owned()
    })
}

/// The p99 latency from the scheduled times of an open-loop row, the ranking key of its table (lowest first); rows
/// without one last.
fn open_loop_p99(row: &Row) -> f64 {
    row.result.open_loop.map_or(f64::INFINITY, |o| o.p99_us)
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

/// How often the cells ran and how to read the figures that follow, for the top of every report.
pub fn repetitions_note(results: &[CellResult]) -> String {
    let runs = results
        .iter()
        .map(|r| r.cell.repetition + 1)
        .max()
        .unwrap_or(1);
    if runs <= 1 {
        return "Each cell ran once, so every figure and ratio is a single sample: on this kind of machine two runs \
                of the same cell differ by 10% and more, and by far more when their core round trips differ. Run \
                with `--repeat 3` or more for medians, ranges and verdicts."
            .to_owned();
    }
    format!(
        "Each cell ran {runs} times, each time in a fresh process, in rounds interleaved with the other cells of \
         its table. A row shows its median repetition, and `repetitions: range` the range of their throughput; a \
         ratio is the median of the ratios of repetitions from the same round, with their range in brackets. A \
         pair whose CPUs were placed differently (core round trips in different bands) is set aside; † marks a \
         ratio that lost pairs that way."
    )
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
    fn every_row_is_a_share_of_the_ceiling_which_is_no_approach_of_the_headline() {
        let mut results = fixtures::results();
        let quicklite = results
            .iter()
            .find(|r| r.cell.workload == "point-read" && r.cell.approach == "quicklite")
            .unwrap();
        let mut ceiling = quicklite.clone();
        ceiling.cell.approach = catalog::CEILING.to_owned();
        ceiling.reads.ops_per_sec *= 2.0;
        results.push(ceiling);
        let summary = Summary::new(&results, "no-such-baseline");
        let reads = &summary.tables[0];
        assert!(reads.has_ceiling);
        assert!(reads.rows[0].is_ceiling);
        assert_eq!(reads.rows[0].of_ceiling_text(), "ceiling");
        assert_eq!(reads.rows[1].label, "quicklite");
        assert_eq!(reads.rows[1].of_ceiling_text(), "50%");
        // The slowest approach stands in for the missing baseline, and the headline speaks of approaches.
        let baseline = reads.baseline.as_ref().unwrap();
        assert_eq!(baseline.label, "tokio-rusqlite");
        assert!(reads.headline().unwrap().starts_with("quicklite is "));
        let columns = crate::export::columns::columns(reads);
        let at = columns
            .headers
            .iter()
            .position(|h| h == "of ceiling")
            .unwrap();
        assert_eq!(columns.cells[1][at], "50%");
        // A table without a ceiling has no such column.
        let inserts = summary
            .tables
            .iter()
            .find(|t| t.workload == "insert")
            .unwrap();
        assert!(!inserts.has_ceiling);
        assert!(inserts.rows.iter().all(|r| r.of_ceiling.is_none()));
    }

    #[test]
    fn repetitions_make_one_row_with_a_median_a_range_and_paired_ratios() {
        let mut results = fixtures::repeated(3);
        // The third round of tokio-rusqlite's point reads failed.
        let failed = results
            .iter_mut()
            .find(|r| {
                r.cell.workload == "point-read"
                    && r.cell.approach == "tokio-rusqlite"
                    && r.cell.repetition == 2
            })
            .unwrap();
        failed.failure = Some("runner exited with exit status: 101".to_owned());
        let summary = Summary::new(&results, "tokio-rusqlite");
        let reads = &summary.tables[0];
        assert_eq!(reads.repetitions, 3);
        assert_eq!(reads.rows.len(), 5, "one row per cell, not per repetition");
        let quicklite = &reads.rows[0];
        assert_eq!(quicklite.label, "quicklite");
        assert_eq!(quicklite.samples.len(), 3);
        let spread = quicklite.spread.unwrap();
        // The middle repetition stands for the row.
        assert_eq!(quicklite.result.cell.repetition, 1);
        assert_eq!(quicklite.throughput, spread.median);
        assert!(spread.low < spread.median && spread.median < spread.high);
        // Two rounds have both sides; the ratio is their median, with their range.
        let ratio = quicklite.ratio_spread.unwrap();
        assert_eq!(ratio.n, 2);
        assert_eq!(quicklite.ratio, Some(ratio.median));
        assert!(
            quicklite.ratio_short().starts_with("5.8")
                && quicklite.ratio_short().contains("× faster ("),
            "{}",
            quicklite.ratio_short()
        );
        assert!(
            reads
                .headline()
                .unwrap()
                .ends_with("over 2 paired repetitions)"),
            "{:?}",
            reads.headline()
        );
        assert!(
            reads
                .failures
                .iter()
                .any(|f| f.label == "tokio-rusqlite · repetition 3"),
            "{:?}",
            reads.failures
        );
        assert!(repetitions_note(&results).starts_with("Each cell ran 3 times"));
        assert!(repetitions_note(&fixtures::results()).starts_with("Each cell ran once"));
    }

    #[test]
    fn a_pair_in_another_placement_is_set_aside_and_marked() {
        let mut results = fixtures::repeated(3);
        for r in results.iter_mut().filter(|r| {
            r.cell.workload == "point-read"
                && r.cell.approach == "quicklite"
                && r.cell.repetition == 0
        }) {
            r.env.core_round_trip_before_ns = Some(330.0);
            r.env.core_round_trip_after_ns = Some(350.0);
        }
        let summary = Summary::new(&results, "tokio-rusqlite");
        let quicklite = &summary.tables[0].rows[0];
        assert_eq!(quicklite.pairs_set_aside, 1);
        assert_eq!(quicklite.ratio_spread.map(|s| s.n), Some(2));
        assert!(
            quicklite.ratio_short().ends_with(" †"),
            "{}",
            quicklite.ratio_short()
        );
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
