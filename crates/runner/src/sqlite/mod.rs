//! The rusqlite code every rusqlite-based approach shares: opening connections with the cell's knobs,
//! seeding, the statements themselves, and reading the environment back from SQLite.
//!
//! Written against the `rusqlite` API that 0.36, 0.40 and 0.41 have in common: the peer runners in
//! `runners/rusqlite040` and `runners/trailbase` compile these same files (`#[path]`), so tokio-rusqlite and
//! deadpool-sqlite run exactly the code direct-blocking and async-sqlite run, and trailbase-sqlite opens, seeds and
//! writes `multi-db` blocks with it.

pub mod checkpointer;
pub mod connect;
pub mod ops;
pub mod report;
pub mod seed;
