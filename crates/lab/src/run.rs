//! The run loop: every cell in order, each result stored before the next cell starts.

use quicklite_lab_core::{ApproachName, Cell, CellResult};

use crate::clock::now_rfc3339;
use crate::error::Result;
use crate::execute::{ExecOptions, failed_result, run_cell};
use crate::runners::Runners;
use crate::store::ResultStore;

/// Told about progress, so a front end can draw it (the CLI draws progress bars; tests record calls).
pub trait Observer {
    /// Cell `index` (0-based) of `total` is about to start.
    fn cell_started(&mut self, index: usize, total: usize, cell: &Cell);
    /// Cell `index` finished (successfully or not) and its result is on disk.
    fn cell_finished(&mut self, index: usize, total: usize, result: &CellResult);
}

/// An observer that ignores everything.
#[derive(Debug, Default, Clone, Copy)]
pub struct Silent;

impl Observer for Silent {
    fn cell_started(&mut self, _: usize, _: usize, _: &Cell) {}
    fn cell_finished(&mut self, _: usize, _: usize, _: &CellResult) {}
}

/// Runs every cell with its approach's runner and stores each result as soon as it exists.
///
/// A failing cell is recorded and the run goes on; only failing to write the results stops it.
pub fn run_all(
    cells: &[Cell],
    runners: &Runners,
    exec: &ExecOptions,
    store: &mut ResultStore,
    observer: &mut dyn Observer,
) -> Result<()> {
    let total = cells.len();
    for (index, cell) in cells.iter().enumerate() {
        observer.cell_started(index, total, cell);
        // The matrix names approaches the lab knows; a cell built otherwise has no runner, and says so.
        let approach = cell.approach.parse::<ApproachName>().ok();
        let result = match approach.and_then(|a| runners.program(a, &cell.build_profile)) {
            Some(program) => run_cell(program, cell, exec),
            // resolve() guarantees a program per approach; a gap here is still reported, not a panic.
            None => failed_result(
                cell,
                std::path::Path::new(""),
                &now_rfc3339(),
                match approach.and_then(|a| runners.unavailable(a)) {
                    Some(reason) => format!("{} is not available here: {reason}", cell.approach),
                    None => format!(
                        "no runner for approach `{}` with build profile `{}` (a profile with runner features, e.g. \
                     `sqlcipher`, is measured only by the runners that have them)",
                        cell.approach, cell.build_profile
                    ),
                },
            ),
        };
        store.push(result)?;
        if let Some(result) = store.results().last() {
            observer.cell_finished(index, total, result);
        }
    }
    Ok(())
}

/// A short label for progress lines: `point-read · quicklite · 64 tasks · memstatus on · fullmutex`.
pub fn cell_label(cell: &Cell) -> String {
    let mut label = format!("{} · {}", cell.workload, cell.approach);
    match &cell.multi_db {
        Some(m) => {
            label.push_str(&format!(" · {} dbs", m.num_databases));
            match m.total_readers {
                Some(total) => label.push_str(&format!(" · {total} readers in all")),
                None => label.push_str(&format!(" × {} readers", m.readers)),
            }
            label.push_str(&format!(
                " · {} writes, delay {} ms",
                m.write_mode, m.write_delay_ms
            ));
        }
        None => label.push_str(&format!(" · {} tasks", cell.concurrency)),
    }
    if let Some(rate) = cell.rate {
        label.push_str(&format!(" · {} offered", crate::format::rate(rate)));
    }
    if let Some(long) = &cell.long_reads {
        label.push_str(&format!(
            " · long reads {}",
            crate::format::long_reads(long)
        ));
    }
    if cell.write_ppm != quicklite_lab_core::DEFAULT_WRITE_PPM {
        label.push_str(&format!(
            " · {} writes",
            crate::format::share_ppm(cell.write_ppm)
        ));
    }
    label.push_str(&format!(
        " · {} workers · {}",
        cell.worker_threads, cell.profile
    ));
    if let Some(sync) = &cell.synchronous {
        label.push_str(&format!(" · synchronous {sync}"));
    }
    label.push_str(&format!(
        " · memstatus {} · {}",
        crate::row::on_off(cell.memstatus),
        cell.mutex
    ));
    if cell.mmap_size.is_some() {
        label.push_str(&format!(
            " · mmap {}",
            crate::summary::mmap_text(cell.mmap_size)
        ));
    }
    if cell.build_profile != quicklite_lab_core::DEFAULT_BUILD_PROFILE {
        label.push_str(&format!(" · build {}", cell.build_profile));
    }
    if cell.repetition > 0 {
        label.push_str(&format!(" · repetition {}", cell.repetition + 1));
    }
    label
}
