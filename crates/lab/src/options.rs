//! What a `bench` run measures: the lists of knobs whose product is the matrix.

use std::ops::RangeInclusive;

use quicklite_lab_core::{ApproachName, CustomWorkload};

use crate::catalog;

/// The knobs of a benchmark run. Every list is one axis of the matrix; [`crate::build_matrix`] takes their
/// product (per workload, only the axes that workload uses) and validates it.
///
/// [`BenchOptions::default`] is the full run; [`BenchOptions::quick`] is the few-minute run the README uses.
#[derive(Debug, Clone, PartialEq)]
pub struct BenchOptions {
    /// Workloads to run: built-in ([`catalog::WORKLOADS`]; by default [`catalog::DEFAULT_WORKLOADS`], all but
    /// `long-read`) and the names of [`BenchOptions::custom`].
    pub workloads: Vec<String>,
    /// Custom workloads from the user's files (`--workload-file`), checked; each runs where
    /// [`BenchOptions::workloads`] names it. By default, none.
    pub custom: Vec<CustomWorkload>,
    /// Approaches to compare. By default, every approach [`ApproachName::runs_by_default`] — the ceiling, the Rust
    /// approaches, then the Go and Node drivers — on the workloads it implements.
    pub approaches: Vec<ApproachName>,
    /// Measured time per cell, in milliseconds. By default, 10 s.
    pub duration_ms: u64,
    /// Warm-up per cell before measuring, in milliseconds. By default, 2 s.
    pub warmup_ms: u64,
    /// Concurrent client tasks (not used by `multi-db`). By default, `[64]`.
    pub concurrency: Vec<u32>,
    /// Tokio worker threads in the runner. By default, tokio's own default ([`default_worker_threads`]): the
    /// configuration a service gets from `#[tokio::main]`.
    pub worker_threads: Vec<u32>,
    /// PRAGMA profiles. By default, `["server"]`.
    pub profiles: Vec<String>,
    /// `synchronous` overrides; `None` keeps the profile's value. By default, `[None]`.
    pub synchronous: Vec<Option<String>>,
    /// SQLite memory statistics on (`true`) or off. By default, `[false]`: every approach gets the
    /// mutex-free allocator, so the comparison is about threading; `true` measures what the default costs.
    pub memstatus: Vec<bool>,
    /// Connection mutex modes. By default, `["nomutex"]` (rusqlite's own default).
    pub mutex: Vec<String>,
    /// `mmap_size` overrides in bytes (`0` turns the memory map off); `None` keeps the profile's value. Like
    /// memory statistics, a set-up choice that may differ inside one table (`quicklite · mmap 0`). By default,
    /// `[None]`.
    pub mmap_size: Vec<Option<u64>>,
    /// Rows in the seeded table. By default, 10 000.
    pub rows: u64,
    /// `multi-db`: database counts. By default, `[1, 10, 50, 100]`, as in seed 004.
    pub num_databases: Vec<u32>,
    /// `multi-db`: reader tasks per database. By default, 3, as in seed 004. Not used with `total_readers`.
    pub readers: u32,
    /// `multi-db`: a fixed number of reader tasks over all databases, each read on a random database, instead of
    /// `readers` per database — the same total read load at every number of databases. By default, `None`.
    pub total_readers: Option<u32>,
    /// `multi-db`: writer delays in milliseconds. By default, `[100, 1000, 10000]`, as in seed 004.
    pub write_delays_ms: Vec<u64>,
    /// `multi-db`: write modes, `blocking` (the delay blocks inside the write, seed 004) and/or `paced` (one
    /// write every delay). By default, `["blocking"]`.
    pub write_modes: Vec<String>,
    /// `throughput`: think times in microseconds, how long each transaction blocks its thread before its commit.
    /// By default, `[0, 1000]`: none, and a millisecond of the application's work inside every transaction.
    pub think_us: Vec<u64>,
    /// `mixed`: shares of writes, in parts per million of its operations (`1000` is 0.1%). By default,
    /// `[100000]`: 10%, the mix the workload has always had ([`quicklite_lab_core::DEFAULT_WRITE_PPM`]).
    pub write_ppm: Vec<u32>,
    /// `long-read`: one read in this many of the window's is long, each value a table of its own. By default,
    /// `[1000]`: a call site a thousand reads short between two long ones.
    pub long_read_every: Vec<u32>,
    /// `long-read`: how long a long read is made to take, in milliseconds, each drawn uniformly from the range; each
    /// range a table of its own. By default, `[100..=300]`: a query over a large tenant, far past what a runtime
    /// thread can be lent for.
    pub long_read_ms: Vec<RangeInclusive<u64>>,
    /// Offered loads of `point-read`, `insert` and `mixed`, in requests per second: each cell sends its requests
    /// on a fixed schedule whatever the answers do, at most its concurrency in flight (open loop); `None` is the
    /// closed loop, each task sending its next request when the last one returns. By default, `[None]`.
    pub rates: Vec<Option<u64>>,
    /// Seed of the operation mix and key choice. By default, 4.
    pub seed: u64,
    /// SQLite build profiles (names from the lab's profile list, `build-profiles.txt`): each profile's runners
    /// are built with its `LIBSQLITE3_FLAGS` into a target directory of their own. By default, `["tuned"]`, the
    /// workspace's own flags.
    pub build_profiles: Vec<String>,
    /// The PostgreSQL server of the `postgres` approach, as a `postgres://` URL. By default, none (the approach
    /// is refused).
    pub postgres_url: Option<String>,
    /// Single cells added on top of the product, to show one knob's effect without multiplying the matrix.
    /// By default, none.
    pub variants: Vec<Variant>,
    /// Times every cell is measured, each time in a fresh process, interleaved with the other cells of its table
    /// (A B C, A B C, … rather than A A B B C C) so that drift and moves of the CPUs hit every row alike. Tables
    /// then show medians and spreads, ratios carry intervals, and the seeds get verdicts. By default, 3; the quick
    /// run keeps 1 and says so.
    pub repeat: u32,
}

