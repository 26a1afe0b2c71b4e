//! What a `bench` run measures: the lists of knobs whose product is the matrix.

use crate::catalog;

/// The knobs of a benchmark run. Every list is one axis of the matrix; [`crate::build_matrix`] takes their
/// product (per workload, only the axes that workload uses) and validates it.
///
/// [`BenchOptions::default`] is the full run; [`BenchOptions::quick`] is the few-minute run the README uses.
#[derive(Debug, Clone, PartialEq)]
pub struct BenchOptions {
    /// Workloads to run. By default, all of [`catalog::WORKLOADS`].
    pub workloads: Vec<String>,
    /// Approaches to compare. By default, all of [`catalog::APPROACHES`].
    pub approaches: Vec<String>,
    /// Measured time per cell, in milliseconds. By default, 10 s.
    pub duration_ms: u64,
    /// Warm-up per cell before measuring, in milliseconds. By default, 2 s.
    pub warmup_ms: u64,
    /// Concurrent client tasks (not used by `multi-db`). By default, `[64]`.
    pub concurrency: Vec<u32>,
    /// Tokio worker threads in the runner. By default, `[4]`, as in seed 004.
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
}

/// One extra cell: a workload and approach at the first value of every axis, with some knobs changed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Variant {
    /// The workload; the variant is skipped when the run does not include it.
    pub workload: String,
    /// The approach; the variant is skipped when the run does not include it.
    pub approach: String,
    /// Memory statistics, if different from the first value of [`BenchOptions::memstatus`].
    pub memstatus: Option<bool>,
    /// Mutex mode, if different from the first value of [`BenchOptions::mutex`].
    pub mutex: Option<String>,
    /// Concurrent client tasks, if different from the first value of [`BenchOptions::concurrency`] (e.g. the
    /// queue one operation at a time, as seed 002's benchmark ran it).
    pub concurrency: Option<u32>,
    /// Build profile, if different from the first value of [`BenchOptions::build_profiles`].
    pub build_profile: Option<String>,
    /// PRAGMA profile, if different from the first value of [`BenchOptions::profiles`].
    pub profile: Option<String>,
}

impl Default for BenchOptions {
    fn default() -> Self {
        Self {
            workloads: owned(catalog::WORKLOADS),
            approaches: owned(catalog::APPROACHES),
            duration_ms: 10_000,
            warmup_ms: 2_000,
            concurrency: vec![64],
            worker_threads: vec![4],
            profiles: vec!["server".to_owned()],
            synchronous: vec![None],
            memstatus: vec![false],
            mutex: vec!["nomutex".to_owned()],
            rows: 10_000,
            num_databases: vec![1, 10, 50, 100],
            readers: 3,
            total_readers: None,
            write_delays_ms: vec![100, 1_000, 10_000],
            write_modes: vec!["blocking".to_owned()],
            seed: 4,
            build_profiles: vec![quicklite_lab_core::DEFAULT_BUILD_PROFILE.to_owned()],
            postgres_url: None,
            variants: Vec::new(),
        }
    }
}

impl BenchOptions {
    /// The README's run: every approach on `point-read`, `insert`, a 10-database `multi-db`, the `queue`, `http`
    /// and `orm`, 2 s measured after 0.5 s of warm-up, plus variants showing memory statistics and the serialized
    /// mutex (seeds 000 and 001), the queue one cycle at a time (seed 002's figures are for one goroutine) and the
    /// ORM suite without the server PRAGMAs (seed 003).
    ///
    /// 55 cells of about 3 s each: roughly three minutes on a 2-core machine, once the runners are built.
    pub fn quick() -> Self {
        let variant = |approach: &str, memstatus: Option<bool>, mutex: Option<&str>| Variant {
            workload: "point-read".to_owned(),
            approach: approach.to_owned(),
            memstatus,
            mutex: mutex.map(str::to_owned),
            concurrency: None,
            build_profile: None,
            profile: None,
        };
        let serial_queue = |approach: &str| Variant {
            workload: catalog::QUEUE.to_owned(),
            approach: approach.to_owned(),
            memstatus: None,
            mutex: None,
            concurrency: Some(1),
            build_profile: None,
            profile: None,
        };
        let untuned_orm = |approach: &str| Variant {
            workload: catalog::ORM.to_owned(),
            approach: approach.to_owned(),
            memstatus: None,
            mutex: None,
            concurrency: None,
            build_profile: None,
            profile: Some("sqlite-default".to_owned()),
        };
        Self {
            workloads: owned(&[
                "point-read",
                "insert",
                catalog::MULTI_DB,
                catalog::QUEUE,
                catalog::HTTP,
                catalog::ORM,
            ]),
            duration_ms: 2_000,
            warmup_ms: 500,
            num_databases: vec![10],
            write_delays_ms: vec![100],
            variants: vec![
                // Seed 000: opening a connection per request pays the allocator mutex on every open.
                variant("per-request", Some(true), None),
                variant("quicklite", Some(true), None),
                // Seed 001: the serialized mode's per-connection mutex, on the pattern that shares connections.
                variant("per-request", None, Some("fullmutex")),
                variant("quicklite", None, Some("fullmutex")),
                // Seed 000 itself: the HTTP service with a connection per request, memory statistics on.
                Variant {
                    workload: catalog::HTTP.to_owned(),
                    ..variant("per-request", Some(true), None)
                },
                // Seed 002: ns/op and allocations per operation, one cycle at a time.
                serial_queue("direct-blocking"),
                serial_queue("tokio-rusqlite"),
                serial_queue("quicklite"),
                // Seed 003: the ORM suite without the server PRAGMAs.
                untuned_orm("direct-blocking"),
                untuned_orm("quicklite"),
            ],
            ..Self::default()
        }
    }
}

fn owned(names: &[&str]) -> Vec<String> {
    names.iter().map(|name| (*name).to_owned()).collect()
}
