//! The matrix: every cell a run will measure, built from [`BenchOptions`] and validated before anything runs.

use quicklite_lab_core::{
    Cell, CustomWorkload, DEFAULT_WRITE_PPM, MultiDb, PPM, Workload, WriteMode,
};

use crate::catalog::{self, MULTI_DB};
use crate::error::{LabError, Result};
use crate::options::{BenchOptions, Variant};

/// Validates `options` and returns the cells to measure, in run order: per workload, every combination of
/// knobs with the approaches innermost (so one summary table's cells run back to back), then the variants.
///
/// Cells carry an empty `dir`; the executor gives each a fresh directory just before it runs.
pub fn build_matrix(options: &BenchOptions) -> Result<Vec<Cell>> {
    validate(options)?;
    let workloads = dedup(&options.workloads);
    let approaches = dedup(&options.approaches);
    let first_memstatus = options.memstatus.first().copied().unwrap_or(false);
    let first_mutex = options.mutex.first().cloned().unwrap_or_default();
    let first_mmap = options.mmap_size.first().copied().flatten();
    let first_profile = options.profiles.first().cloned().unwrap_or_default();
    let first_build = options.build_profiles.first().cloned().unwrap_or_default();
    let mut cells = Vec::new();
    for workload in &workloads {
        let scenarios = scenarios(workload, options);
        for base in &scenarios {
            for &memstatus in &dedup(&options.memstatus) {
                for (mutex, mmap_size) in
                    product(&dedup(&options.mutex), &dedup(&options.mmap_size))
                {
                    for approach in approaches
                        .iter()
                        .filter(|a| supports(options, workload, a) && takes_rate(base, a))
                    {
                        // A server-backed approach has no SQLite knobs: one cell, at the first values.
                        let sqlite_knobs_vary = memstatus != first_memstatus
                            || mutex != first_mutex
                            || mmap_size != first_mmap
                            || base.profile != first_profile
                            || base.build_profile != first_build;
                        if catalog::SERVER_APPROACHES.contains(&approach.as_str())
                            && sqlite_knobs_vary
                        {
                            continue;
                        }
                        // A runner in another language links its own SQLite, set up by its driver: the process
                        // knobs of a Rust runner (memory statistics, mutex mode, build profile) do not reach it.
                        let process_knobs_vary = memstatus != first_memstatus
                            || mutex != first_mutex
                            || base.build_profile != first_build;
                        if catalog::is_other_language(approach) && process_knobs_vary {
                            continue;
                        }
                        cells.push(Cell {
                            postgres_url: catalog::SERVER_APPROACHES
                                .contains(&approach.as_str())
                                .then(|| options.postgres_url.clone())
                                .flatten(),
                            approach: approach.clone(),
                            memstatus,
                            mutex: mutex.clone(),
                            mmap_size,
                            ..base.clone()
                        });
                    }
                }
            }
        }
        for variant in variants_for(workload, &approaches, &options.variants)
            .filter(|v| supports(options, workload, &v.approach))
        {
            if let Some(base) = scenarios
                .first()
                .filter(|b| takes_rate(b, &variant.approach))
            {
                let cell = apply(base, variant, options);
                if !cells.contains(&cell) {
                    cells.push(cell);
                }
            }
        }
    }
    Ok(interleave(cells, options.repeat))
}

/// Every table's cells `repeat` times, in rounds: the cells of one table (the same load, see
/// [`crate::Summary`]) run A B C, A B C, … with their repetition numbered, and one table's rounds run back to
/// back, so the rows compared with each other are measured close together and alike under drift.
pub fn interleave(cells: Vec<Cell>, repeat: u32) -> Vec<Cell> {
    let mut tables: Vec<(Cell, Vec<Cell>)> = Vec::new();
    for cell in cells {
        let key = crate::summary::load_key(&cell);
        match tables.iter_mut().find(|(k, _)| *k == key) {
            Some((_, members)) => members.push(cell),
            None => tables.push((key, vec![cell])),
        }
    }
    let mut out = Vec::new();
    for (_, members) in tables {
        for repetition in 0..repeat.max(1) {
            out.extend(members.iter().map(|cell| Cell {
                repetition,
                ..cell.clone()
            }));
        }
    }
    out
}

