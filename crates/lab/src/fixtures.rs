//! A fixed set of fake results, for the exporters' snapshot tests and the CSV round-trip test.

use std::collections::BTreeMap;

use quicklite_lab_core::{
    Cell, CellResult, Completion, DEFAULT_WRITE_PPM, Environment, IdleCpu, LONG_READ, Lateness,
    LongReads, MultiDb, NamedOp, OpStats, OpenLoop, WriteMode,
};

fn cell(workload: &str, approach: &str) -> Cell {
    Cell {
        workload: workload.to_owned(),
        approach: approach.to_owned(),
        duration_ms: 2_000,
        warmup_ms: 500,
        concurrency: 64,
        worker_threads: 4,
        profile: "server".to_owned(),
        synchronous: None,
        memstatus: false,
        mmap_size: None,
        mutex: "nomutex".to_owned(),
        rows: 10_000,
        multi_db: None,
        think_us: 0,
        write_ppm: DEFAULT_WRITE_PPM,
        rate: None,
        long_reads: None,
        dir: "/tmp/quicklite-cell-x".to_owned(),
        seed: 4,
        repetition: 0,
        build_profile: "tuned".to_owned(),
        postgres_url: None,
        custom: None,
    }
}

fn env(runner: &str, sqlite: &str, crates: &[(&str, &str)], journal: &str) -> Environment {
    let map = |pairs: &[(&str, &str)]| -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    };
    Environment {
        runner: runner.to_owned(),
        sqlite_version: sqlite.to_owned(),
        compile_options: vec!["DEFAULT_MEMSTATUS=0".to_owned(), "THREADSAFE=1".to_owned()],
        pragmas: map(&[("journal_mode", journal), ("synchronous", "1")]),
        crate_versions: map(crates),
        memstatus: "off (sqlite3_config)".to_owned(),
        cpu_model: "Test CPU @ 3.0GHz".to_owned(),
        cpus: 2,
        open_files_limit: Some(1_024),
        core_round_trip_before_ns: Some(64.5),
        core_round_trip_after_ns: Some(71.0),
        allocator: Some("the C library's malloc".to_owned()),
        kernel: "6.1.0-test".to_owned(),
        date: "2026-11-21T22:00:00Z".to_owned(),
    }
}

fn ops(ops_per_sec: f64, p50_us: f64) -> OpStats {
    OpStats {
        ops: (ops_per_sec * 2.0) as u64,
        ops_per_sec,
        avg_us: p50_us * 1.25,
        p50_us,
        p99_us: p50_us * 6.0,
        max_us: p50_us * 40.0,
    }
}

fn ok(cell: Cell, reads: OpStats, writes: OpStats, env: Environment) -> CellResult {
    CellResult {
        cell,
        failure: None,
        reads,
        writes,
        write_completion: None,
        errors: 0,
        error_samples: Vec::new(),
        wall_secs: 2.0,
        cpu_secs: 3.5,
        threads: Some(9),
        rss_bytes: Some(24_000_000),
        open_databases: Some(1),
        database_opens: Some(1),
        operations: Vec::new(),
        window_allocations: None,
        window_alloc_bytes: None,
        lateness: None,
        cpu_per_op_us: None,
        idle_cpu: None,
        open_loop: None,
        env,
    }
}

/// `result` with the CPU figures a runner reports since they exist: its CPU time over its operations, and some CPU
/// in a 0.5 s idle window after it, different for each approach so that the columns tell them apart.
fn with_cpu(mut result: CellResult) -> CellResult {
    let operations = match result.operation("cycle") {
        Some(cycle) => cycle.stats.ops,
        None => {
            result.reads.ops
                + result.writes.ops
                + result.operations.iter().map(|op| op.stats.ops).sum::<u64>()
        }
    };
    result.cpu_per_op_us = (operations > 0).then(|| result.cpu_secs * 1e6 / operations as f64);
    let idle_cpu_secs = match result.cell.approach.as_str() {
        "quicklite" => 0.0125,
        "tokio-rusqlite" => 0.001,
        _ => 0.0005,
    };
    result.idle_cpu = Some(IdleCpu {
        secs: 0.5,
        cpu_secs: idle_cpu_secs,
    });
    result
}

/// `result` with the runtime's lateness its ticker measured over a 2 s window: p50, p99 and max in µs (p99.9
/// halfway between the last two).
fn late(mut result: CellResult, p50_us: f64, p99_us: f64, max_us: f64) -> CellResult {
    result.lateness = Some(Lateness {
        p50_us,
        p99_us,
        p999_us: Some((p99_us + max_us) / 2.0),
        max_us,
        ticks: 2_000,
    });
    result
}

