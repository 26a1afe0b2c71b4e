//! Ratios: a row's throughput over the baseline's and its share of the ceiling, repetitions paired round by
//! round, and how a row writes them.

use quicklite_lab_core::ApproachName;

use super::row::Row;
use super::throughput::throughput;
use crate::format;
use crate::repetitions::{Paired, Spread};

/// The row ratios are computed against.
#[derive(Debug, Clone)]
pub struct Baseline {
    /// Its row label.
    pub label: String,
    /// `false` when the requested baseline did not run (or failed) and the slowest row stands in.
    pub requested: bool,
}

impl Row {
    /// `5.92× faster than tokio-rusqlite`, `baseline`, or empty.
    pub fn ratio_text(&self, baseline: &Baseline) -> String {
        match (self.is_baseline, self.ratio) {
            (true, _) => "baseline".to_owned(),
            (false, Some(ratio)) => format::ratio(ratio, &baseline.label),
            (false, None) => String::new(),
        }
    }

    /// `5.92× faster`, `5.92× faster (5.10–6.30×)` with repetitions, `baseline`, or empty: for a column headed
    /// with the baseline's name. A dagger marks a ratio some of whose pairs were set aside for their placement.
    pub fn ratio_short(&self) -> String {
        let dagger = if self.pairs_set_aside > 0 { " †" } else { "" };
        match (self.is_baseline, self.ratio, &self.ratio_spread) {
            (true, _, _) => "baseline".to_owned(),
            (false, Some(ratio), Some(s)) => format!(
                "{} ({}){dagger}",
                format::ratio_short(ratio),
                format::ratio_range(ratio, s.low, s.high)
            ),
            (false, Some(ratio), None) => format!("{}{dagger}", format::ratio_short(ratio)),
            (false, None, _) => String::new(),
        }
    }

    /// `41%`, or `41% (38–45%)` with repetitions: the row's share of the ceiling's throughput; `ceiling` for the
    /// ceiling itself; empty without one.
    pub fn of_ceiling_text(&self) -> String {
        if self.is_ceiling {
            return ApproachName::Ceiling.to_string();
        }
        match (self.of_ceiling, &self.of_ceiling_spread) {
            (Some(share), Some(s)) => format!(
                "{} ({:.0}–{:.0}%)",
                format::percent(share),
                s.low * 100.0,
                s.high * 100.0
            ),
            (Some(share), None) => format::percent(share),
            (None, _) => String::new(),
        }
    }

    /// ` (5.10–6.30× over 5 paired repetitions)` when the ratio has a range, else empty.
    pub fn interval_note(&self) -> String {
        match (self.ratio, &self.ratio_spread) {
            (Some(ratio), Some(s)) => format!(
                " ({} over {} paired repetitions)",
                format::ratio_range(ratio, s.low, s.high),
                s.n
            ),
            _ => String::new(),
        }
    }
}

/// Fills in `row`'s ratio to `base`: repetitions of the same round paired, or the medians when no pair is left.
pub(super) fn compare(row: &mut Row, base: &Row) {
    if row.is_baseline {
        row.ratio = Some(1.0);
        return;
    }
    let (ratio, spread, set_aside) = paired_ratio(row, base);
    row.ratio = Some(ratio);
    row.ratio_spread = spread;
    row.pairs_set_aside = set_aside;
}

/// `row`'s throughput over `base`'s: the median of the ratios of repetitions from the same round (pairs in
/// different placements set aside) with their spread when there are two or more, or the ratio of the medians when
/// no pair is left; and how many pairs were set aside.
pub(super) fn paired_ratio(row: &Row, base: &Row) -> (f64, Option<Spread>, usize) {
    let pairs = row.samples.iter().filter_map(|sample| {
        base.samples
            .iter()
            .find(|b| b.cell.repetition == sample.cell.repetition)
            .map(|b| (sample, b))
    });
    let paired = Paired::of(pairs, throughput);
    match paired.spread() {
        Some(spread) => (
            spread.median,
            Some(spread).filter(|s| s.n > 1),
            paired.set_aside,
        ),
        None => (row.throughput / base.throughput, None, paired.set_aside),
    }
}

#[cfg(test)]
mod tests {
    use quicklite_lab_core::ApproachName;

    use crate::fixtures;
    use crate::summary::Summary;

    #[test]
    fn every_row_is_a_share_of_the_ceiling_which_is_no_approach_of_the_headline() {
        let mut results = fixtures::results();
        let quicklite = results
            .iter()
            .find(|r| r.cell.workload == "point-read" && r.cell.approach == "quicklite")
            .unwrap();
        let mut ceiling = quicklite.clone();
        ceiling.cell.approach = ApproachName::Ceiling.to_string();
        ceiling.reads.ops_per_sec *= 2.0;
        results.push(ceiling);
        let summary = Summary::new(&results, ApproachName::Sqlx);
        let reads = &summary.tables[0];
        assert!(reads.has_ceiling);
        assert!(reads.rows[0].is_ceiling);
        assert_eq!(reads.rows[0].of_ceiling_text(), "ceiling");
        assert_eq!(reads.rows[1].label, "quicklite");
        assert_eq!(reads.rows[1].of_ceiling_text(), "50%");
        // The slowest approach stands in for the missing baseline, and the headline speaks of approaches.
        let baseline = reads.baseline.as_ref().unwrap();
        assert_eq!(baseline.label, "tokio-rusqlite");
        assert!(reads.headline().unwrap().starts_with("quicklite is "));
        let columns = crate::export::columns::columns(reads);
        let at = columns
            .headers
            .iter()
            .position(|h| h == "of ceiling")
            .unwrap();
        assert_eq!(columns.cells[1][at], "50%");
        // A table without a ceiling has no such column.
        let inserts = summary
            .tables
            .iter()
            .find(|t| t.workload == "insert")
            .unwrap();
        assert!(!inserts.has_ceiling);
        assert!(inserts.rows.iter().all(|r| r.of_ceiling.is_none()));
    }

    #[test]
    fn a_pair_in_another_placement_is_set_aside_and_marked() {
        let mut results = fixtures::repeated(3);
        for r in results.iter_mut().filter(|r| {
            r.cell.workload == "point-read"
                && r.cell.approach == "quicklite"
                && r.cell.repetition == 0
        }) {
            r.env.core_round_trip_before_ns = Some(330.0);
            r.env.core_round_trip_after_ns = Some(350.0);
        }
        let summary = Summary::new(&results, ApproachName::TokioRusqlite);
        let quicklite = &summary.tables[0].rows[0];
        assert_eq!(quicklite.pairs_set_aside, 1);
        assert_eq!(quicklite.ratio_spread.map(|s| s.n), Some(2));
        assert!(
            quicklite.ratio_short().ends_with(" †"),
            "{}",
            quicklite.ratio_short()
        );
    }

    #[test]
    fn a_missing_baseline_falls_back_to_the_slowest() {
        let summary = Summary::new(&fixtures::results(), ApproachName::TokioRusqlite);
        let inserts = &summary.tables[1];
        let baseline = inserts.baseline.as_ref().unwrap();
        assert!(!baseline.requested);
        assert_eq!(baseline.label, "per-request");
    }
}
