//! Repeated measurements of one cell: medians and spreads, ratios paired by repetition, the CPUs' placement,
//! and the three-way verdict of the seeds section.
//!
//! A run with `--repeat N` measures every cell N times, in rounds (A B C, A B C, …; [`crate::interleave`]), so the
//! k-th repetition of two rows of a table ran minutes or seconds apart, not a whole run apart. Ratios are therefore
//! taken pair by pair — the k-th repetition of a row over the k-th of the baseline — and summarised by their median
//! and range. On a virtual machine the host moves the CPUs between places where a hand-off between threads costs
//! 26, 60–90 or 300–400 ns (docs/design.md); a pair measured in different places measures the move, not the
//! approaches, so it is set aside.

use quicklite_lab_core::{Cell, CellResult};

/// The smallest effect the seeds section names: a ratio within 10% of 1 is no effect (two runs of the same cell on
/// a shared 2-core machine differ by about that much even in one placement).
pub const SMALLEST_EFFECT: f64 = 0.10;

/// Placement-matched pairs needed before the seeds section gives a verdict.
pub const MIN_PAIRS: usize = 3;

/// The rule behind every verdict, as the reports print it.
pub const RULE: &str = "Each claim is tested on pairs of cells that differ in one knob and ran in the same round of \
    repetitions; a pair whose cross-core round trips fall in different bands (under 45 ns, 45–200 ns, 200 ns and \
    more) or moved during a cell is set aside. With at least 3 pairs left, a claim **reproduces** when every pair \
    shows an effect of 10% or more in the claimed direction, **does not reproduce** when none does, and is \
    **inconclusive at this noise level** when the pairs fall on both sides of that line; with fewer pairs it is \
    inconclusive (run with `--repeat 3` or more). The bracket after a figure is the range of the pairs: with n \
    pairs it holds the true median with probability 1 − 2^(1−n) (75% for 3, 94% for 5).";

/// Results grouped by cell, every repetition of one cell together (in the order given), the groups in the order
/// their first result comes; each group's key is the cell with its repetition and directory blanked.
pub fn by_cell<'a>(
    results: impl IntoIterator<Item = &'a CellResult>,
) -> Vec<(Cell, Vec<&'a CellResult>)> {
    let mut groups: Vec<(Cell, Vec<&CellResult>)> = Vec::new();
    for result in results {
        let key = Cell {
            repetition: 0,
            dir: String::new(),
            ..result.cell.clone()
        };
        match groups.iter_mut().find(|(k, _)| *k == key) {
            Some((_, members)) => members.push(result),
            None => groups.push((key, vec![result])),
        }
    }
    groups
}

/// The median and range of some measurements.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Spread {
    /// The median (the mean of the two middle values for an even count).
    pub median: f64,
    /// The smallest value.
    pub low: f64,
    /// The largest value.
    pub high: f64,
    /// How many values.
    pub n: usize,
}

impl Spread {
    /// The spread of `values`; `None` when there are none (or one is not a number).
    pub fn of(values: &[f64]) -> Option<Self> {
        if values.is_empty() || values.iter().any(|v| v.is_nan()) {
            return None;
        }
        let mut sorted = values.to_vec();
        sorted.sort_by(f64::total_cmp);
        let n = sorted.len();
        let median = if n % 2 == 1 {
            sorted[n / 2]
        } else {
            (sorted[n / 2 - 1] + sorted[n / 2]) / 2.0
        };
        Some(Self {
            median,
            low: sorted[0],
            high: sorted[n - 1],
            n,
        })
    }

    /// The probability that `[low, high]` holds the median of the distribution the values were drawn from
    /// (the sign test's interval): `1 − 2^(1−n)`, 0 for one value.
    pub fn coverage(&self) -> f64 {
        let n = i32::try_from(self.n).unwrap_or(i32::MAX);
        1.0 - 2f64.powi(1 - n)
    }
}

