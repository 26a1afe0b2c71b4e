//! One row of a table: one cell's successful repetitions, the median standing for them, and the ratios filled in
//! once the table knows its baseline and ceiling.

use quicklite_lab_core::{ApproachName, CellResult};

use super::throughput::throughput;
use crate::format;
#[cfg(doc)]
use crate::repetitions::Paired;
use crate::repetitions::Spread;

/// One cell of a table, every repetition that succeeded.
#[derive(Debug, Clone)]
pub struct Row {
    /// Approach, plus the set-up knobs that differ from the table's usual values.
    pub label: String,
    /// The median repetition (the lower middle one for an even count): its latencies, CPU time and environment
    /// stand for the row.
    pub result: CellResult,
    /// Every successful repetition, in repetition order.
    pub samples: Vec<CellResult>,
    /// Reads + writes per second (queue cycles per second for the queue) of the median repetition: the ranking
    /// key.
    pub throughput: f64,
    /// The median and range of the repetitions' throughput; `None` for a single repetition.
    pub spread: Option<Spread>,
    /// This row's throughput over the baseline's: the median of the ratios of repetitions from the same round
    /// (pairs in different placements set aside, [`Paired`]), or the ratio of the medians when no pair is left.
    pub ratio: Option<f64>,
    /// The median and range of those paired ratios, when there are two or more.
    pub ratio_spread: Option<Spread>,
    /// Pairs with the baseline set aside because their placements differ.
    pub pairs_set_aside: usize,
    /// Whether this row is the baseline.
    pub is_baseline: bool,
    /// Whether this row is the [`ApproachName::Ceiling`], the reference every row is a share of.
    pub is_ceiling: bool,
    /// This row's throughput as a share of the ceiling's (paired as the ratio is), when the table has a ceiling.
    pub of_ceiling: Option<f64>,
    /// The median and range of those paired shares, when there are two or more.
    pub of_ceiling_spread: Option<Spread>,
}

impl Row {
    /// `5: 1.10M–1.31M/s`: the repetitions and the range of their throughput; empty for one repetition.
    pub fn spread_text(&self) -> String {
        match &self.spread {
            Some(s) => format!("{}: {}–{}/s", s.n, format::ops(s.low), format::ops(s.high)),
            None => String::new(),
        }
    }
}

/// The row of one cell's successful repetitions (at least one).
pub(super) fn row(label: String, samples: &[&CellResult]) -> Row {
    let mut by_throughput: Vec<&CellResult> = samples.to_vec();
    by_throughput.sort_by(|a, b| throughput(a).total_cmp(&throughput(b)));
    let median = by_throughput[(by_throughput.len() - 1) / 2];
    let mut samples: Vec<CellResult> = samples.iter().map(|r| (*r).clone()).collect();
    samples.sort_by_key(|r| r.cell.repetition);
    let throughputs: Vec<f64> = samples.iter().map(throughput).collect();
    Row {
        label,
        result: median.clone(),
        throughput: throughput(median),
        spread: Spread::of(&throughputs).filter(|s| s.n > 1),
        samples,
        ratio: None,
        ratio_spread: None,
        pairs_set_aside: 0,
        is_baseline: false,
        is_ceiling: median.cell.approach == ApproachName::Ceiling,
        of_ceiling: None,
        of_ceiling_spread: None,
    }
}