/// One extra cell: a workload and approach at the first value of every axis, with some knobs changed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Variant {
    /// The workload; the variant is skipped when the run does not include it.
    pub workload: String,
    /// The approach; the variant is skipped when the run does not include it.
    pub approach: ApproachName,
    /// Memory statistics, if different from the first value of [`BenchOptions::memstatus`].
    pub memstatus: Option<bool>,
    /// Mutex mode, if different from the first value of [`BenchOptions::mutex`].
    pub mutex: Option<String>,
    /// `mmap_size` in bytes, if different from the first value of [`BenchOptions::mmap_size`].
    pub mmap_size: Option<u64>,
    /// Concurrent client tasks, if different from the first value of [`BenchOptions::concurrency`] (e.g. the
    /// queue one operation at a time, as seed 002's benchmark ran it).
    pub concurrency: Option<u32>,
    /// Build profile, if different from the first value of [`BenchOptions::build_profiles`].
    pub build_profile: Option<String>,
    /// PRAGMA profile, if different from the first value of [`BenchOptions::profiles`].
    pub profile: Option<String>,
}

impl Variant {
    /// `approach` on `workload` at the first value of every axis: set the knobs to change on it.
    pub fn new(workload: &str, approach: ApproachName) -> Self {
        Self {
            workload: workload.to_owned(),
            approach,
            memstatus: None,
            mutex: None,
            mmap_size: None,
            concurrency: None,
            build_profile: None,
            profile: None,
        }
    }
}

impl Default for BenchOptions {
    fn default() -> Self {
        Self {
            workloads: owned(catalog::DEFAULT_WORKLOADS),
            custom: Vec::new(),
            approaches: ApproachName::ALL
                .into_iter()
                .filter(|a| a.runs_by_default())
                .collect(),
            duration_ms: 10_000,
            warmup_ms: 2_000,
            concurrency: vec![64],
            worker_threads: vec![default_worker_threads()],
            profiles: vec!["server".to_owned()],
            synchronous: vec![None],
            memstatus: vec![false],
            mutex: vec!["nomutex".to_owned()],
            mmap_size: vec![None],
            rows: 10_000,
            num_databases: vec![1, 10, 50, 100],
            readers: 3,
            total_readers: None,
            write_delays_ms: vec![100, 1_000, 10_000],
            write_modes: vec!["blocking".to_owned()],
            think_us: vec![0, 1_000],
            write_ppm: vec![quicklite_lab_core::DEFAULT_WRITE_PPM],
            long_read_every: vec![1_000],
            long_read_ms: vec![100..=300],
            rates: vec![None],
            seed: 4,
            build_profiles: vec![quicklite_lab_core::DEFAULT_BUILD_PROFILE.to_owned()],
            postgres_url: None,
            variants: Vec::new(),
            repeat: 3,
        }
    }
}

