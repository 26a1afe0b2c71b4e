//! The matrix: every cell a run will measure, built from [`BenchOptions`] and validated before anything runs.

mod product;
mod rounds;
mod validation;
mod variants;

use quicklite_lab_core::{Cell, CustomWorkload};

pub use self::rounds::interleave;
pub use self::validation::validate;
use crate::error::Result;
use crate::options::BenchOptions;
use product::{dedup, product, scenarios, supports, takes_rate};
use variants::{apply, variants_for};

/// Validates `options` and returns the cells to measure, in run order: per workload, every combination of
/// knobs with the approaches innermost (so one summary table's cells run back to back), then the variants.
///
/// Cells carry an empty `dir`; the executor gives each a fresh directory just before it runs.
pub fn build_matrix(options: &BenchOptions) -> Result<Vec<Cell>> {
    validate(options)?;
    let workloads = dedup(&options.workloads);
    let approaches = dedup(&options.approaches);
    let first_memstatus = options.memstatus.first().copied().unwrap_or(false);
    let first_mutex = options.mutex.first().cloned().unwrap_or_default();
    let first_mmap = options.mmap_size.first().copied().flatten();
    let first_profile = options.profiles.first().cloned().unwrap_or_default();
    let first_build = options.build_profiles.first().cloned().unwrap_or_default();
    let mut cells = Vec::new();
    for workload in &workloads {
        let scenarios = scenarios(workload, options);
        for base in &scenarios {
            for &memstatus in &dedup(&options.memstatus) {
                for (mutex, mmap_size) in
                    product(&dedup(&options.mutex), &dedup(&options.mmap_size))
                {
                    for &approach in approaches
                        .iter()
                        .filter(|&&a| supports(options, workload, a) && takes_rate(base, a))
                    {
                        // A server-backed approach has no SQLite knobs: one cell, at the first values.
                        let sqlite_knobs_vary = memstatus != first_memstatus
                            || mutex != first_mutex
                            || mmap_size != first_mmap
                            || base.profile != first_profile
                            || base.build_profile != first_build;
                        if approach.needs_server() && sqlite_knobs_vary {
                            continue;
                        }
                        // A runner in another language links its own SQLite, set up by its driver, and Turso links
                        // none: the process knobs of a Rust runner (memory statistics, mutex mode, build profile) do
                        // not reach them.
                        let process_knobs_vary = memstatus != first_memstatus
                            || mutex != first_mutex
                            || base.build_profile != first_build;
                        if !approach.runner().takes_process_knobs() && process_knobs_vary {
                            continue;
                        }
                        cells.push(Cell {
                            postgres_url: approach
                                .needs_server()
                                .then(|| options.postgres_url.clone())
                                .flatten(),
                            approach: approach.to_string(),
                            memstatus,
                            mutex: mutex.clone(),
                            mmap_size,
                            ..base.clone()
                        });
                    }
                }
            }
        }
        for variant in variants_for(workload, &approaches, &options.variants)
            .filter(|v| supports(options, workload, v.approach))
        {
            if let Some(base) = scenarios
                .first()
                .filter(|b| takes_rate(b, variant.approach))
            {
                let cell = apply(base, variant, options);
                if !cells.contains(&cell) {
                    cells.push(cell);
                }
            }
        }
    }
    Ok(interleave(cells, options.repeat))
}

/// The run's custom workload named `name`, if it is one.
fn custom<'o>(options: &'o BenchOptions, name: &str) -> Option<&'o CustomWorkload> {
    options.custom.iter().find(|c| c.name == name)
}

#[cfg(test)]
mod tests {
    use quicklite_lab_core::ApproachName;

    use super::*;

    /// The full run's defaults, each cell once: the tests of the product count cells.
    pub(super) fn once() -> BenchOptions {
        BenchOptions {
            repeat: 1,
            ..BenchOptions::default()
        }
    }

    /// A custom workload as the command line gives it after checking its file.
    pub(super) fn custom_workload(name: &str) -> CustomWorkload {
        CustomWorkload {
            name: name.to_owned(),
            schema: vec!["CREATE TABLE t (x)".to_owned()],
            seed: Vec::new(),
            transactions: vec![quicklite_lab_core::Transaction {
                name: "read".to_owned(),
                weight: 1,
                writes: false,
                params: Vec::new(),
                statements: vec![quicklite_lab_core::CustomStatement {
                    sql: "SELECT x FROM t".to_owned(),
                    binds: Vec::new(),
                }],
            }],
        }
    }

    #[test]
    fn quick_matrix_covers_every_approach_on_three_workloads_and_the_queue() {
        let cells = build_matrix(&BenchOptions::quick()).expect("quick options are valid");
        // 8 approaches (trailbase-sqlite is left out) × 4 workloads, the ceiling on the three single-database ones
        // and the queue, the queue, http and orm without sqlx, 5 set-up variants, 4 one-task queue variants, 2
        // untuned orm variants, 4 one-task mixed variants, 6 without a memory map.
        assert_eq!(cells.len(), 8 * 4 + 4 + 7 * 3 + 5 + 4 + 2 + 4 + 6);
        assert!(
            cells
                .iter()
                .filter(|c| c.approach == ApproachName::Ceiling)
                .all(|c| ApproachName::Ceiling.implements(c.workload.parse().unwrap()))
        );
        assert!(cells.iter().all(|c| c.approach != "trailbase-sqlite"));
        let unmapped: Vec<&Cell> = cells.iter().filter(|c| c.mmap_size == Some(0)).collect();
        assert_eq!(unmapped.len(), 6);
        assert!(
            unmapped
                .iter()
                .all(|c| ["point-read", "mixed"].contains(&c.workload.as_str()))
        );
        let serial_mixed = cells
            .iter()
            .filter(|c| c.workload == "mixed" && c.concurrency == 1);
        assert_eq!(serial_mixed.count(), 6);
        let orm: Vec<&Cell> = cells.iter().filter(|c| c.workload == "orm").collect();
        assert!(orm.iter().all(|c| c.concurrency == 1));
        assert_eq!(
            orm.iter().filter(|c| c.profile == "sqlite-default").count(),
            2
        );
        for workload in ["point-read", "insert", "multi-db"] {
            for approach in ApproachName::ALL
                .into_iter()
                .filter(|a| a.runs_by_default() && a.runner().in_quick_run())
                .filter(|a| a.implements(workload.parse().unwrap()))
            {
                assert!(
                    cells
                        .iter()
                        .any(|c| c.workload == workload && c.approach == approach),
                    "{workload} × {approach} missing"
                );
            }
        }
        let multi = cells.iter().find(|c| c.workload == "multi-db").unwrap();
        assert_eq!(multi.multi_db.as_ref().map(|m| m.num_databases), Some(10));
        let queue: Vec<&Cell> = cells.iter().filter(|c| c.workload == "queue").collect();
        assert!(
            queue
                .iter()
                .all(|c| !["sqlx", "trailbase-sqlite"].contains(&c.approach.as_str())),
            "sqlx and trailbase-sqlite have no queue"
        );
        let serial: Vec<&str> = queue
            .iter()
            .filter(|c| c.concurrency == 1)
            .map(|c| c.approach.as_str())
            .collect();
        assert_eq!(
            serial,
            ["ceiling", "direct-blocking", "tokio-rusqlite", "quicklite"]
        );
        assert!(cells.iter().all(|c| c.build_profile == "tuned"));
    }
}
