//! Seed 001, threading mode: SQLite serialized against multi-thread, by build and by open flags.

use quicklite_lab_core::CellResult;

use super::Finding;
use super::pairing::comparisons;
use super::verdict::{conclude, pair_text};

/// Seed 001: serialized → multi-thread mode.
pub(super) fn threading(results: &[&CellResult]) -> Finding {
    // Reads of node:sqlite's benchmark: +18% to +37%; the middle of that range stands for the claim.
    let seed_ratio = 1.25;
    let finding = Finding {
        seed: "001",
        claim: "SQLite in serialized mode (THREADSAFE=1, or SQLITE_OPEN_FULLMUTEX) takes a mutex on every API call; \
                multi-thread mode (THREADSAFE=2, or SQLITE_OPEN_NOMUTEX) makes reads faster.",
        published: "+18% to +37% on node:sqlite's read benchmarks (THREADSAFE=2 instead of 1)",
        machine: "14-core Apple M4, node:sqlite",
        measured: None,
        verdict:
            "not measured in this run (needs a --build-profiles threadsafe2,tuned pair, or --mutex \
                  nomutex,fullmutex cells, e.g. --quick)"
                .to_owned(),
    };
    let mut builds = comparisons(
        results,
        |c| c.build_profile == "threadsafe2",
        |c| c.build_profile = "tuned".to_owned(),
    );
    builds.truncate(2);
    let mut mutexes = comparisons(
        results,
        |c| c.mutex == "nomutex" && c.workload == "point-read",
        |c| c.mutex = "fullmutex".to_owned(),
    );
    mutexes.truncate(2);
    let mut measured = Vec::new();
    for c in &builds {
        let (multi, _) = c.first();
        measured.push(pair_text(
            &format!(
                "{} {}, build THREADSAFE=1 → 2",
                multi.cell.workload, multi.cell.approach
            ),
            c,
        ));
    }
    for c in &mutexes {
        let (multi, _) = c.first();
        measured.push(pair_text(
            &format!(
                "{} {}, fullmutex → nomutex",
                multi.cell.workload, multi.cell.approach
            ),
            c,
        ));
    }
    builds.extend(mutexes);
    conclude(finding, &measured, &builds, seed_ratio)
}
