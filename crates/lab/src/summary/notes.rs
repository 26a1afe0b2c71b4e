//! The notes at the top of a report: how often the cells ran, how to read a table that ran open loop, and which
//! approaches ran on a SQLite with the WAL-reset bug.

use quicklite_lab_core::CellResult;

use crate::wal_reset_bug::{self, DESCRIPTION, MARK};

/// The approaches whose SQLite has the WAL-reset bug, each with that SQLite's version, for reports with one; `None`
/// when no runner reported such a SQLite.
pub fn wal_reset_note(results: &[CellResult]) -> Option<String> {
    let mut affected: Vec<String> = Vec::new();
    for r in results.iter().filter(|r| r.failure.is_none()) {
        let version = &r.env.sqlite_version;
        let named = format!("`{}` (SQLite {version})", r.cell.approach);
        if wal_reset_bug::affected(version) && !affected.contains(&named) {
            affected.push(named);
        }
    }
    (!affected.is_empty()).then(|| {
        format!(
            "{MARK} marks an approach whose SQLite has the WAL-reset bug: {}. That bug, in SQLite 3.7.0 to 3.51.2 \
             (fixed in 3.51.3, and in the backports 3.50.7 and 3.44.6), is a data race between a checkpoint and a \
             commit that resets the WAL, which can corrupt a database that several connections write and \
             checkpoint in WAL mode, as every approach here does ({DESCRIPTION}): such a row measures a set-up that \
             is not safe to run as it is.",
            affected.join(", ")
        )
    })
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