/// Where the host had put the CPUs while a cell ran, read from its cross-core round trips.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Placement {
    /// Under 45 ns: the two CPUs share a core.
    SharedCore,
    /// 45–200 ns: nearby cores.
    Near,
    /// 200 ns and more: distant cores (another socket or die).
    Far,
    /// The round trip before the cell and the one after it fall in different bands.
    Moved,
    /// Not measured (a runner that does not probe, or a failed cell).
    Unknown,
}

impl Placement {
    /// The band of one round trip.
    fn band(ns: f64) -> Self {
        if ns < 45.0 {
            Self::SharedCore
        } else if ns < 200.0 {
            Self::Near
        } else {
            Self::Far
        }
    }

    /// The placement of `result`'s cell.
    pub fn of(result: &CellResult) -> Self {
        let env = &result.env;
        match (env.core_round_trip_before_ns, env.core_round_trip_after_ns) {
            (Some(before), Some(after)) if Self::band(before) != Self::band(after) => Self::Moved,
            (Some(ns), _) | (None, Some(ns)) => Self::band(ns),
            (None, None) => Self::Unknown,
        }
    }

    /// Whether two cells ran in the same placement, as far as anyone can tell: a move during either sets the pair
    /// aside; an unmeasured side cannot be checked and is given the benefit of the doubt.
    pub fn comparable(a: &CellResult, b: &CellResult) -> bool {
        match (Self::of(a), Self::of(b)) {
            (Self::Moved, _) | (_, Self::Moved) => false,
            (Self::Unknown, _) | (_, Self::Unknown) => true,
            (a, b) => a == b,
        }
    }
}

/// Ratios of pairs of cells from the same repetition round, those measured in different placements set aside.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Paired {
    /// `value(first) / value(second)` of every comparable pair, in the order given.
    pub ratios: Vec<f64>,
    /// Pairs left out because their placements differ.
    pub set_aside: usize,
}

impl Paired {
    /// Pairs up `pairs`, keeping the ratio of `value` for each comparable pair with a positive denominator.
    pub fn of<'a>(
        pairs: impl IntoIterator<Item = (&'a CellResult, &'a CellResult)>,
        value: impl Fn(&CellResult) -> f64,
    ) -> Self {
        let mut out = Self::default();
        for (a, b) in pairs {
            let (top, bottom) = (value(a), value(b));
            if bottom <= 0.0 || top.is_nan() || bottom.is_nan() {
                continue;
            }
            if Placement::comparable(a, b) {
                out.ratios.push(top / bottom);
            } else {
                out.set_aside += 1;
            }
        }
        out
    }

    /// The median and range of the kept ratios.
    pub fn spread(&self) -> Option<Spread> {
        Spread::of(&self.ratios)
    }

    /// The verdict on a claim that these ratios exceed 1 (ratios oriented so that the claim's direction is up).
    pub fn verdict(&self) -> Verdict {
        Verdict::of(&self.ratios)
    }
}

/// Whether a claim holds here, from repeated pairs ([`RULE`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Every pair shows an effect of at least [`SMALLEST_EFFECT`] in the claimed direction.
    Reproduces,
    /// No pair does.
    DoesNotReproduce,
    /// Some pairs do and some do not, or there are fewer than [`MIN_PAIRS`].
    Inconclusive,
}

impl Verdict {
    /// The verdict on effect ratios oriented so that the claim's direction is above 1.
    pub fn of(ratios: &[f64]) -> Self {
        Self::of_outcomes(ratios.iter().map(|r| *r >= 1.0 + SMALLEST_EFFECT))
    }

    /// The verdict on per-pair outcomes: whether each pair showed the claimed effect.
    pub fn of_outcomes(outcomes: impl IntoIterator<Item = bool>) -> Self {
        let outcomes: Vec<bool> = outcomes.into_iter().collect();
        if outcomes.len() < MIN_PAIRS {
            Self::Inconclusive
        } else if outcomes.iter().all(|shown| *shown) {
            Self::Reproduces
        } else if outcomes.iter().all(|shown| !*shown) {
            Self::DoesNotReproduce
        } else {
            Self::Inconclusive
        }
    }

