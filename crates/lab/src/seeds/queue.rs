//! Seed 002, the job queue: the cost of a publish, a claim, an ack and a full cycle, one task at a time.

use quicklite_lab_core::CellResult;

use super::Finding;
use super::verdict::{effect, thousands};
use crate::repetitions::{MIN_PAIRS, Spread, Verdict, by_cell};

/// Seed 002: the queue's figures.
pub(super) fn queue(results: &[&CellResult]) -> Finding {
    /// The seed's full cycle, in ns.
    const SEED_CYCLE_NS: f64 = 22_465.0;
    let mut finding = Finding {
        seed: "002",
        claim: "A job queue on SQLite (publish INSERT, claim UPDATE … RETURNING, ack DELETE) runs a full cycle in \
                tens of microseconds with a C SQLite driver, in 11 allocations.",
        published: "publish 7,265 ns, claim 388,600 ns, ack 9,514 ns, cycle 22,465 ns, 11 allocs per cycle \
                    (modernc: 106,000 ns and 57 allocs per cycle)",
        machine: "i9-14900K, Go + C SQLite 3.48 (cwasq), WAL, one writer",
        measured: None,
        verdict: "not measured in this run (needs queue cells at --concurrency 1, e.g. --quick)"
            .to_owned(),
    };
    // One group per approach (and set-up), its repetitions together.
    let serial = by_cell(
        results
            .iter()
            .copied()
            .filter(|r| r.cell.workload == "queue" && r.cell.concurrency == 1)
            .filter(|r| r.operation("cycle").is_some_and(|o| o.stats.ops > 0)),
    );
    if serial.is_empty() {
        return finding;
    }
    let ns = |r: &CellResult, name: &str| r.operation(name).map_or(0.0, |o| o.stats.avg_us * 1e3);
    // The median over a group's repetitions.
    let median = |group: &[&CellResult], value: &dyn Fn(&CellResult) -> f64| {
        let values: Vec<f64> = group.iter().map(|r| value(r)).collect();
        Spread::of(&values).map_or(0.0, |s| s.median)
    };
    let lines: Vec<String> = serial
        .iter()
        .map(|(cell, group)| {
            let counted = group
                .iter()
                .all(|r| r.operation("cycle").and_then(|o| o.allocs_per_op).is_some());
            let allocs = if counted {
                let per_cycle = |r: &CellResult| {
                    r.operation("cycle")
                        .and_then(|o| o.allocs_per_op)
                        .unwrap_or(0.0)
                };
                format!("{:.1} allocs", median(group, &per_cycle))
            } else {
                "allocations not counted".to_owned()
            };
            let repetitions = if group.len() > 1 {
                format!(" (medians of {})", group.len())
            } else {
                String::new()
            };
            format!(
                "{}: publish {}, claim {}, ack {}, cycle {} ns, {allocs} per cycle{repetitions}",
                cell.approach,
                thousands(median(group, &|r| ns(r, "publish"))),
                thousands(median(group, &|r| ns(r, "claim"))),
                thousands(median(group, &|r| ns(r, "ack"))),
                thousands(median(group, &|r| ns(r, "cycle"))),
            )
        })
        .collect();
    finding.measured = Some(lines.join("; "));
    let cycle_of = |group: &[&CellResult]| median(group, &|r| ns(r, "cycle"));
    let best = serial
        .iter()
        .min_by(|(_, a), (_, b)| cycle_of(a).total_cmp(&cycle_of(b)));
    if let Some((cell, group)) = best {
        let cycle = cycle_of(group);
        let claim_over_publish =
            median(group, &|r| ns(r, "claim")) / median(group, &|r| ns(r, "publish")).max(1.0);
        // The claim's line: a cycle of "tens of microseconds", under 100 µs, in every repetition.
        let within = Verdict::of_outcomes(group.iter().map(|r| ns(r, "cycle") < 100_000.0));
        let judged = match within {
            Verdict::Inconclusive if group.len() < MIN_PAIRS => format!(
                "inconclusive ({} of the fastest; a verdict needs {MIN_PAIRS}): ",
                if group.len() == 1 {
                    "one repetition".to_owned()
                } else {
                    format!("{} repetitions", group.len())
                }
            ),
            verdict => format!(
                "{} (a cycle under 100 µs in every repetition): ",
                verdict.text()
            ),
        };
        finding.verdict = format!(
            "{judged}the fastest here, {}, runs a cycle {} than the seed's C driver ({} vs 22,465 ns); its claim \
             costs {claim_over_publish:.1}× a publish, against 53× in the seed (whose claim, 388,600 ns, exceeds its \
             own 22,465 ns cycle, so it cannot have been measured on the same queue; here the claim is an index \
             search, checked by EXPLAIN QUERY PLAN). Allocations of the Rust runners are heap allocations of the \
             whole process, the async machinery included; the Go runners (go-mattn, go-modernc, go-zombiezen) \
             count Go's heap allocations per cycle (runtime.MemStats), as the seed did.",
            cell.approach,
            effect(SEED_CYCLE_NS / cycle.max(1.0)),
            thousands(cycle),
        );
    }
    finding
}
