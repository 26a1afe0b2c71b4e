//! Seed 003's memory map: the profile's `mmap_size` against none, on reads alone and beside a writer.

use quicklite_lab_core::{ApproachName, CellResult};

use super::Finding;
use super::pairing::comparisons;
use super::verdict::{effect_range, pair_text, set_aside_note};
use crate::repetitions::{MIN_PAIRS, Verdict};

/// Seed 003's memory map: the profile's `mmap_size` against none, on reads alone and on reads beside a writer.
pub(super) fn memory_map(results: &[&CellResult]) -> Finding {
    let mut finding = Finding {
        seed: "003",
        claim: "Memory-mapped I/O makes reads cheaper: the seed's tuned PRAGMAs (like Rails 8's defaults) set \
                mmap_size = 128 MiB.",
        published: "no figure of its own: one of the tuned PRAGMAs behind 13.59 s → 6.79 s",
        machine: "Apple M1 Max, Ruby sqlite3 1.6.6, SQLite 3.43.1, ActiveRecord",
        measured: None,
        verdict: "not measured in this run (needs point-read or mixed cells with --mmap default,0, e.g. --quick)"
            .to_owned(),
    };
    let found = comparisons(
        results,
        |c| c.mmap_size.is_none() && matches!(c.workload.as_str(), "point-read" | "mixed"),
        |c| c.mmap_size = Some(0),
    );
    let mut measured = Vec::new();
    let mut verdicts = Vec::new();
    for c in &found {
        let cell = &c.first().0.cell;
        // `mixed` with no writes at all is reads alone too.
        let what = if cell.workload == "mixed" && cell.write_ppm > 0 {
            "beside a writer"
        } else {
            "reads alone"
        };
        // quicklite's readers give the map up while the database is written (docs/design.md).
        let map = if cell.approach == ApproachName::Quicklite {
            "the profile's map (dropped by readers while the database is written)"
        } else {
            "the profile's map"
        };
        // The share of writes, when it is not the workload's usual 10%: it decides how often the map is dropped.
        let writes = if cell.write_ppm == quicklite_lab_core::DEFAULT_WRITE_PPM {
            String::new()
        } else {
            format!(" ({} writes)", crate::format::share_ppm(cell.write_ppm))
        };
        measured.push(pair_text(
            &format!(
                "{}{writes} {}, {} tasks, {} rows: no map → {map}",
                cell.workload, cell.approach, cell.concurrency, cell.rows
            ),
            c,
        ));
        let paired = c.paired();
        let effect_here = match paired.spread() {
            None => "inconclusive: every pair ran with the CPUs placed differently".to_owned(),
            Some(spread) => {
                let figure = effect_range(&spread);
                // The claim is that the map helps; its inverse, that it costs, is judged the same way.
                let inverse: Vec<f64> = paired.ratios.iter().map(|r| 1.0 / r).collect();
                match (paired.verdict(), Verdict::of(&inverse)) {
                    (Verdict::Reproduces, _) => format!("the map helps, {figure}"),
                    (_, Verdict::Reproduces) => format!("the map costs, {figure}"),
                    (Verdict::DoesNotReproduce, Verdict::DoesNotReproduce) => {
                        format!("no effect of 10% or more, {figure}")
                    }
                    _ if spread.n < MIN_PAIRS => {
                        let from = if spread.n == 1 { " from 1 pair" } else { "" };
                        format!("inconclusive, {figure}{from}")
                    }
                    _ => format!("inconclusive at this noise level, {figure}"),
                }
            }
        };
        verdicts.push(format!(
            "{} {} tasks, {what}: {effect_here}{}",
            cell.approach,
            cell.concurrency,
            set_aside_note(&paired)
        ));
    }
    if !measured.is_empty() {
        finding.measured = Some(measured.join("; "));
        finding.verdict = verdicts.join("; ");
    }
    finding
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixtures;
    use crate::seeds::findings;

    #[test]
    fn the_memory_map_is_judged_on_reads_alone_and_beside_a_writer() {
        let mut results = fixtures::results();
        let reads = results
            .iter()
            .find(|r| r.cell.workload == "point-read" && r.cell.approach == "quicklite")
            .unwrap()
            .clone();
        let mixed = |mmap_size: Option<u64>, ops_per_sec: f64| {
            let mut r = reads.clone();
            r.cell.workload = "mixed".to_owned();
            r.cell.mmap_size = mmap_size;
            r.reads.ops_per_sec = ops_per_sec;
            r
        };
        results.push(mixed(None, 150_000.0));
        results.push(mixed(Some(0), 250_000.0));
        // Three rounds of the same figures.
        let rounds: Vec<CellResult> = (0..3)
            .flat_map(|repetition| {
                results.iter().cloned().map(move |mut r| {
                    r.cell.repetition = repetition;
                    r
                })
            })
            .collect();
        let found = findings(&rounds);
        let map = &found[4];
        // The fixture's point-read pair: 1.18M without a map, 1.42M with it.
        assert_eq!(
            map.measured.as_deref(),
            Some(
                "point-read quicklite, 64 tasks, 10000 rows: no map → the profile's map (dropped by readers while \
                 the database is written): 1.18M/s → 1.42M/s; mixed quicklite, 64 tasks, 10000 rows: no map → the \
                 profile's map (dropped by readers while the database is written): 250k/s → 150k/s"
            )
        );
        assert!(
            map.verdict.starts_with(
                "quicklite 64 tasks, reads alone: the map helps, 1.20× faster [1.20–1.20×, 3 pairs]; quicklite \
                 64 tasks, beside a writer: the map costs, 1.67× slower [1.67–1.67×, 3 pairs]"
            ),
            "{}",
            map.verdict
        );
    }
}