/// Point reads (with a memory-statistics variant and a crashed runner), inserts without the baseline approach,
/// a two-approach multi-db table with write completion, the queue, the ORM suite, `mixed` at two shares of
/// writes other than the default, point reads at an offered rate, and `long-read`. The point reads, multi-db and mixed carry the runtime's lateness (direct-blocking's far past the timer's
/// 0–2 ms baseline); the inserts come from a build before the ticker, without it. Every successful cell but the
/// inserts carries CPU per operation and idle CPU.
pub fn results() -> Vec<CellResult> {
    let main = || {
        env(
            "quicklite-runner 0.1.0",
            "3.54.1",
            &[("rusqlite", "0.41.1"), ("quicklite", "0.1.0")],
            "wal",
        )
    };
    let peer = || {
        env(
            "runner-rusqlite040 0.1.0",
            "3.53.2",
            &[("rusqlite", "0.40.0"), ("tokio-rusqlite", "0.8.0")],
            "wal",
        )
    };
    let none = OpStats::default;
    let mut out = vec![
        late(
            ok(
                cell("point-read", "direct-blocking"),
                ops(310_000.0, 3.1),
                none(),
                main(),
            ),
            1_900.0,
            14_200.0,
            38_500.0,
        ),
        late(
            ok(
                cell("point-read", "tokio-rusqlite"),
                ops(240_000.0, 250.0),
                none(),
                peer(),
            ),
            720.0,
            1_450.0,
            2_800.0,
        ),
        late(
            ok(
                cell("point-read", "quicklite"),
                ops(1_420_000.0, 40.0),
                none(),
                main(),
            ),
            610.0,
            1_120.0,
            2_150.0,
        ),
        late(
            ok(
                Cell {
                    memstatus: true,
                    ..cell("point-read", "quicklite")
                },
                ops(1_100_000.0, 52.0),
                none(),
                main(),
            ),
            580.0,
            1_090.0,
            1_980.0,
        ),
        late(
            ok(
                Cell {
                    mmap_size: Some(0),
                    ..cell("point-read", "quicklite")
                },
                ops(1_180_000.0, 47.0),
                none(),
                main(),
            ),
            655.0,
            1_180.0,
            2_400.0,
        ),
        CellResult {
            failure: Some(
                "runner exited with exit status: 101; stderr: thread 'main' panicked".to_owned(),
            ),
            env: Environment::default(),
            cpu_secs: 0.0,
            wall_secs: 0.0,
            threads: None,
            rss_bytes: None,
            open_databases: None,
            database_opens: None,
            ..ok(
                cell("point-read", "spawn-blocking"),
                none(),
                none(),
                Environment::default(),
            )
        },
        ok(
            cell("insert", "direct-blocking"),
            none(),
            ops(48_000.0, 1_300.0),
            main(),
        ),
        ok(
            cell("insert", "per-request"),
            none(),
            ops(6_100.0, 10_400.0),
            main(),
        ),
        ok(
            cell("insert", "quicklite"),
            none(),
            ops(330_000.0, 180.0),
            main(),
        ),
    ];
    let multi = |approach: &str| Cell {
        concurrency: 40,
        multi_db: Some(MultiDb {
            num_databases: 10,
            readers: 3,
            write_delay_ms: 100,
            write_mode: WriteMode::Blocking,
            total_readers: None,
        }),
        ..cell("multi-db", approach)
    };
    let mut blocking = ok(
        multi("direct-blocking"),
        ops(16.0, 180_000.0),
        ops(5.4, 100_200.0),
        main(),
    );
    blocking.write_completion = Some(Completion {
        expected: 200,
        completed: 54,
        ratio: 0.27,
    });
    blocking.errors = 2;
    blocking.error_samples = vec!["database is locked".to_owned()];
    // Every write blocks a worker for 100 ms: the runtime's timer waits as long.
    blocking = late(blocking, 48_000.0, 99_800.0, 101_300.0);
    let mut tokio_rusqlite = ok(
        multi("tokio-rusqlite"),
        ops(30.0, 1_000.0),
        ops(20.0, 100_100.0),
        peer(),
    );
    tokio_rusqlite.write_completion = Some(Completion {
        expected: 200,
        completed: 200,
        ratio: 1.0,
    });
    // A thread per connection: two per database.
    tokio_rusqlite.threads = Some(28);
    tokio_rusqlite.rss_bytes = Some(61_000_000);
    tokio_rusqlite.open_databases = Some(10);
    tokio_rusqlite.database_opens = Some(10);
    tokio_rusqlite = late(tokio_rusqlite, 540.0, 1_050.0, 1_900.0);
    blocking.open_databases = Some(10);
    blocking.database_opens = Some(10);
    out.push(blocking);
    out.push(tokio_rusqlite);
    out.push(queue(
        "quicklite",
        [9.0, 21.0, 8.0],
        [2.0, 3.0, 2.0],
        main(),
    ));
    out.push(queue(
        "tokio-rusqlite",
        [6.0, 15.0, 5.0],
        [6.0, 8.0, 6.0],
        peer(),
    ));
    out.push(orm("server", 10.0, main()));
    out.push(orm("sqlite-default", 40.0, main()));
    // `mixed` at 1% and 0.1% of writes (a tenth and a hundredth of the default's): a table each.
    for (write_ppm, reads, writes) in [(10_000, 1.6, 0.1), (1_000, 1.8, 0.01)] {
        let mixed = |approach: &str| Cell {
            write_ppm,
            ..cell("mixed", approach)
        };
        out.push(late(
            ok(
                mixed("quicklite"),
                ops(470_000.0 * reads, 55.0),
                ops(52_000.0 * writes, 310.0),
                main(),
            ),
            600.0,
            1_150.0,
            2_250.0,
        ));
        out.push(late(
            ok(
                mixed("tokio-rusqlite"),
                ops(150_000.0 * reads, 380.0),
                ops(16_500.0 * writes, 420.0),
                peer(),
            ),
            700.0,
            1_400.0,
            2_700.0,
        ));
    }
    // `point-read` offered 1,000 requests a second: latency from the scheduled times, one request dropped.
    for (approach, p99_us, dropped, env) in [
        ("quicklite", 140.0, 0, main()),
        ("tokio-rusqlite", 190.0, 1, peer()),
    ] {
        let cell = Cell {
            rate: Some(1_000),
            ..cell("point-read", approach)
        };
        let mut result = ok(cell, ops(1_000.0, 60.0), OpStats::default(), env);
        result.open_loop = Some(OpenLoop {
            due: 2_000,
            issued: 2_000 - dropped,
            dropped,
            completed: 2_000 - dropped,
            failed: 0,
            unfinished: 0,
            achieved_per_sec: (2_000 - dropped) as f64 / 2.0,
            p50_us: 60.0,
            p99_us,
            p999_us: p99_us * 3.0,
            max_us: p99_us * 10.0,
            send_lateness_p50_us: 8.0,
            send_lateness_p99_us: 40.0,
        });
        out.push(late(result, 600.0, 1_100.0, 2_000.0));
    }
    out.extend(long_reads(main, peer));
    out.into_iter()
        .map(|r| {
            if r.failure.is_none() && r.cell.workload != "insert" {
                with_cpu(r)
            } else {
                r
            }
        })
        .collect()
}

