//! The options checked before anything runs: unknown names, empty lists, zero values and contradictions, each
//! refusal naming the option at fault. Approaches are [`ApproachName`](quicklite_lab_core::ApproachName)s, known by
//! construction.

use quicklite_lab_core::{LongReads, PPM, Workload};

use super::custom;
use super::product::supports;
use crate::catalog::{self, MULTI_DB};
use crate::error::{LabError, Result};
use crate::options::BenchOptions;

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
    if let Some(name) = options.approaches.iter().find(|a| a.needs_server())
        && options.postgres_url.is_none()
    {
        return Err(invalid(
            "--approaches",
            format!("`{name}` needs a server: add --with-postgres or --postgres-url URL"),
        ));
    }
    // A variant is measured only when named: one that runs none of the run's workloads was named for nothing.
    for &approach in options.approaches.iter().filter(|a| a.is_variant()) {
        if !options
            .workloads
            .iter()
            .any(|w| supports(options, w, approach))
        {
            let runs: Vec<&str> = Workload::ALL
                .into_iter()
                .filter(|w| approach.implements(*w))
                .map(Workload::name)
                .collect();
            return Err(invalid(
                "--approaches",
                format!(
                    "`{approach}` runs none of the workloads asked ({}); it runs {}",
                    options.workloads.join(", "),
                    runs.join(", ")
                ),
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
    if options
        .workloads
        .iter()
        .any(|w| w == catalog::THROUGHPUT || w == catalog::HELD_TX)
    {
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
    if options.workloads.iter().any(|w| w == catalog::LONG_READ) {
        check_long_reads(options)?;
    }
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

/// Refuses long reads that leave no short read, take no time, run from longer to shorter, or would not fit the
/// measured window.
fn check_long_reads(options: &BenchOptions) -> Result<()> {
    non_empty("--long-read-every", &options.long_read_every)?;
    if let Some(every) = options.long_read_every.iter().find(|&&every| every < 2) {
        return Err(invalid(
            "--long-read-every",
            format!(
                "one read in {every} long leaves no short read: every value must be at least 2"
            ),
        ));
    }
    non_empty("--long-read-ms", &options.long_read_ms)?;
    for range in &options.long_read_ms {
        let (min, max) = (*range.start(), *range.end());
        let reason = if min == 0 {
            "a long read takes at least 1 ms".to_owned()
        } else if min > max {
            format!("{min}-{max}: the shortest time comes first ({max}-{min})")
        } else if max > LongReads::MAX_MS {
            format!(
                "{max} ms is past the longest a long read may take ({} ms)",
                LongReads::MAX_MS
            )
        } else if max > options.duration_ms {
            format!(
                "a long read of up to {max} ms does not fit the measured window of {} (--duration)",
                crate::format::duration_ms(options.duration_ms)
            )
        } else {
            continue;
        };
        return Err(invalid("--long-read-ms", reason));
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

#[cfg(test)]
mod tests {
    use quicklite_lab_core::ApproachName;

    use super::*;
    use crate::matrix::build_matrix;
    use crate::matrix::tests::{custom_workload, once};

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
    fn a_variant_named_for_none_of_the_workloads_is_refused_with_those_it_runs() {
        let options = BenchOptions {
            workloads: vec!["insert".into(), "point-read".into()],
            approaches: vec![ApproachName::Quicklite, ApproachName::QuickliteClosure],
            ..once()
        };
        let err = build_matrix(&options).unwrap_err().to_string();
        assert!(
            err.contains("--approaches")
                && err.contains(
                    "`quicklite-closure` runs none of the workloads asked (insert, point-read); it runs held-tx"
                ),
            "{err}"
        );
        let options = BenchOptions {
            workloads: vec!["point-read".into()],
            approaches: vec![ApproachName::QuickliteFeed],
            ..once()
        };
        let err = build_matrix(&options).unwrap_err().to_string();
        assert!(
            err.contains("it runs insert, mixed, write-read, throughput, held-tx"),
            "{err}"
        );
        // Among the workloads it runs, it is measured where it applies and left out elsewhere.
        let options = BenchOptions {
            workloads: vec!["point-read".into(), "insert".into()],
            ..options
        };
        let cells = build_matrix(&options).unwrap();
        assert!(cells.iter().all(|c| c.workload == "insert"));
    }

    #[test]
    fn held_tx_needs_a_think_time_list_and_takes_no_rate() {
        let options = BenchOptions {
            workloads: vec!["held-tx".into()],
            approaches: vec![ApproachName::Quicklite],
            think_us: Vec::new(),
            ..once()
        };
        let err = build_matrix(&options).unwrap_err().to_string();
        assert!(err.contains("--think-us"), "{err}");
        let options = BenchOptions {
            think_us: vec![1_000],
            rates: vec![Some(1_000)],
            ..options
        };
        let err = build_matrix(&options).unwrap_err().to_string();
        assert!(
            err.contains("--rate") && err.contains("held-tx cannot run at a fixed rate"),
            "{err}"
        );
    }

    #[test]
    fn a_rate_is_refused_for_workloads_without_an_open_loop_and_when_zero() {
        let options = BenchOptions {
            workloads: vec!["point-read".into(), "queue".into(), "orm".into()],
            approaches: vec![ApproachName::Quicklite],
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

    #[test]
    fn long_reads_leave_short_ones_take_time_and_fit_the_window() {
        let good = BenchOptions {
            workloads: vec!["long-read".into()],
            approaches: vec![ApproachName::Quicklite],
            duration_ms: 1_000,
            ..once()
        };
        assert!(build_matrix(&good).is_ok());
        let cases: Vec<(BenchOptions, &str)> = vec![
            (
                BenchOptions {
                    long_read_every: vec![1_000, 1],
                    ..good.clone()
                },
                "invalid --long-read-every: one read in 1 long leaves no short read",
            ),
            (
                BenchOptions {
                    long_read_every: vec![],
                    ..good.clone()
                },
                "invalid --long-read-every: the list is empty",
            ),
            (
                BenchOptions {
                    long_read_ms: vec![0..=10],
                    ..good.clone()
                },
                "invalid --long-read-ms: a long read takes at least 1 ms",
            ),
            (
                BenchOptions {
                    // Upside down, as a caller other than the command line may give it.
                    long_read_ms: vec![std::ops::RangeInclusive::new(300, 100)],
                    ..good.clone()
                },
                "invalid --long-read-ms: 300-100: the shortest time comes first (100-300)",
            ),
            (
                BenchOptions {
                    long_read_ms: vec![100..=2_000],
                    ..good.clone()
                },
                "invalid --long-read-ms: a long read of up to 2000 ms does not fit the measured window of 1 s",
            ),
            (
                BenchOptions {
                    long_read_ms: vec![100..=70_000],
                    duration_ms: 100_000,
                    ..good.clone()
                },
                "invalid --long-read-ms: 70000 ms is past the longest",
            ),
        ];
        for (options, message) in cases {
            let err = build_matrix(&options).unwrap_err().to_string();
            assert!(err.contains(message), "{message}: {err}");
        }
        // Without the workload in the run, its knobs are not looked at.
        let unused = BenchOptions {
            workloads: vec!["point-read".into()],
            long_read_every: vec![1],
            ..good
        };
        assert!(build_matrix(&unused).is_ok());
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