/// The knob combinations of one workload (approach, memory statistics and mutex still to be filled in).
fn scenarios(workload: &str, options: &BenchOptions) -> Vec<Cell> {
    let template = Cell {
        workload: workload.to_owned(),
        approach: String::new(),
        duration_ms: options.duration_ms,
        warmup_ms: options.warmup_ms,
        concurrency: 0,
        worker_threads: 0,
        profile: String::new(),
        synchronous: None,
        memstatus: false,
        mmap_size: None,
        mutex: String::new(),
        rows: options.rows,
        multi_db: None,
        think_us: 0,
        write_ppm: DEFAULT_WRITE_PPM,
        rate: None,
        dir: String::new(),
        seed: options.seed,
        repetition: 0,
        build_profile: String::new(),
        postgres_url: None,
        custom: custom(options, workload).cloned(),
    };
    // multi-db's load is set by databases × readers, not by a concurrency level (seed 004), so it gets one
    // entry on that axis: the number of tasks it runs, for the record.
    let loads: Vec<(u32, Option<MultiDb>)> = if workload == MULTI_DB {
        let mut loads = Vec::new();
        for &num_databases in &dedup(&options.num_databases) {
            for &write_delay_ms in &dedup(&options.write_delays_ms) {
                for mode in &dedup(&options.write_modes) {
                    // Validated before: every name parses.
                    let write_mode = WriteMode::parse(mode).unwrap_or_default();
                    // With a total, readers are not per database; 0 keeps the cell from saying otherwise.
                    let readers = if options.total_readers.is_some() {
                        0
                    } else {
                        options.readers
                    };
                    let multi_db = MultiDb {
                        num_databases,
                        readers,
                        write_delay_ms,
                        write_mode,
                        total_readers: options.total_readers,
                    };
                    let tasks = u64::from(num_databases) + multi_db.reader_tasks();
                    loads.push((u32::try_from(tasks).unwrap_or(u32::MAX), Some(multi_db)));
                }
            }
        }
        loads
    } else if workload == catalog::ORM {
        // The suite runs one operation at a time, as the seed's single connection did.
        vec![(1, None)]
    } else {
        dedup(&options.concurrency)
            .into_iter()
            .map(|c| (c, None))
            .collect()
    };
    // Only the throughput workload thinks inside its transactions; it commits with `synchronous=FULL` unless told
    // otherwise, as the harness it follows.
    let (thinks, synchronous_default) = if workload == catalog::THROUGHPUT {
        (dedup(&options.think_us), Some("full".to_owned()))
    } else {
        (vec![0], None)
    };
    // Only `mixed` has a share of writes; every other workload keeps the default, which no cell writes out.
    let write_shares = if workload == catalog::MIXED {
        dedup(&options.write_ppm)
    } else {
        vec![DEFAULT_WRITE_PPM]
    };
    let mut out = Vec::new();
    let shares_and_rates = product(&write_shares, &dedup(&options.rates));
    for ((concurrency, multi_db), (write_ppm, rate)) in product(&loads, &shares_and_rates) {
        for &think_us in &thinks {
            for &worker_threads in &dedup(&options.worker_threads) {
                for profile in &dedup(&options.profiles) {
                    for synchronous in &dedup(&options.synchronous) {
                        for build_profile in &dedup(&options.build_profiles) {
                            out.push(Cell {
                                concurrency,
                                think_us,
                                write_ppm,
                                rate,
                                worker_threads,
                                profile: profile.clone(),
                                synchronous: synchronous.clone().or(synchronous_default.clone()),
                                multi_db: multi_db.clone(),
                                build_profile: build_profile.clone(),
                                ..template.clone()
                            });
                        }
                    }
                }
            }
        }
    }
    out
}

/// Whether `approach` implements `workload`, built in or one of the run's custom workloads.
fn supports(options: &BenchOptions, workload: &str, approach: &str) -> bool {
    if custom(options, workload).is_some() {
        return catalog::CUSTOM_APPROACHES.contains(&approach);
    }
    catalog::supports(workload, approach)
}

/// The run's custom workload named `name`, if it is one.
fn custom<'o>(options: &'o BenchOptions, name: &str) -> Option<&'o CustomWorkload> {
    options.custom.iter().find(|c| c.name == name)
}

/// Whether `approach` has a cell at `base`'s load: the ceiling runs flat out only, so it has none at a rate.
fn takes_rate(base: &Cell, approach: &str) -> bool {
    base.rate.is_none() || approach != catalog::CEILING
}

fn variants_for<'a>(
    workload: &'a str,
    approaches: &'a [String],
    variants: &'a [Variant],
) -> impl Iterator<Item = &'a Variant> {
    variants
        .iter()
        .filter(move |v| v.workload == workload && approaches.contains(&v.approach))
}

