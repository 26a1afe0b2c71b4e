//! The summary every report shares: results grouped into tables, ranked by throughput, with ratios.
//!
//! A table holds the cells of one workload that ran under the same load (concurrency, worker threads, profile,
//! `synchronous`, databases, …), so its numbers compare approaches and nothing else. Memory statistics and the
//! mutex mode may differ inside a table: they are process set-up choices of one approach, shown in the row's label
//! (`quicklite · memstatus on`) when they differ from the table's usual value.

mod notes;
mod ratio;
mod row;
mod settings;
mod table;
mod throughput;

use quicklite_lab_core::{ApproachName, Cell, CellResult};

pub use self::notes::{open_loop_note, repetitions_note, wal_reset_note};
pub use self::ratio::Baseline;
pub use self::row::Row;
pub use self::settings::mmap_text;
pub use self::table::{Failure, Table};
pub use self::throughput::{orm_suite_us, throughput};
use table::table;

/// Every result, grouped into comparable tables.
#[derive(Debug, Clone)]
pub struct Summary {
    /// The approach ratios are computed against, as requested.
    pub baseline: ApproachName,
    /// Tables in the order their first cell ran.
    pub tables: Vec<Table>,
}

impl Summary {
    /// Groups `results` into tables and ranks them against `baseline`.
    pub fn new(results: &[CellResult], baseline: ApproachName) -> Self {
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
        Self { baseline, tables }
    }

    /// All failures, with the title of their table.
    pub fn failures(&self) -> impl Iterator<Item = (&str, &Failure)> {
        self.tables
            .iter()
            .flat_map(|t| t.failures.iter().map(move |f| (t.title.as_str(), f)))
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
