//! Seed 000, memory statistics: a connection per request with SQLite's memory statistics on and off.

use quicklite_lab_core::{ApproachName, CellResult};

use super::Finding;
use super::pairing::comparisons;
use super::verdict::{conclude, pair_text};

/// Seed 000: memory statistics on → off, per-request connections.
pub(super) fn memstatus(results: &[&CellResult]) -> Finding {
    let seed_ratio = 30_737.0 / 5_622.0;
    let mut found = comparisons(
        results,
        |c| !c.memstatus && c.approach == ApproachName::PerRequest,
        |c| c.memstatus = true,
    );
    // The seed's endpoint is HTTP on rusqlite's bundled build; the point read is the same pattern without the HTTP
    // layer, and the project's own build differs only in its compile options.
    found.sort_by_key(|c| {
        let (off, _) = c.first();
        (
            off.cell.workload != "http",
            off.cell.build_profile != "default",
        )
    });
    found.truncate(3);
    let finding = Finding {
        seed: "000",
        claim: "A connection opened per request with SQLite's memory statistics on (rusqlite's bundled default) \
                serializes every allocation on one mutex; turning them off multiplies throughput.",
        published: "5,622 → 30,737 req/s (5.47×), axum, a fresh connection per request, 50 concurrent users",
        machine: "16-thread Ryzen, rusqlite 0.39 bundled",
        measured: None,
        verdict: "not measured in this run (needs per-request cells with --memstatus on and off, e.g. --quick)"
            .to_owned(),
    };
    let measured: Vec<String> = found
        .iter()
        .map(|c| {
            let (off, _) = c.first();
            pair_text(
                &format!(
                    "{} per-request, {} tasks, build {}, memstatus on → off",
                    off.cell.workload, off.cell.concurrency, off.cell.build_profile
                ),
                c,
            )
        })
        .collect();
    conclude(finding, &measured, &found, seed_ratio)
}
