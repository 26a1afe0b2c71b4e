//! Seed 004, many databases: how many writes complete when SQLite is called directly on tokio's workers,
//! against a thread per database.

use quicklite_lab_core::{ApproachName, CellResult};

use super::Finding;
use super::pairing::twin;
use crate::format;
use crate::repetitions::{MIN_PAIRS, Placement, Spread, Verdict, by_cell};

/// Seed 004: write completion of direct blocking calls against a thread per database.
pub(super) fn multi_db(results: &[&CellResult]) -> Finding {
    let mut finding = Finding {
        seed: "004",
        claim: "SQLite called directly on tokio's workers starves them as databases multiply: writes stop \
                completing, while spawn_blocking and tokio-rusqlite complete them all.",
        published: "direct blocking completes 27% of writes at 10 databases, 6% at 50, 2% at 100; spawn_blocking \
                    and tokio-rusqlite 100%",
        machine: "ICRC Rosetta benchmark, 4 tokio workers, 3 readers per database (machine not stated)",
        measured: None,
        verdict: "not measured in this run (needs multi-db cells in the blocking write mode with direct-blocking \
                  and tokio-rusqlite, e.g. --quick)"
            .to_owned(),
    };
    let completion = |r: &CellResult| r.write_completion.as_ref().map(|c| c.ratio);
    let blocking: Vec<&&CellResult> = results
        .iter()
        .filter(|r| r.cell.approach == ApproachName::DirectBlocking)
        .filter(|r| {
            r.cell
                .multi_db
                .as_ref()
                .is_some_and(|m| m.write_mode == quicklite_lab_core::WriteMode::Blocking)
        })
        .collect();
    // One group per database count (and delay), its repetitions together.
    let groups = by_cell(blocking.into_iter().copied());
    let median = |values: Vec<f64>| Spread::of(&values).map(|s| s.median);
    let mut measured = Vec::new();
    let mut verdicts = Vec::new();
    for (cell, group) in &groups {
        let Some(direct_median) = median(group.iter().filter_map(|r| completion(r)).collect())
        else {
            continue;
        };
        let databases = cell.multi_db.as_ref().map_or(0, |m| m.num_databases);
        let mut line = format!(
            "{databases} databases: direct-blocking {}",
            format::percent(direct_median)
        );
        // Per repetition: did direct blocking leave writes incomplete while every other approach completed them?
        let mut outcomes: Vec<Option<bool>> = vec![Some(true); group.len()];
        let mut any_other = false;
        for other in [ApproachName::SpawnBlocking, ApproachName::TokioRusqlite] {
            let twins: Vec<Option<&CellResult>> = group
                .iter()
                .map(|direct| twin(results, &direct.cell, |c| c.approach = other.to_string()))
                .collect();
            let Some(other_median) = median(
                twins
                    .iter()
                    .flatten()
                    .filter_map(|r| completion(r))
                    .collect(),
            ) else {
                continue;
            };
            any_other = true;
            line.push_str(&format!(", {other} {}", format::percent(other_median)));
            for ((outcome, direct), twin) in outcomes.iter_mut().zip(group).zip(&twins) {
                *outcome = match (*outcome, twin) {
                    (Some(shown), Some(twin)) if Placement::comparable(direct, twin) => {
                        let direct_ratio = completion(direct).unwrap_or(1.0);
                        let other_ratio = completion(twin).unwrap_or(0.0);
                        Some(shown && direct_ratio < 0.9 && other_ratio >= 0.95)
                    }
                    _ => None,
                };
            }
        }
        if group.len() > 1 {
            line.push_str(&format!(" (medians of {})", group.len()));
        }
        measured.push(line);
        if !any_other {
            continue;
        }
        let kept: Vec<bool> = outcomes.into_iter().flatten().collect();
        let text = match Verdict::of_outcomes(kept.iter().copied()) {
            Verdict::Reproduces => "reproduces".to_owned(),
            Verdict::DoesNotReproduce => {
                "does not reproduce (direct blocking completed as many writes as the others)"
                    .to_owned()
            }
            Verdict::Inconclusive if kept.len() < MIN_PAIRS => format!(
                "inconclusive from {} (a verdict needs {MIN_PAIRS}); {}",
                if kept.len() == 1 {
                    "one repetition".to_owned()
                } else {
                    format!("{} repetitions", kept.len())
                },
                if kept.iter().all(|shown| *shown) {
                    "there, direct blocking left writes incomplete while the others completed them"
                } else {
                    "the repetitions disagree"
                }
            ),
            Verdict::Inconclusive => {
                "inconclusive at this noise level (the repetitions disagree)".to_owned()
            }
        };
        verdicts.push(format!("{databases} databases: {text}"));
    }
    if !measured.is_empty() {
        finding.measured = Some(measured.join("; "));
        finding.verdict = if verdicts.is_empty() {
            "direct-blocking measured, but no spawn-blocking or tokio-rusqlite twin to compare with"
                .to_owned()
        } else {
            verdicts.join("; ")
        };
    }
    finding
}
