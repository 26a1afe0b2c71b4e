//! The approaches this runner implements, one per file, all measured through [`quicklite_lab_core::drive`].

pub mod async_sqlite;
pub mod ceiling;
pub mod direct_blocking;
pub mod per_request;
pub mod postgres;
pub mod quicklite;
pub mod shared;
pub mod spawn_blocking;

/// Approach names, as used in cells and by `--approaches`.
pub const NAMES: &[&str] = &[
    "direct-blocking",
    "spawn-blocking",
    "per-request",
    "async-sqlite",
    "quicklite",
    "quicklite-timeouts",
    "quicklite-writes-first",
    "quicklite-no-inline",
    "quicklite-subscribed",
    "quicklite-subscribed-100",
    "postgres",
    "ceiling",
];