/// `long-read` with one read in 1,000 long (100–300 ms) beside the 1 ms writer: quicklite holding its runtime's
/// workers through its long reads (lateness and slowest write near a long read's time), quicklite-no-inline on its
/// reader threads (the timer's baseline), tokio-rusqlite with its writes behind its reads on one thread.
fn long_reads(main: impl Fn() -> Environment, peer: impl Fn() -> Environment) -> Vec<CellResult> {
    let cell = |approach: &str| Cell {
        long_reads: Some(LongReads {
            every: 1_000,
            min_ms: 100,
            max_ms: 300,
        }),
        ..cell("long-read", approach)
    };
    // Short reads per second, then the writes' p99 and max, and the ticker's p99, p99.9 and max, in µs.
    let figures = [
        (
            "quicklite",
            900_000.0,
            [95_000.0, 290_000.0],
            [180_000.0, 280_000.0, 300_000.0],
            main(),
        ),
        (
            "quicklite-no-inline",
            310_000.0,
            [1_900.0, 4_100.0],
            [1_800.0, 2_400.0, 3_000.0],
            main(),
        ),
        (
            "tokio-rusqlite",
            5_200.0,
            [250_000.0, 300_000.0],
            [1_500.0, 2_100.0, 2_600.0],
            peer(),
        ),
    ];
    figures
        .into_iter()
        .map(
            |(approach, reads, [write_p99, write_max], [p99, p999, max], env)| {
                let writes = OpStats {
                    ops: 2_000,
                    ops_per_sec: 1_000.0,
                    avg_us: write_p99 / 5.0,
                    p50_us: 1_100.0,
                    p99_us: write_p99,
                    max_us: write_max,
                };
                let mut result = ok(cell(approach), ops(reads, 20.0), writes, env);
                let long = (reads * 2.0 / 1_000.0) as u64;
                result.operations = vec![NamedOp {
                    name: LONG_READ.to_owned(),
                    stats: OpStats {
                        ops: long,
                        ops_per_sec: long as f64 / 2.0,
                        avg_us: 201_000.0,
                        p50_us: 199_000.0,
                        p99_us: 297_000.0,
                        max_us: 301_000.0,
                    },
                    allocs_per_op: None,
                    alloc_bytes_per_op: None,
                }];
                result.write_completion = Some(Completion {
                    expected: 2_000,
                    completed: 2_000,
                    ratio: 1.0,
                });
                result.lateness = Some(Lateness {
                    p50_us: 900.0,
                    p99_us: p99,
                    p999_us: Some(p999),
                    max_us: max,
                    ticks: 2_000,
                });
                result
            },
        )
        .collect()
}

