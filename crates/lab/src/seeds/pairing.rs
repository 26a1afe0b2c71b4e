//! The cells that test a claim: a cell and its twin with one knob changed, paired round by round into
//! comparisons.

use quicklite_lab_core::{Cell, CellResult};

use crate::repetitions::{Paired, Spread, by_cell};
use crate::summary::throughput;

/// The successful cell equal to `base` except for what `change` sets.
pub(super) fn twin<'a>(
    results: &[&'a CellResult],
    base: &Cell,
    change: impl Fn(&mut Cell),
) -> Option<&'a CellResult> {
    let mut wanted = base.clone();
    change(&mut wanted);
    results.iter().copied().find(|r| {
        let mut cell = r.cell.clone();
        cell.dir.clone_from(&wanted.dir);
        cell == wanted
    })
}

/// `(with, without)` pairs of successful cells: `pick` selects the cells with the knob in its "on" state,
/// `flip` turns such a cell into its counterpart.
fn pairs<'a>(
    results: &[&'a CellResult],
    pick: impl Fn(&Cell) -> bool,
    flip: impl Fn(&mut Cell) + Copy,
) -> Vec<(&'a CellResult, &'a CellResult)> {
    results
        .iter()
        .copied()
        .filter(|r| pick(&r.cell))
        .filter_map(|r| twin(results, &r.cell, flip).map(|other| (r, other)))
        .filter(|(a, b)| throughput(a) > 0.0 && throughput(b) > 0.0)
        .collect()
}

/// The pairs of one comparison — a cell with the knob on and its twin without — from every repetition round.
pub(super) struct Comparison<'a> {
    /// `(with, without)`, in repetition order; never empty.
    pairs: Vec<(&'a CellResult, &'a CellResult)>,
}

impl<'a> Comparison<'a> {
    /// The first round's pair, whose cells name the comparison.
    pub(super) fn first(&self) -> (&'a CellResult, &'a CellResult) {
        self.pairs[0]
    }

    /// The ratios `with / without` of throughput, pair by pair.
    pub(super) fn paired(&self) -> Paired {
        Paired::of(self.pairs.iter().copied(), throughput)
    }

    /// The median of `value` over the `with` side (`with = true`) or the `without` side.
    pub(super) fn median(&self, with: bool, value: impl Fn(&CellResult) -> f64) -> f64 {
        let values: Vec<f64> = self
            .pairs
            .iter()
            .map(|(a, b)| value(if with { a } else { b }))
            .collect();
        Spread::of(&values).map_or(0.0, |s| s.median)
    }
}

/// [`pairs`] grouped into comparisons: the same two cells, every repetition.
pub(super) fn comparisons<'a>(
    results: &[&'a CellResult],
    pick: impl Fn(&Cell) -> bool,
    flip: impl Fn(&mut Cell) + Copy,
) -> Vec<Comparison<'a>> {
    let found = pairs(results, pick, flip);
    by_cell(found.iter().map(|(with, _)| *with))
        .into_iter()
        .map(|(_, withs)| {
            let mut pairs: Vec<(&CellResult, &CellResult)> = withs
                .iter()
                .filter_map(|w| found.iter().find(|(a, _)| std::ptr::eq(*a, *w)).copied())
                .collect();
            pairs.sort_by_key(|(a, _)| a.cell.repetition);
            Comparison { pairs }
        })
        .collect()
}