fn apply(base: &Cell, variant: &Variant, options: &BenchOptions) -> Cell {
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
        approach: variant.approach.clone(),
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

/// Rejects unknown names, empty lists, zero durations and contradictions, naming the option at fault.
pub fn validate(options: &BenchOptions) -> Result<()> {
    non_empty("--workloads", &options.workloads)?;
    for name in &options.workloads {
        if !catalog::WORKLOADS.contains(&name.as_str()) && custom(options, name).is_none() {
            let customs: Vec<&str> = options.custom.iter().map(|c| c.name.as_str()).collect();
            return Err(LabError::UnknownWorkload {
                name: name.clone(),
                valid: catalog::list(&[catalog::WORKLOADS, &customs].concat()),
            });
        }
    }
    for (k, workload) in options.custom.iter().enumerate() {
        if options.custom[..k].iter().any(|c| c.name == workload.name) {
            return Err(invalid(
                "--workload-file",
                format!("two workload files name their workload `{}`", workload.name),
            ));
        }
    }
    non_empty("--approaches", &options.approaches)?;
    for name in &options.approaches {
        if !catalog::is_approach(name) {
            return Err(LabError::UnknownApproach {
                name: name.clone(),
                valid: catalog::list(
                    &[
                        catalog::APPROACHES,
                        catalog::GO_APPROACHES,
                        catalog::NODE_APPROACHES,
                        catalog::VARIANT_APPROACHES,
                        catalog::SERVER_APPROACHES,
                    ]
                    .concat(),
                ),
            });
        }
        if catalog::SERVER_APPROACHES.contains(&name.as_str()) && options.postgres_url.is_none() {
            return Err(invalid(
                "--approaches",
                format!("`{name}` needs a server: add --with-postgres or --postgres-url URL"),
            ));
        }
    }
    if options.repeat == 0 {
        return Err(invalid("--repeat", "must be at least 1"));
    }
    if options.duration_ms == 0 {
        return Err(invalid("--duration", "must be greater than zero"));
    }
    let has_single_db = options.workloads.iter().any(|w| w != MULTI_DB);
    let has_multi_db = options.workloads.iter().any(|w| w == MULTI_DB);
    if has_single_db {
        positive_list("--concurrency", &options.concurrency)?;
        if options.rows == 0 {
            return Err(invalid("--rows", "must be greater than zero"));
        }
    }
    positive_list("--workers", &options.worker_threads)?;
    known_list("--profiles", &options.profiles, catalog::PROFILES)?;
    non_empty("--synchronous", &options.synchronous)?;
    for value in options.synchronous.iter().flatten() {
        if !catalog::SYNCHRONOUS.contains(&value.as_str()) {
            return Err(invalid(
                "--synchronous",
                format!(
                    "unknown value `{value}` (valid: default, {})",
                    catalog::list(catalog::SYNCHRONOUS)
                ),
            ));
        }
    }
    non_empty("--memstatus", &options.memstatus)?;
    known_list("--mutex", &options.mutex, catalog::MUTEX_MODES)?;
    non_empty("--mmap", &options.mmap_size)?;
    if options.workloads.iter().any(|w| w == catalog::THROUGHPUT) {
        non_empty("--think-us", &options.think_us)?;
    }
    if options.workloads.iter().any(|w| w == catalog::MIXED) {
        non_empty("--write-ratio", &options.write_ppm)?;
        if let Some(ppm) = options.write_ppm.iter().find(|&&ppm| ppm > PPM) {
            return Err(invalid(
                "--write-ratio",
                format!(
                    "a share of writes is at most 1 (100%), not {}",
                    crate::format::share_ppm(*ppm)
                ),
            ));
        }
    }
    check_rates(options)?;
    if has_multi_db {
        positive_list("--num-databases", &options.num_databases)?;
        positive_list("--write-delays", &options.write_delays_ms)?;
        known_list("--write-mode", &options.write_modes, catalog::WRITE_MODES)?;
        match options.total_readers {
            Some(0) => {
                return Err(invalid(
                    "--total-readers",
                    "must be greater than zero (or left out for --readers per database)",
                ));
            }
            Some(_) => {}
            None if options.readers == 0 => {
                return Err(invalid(
                    "--readers",
                    "multi-db needs at least one reader per database",
                ));
            }
            None => {}
        }
    }
    non_empty("--build-profiles", &options.build_profiles)?;
    for name in &options.build_profiles {
        crate::build_profiles::find(name)?;
    }
    for variant in &options.variants {
        if variant.concurrency == Some(0) {
            return Err(invalid("variant concurrency", "must be greater than zero"));
        }
        if let Some(profile) = &variant.profile
            && !catalog::PROFILES.contains(&profile.as_str())
        {
            return Err(invalid(
                "variant profile",
                format!("unknown profile `{profile}`"),
            ));
        }
        if let Some(mutex) = &variant.mutex
            && !catalog::MUTEX_MODES.contains(&mutex.as_str())
        {
            return Err(invalid("variant mutex", format!("unknown mode `{mutex}`")));
        }
    }
    Ok(())
}

/// Refuses a rate of zero, and a rate with a workload that has no open-loop driver.
fn check_rates(options: &BenchOptions) -> Result<()> {
    non_empty("--rate", &options.rates)?;
    if options.rates.iter().all(Option::is_none) {
        return Ok(());
    }
    if options.rates.contains(&Some(0)) {
        return Err(invalid(
            "--rate",
            "every rate must be at least one request per second",
        ));
    }
    let closed_only: Vec<&str> = options
        .workloads
        .iter()
        .filter(|w| Workload::parse(w).is_ok_and(|w| !w.runs_open_loop()))
        .map(String::as_str)
        .collect();
    if !closed_only.is_empty() {
        let open: Vec<&str> = Workload::OPEN_LOOP.iter().map(|w| w.name()).collect();
        return Err(invalid(
            "--rate",
            format!(
                "{} cannot run at a fixed rate (only {} can): leave {} out of --workloads",
                catalog::list(&closed_only),
                open.join(", "),
                if closed_only.len() == 1 { "it" } else { "them" }
            ),
        ));
    }
    Ok(())
}

fn invalid(option: &'static str, reason: impl Into<String>) -> LabError {
    LabError::InvalidOption {
        option,
        reason: reason.into(),
    }
}

fn non_empty<T>(option: &'static str, list: &[T]) -> Result<()> {
    if list.is_empty() {
        return Err(invalid(option, "the list is empty"));
    }
    Ok(())
}

fn positive_list<T: Copy + Into<u64>>(option: &'static str, list: &[T]) -> Result<()> {
    non_empty(option, list)?;
    if list.iter().any(|&v| v.into() == 0) {
        return Err(invalid(option, "every value must be greater than zero"));
    }
    Ok(())
}

fn known_list(option: &'static str, list: &[String], valid: &[&str]) -> Result<()> {
    non_empty(option, list)?;
    for value in list {
        if !valid.contains(&value.as_str()) {
            return Err(invalid(
                option,
                format!("unknown value `{value}` (valid: {})", catalog::list(valid)),
            ));
        }
    }
    Ok(())
}

/// Every pair of `a` and `b`, `b` innermost.
fn product<A: Clone, B: Clone>(a: &[A], b: &[B]) -> Vec<(A, B)> {
    a.iter()
        .flat_map(|x| b.iter().map(move |y| (x.clone(), y.clone())))
        .collect()
}

/// Removes repeated values, keeping the first occurrence's position.
fn dedup<T: Clone + PartialEq>(list: &[T]) -> Vec<T> {
    let mut out: Vec<T> = Vec::with_capacity(list.len());
    for item in list {
        if !out.contains(item) {
            out.push(item.clone());
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The full run's defaults, each cell once: the tests of the product count cells.
    fn once() -> BenchOptions {
        BenchOptions {
            repeat: 1,
            ..BenchOptions::default()
        }
    }

    #[test]
    fn quick_matrix_covers_every_approach_on_three_workloads_and_the_queue() {
        let cells = build_matrix(&BenchOptions::quick()).expect("quick options are valid");
        // 8 approaches (trailbase-sqlite is left out) × 4 workloads, the ceiling on the three single-database ones
        // and the queue, the queue, http and orm without sqlx, 5 set-up variants, 4 one-task queue variants, 2
        // untuned orm variants, 4 one-task mixed variants, 6 without a memory map.
        assert_eq!(cells.len(), 8 * 4 + 4 + 7 * 3 + 5 + 4 + 2 + 4 + 6);
        assert!(
            cells
                .iter()
                .filter(|c| c.approach == catalog::CEILING)
                .all(|c| catalog::ceiling_supports(&c.workload))
        );
        assert!(cells.iter().all(|c| c.approach != "trailbase-sqlite"));
        let unmapped: Vec<&Cell> = cells.iter().filter(|c| c.mmap_size == Some(0)).collect();
        assert_eq!(unmapped.len(), 6);
        assert!(
            unmapped
                .iter()
                .all(|c| ["point-read", "mixed"].contains(&c.workload.as_str()))
        );
        let serial_mixed = cells
            .iter()
            .filter(|c| c.workload == "mixed" && c.concurrency == 1);
        assert_eq!(serial_mixed.count(), 6);
        let orm: Vec<&Cell> = cells.iter().filter(|c| c.workload == "orm").collect();
        assert!(orm.iter().all(|c| c.concurrency == 1));
        assert_eq!(
            orm.iter().filter(|c| c.profile == "sqlite-default").count(),
            2
        );
        for workload in ["point-read", "insert", "multi-db"] {
            for approach in catalog::APPROACHES
                .iter()
                .filter(|a| !catalog::NEEDS_MORE_THAN_RUST.contains(a))
                .filter(|a| catalog::supports(workload, a))
            {
                assert!(
                    cells
                        .iter()
                        .any(|c| c.workload == workload && c.approach == *approach),
                    "{workload} × {approach} missing"
                );
            }
        }
        let multi = cells.iter().find(|c| c.workload == "multi-db").unwrap();
        assert_eq!(multi.multi_db.as_ref().map(|m| m.num_databases), Some(10));
        let queue: Vec<&Cell> = cells.iter().filter(|c| c.workload == "queue").collect();
        assert!(
            queue
                .iter()
                .all(|c| !["sqlx", "trailbase-sqlite"].contains(&c.approach.as_str())),
            "sqlx and trailbase-sqlite have no queue"
        );
        let serial: Vec<&str> = queue
            .iter()
            .filter(|c| c.concurrency == 1)
            .map(|c| c.approach.as_str())
            .collect();
        assert_eq!(
            serial,
            ["ceiling", "direct-blocking", "tokio-rusqlite", "quicklite"]
        );
        assert!(cells.iter().all(|c| c.build_profile == "tuned"));
    }

    #[test]
    fn repetitions_run_in_rounds_within_each_table() {
        let options = BenchOptions {
            workloads: vec!["point-read".into(), "insert".into()],
            approaches: vec!["quicklite".into(), "tokio-rusqlite".into()],
            memstatus: vec![false, true],
            concurrency: vec![64, 1],
            repeat: 2,
            ..once()
        };
        let cells = build_matrix(&options).unwrap();
        let order: Vec<String> = cells
            .iter()
            .map(|c| {
                format!(
                    "{} {} {} {} #{}",
                    c.workload,
                    c.concurrency,
                    c.approach,
                    crate::row::on_off(c.memstatus),
                    c.repetition
                )
            })
            .collect();
        let table = |workload: &str, tasks: u32| -> Vec<String> {
            let round = |repetition: u32| {
                ["off", "on"].into_iter().flat_map(move |memstatus| {
                    ["quicklite", "tokio-rusqlite"]
                        .into_iter()
                        .map(move |approach| {
                            format!("{workload} {tasks} {approach} {memstatus} #{repetition}")
                        })
                })
            };
            round(0).chain(round(1)).collect()
        };
        let expected: Vec<String> = [
            table("point-read", 64),
            table("point-read", 1),
            table("insert", 64),
            table("insert", 1),
        ]
        .concat();
        assert_eq!(order, expected);
        // The runner is never told: a first repetition is not written at all, a later one is.
        let json = |c: &Cell| serde_json::to_string(c).unwrap();
        assert!(!json(&cells[0]).contains("repetition"));
        assert!(json(&cells[4]).contains("\"repetition\":1"));
        let zero = BenchOptions {
            repeat: 0,
            ..options
        };
        assert!(
            build_matrix(&zero)
                .unwrap_err()
                .to_string()
                .contains("--repeat")
        );
    }

    #[test]
    fn postgres_needs_a_server_and_runs_the_orm_suite_once() {
        let mut options = BenchOptions {
            workloads: vec!["orm".into(), "point-read".into()],
            approaches: vec!["direct-blocking".into(), "postgres".into()],
            profiles: vec!["server".into(), "sqlite-default".into()],
            memstatus: vec![false, true],
            ..once()
        };
        let err = build_matrix(&options).unwrap_err().to_string();
        assert!(
            err.contains("`postgres` needs a server: add --with-postgres"),
            "{err}"
        );
        options.postgres_url = Some("postgres://u@127.0.0.1:5/lab".into());
        let cells = build_matrix(&options).unwrap();
        let postgres: Vec<&Cell> = cells.iter().filter(|c| c.approach == "postgres").collect();
        assert_eq!(
            postgres.len(),
            1,
            "no SQLite knob multiplies it; no point-read"
        );
        assert_eq!(postgres[0].workload, "orm");
        assert_eq!(
            postgres[0].postgres_url.as_deref(),
            Some("postgres://u@127.0.0.1:5/lab")
        );
        assert!(
            cells
                .iter()
                .filter(|c| c.approach != "postgres")
                .all(|c| c.postgres_url.is_none())
        );
        // direct-blocking: 2 PRAGMA profiles × 2 memory-statistics settings on each workload.
        assert_eq!(cells.len(), 1 + 2 * 2 * 2);
    }

    #[test]
    fn build_profiles_are_an_axis() {
        let options = BenchOptions {
            workloads: vec!["point-read".into()],
            approaches: vec!["quicklite".into()],
            build_profiles: vec!["tuned".into(), "default".into(), "tuned".into()],
            ..once()
        };
        let cells = build_matrix(&options).unwrap();
        let profiles: Vec<&str> = cells.iter().map(|c| c.build_profile.as_str()).collect();
        assert_eq!(profiles, ["tuned", "default"]);
    }

    #[test]
    fn product_multiplies_only_the_axes_a_workload_uses() {
        let options = BenchOptions {
            workloads: vec!["point-read".into(), "multi-db".into()],
            approaches: vec!["quicklite".into()],
            concurrency: vec![1, 64],
            num_databases: vec![1, 10],
            write_delays_ms: vec![100],
            ..once()
        };
        let cells = build_matrix(&options).unwrap();
        assert_eq!(
            cells.iter().filter(|c| c.workload == "point-read").count(),
            2
        );
        assert_eq!(cells.iter().filter(|c| c.workload == "multi-db").count(), 2);
        assert!(cells.iter().all(|c| c.dir.is_empty()));
    }

    #[test]
    fn variants_skip_approaches_not_in_the_run() {
        let options = BenchOptions {
            approaches: vec!["sqlx".into()],
            ..BenchOptions::quick()
        };
        let cells = build_matrix(&options).unwrap();
        assert_eq!(cells.len(), 4);
    }

    #[test]
    fn the_memory_map_is_a_set_up_axis_that_skips_server_approaches() {
        let options = BenchOptions {
            workloads: vec!["orm".into()],
            approaches: vec!["quicklite".into(), "postgres".into()],
            mmap_size: vec![None, Some(0), None],
            postgres_url: Some("postgres://localhost/x".into()),
            ..once()
        };
        let cells = build_matrix(&options).unwrap();
        let knobs: Vec<(&str, Option<u64>)> = cells
            .iter()
            .map(|c| (c.approach.as_str(), c.mmap_size))
            .collect();
        assert_eq!(
            knobs,
            [
                ("quicklite", None),
                ("postgres", None),
                ("quicklite", Some(0))
            ]
        );
        let empty = BenchOptions {
            mmap_size: vec![],
            ..once()
        };
        assert!(
            build_matrix(&empty)
                .unwrap_err()
                .to_string()
                .contains("--mmap")
        );
    }

    #[test]
    fn unknown_approach_lists_the_valid_ones() {
        let options = BenchOptions {
            approaches: vec!["quicklite".into(), "tokio-sqlite".into()],
            ..once()
        };
        let message = build_matrix(&options).unwrap_err().to_string();
        assert!(message.contains("`tokio-sqlite`"), "{message}");
        assert!(
            message.contains("tokio-rusqlite, deadpool-sqlite"),
            "{message}"
        );
    }

    #[test]
    fn unknown_workload_lists_the_valid_ones() {
        let options = BenchOptions {
            workloads: vec!["reads".into()],
            ..once()
        };
        let message = build_matrix(&options).unwrap_err().to_string();
        assert!(
            message.contains("point-read, insert, mixed, write-read, multi-db"),
            "{message}"
        );
    }

    #[test]
    fn contradictions_are_rejected_with_the_option_named() {
        let cases: Vec<(BenchOptions, &str)> = vec![
            (
                BenchOptions {
                    duration_ms: 0,
                    ..Default::default()
                },
                "--duration",
            ),
            (
                BenchOptions {
                    concurrency: vec![],
                    ..Default::default()
                },
                "--concurrency",
            ),
            (
                BenchOptions {
                    concurrency: vec![0],
                    ..Default::default()
                },
                "--concurrency",
            ),
            (
                BenchOptions {
                    worker_threads: vec![],
                    ..Default::default()
                },
                "--workers",
            ),
            (
                BenchOptions {
                    readers: 0,
                    ..Default::default()
                },
                "--readers",
            ),
            (
                BenchOptions {
                    num_databases: vec![],
                    ..Default::default()
                },
                "--num-databases",
            ),
            (
                BenchOptions {
                    write_delays_ms: vec![0],
                    ..Default::default()
                },
                "--write-delays",
            ),
            (
                BenchOptions {
                    write_modes: vec!["lazy".into()],
                    ..Default::default()
                },
                "--write-mode",
            ),
            (
                BenchOptions {
                    total_readers: Some(0),
                    ..Default::default()
                },
                "--total-readers",
            ),
            (
                BenchOptions {
                    profiles: vec!["fast".into()],
                    ..Default::default()
                },
                "--profiles",
            ),
            (
                BenchOptions {
                    mutex: vec!["none".into()],
                    ..Default::default()
                },
                "--mutex",
            ),
            (
                BenchOptions {
                    memstatus: vec![],
                    ..Default::default()
                },
                "--memstatus",
            ),
            (
                BenchOptions {
                    synchronous: vec![Some("extra-full".into())],
                    ..Default::default()
                },
                "--synchronous",
            ),
        ];
        for (options, option) in cases {
            let message = build_matrix(&options).unwrap_err().to_string();
            assert!(message.contains(option), "{option}: {message}");
        }
    }

    #[test]
    fn write_modes_and_total_readers_are_multi_db_axes() {
        let options = BenchOptions {
            workloads: vec!["multi-db".into()],
            approaches: vec!["quicklite".into(), "tokio-rusqlite".into()],
            num_databases: vec![1, 1_000],
            write_delays_ms: vec![100],
            write_modes: vec!["blocking".into(), "paced".into()],
            total_readers: Some(64),
            ..once()
        };
        let cells = build_matrix(&options).unwrap();
        assert_eq!(cells.len(), 2 * 2 * 2);
        for cell in &cells {
            let m = cell.multi_db.as_ref().unwrap();
            assert_eq!(m.total_readers, Some(64));
            assert_eq!(
                m.readers, 0,
                "readers per database are not used with a total"
            );
            assert_eq!(cell.concurrency, m.num_databases + 64);
        }
        let paced = cells
            .iter()
            .filter(|c| c.multi_db.as_ref().unwrap().write_mode == WriteMode::Paced)
            .count();
        assert_eq!(paced, 4);
        // The default keeps today's cells: blocking writers, readers per database.
        let cells = build_matrix(&BenchOptions::quick()).unwrap();
        let m = cells.iter().find_map(|c| c.multi_db.as_ref()).unwrap();
        assert_eq!(
            (m.write_mode, m.total_readers, m.readers),
            (WriteMode::Blocking, None, 3)
        );
    }

    #[test]
    fn shares_of_writes_are_an_axis_of_mixed_only() {
        let options = BenchOptions {
            workloads: vec!["mixed".into(), "point-read".into()],
            approaches: vec!["quicklite".into(), "tokio-rusqlite".into()],
            concurrency: vec![64, 1],
            write_ppm: vec![0, 1_000, 10_000, 0],
            ..once()
        };
        let cells = build_matrix(&options).unwrap();
        let mixed: Vec<(u32, u32, &str)> = cells
            .iter()
            .filter(|c| c.workload == "mixed")
            .map(|c| (c.concurrency, c.write_ppm, c.approach.as_str()))
            .collect();
        // Each share is a table of its own (the approaches innermost), at every concurrency.
        let mut expected = Vec::new();
        for concurrency in [64, 1] {
            for share in [0, 1_000, 10_000] {
                for approach in ["quicklite", "tokio-rusqlite"] {
                    expected.push((concurrency, share, approach));
                }
            }
        }
        assert_eq!(mixed, expected);
        // Point reads have no writes to share: their cells keep the default, which is not sent to the runner.
        let reads: Vec<&Cell> = cells
            .iter()
            .filter(|c| c.workload == "point-read")
            .collect();
        assert_eq!(reads.len(), 4);
        assert!(reads.iter().all(|c| c.write_ppm == DEFAULT_WRITE_PPM));
        assert!(
            !serde_json::to_string(reads[0])
                .unwrap()
                .contains("write_ppm")
        );
        // Today's mix by default.
        let cells = build_matrix(&BenchOptions::quick()).unwrap();
        assert!(cells.iter().all(|c| c.write_ppm == DEFAULT_WRITE_PPM));
        for (write_ppm, message) in [
            (vec![], "the list is empty"),
            (vec![PPM + 1], "at most 1 (100%)"),
        ] {
            let options = BenchOptions {
                write_ppm,
                ..options.clone()
            };
            let err = build_matrix(&options).unwrap_err().to_string();
            assert!(
                err.contains("--write-ratio") && err.contains(message),
                "{err}"
            );
        }
    }

    #[test]
    fn rates_are_an_axis_and_the_ceiling_stays_closed_loop() {
        let options = BenchOptions {
            workloads: vec!["point-read".into(), "mixed".into()],
            approaches: vec![
                "quicklite".into(),
                "ceiling".into(),
                "tokio-rusqlite".into(),
            ],
            concurrency: vec![64],
            rates: vec![Some(1_000), Some(20_000), Some(1_000)],
            ..once()
        };
        let cells = build_matrix(&options).unwrap();
        let got: Vec<(&str, Option<u64>, &str)> = cells
            .iter()
            .map(|c| (c.workload.as_str(), c.rate, c.approach.as_str()))
            .collect();
        let mut expected = Vec::new();
        for workload in ["point-read", "mixed"] {
            for rate in [1_000, 20_000] {
                for approach in ["quicklite", "tokio-rusqlite"] {
                    expected.push((workload, Some(rate), approach));
                }
            }
        }
        assert_eq!(got, expected);
        // Without --rate, every cell is closed loop and its JSON says nothing of rates.
        let cells = build_matrix(&BenchOptions::quick()).unwrap();
        assert!(cells.iter().all(|c| c.rate.is_none()));
        assert!(!serde_json::to_string(&cells[0]).unwrap().contains("rate"));
    }

    #[test]
    fn a_rate_is_refused_for_workloads_without_an_open_loop_and_when_zero() {
        let options = BenchOptions {
            workloads: vec!["point-read".into(), "queue".into(), "orm".into()],
            approaches: vec!["quicklite".into()],
            rates: vec![Some(1_000)],
            ..once()
        };
        let err = build_matrix(&options).unwrap_err().to_string();
        assert!(
            err.contains("--rate")
                && err.contains("queue, orm cannot run at a fixed rate")
                && err.contains("point-read, insert, mixed"),
            "{err}"
        );
        let options = BenchOptions {
            workloads: vec!["insert".into()],
            rates: vec![Some(0)],
            ..options
        };
        let err = build_matrix(&options).unwrap_err().to_string();
        assert!(err.contains("at least one request per second"), "{err}");
    }

    /// A custom workload as the command line gives it after checking its file.
    fn custom_workload(name: &str) -> CustomWorkload {
        CustomWorkload {
            name: name.to_owned(),
            schema: vec!["CREATE TABLE t (x)".to_owned()],
            seed: Vec::new(),
            transactions: vec![quicklite_lab_core::Transaction {
                name: "read".to_owned(),
                weight: 1,
                writes: false,
                params: Vec::new(),
                statements: vec![quicklite_lab_core::CustomStatement {
                    sql: "SELECT x FROM t".to_owned(),
                    binds: Vec::new(),
                }],
            }],
        }
    }

    #[test]
    fn custom_workloads_run_on_the_approaches_that_take_any_sql_and_carry_their_file() {
        let options = BenchOptions {
            workloads: vec!["shop".to_owned(), "point-read".to_owned()],
            custom: vec![custom_workload("shop")],
            concurrency: vec![1, 64],
            rates: vec![None, Some(1_000)],
            ..once()
        };
        let cells = build_matrix(&options).unwrap();
        let shop: Vec<&Cell> = cells.iter().filter(|c| c.workload == "shop").collect();
        assert!(
            shop.iter()
                .all(|c| c.custom.as_ref() == Some(&options.custom[0]))
        );
        assert!(
            cells
                .iter()
                .filter(|c| c.workload == "point-read")
                .all(|c| c.custom.is_none())
        );
        let approaches: Vec<&str> =
            dedup(&shop.iter().map(|c| c.approach.as_str()).collect::<Vec<_>>());
        assert!(approaches.contains(&"quicklite") && approaches.contains(&"ceiling"));
        assert!(approaches.contains(&"sqlx") && approaches.contains(&"tokio-rusqlite"));
        for other in ["go-mattn", "node-better-sqlite3", "postgres"] {
            assert!(!approaches.contains(&other), "{other}");
        }
        // Two concurrencies, closed loop and one rate (the ceiling closed loop only).
        let quicklite = shop.iter().filter(|c| c.approach == "quicklite").count();
        assert_eq!(quicklite, 4);
    }

    #[test]
    fn custom_workload_names_must_be_known_and_distinct() {
        let unknown = BenchOptions {
            workloads: vec!["shop".to_owned()],
            custom: vec![custom_workload("forum")],
            ..once()
        };
        let err = build_matrix(&unknown).unwrap_err().to_string();
        assert!(
            err.contains("unknown workload `shop`") && err.contains("forum"),
            "{err}"
        );
        let twice = BenchOptions {
            workloads: vec!["shop".to_owned()],
            custom: vec![custom_workload("shop"), custom_workload("shop")],
            ..once()
        };
        let err = build_matrix(&twice).unwrap_err().to_string();
        assert!(err.contains("two workload files"), "{err}");
    }

    #[test]
    fn readers_zero_is_fine_with_total_readers() {
        let options = BenchOptions {
            workloads: vec!["multi-db".into()],
            readers: 0,
            total_readers: Some(8),
            ..once()
        };
        assert!(build_matrix(&options).is_ok());
    }

    #[test]
    fn readers_zero_is_fine_without_multi_db() {
        let options = BenchOptions {
            workloads: vec!["insert".into()],
            readers: 0,
            ..once()
        };
        assert!(build_matrix(&options).is_ok());
    }
}
