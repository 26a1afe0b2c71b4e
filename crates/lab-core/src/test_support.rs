//! Helpers shared by this crate's unit tests.

use crate::{Cell, MultiDb, WriteMode};

/// A small, valid cell for `workload` and `approach`.
pub(crate) fn sample_cell(workload: &str, approach: &str) -> Cell {
    Cell {
        workload: workload.into(),
        approach: approach.into(),
        duration_ms: 60,
        warmup_ms: 10,
        concurrency: 4,
        worker_threads: 2,
        profile: "server".into(),
        synchronous: None,
        memstatus: false,
        mutex: "nomutex".into(),
        rows: 200,
        multi_db: (workload == "multi-db").then_some(MultiDb {
            num_databases: 3,
            readers: 2,
            write_delay_ms: 5,
            write_mode: WriteMode::Blocking,
            total_readers: None,
        }),
        dir: "/nonexistent".into(),
        seed: 42,
        build_profile: "tuned".into(),
        postgres_url: None,
    }
}
