//! How a seed's outcome is written: the size and direction of an effect, the verdict against the seed's figure
//! by the rule of repeated pairs, and the figures of a comparison.

use quicklite_lab_core::CellResult;

use super::Finding;
use super::pairing::Comparison;
use crate::format;
use crate::repetitions::{MIN_PAIRS, Paired, SMALLEST_EFFECT, Spread, Verdict};
use crate::summary::throughput;

/// `5.47× faster`, `1.02× slower`, for an effect `after / before`.
pub(super) fn effect(ratio: f64) -> String {
    if ratio >= 1.0 {
        format!("{ratio:.2}× faster")
    } else {
        format!("{:.2}× slower", 1.0 / ratio)
    }
}

/// `1.52× faster`, or `1.52× faster [1.40–1.60×, 5 pairs]` with repetitions: the median effect and its range.
pub(super) fn effect_range(spread: &Spread) -> String {
    if spread.n < 2 {
        return effect(spread.median);
    }
    format!(
        "{} [{}, {} pairs]",
        effect(spread.median),
        format::ratio_range(spread.median, spread.low, spread.high),
        spread.n
    )
}

/// `; 2 pairs set aside (CPUs placed differently)`, or empty.
pub(super) fn set_aside_note(paired: &Paired) -> String {
    match paired.set_aside {
        0 => String::new(),
        1 => "; 1 pair set aside (CPUs placed differently)".to_owned(),
        n => format!("; {n} pairs set aside (CPUs placed differently)"),
    }
}

/// Whether a speed-up (ratios `with / without`, the claim's direction above 1) reproduces a published
/// `seed_ratio` ([`crate::repetitions::RULE`]), and how its size compares.
pub(super) fn verdict(paired: &Paired, seed_ratio: f64) -> String {
    let Some(spread) = paired.spread() else {
        return format!(
            "inconclusive: every pair ran with the CPUs placed differently{}",
            set_aside_note(paired)
        );
    };
    let figure = effect_range(&spread);
    let note = set_aside_note(paired);
    match paired.verdict() {
        Verdict::Reproduces => {
            let size = if spread.high < seed_ratio {
                "smaller than the seed's"
            } else if spread.low > seed_ratio {
                "larger than the seed's"
            } else {
                "about the size of the seed's"
            };
            format!("reproduces: {figure} here, {size} {seed_ratio:.2}×{note}")
        }
        Verdict::DoesNotReproduce => {
            let what = if spread.high < 1.0 / (1.0 + SMALLEST_EFFECT) {
                "reversed here"
            } else {
                "no effect of 10% or more here"
            };
            format!(
                "does not reproduce: {what}, {figure} (the seed: {seed_ratio:.2}× faster){note}"
            )
        }
        Verdict::Inconclusive if spread.n < MIN_PAIRS => format!(
            "inconclusive: {figure}{} (a verdict needs {MIN_PAIRS} pairs in matching placements: --repeat \
             {MIN_PAIRS} or more; the seed: {seed_ratio:.2}× faster){note}",
            if spread.n == 1 { " from 1 pair" } else { "" }
        ),
        Verdict::Inconclusive => format!(
            "inconclusive at this noise level: {figure}, pairs on both sides of the 10% line (the seed: \
             {seed_ratio:.2}× faster){note}"
        ),
    }
}

/// `label: 9.95k/s → 15k/s` for one comparison, the cell without the knob first, medians over the repetitions
/// (`suite 12.3 ms → 6.1 ms` for the ORM suite).
pub(super) fn pair_text(label: &str, comparison: &Comparison) -> String {
    let (with, _) = comparison.first();
    let (before, after) = (false, true);
    if with.cell.workload == "orm" {
        let suite = |r: &CellResult| crate::summary::orm_suite_us(r, false).unwrap_or(0.0);
        return format!(
            "{label}: suite {} → {}",
            format::latency_us(comparison.median(before, suite)),
            format::latency_us(comparison.median(after, suite))
        );
    }
    format!(
        "{label}: {}/s → {}/s",
        format::ops(comparison.median(before, throughput)),
        format::ops(comparison.median(after, throughput))
    )
}

/// Fills in what was measured and the verdict on the first comparison, naming the other comparisons' effects;
/// leaves the finding "not measured" when there is none.
pub(super) fn conclude(
    mut finding: Finding,
    measured: &[String],
    found: &[Comparison],
    seed_ratio: f64,
) -> Finding {
    if let Some(first) = found.first() {
        finding.measured = Some(measured.join("; "));
        finding.verdict = verdict(&first.paired(), seed_ratio);
        if found.len() > 1 {
            let rest: Vec<String> = found[1..]
                .iter()
                .filter_map(|c| c.paired().spread())
                .map(|s| effect_range(&s))
                .collect();
            finding
                .verdict
                .push_str(&format!(" (the other pairs: {})", rest.join(", ")));
        }
    }
    finding
}

/// `388,600` for 388600.4.
pub(super) fn thousands(value: f64) -> String {
    let digits = format!("{:.0}", value.max(0.0));
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verdicts_follow_the_rule_of_repeated_pairs() {
        let paired = |ratios: &[f64]| Paired {
            ratios: ratios.to_vec(),
            set_aside: 0,
        };
        let v = verdict(&paired(&[1.5, 1.6, 1.4]), 5.47);
        assert_eq!(
            v,
            "reproduces: 1.50× faster [1.40–1.60×, 3 pairs] here, smaller than the seed's 5.47×"
        );
        assert!(verdict(&paired(&[6.5, 7.0, 6.1]), 5.47).contains("larger than the seed's"));
        assert!(verdict(&paired(&[1.2, 1.3, 1.25]), 1.25).contains("about the size of the seed's"));
        assert!(
            verdict(&paired(&[1.05, 0.98, 1.02]), 1.25)
                .starts_with("does not reproduce: no effect of 10% or more here")
        );
        assert!(
            verdict(&paired(&[0.5, 0.6, 0.55]), 1.25)
                .starts_with("does not reproduce: reversed here")
        );
        assert!(
            verdict(&paired(&[1.5, 1.05, 1.3]), 1.25).starts_with(
                "inconclusive at this noise level: 1.30× faster [1.05–1.50×, 3 pairs]"
            )
        );
        // One sample, however large its effect, is no verdict.
        assert_eq!(
            verdict(&paired(&[4.0]), 2.0),
            "inconclusive: 4.00× faster from 1 pair (a verdict needs 3 pairs in matching placements: --repeat 3 \
             or more; the seed: 2.00× faster)"
        );
        let lost = Paired {
            ratios: vec![],
            set_aside: 2,
        };
        assert_eq!(
            verdict(&lost, 2.0),
            "inconclusive: every pair ran with the CPUs placed differently; 2 pairs set aside (CPUs placed \
             differently)"
        );
        assert_eq!(thousands(388_600.4), "388,600");
        assert_eq!(thousands(950.0), "950");
    }
}
