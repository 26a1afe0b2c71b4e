//! The "seeds" section of the reports: each seed document's claim, its published figure and machine, and what
//! this run measured of it, computed from the results present — never a stored figure passed off as measured.
//!
//! The seeds are the five write-ups the project started from (docs/design.md): 000 memory statistics, 001 threading
//! mode, 002 the job queue, 003 PRAGMA and compile tuning, 004 async approaches over many databases. For each,
//! [`findings`] looks for the pairs of cells that test the claim (the same cell with one knob changed) and states
//! the direction and size of the effect here; without them it says "not measured in this run" and which cells
//! would measure it.

mod memory_map;
mod memstatus;
mod multi_db;
mod pairing;
mod queue;
mod threading;
mod tuning;
mod verdict;

use quicklite_lab_core::CellResult;

use memory_map::memory_map;
use memstatus::memstatus;
use multi_db::multi_db;
use queue::queue;
use threading::threading;
use tuning::tuning;

/// One seed, as published and as measured here.
#[derive(Debug, Clone, PartialEq)]
pub struct Finding {
    /// `000` … `004`.
    pub seed: &'static str,
    /// The seed's claim, in a sentence.
    pub claim: &'static str,
    /// Its published figure.
    pub published: &'static str,
    /// The machine and software behind the published figure.
    pub machine: &'static str,
    /// Our figure, from this run's results; `None` when the cells that measure it are missing.
    pub measured: Option<String>,
    /// Whether the effect reproduces here, its direction and size; or which cells would measure it.
    pub verdict: String,
}

/// The five seeds, measured from `results`.
pub fn findings(results: &[CellResult]) -> Vec<Finding> {
    // The seeds' claims are about flat-out throughput: cells at an offered rate measure something else.
    let ok: Vec<&CellResult> = results
        .iter()
        .filter(|r| r.failure.is_none() && r.cell.rate.is_none())
        .collect();
    vec![
        memstatus(&ok),
        threading(&ok),
        queue(&ok),
        tuning(&ok),
        memory_map(&ok),
        multi_db(&ok),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixtures;

    #[test]
    fn every_seed_is_reported_and_missing_cells_say_so() {
        let found = findings(&[]);
        let seeds: Vec<&str> = found.iter().map(|f| f.seed).collect();
        assert_eq!(seeds, ["000", "001", "002", "003", "003", "004"]);
        for f in &found {
            assert_eq!(f.measured, None, "{f:?}");
            assert!(f.verdict.starts_with("not measured in this run"), "{f:?}");
        }
    }

    #[test]
    fn figures_come_from_the_results() {
        let found = findings(&fixtures::results());
        // Seed 002: the fixture's one-task queue cells, in ns.
        let queue = &found[2];
        let measured = queue.measured.as_deref().unwrap();
        assert!(
            measured.contains(
                "quicklite: publish 9,000, claim 21,000, ack 8,000, cycle 38,000 ns, 7.0 allocs"
            ),
            "{measured}"
        );
        assert!(
            queue.verdict.contains("tokio-rusqlite"),
            "{}",
            queue.verdict
        );
        // Seed 004: the fixture's 10-database multi-db, 27% against 100%.
        let multi = &found[5];
        assert_eq!(
            multi.measured.as_deref(),
            Some("10 databases: direct-blocking 27%, tokio-rusqlite 100%")
        );
        assert!(
            multi
                .verdict
                .starts_with("10 databases: inconclusive from one repetition"),
            "{}",
            multi.verdict
        );
        // Seed 000: the fixture has no per-request pair.
        assert_eq!(found[0].measured, None);
        // Seed 003: the ORM suite, 80 µs under sqlite-default, 20 µs under server: 4×.
        let tuning = &found[3];
        assert_eq!(
            tuning.measured.as_deref(),
            Some("orm direct-blocking, sqlite-default → server PRAGMAs: suite 80.0 µs → 20.0 µs")
        );
        assert!(
            tuning
                .verdict
                .contains("PRAGMAs on orm: inconclusive: 4.00× faster from 1 pair"),
            "{}",
            tuning.verdict
        );
    }

    #[test]
    fn repeated_results_get_verdicts_and_one_repetition_does_not() {
        let once = findings(&fixtures::results());
        // Seed 003's ORM suite, 80 µs → 20 µs: one pair, so no verdict.
        assert!(
            once[3]
                .verdict
                .starts_with("PRAGMAs on orm: inconclusive: 4.00× faster from 1 pair"),
            "{}",
            once[3].verdict
        );
        assert!(
            once[5].verdict.starts_with(
                "10 databases: inconclusive from one repetition (a verdict needs 3); there, direct"
            ),
            "{}",
            once[5].verdict
        );
        let thrice = findings(&fixtures::repeated(3));
        assert!(
            thrice[3]
                .verdict
                .starts_with("PRAGMAs on orm: reproduces: 4.0"),
            "{}",
            thrice[3].verdict
        );
        assert_eq!(thrice[5].verdict, "10 databases: reproduces");
        assert_eq!(
            thrice[5].measured.as_deref(),
            Some("10 databases: direct-blocking 27%, tokio-rusqlite 100% (medians of 3)")
        );
        // The queue's figures are medians over the repetitions.
        let queue = thrice[2].measured.as_deref().unwrap();
        assert!(queue.contains("(medians of 3)"), "{queue}");
        assert!(
            thrice[2]
                .verdict
                .starts_with("reproduces (a cycle under 100 µs in every repetition)"),
            "{}",
            thrice[2].verdict
        );
        // A pair whose CPUs moved is set aside; with two pairs left, no verdict.
        let mut moved = fixtures::repeated(3);
        for r in moved.iter_mut().filter(|r| r.cell.repetition == 1) {
            r.env.core_round_trip_after_ns = Some(340.0);
        }
        let found = findings(&moved);
        assert!(
            found[3].verdict.contains(", 2 pairs] (a verdict needs 3")
                && found[3].verdict.contains("1 pair set aside"),
            "{}",
            found[3].verdict
        );
    }
}
