//! The product of the axes: a workload's knob combinations, and which approaches take a cell of them.

use quicklite_lab_core::{
    ApproachName, Cell, DEFAULT_WRITE_PPM, LongReads, MultiDb, Workload, WriteMode,
};

use super::custom;
use crate::catalog::{self, MULTI_DB};
use crate::options::BenchOptions;

/// The knob combinations of one workload (approach, memory statistics and mutex still to be filled in).
pub(super) fn scenarios(workload: &str, options: &BenchOptions) -> Vec<Cell> {
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
        long_reads: None,
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
    // Only the throughput and held-tx workloads think inside their transactions; throughput commits with
    // `synchronous=FULL` unless told otherwise, as the harness it follows.
    let (thinks, synchronous_default) = if workload == catalog::THROUGHPUT {
        (dedup(&options.think_us), Some("full".to_owned()))
    } else if workload == catalog::HELD_TX {
        (dedup(&options.think_us), None)
    } else {
        (vec![0], None)
    };
    // Only `mixed` has a share of writes; every other workload keeps the default, which no cell writes out.
    let write_shares = if workload == catalog::MIXED {
        dedup(&options.write_ppm)
    } else {
        vec![DEFAULT_WRITE_PPM]
    };
    // Only `long-read` has long reads: a table for each of their settings.
    let long_reads: Vec<Option<LongReads>> = if workload == catalog::LONG_READ {
        product(
            &dedup(&options.long_read_every),
            &dedup(&options.long_read_ms),
        )
        .into_iter()
        .map(|(every, ms)| {
            Some(LongReads {
                every,
                min_ms: *ms.start(),
                max_ms: *ms.end(),
            })
        })
        .collect()
    } else {
        vec![None]
    };
    let mut out = Vec::new();
    let shares_and_rates = product(&write_shares, &dedup(&options.rates));
    for ((concurrency, multi_db), (write_ppm, rate)) in product(&loads, &shares_and_rates) {
        for (think_us, long_reads) in product(&thinks, &long_reads) {
            for &worker_threads in &dedup(&options.worker_threads) {
                for profile in &dedup(&options.profiles) {
                    for synchronous in &dedup(&options.synchronous) {
                        for build_profile in &dedup(&options.build_profiles) {
                            out.push(Cell {
                                concurrency,
                                think_us,
                                long_reads,
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
pub(super) fn supports(options: &BenchOptions, workload: &str, approach: ApproachName) -> bool {
    if custom(options, workload).is_some() {
        return approach.runs_custom();
    }
    // Validated before: every name is a built-in workload or a custom one.
    Workload::parse(workload).is_ok_and(|workload| approach.implements(workload))
}

/// Whether `approach` has a cell at `base`'s load: the ceiling runs flat out only, so it has none at a rate.
pub(super) fn takes_rate(base: &Cell, approach: ApproachName) -> bool {
    base.rate.is_none() || approach != ApproachName::Ceiling
}

/// Every pair of `a` and `b`, `b` innermost.
pub(super) fn product<A: Clone, B: Clone>(a: &[A], b: &[B]) -> Vec<(A, B)> {
    a.iter()
        .flat_map(|x| b.iter().map(move |y| (x.clone(), y.clone())))
        .collect()
}

/// Removes repeated values, keeping the first occurrence's position.
pub(super) fn dedup<T: Clone + PartialEq>(list: &[T]) -> Vec<T> {
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
    use quicklite_lab_core::PPM;

    use super::*;
    use crate::matrix::build_matrix;
    use crate::matrix::tests::{custom_workload, once};

    #[test]
    fn postgres_needs_a_server_and_runs_the_orm_suite_once() {
        let mut options = BenchOptions {
            workloads: vec!["orm".into(), "point-read".into()],
            approaches: vec![ApproachName::DirectBlocking, ApproachName::Postgres],
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
            approaches: vec![ApproachName::Quicklite],
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
            approaches: vec![ApproachName::Quicklite],
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
    fn the_memory_map_is_a_set_up_axis_that_skips_server_approaches() {
        let options = BenchOptions {
            workloads: vec!["orm".into()],
            approaches: vec![ApproachName::Quicklite, ApproachName::Postgres],
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
    fn write_modes_and_total_readers_are_multi_db_axes() {
        let options = BenchOptions {
            workloads: vec!["multi-db".into()],
            approaches: vec![ApproachName::Quicklite, ApproachName::TokioRusqlite],
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
            approaches: vec![ApproachName::Quicklite, ApproachName::TokioRusqlite],
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
    fn long_reads_are_axes_of_their_workload_which_runs_only_when_named() {
        let options = BenchOptions {
            workloads: vec!["long-read".into(), "point-read".into()],
            approaches: vec![
                ApproachName::Quicklite,
                ApproachName::QuickliteNoInline,
                ApproachName::TokioRusqlite,
                // Neither has counted reads: no long-read cell.
                ApproachName::Ceiling,
                ApproachName::Sqlx,
            ],
            long_read_every: vec![1_000, 100, 1_000],
            long_read_ms: vec![100..=300, 50..=50],
            ..once()
        };
        let cells = build_matrix(&options).unwrap();
        let long: Vec<(u32, u64, u64, &str)> = cells
            .iter()
            .filter(|c| c.workload == "long-read")
            .map(|c| {
                let l = c.long_reads.unwrap();
                (l.every, l.min_ms, l.max_ms, c.approach.as_str())
            })
            .collect();
        let mut expected = Vec::new();
        for every in [1_000, 100] {
            for (min, max) in [(100, 300), (50, 50)] {
                for approach in ["quicklite", "quicklite-no-inline", "tokio-rusqlite"] {
                    expected.push((every, min, max, approach));
                }
            }
        }
        assert_eq!(long, expected);
        assert!(
            cells
                .iter()
                .filter(|c| c.workload == "point-read")
                .all(|c| c.long_reads.is_none())
        );
        // Measured only when named: neither the full run nor the quick one has it.
        for options in [once(), BenchOptions::quick()] {
            let cells = build_matrix(&options).unwrap();
            assert!(cells.iter().all(|c| c.workload != "long-read"));
            assert!(cells.iter().all(|c| c.long_reads.is_none()));
        }
    }

    #[test]
    fn held_transactions_think_at_each_think_time_where_a_transaction_can_be_held() {
        let options = BenchOptions {
            workloads: vec!["held-tx".into(), "insert".into()],
            approaches: vec![
                ApproachName::Quicklite,
                ApproachName::QuickliteClosure,
                ApproachName::QuickliteFeed,
                ApproachName::Sqlx,
                // No transaction to hold across `.await`: no held-tx cell.
                ApproachName::TrailbaseSqlite,
                ApproachName::TokioRusqlite,
                ApproachName::Ceiling,
            ],
            concurrency: vec![1, 64],
            think_us: vec![1_000, 0, 1_000],
            ..once()
        };
        let cells = build_matrix(&options).unwrap();
        let held: Vec<(u32, u64, &str)> = cells
            .iter()
            .filter(|c| c.workload == "held-tx")
            .map(|c| (c.concurrency, c.think_us, c.approach.as_str()))
            .collect();
        let mut expected = Vec::new();
        for concurrency in [1, 64] {
            for think in [1_000, 0] {
                for approach in ["quicklite", "quicklite-closure", "quicklite-feed", "sqlx"] {
                    expected.push((concurrency, think, approach));
                }
            }
        }
        assert_eq!(held, expected);
        // Inserts think not, and the closure form has none: it answers held-tx's question only.
        let inserts: Vec<&str> = cells
            .iter()
            .filter(|c| c.workload == "insert" && c.concurrency == 64)
            .map(|c| c.approach.as_str())
            .collect();
        assert_eq!(
            inserts,
            [
                "quicklite",
                "quicklite-feed",
                "sqlx",
                "trailbase-sqlite",
                "tokio-rusqlite",
                "ceiling"
            ]
        );
        assert!(
            cells
                .iter()
                .filter(|c| c.workload == "insert")
                .all(|c| c.think_us == 0 && c.synchronous.is_none())
        );
        // The profile's `synchronous`: FULL is throughput's, after the harness it follows.
        assert!(cells.iter().all(|c| c.synchronous.is_none()));
        // Measured only when named, and the variants only when named: neither the full run nor the quick one has
        // them.
        for options in [once(), BenchOptions::quick()] {
            let cells = build_matrix(&options).unwrap();
            assert!(cells.iter().all(|c| c.workload != "held-tx"));
            assert!(
                cells
                    .iter()
                    .all(|c| c.approach != "quicklite-closure" && c.approach != "quicklite-feed")
            );
        }
    }

    #[test]
    fn rates_are_an_axis_and_the_ceiling_stays_closed_loop() {
        let options = BenchOptions {
            workloads: vec!["point-read".into(), "mixed".into()],
            approaches: vec![
                ApproachName::Quicklite,
                ApproachName::Ceiling,
                ApproachName::TokioRusqlite,
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
}