impl BenchOptions {
    /// The README's run: every Rust approach but trailbase-sqlite and turso on `point-read`, `insert`, `mixed`, a 10-database
    /// `multi-db`, the `queue`, `http` and `orm` (each where its runner implements it), 2 s measured after 0.5 s of
    /// warm-up, plus variants showing memory statistics and the
    /// serialized mutex (seeds 000 and 001), the queue one cycle at a time (seed 002's figures are for one
    /// goroutine), the ORM suite without the server PRAGMAs (seed 003), `mixed` one request at a time, and reads
    /// with and without a memory map, alone and beside a writer (seed 003's `mmap_size`).
    ///
    /// 78 cells of about 3.5 s each, the idle window after each included: roughly five minutes on a 2-core machine,
    /// once the runners are built.
    pub fn quick() -> Self {
        use ApproachName::{Ceiling, DirectBlocking, PerRequest, Quicklite, TokioRusqlite};
        let variant = Variant::new;
        let point_read = |approach, memstatus: Option<bool>, mutex: Option<&str>| Variant {
            memstatus,
            mutex: mutex.map(str::to_owned),
            ..variant("point-read", approach)
        };
        let serial = |workload: &str, approach| Variant {
            concurrency: Some(1),
            ..variant(workload, approach)
        };
        let untuned_orm = |approach| Variant {
            profile: Some("sqlite-default".to_owned()),
            ..variant(catalog::ORM, approach)
        };
        let unmapped = |base: Variant| Variant {
            mmap_size: Some(0),
            ..base
        };
        Self {
            // The Rust approaches, but those whose runner needs more than the Rust toolchain to build (trailbase-sqlite
            // needs libclang): the README's first command must work on a fresh machine. The runners in other
            // languages and Turso's take minutes to build. `--approaches` adds any of them.
            approaches: ApproachName::ALL
                .into_iter()
                .filter(|a| a.runs_by_default() && a.runner().in_quick_run())
                .collect(),
            workloads: owned(&[
                "point-read",
                "insert",
                "mixed",
                catalog::MULTI_DB,
                catalog::QUEUE,
                catalog::HTTP,
                catalog::ORM,
            ]),
            duration_ms: 2_000,
            warmup_ms: 500,
            repeat: 1,
            num_databases: vec![10],
            write_delays_ms: vec![100],
            variants: vec![
                // Seed 000: opening a connection per request pays the allocator mutex on every open.
                point_read(PerRequest, Some(true), None),
                point_read(Quicklite, Some(true), None),
                // Seed 001: the serialized mode's per-connection mutex, on the pattern that shares connections.
                point_read(PerRequest, None, Some("fullmutex")),
                point_read(Quicklite, None, Some("fullmutex")),
                // Seed 000 itself: the HTTP service with a connection per request, memory statistics on.
                Variant {
                    memstatus: Some(true),
                    ..variant(catalog::HTTP, PerRequest)
                },
                // Seed 002: ns/op and allocations per operation, one cycle at a time.
                serial(catalog::QUEUE, Ceiling),
                serial(catalog::QUEUE, DirectBlocking),
                serial(catalog::QUEUE, TokioRusqlite),
                serial(catalog::QUEUE, Quicklite),
                // Seed 003: the ORM suite without the server PRAGMAs.
                untuned_orm(DirectBlocking),
                untuned_orm(Quicklite),
                // Reads beside a writer, one request at a time.
                serial("mixed", Ceiling),
                serial("mixed", DirectBlocking),
                serial("mixed", TokioRusqlite),
                serial("mixed", Quicklite),
                // Seed 003's memory map: what it gains on reads alone and costs beside a writer.
                unmapped(variant("point-read", TokioRusqlite)),
                unmapped(variant("point-read", Quicklite)),
                unmapped(variant("mixed", TokioRusqlite)),
                unmapped(variant("mixed", Quicklite)),
                unmapped(serial("mixed", TokioRusqlite)),
                unmapped(serial("mixed", Quicklite)),
            ],
            ..Self::default()
        }
    }
}

/// The worker threads tokio's multi-threaded runtime starts when not told a number: `TOKIO_WORKER_THREADS` when
/// set to a positive number, otherwise the CPUs this process may run on (`available_parallelism`), as tokio
/// decides it.
///
/// The lab measures the configuration users get, so this is its default; a fixed number would give a machine
/// with fewer cores more workers than cores (the approaches that call SQLite on the workers then compete with
/// their own threads) and a larger machine fewer workers than a service on it would run. Resolved here rather
/// than in the runner so that every cell records the number it ran with.
pub fn default_worker_threads() -> u32 {
    let from_env = std::env::var("TOKIO_WORKER_THREADS")
        .ok()
        .and_then(|value| value.trim().parse::<u32>().ok())
        .filter(|&n| n > 0);
    from_env.unwrap_or_else(|| {
        std::thread::available_parallelism()
            .map_or(1, |n| u32::try_from(n.get()).unwrap_or(u32::MAX))
    })
}

fn owned(names: &[&str]) -> Vec<String> {
    names.iter().map(|name| (*name).to_owned()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_workers_are_tokios_default() {
        // This test's process runs without TOKIO_WORKER_THREADS unless a developer set it; either way the default
        // is what tokio would start.
        let expected = match std::env::var("TOKIO_WORKER_THREADS") {
            Ok(n) => n.trim().parse().unwrap(),
            Err(_) => std::thread::available_parallelism().unwrap().get() as u32,
        };
        assert_eq!(default_worker_threads(), expected);
        assert_eq!(BenchOptions::default().worker_threads, [expected]);
        assert_eq!(BenchOptions::quick().worker_threads, [expected]);
    }
}
