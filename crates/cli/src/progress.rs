//! Progress while a run goes: a bar with cell k of n, ETA and the current cell, and one line per finished cell.

use std::time::Duration;

use indicatif::{ProgressBar, ProgressStyle};
use quicklite_lab::{Cell, CellResult};
use quicklite_lab::{Observer, cell_label, format};

/// Draws on stderr, so stdout carries only the summary. Without a terminal (CI logs, pipes) the bar hides
/// itself and the per-cell lines are still printed.
pub struct Progress {
    bar: ProgressBar,
}

impl Progress {
    /// A bar for `total` cells.
    pub fn new(total: usize) -> Self {
        let bar = ProgressBar::new(total as u64);
        let style = ProgressStyle::with_template(
            "{spinner} [{elapsed_precise}] [{bar:30}] cell {pos}/{len} · ETA {eta} · {wide_msg}",
        )
        .unwrap_or_else(|_| ProgressStyle::default_bar())
        .progress_chars("=> ");
        bar.set_style(style);
        bar.enable_steady_tick(Duration::from_millis(200));
        Self { bar }
    }

    /// Removes the bar.
    pub fn finish(&self) {
        self.bar.finish_and_clear();
    }

    fn line(&self, text: String) {
        if self.bar.is_hidden() {
            eprintln!("{text}");
        } else {
            self.bar.println(text);
        }
    }
}

impl Observer for Progress {
    fn cell_started(&mut self, _index: usize, _total: usize, cell: &Cell) {
        self.bar.set_message(cell_label(cell));
    }

    fn cell_finished(&mut self, index: usize, total: usize, result: &CellResult) {
        let label = cell_label(&result.cell);
        let text = match &result.failure {
            None => format!(
                "{} ok     {label}: {}",
                counter(index, total),
                rates(result)
            ),
            Some(failure) => format!(
                "{} FAILED {label}: {}",
                counter(index, total),
                failure.lines().next().unwrap_or("")
            ),
        };
        self.line(text);
        self.bar.inc(1);
    }
}

/// `1.42M reads/s, 12k writes/s` (or queue cycles/s), leaving out a kind the workload does not do, then the CPU
/// per operation, the idle CPU, the runtime's lateness and the core round trip when the runner measured them.
fn rates(result: &CellResult) -> String {
    let mut parts = Vec::new();
    if let Some(suite) = quicklite_lab::orm_suite_us(result, false) {
        parts.push(format!("ORM suite {}", format::latency_us(suite)));
    }
    if let Some(cycle) = result.operation("cycle").filter(|c| c.stats.ops > 0) {
        parts.push(format!(
            "{} queue cycles/s",
            format::ops(cycle.stats.ops_per_sec)
        ));
    }
    if result.reads.ops > 0 {
        parts.push(format!("{} reads/s", format::ops(result.reads.ops_per_sec)));
    }
    if result.writes.ops > 0 {
        parts.push(format!(
            "{} writes/s",
            format::ops(result.writes.ops_per_sec)
        ));
    }
    if parts.is_empty() {
        parts.push("no operation completed".to_owned());
    }
    let mut notes = Vec::new();
    if let Some(us) = result.cpu_per_op_us {
        notes.push(format!("CPU/op {}", format::cpu_us(us)));
    }
    if let Some(idle) = result.idle_cpu {
        notes.push(format!(
            "idle CPU {} of a core",
            format::core_percent(idle.core_share())
        ));
    }
    if let Some(lateness) = result.lateness {
        notes.push(format!(
            "lateness p99 {}",
            format::latency_us(lateness.p99_us)
        ));
        if result.cell.long_reads.is_some() {
            notes.push(format!(
                "lateness max {}",
                format::latency_us(lateness.max_us)
            ));
        }
    }
    if result.cell.long_reads.is_some() && result.writes.ops > 0 {
        notes.push(format!(
            "slowest write {}",
            format::latency_us(result.writes.max_us)
        ));
    }
    let round_trip = format::round_trip_ns(
        result.env.core_round_trip_before_ns,
        result.env.core_round_trip_after_ns,
    );
    if !round_trip.is_empty() {
        notes.push(format!("core round trip {round_trip}"));
    }
    if notes.is_empty() {
        parts.join(", ")
    } else {
        format!("{} ({})", parts.join(", "), notes.join(", "))
    }
}

/// `[ 9/28]`: padded so the lines of a run stay aligned.
fn counter(index: usize, total: usize) -> String {
    let width = total.to_string().len();
    format!("[{:>width$}/{total}]", index + 1)
}
