//! One table: the cells of one workload under one load, a row per cell with its repetitions, labelled by the
//! set-up knobs that differ, and ranked.

use quicklite_lab_core::{ApproachName, Cell, CellResult};

use super::ratio::{Baseline, compare, paired_ratio};
use super::row::{Row, row};
use super::settings::{mmap_text, settings};
use super::throughput::is_orm;
use crate::repetitions::by_cell;
use crate::row::on_off;
use crate::{catalog, format};

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
    /// Whether a row is the [`ApproachName::Ceiling`]: every row then shows its share of it.
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
    /// Whether the table is `held-tx`'s: each write is a transaction that thinks between its statements, shown as
    /// transactions per second and transaction latency.
    pub is_held_tx: bool,
    /// Whether the table is `long-read`'s: its reads are the short ones, with the long reads, the slowest write and
    /// the ticker's tail beside them.
    pub is_long_read: bool,
    /// Whether the table's cells ran open loop at one offered rate: achieved rate, dropped requests and latency
    /// from the scheduled times instead of rates and ratios, rows ranked by p99 (every row offered the same load).
    pub is_open_loop: bool,
    /// The most repetitions any row has.
    pub repetitions: usize,
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

pub(super) fn table(members: &[&CellResult], baseline_name: ApproachName) -> Table {
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
        .position(|r| r.label == baseline_name.as_str())
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
        is_held_tx: first.workload == catalog::HELD_TX,
        is_long_read: first.workload == catalog::LONG_READ,
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

/// The p99 latency from the scheduled times of an open-loop row, the ranking key of its table (lowest first); rows
/// without one last.
fn open_loop_p99(row: &Row) -> f64 {
    row.result.open_loop.map_or(f64::INFINITY, |o| o.p99_us)
}

/// The most common value; ties go to the one seen first.
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
    use quicklite_lab_core::ApproachName;

    use crate::fixtures;
    use crate::summary::{Summary, repetitions_note};

    #[test]
    fn tables_rank_by_throughput_against_the_named_baseline() {
        let summary = Summary::new(&fixtures::results(), ApproachName::TokioRusqlite);
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
        let summary = Summary::new(&results, ApproachName::TokioRusqlite);
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
}