    /// `reproduces`, `does not reproduce`, `inconclusive at this noise level`.
    pub fn text(self) -> &'static str {
        match self {
            Self::Reproduces => "reproduces",
            Self::DoesNotReproduce => "does not reproduce",
            Self::Inconclusive => "inconclusive at this noise level",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixtures;

    fn with_round_trips(before: Option<f64>, after: Option<f64>, ops: f64) -> CellResult {
        let mut r = fixtures::results()[0].clone();
        r.env.core_round_trip_before_ns = before;
        r.env.core_round_trip_after_ns = after;
        r.reads.ops_per_sec = ops;
        r.writes.ops_per_sec = 0.0;
        r
    }

    #[test]
    fn a_spread_is_the_median_and_range() {
        let s = Spread::of(&[3.0, 1.0, 2.0]).unwrap();
        assert_eq!((s.median, s.low, s.high, s.n), (2.0, 1.0, 3.0, 3));
        let even = Spread::of(&[4.0, 1.0, 3.0, 2.0]).unwrap();
        assert_eq!(even.median, 2.5);
        assert_eq!(Spread::of(&[]), None);
        assert_eq!(Spread::of(&[1.0, f64::NAN]), None);
        assert_eq!(Spread::of(&[7.0]).unwrap().coverage(), 0.0);
        assert_eq!(s.coverage(), 0.75);
        let five = Spread::of(&[1.0; 5]).unwrap();
        assert!((five.coverage() - 0.9375).abs() < 1e-12);
    }

    #[test]
    fn placements_are_bands_of_the_round_trip() {
        let at = |before, after| Placement::of(&with_round_trips(before, after, 1.0));
        assert_eq!(at(Some(26.0), Some(30.0)), Placement::SharedCore);
        assert_eq!(at(Some(62.0), Some(150.0)), Placement::Near);
        assert_eq!(at(Some(320.0), None), Placement::Far);
        assert_eq!(at(Some(70.0), Some(340.0)), Placement::Moved);
        assert_eq!(at(None, None), Placement::Unknown);
    }

    #[test]
    fn pairs_in_different_placements_are_set_aside() {
        let near = |ops| with_round_trips(Some(70.0), Some(80.0), ops);
        let far = |ops| with_round_trips(Some(330.0), Some(310.0), ops);
        let unknown = |ops| with_round_trips(None, None, ops);
        let (a1, b1) = (near(200.0), near(100.0));
        let (a2, b2) = (near(300.0), far(100.0));
        let (a3, b3) = (unknown(150.0), far(100.0));
        let (a4, b4) = (near(1.0), near(0.0));
        let paired = Paired::of(
            [(&a1, &b1), (&a2, &b2), (&a3, &b3), (&a4, &b4)],
            crate::summary::throughput,
        );
        assert_eq!(paired.ratios, [2.0, 1.5]);
        assert_eq!(paired.set_aside, 1);
        let spread = paired.spread().unwrap();
        assert_eq!((spread.low, spread.median, spread.high), (1.5, 1.75, 2.0));
    }

    #[test]
    fn a_verdict_needs_three_pairs_on_one_side_of_the_line() {
        assert_eq!(Verdict::of(&[1.5, 1.3, 1.2]), Verdict::Reproduces);
        assert_eq!(Verdict::of(&[1.05, 0.9, 1.02]), Verdict::DoesNotReproduce);
        assert_eq!(Verdict::of(&[0.5, 0.6, 0.55]), Verdict::DoesNotReproduce);
        // Both sides of the 10% line: the noise is as large as the effect.
        assert_eq!(Verdict::of(&[1.5, 1.05, 1.3]), Verdict::Inconclusive);
        // Too few pairs, however large the effect.
        assert_eq!(Verdict::of(&[5.0, 6.0]), Verdict::Inconclusive);
        assert_eq!(Verdict::of(&[]), Verdict::Inconclusive);
        assert_eq!(
            Verdict::of_outcomes([true, true, true, true, true]),
            Verdict::Reproduces
        );
        assert_eq!(
            Verdict::Inconclusive.text(),
            "inconclusive at this noise level"
        );
    }
}