/// The ORM suite on direct-blocking under `profile`, every operation taking `us` (its transaction twin 1.5×).
/// [`results`] measured `times` times, as `--repeat` records them: each repetition in its own round, every rate
/// scaled by a factor of the round (and each cell by a little of its own), latencies by its inverse.
pub fn repeated(times: u32) -> Vec<CellResult> {
    let mut out = Vec::new();
    for repetition in 0..times {
        for (i, result) in results().into_iter().enumerate() {
            let factor = 1.0 + 0.04 * f64::from(repetition) - 0.01 * (i % 3) as f64;
            let scale = |stats: &mut OpStats| {
                stats.ops_per_sec *= factor;
                stats.avg_us /= factor;
                stats.p50_us /= factor;
                stats.p99_us /= factor;
            };
            let mut r = result;
            r.cell.repetition = repetition;
            scale(&mut r.reads);
            scale(&mut r.writes);
            for op in &mut r.operations {
                scale(&mut op.stats);
            }
            out.push(r);
        }
    }
    out
}

/// Point reads by quicklite on a SQLite that fixes the WAL-reset bug, and by trailbase-sqlite on its bundled 3.49.2,
/// which has it.
pub fn wal_reset_bug() -> Vec<CellResult> {
    let fixed = env(
        "quicklite-runner 0.1.0",
        "3.54.1",
        &[("rusqlite", "0.41.1"), ("quicklite", "0.1.0")],
        "wal",
    );
    let affected = env(
        "runner-trailbase 0.1.0",
        "3.49.2",
        &[("rusqlite", "0.36.0"), ("trailbase-sqlite", "0.3.0")],
        "wal",
    );
    vec![
        ok(
            cell("point-read", "quicklite"),
            ops(1_420_000.0, 40.0),
            OpStats::default(),
            fixed,
        ),
        ok(
            cell("point-read", "trailbase-sqlite"),
            ops(380_000.0, 160.0),
            OpStats::default(),
            affected,
        ),
    ]
}

fn orm(profile: &str, us: f64, env: Environment) -> CellResult {
    let mut result = ok(
        Cell {
            concurrency: 1,
            profile: profile.to_owned(),
            ..cell("orm", "direct-blocking")
        },
        OpStats::default(),
        OpStats::default(),
        env,
    );
    for name in ["model_object_creation", "model_object_select_by_pk"] {
        for (suffix, factor) in [("", 1.0), (" (txn)", 1.5)] {
            result.operations.push(NamedOp {
                name: format!("{name}{suffix}"),
                stats: OpStats {
                    ops: 1_000,
                    ops_per_sec: 16_000.0,
                    avg_us: us * factor,
                    p50_us: us * factor,
                    p99_us: us * factor * 4.0,
                    max_us: us * factor * 10.0,
                },
                allocs_per_op: None,
                alloc_bytes_per_op: None,
            });
        }
    }
    result
}

/// A queue cell at one task: mean µs and allocations per publish, claim and ack.
fn queue(approach: &str, us: [f64; 3], allocs: [f64; 3], env: Environment) -> CellResult {
    let cycle_us: f64 = us.iter().sum();
    let cycles = (2.0 * 1e6 / cycle_us) as u64;
    let op = |name: &str, us: f64, allocs: f64| NamedOp {
        name: name.to_owned(),
        stats: OpStats {
            ops: cycles,
            ops_per_sec: cycles as f64 / 2.0,
            avg_us: us,
            p50_us: us,
            p99_us: us * 4.0,
            max_us: us * 30.0,
        },
        allocs_per_op: Some(allocs),
        alloc_bytes_per_op: Some(allocs * 64.0),
    };
    let mut result = ok(
        Cell {
            concurrency: 1,
            ..cell("queue", approach)
        },
        OpStats::default(),
        OpStats::default(),
        env,
    );
    result.operations = vec![
        op("publish", us[0], allocs[0]),
        op("claim", us[1], allocs[1]),
        op("ack", us[2], allocs[2]),
        op("cycle", cycle_us, allocs.iter().sum()),
    ];
    let total: f64 = allocs.iter().sum();
    result.window_allocations = Some((total * cycles as f64 * 1.1) as u64);
    result.window_alloc_bytes = Some((total * cycles as f64 * 70.0) as u64);
    result
}
