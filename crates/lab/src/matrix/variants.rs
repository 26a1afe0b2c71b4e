//! The variants: extra cells of one approach with some knobs changed, at the first value of every other axis.

use quicklite_lab_core::{ApproachName, Cell};

use crate::options::{BenchOptions, Variant};

pub(super) fn variants_for<'a>(
    workload: &'a str,
    approaches: &'a [ApproachName],
    variants: &'a [Variant],
) -> impl Iterator<Item = &'a Variant> {
    variants
        .iter()
        .filter(move |v| v.workload == workload && approaches.contains(&v.approach))
}

pub(super) fn apply(base: &Cell, variant: &Variant, options: &BenchOptions) -> Cell {
    let first_memstatus = options.memstatus.first().copied().unwrap_or(false);
    let first_mutex = options.mutex.first().cloned().unwrap_or_default();
    let first_mmap = options.mmap_size.first().copied().flatten();
    let profile = variant
        .profile
        .clone()
        .unwrap_or_else(|| base.profile.clone());
    let concurrency = match (&base.multi_db, variant.concurrency) {
        (None, Some(concurrency)) => concurrency,
        _ => base.concurrency,
    };
    Cell {
        approach: variant.approach.to_string(),
        memstatus: variant.memstatus.unwrap_or(first_memstatus),
        mutex: variant.mutex.clone().unwrap_or(first_mutex),
        mmap_size: variant.mmap_size.or(first_mmap),
        concurrency,
        profile,
        build_profile: variant
            .build_profile
            .clone()
            .unwrap_or_else(|| base.build_profile.clone()),
        ..base.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::matrix::build_matrix;

    #[test]
    fn variants_skip_approaches_not_in_the_run() {
        let options = BenchOptions {
            approaches: vec![ApproachName::Sqlx],
            ..BenchOptions::quick()
        };
        let cells = build_matrix(&options).unwrap();
        assert_eq!(cells.len(), 4);
    }
}
