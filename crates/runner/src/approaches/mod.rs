//! The approaches this runner implements, one per file, all measured through [`quicklite_lab_core::drive`].

pub mod async_sqlite;
pub mod ceiling;
pub mod ceiling_async;
pub mod direct_blocking;
pub mod per_request;
pub mod postgres;
pub mod quicklite;
pub mod shared;
pub mod spawn_blocking;
