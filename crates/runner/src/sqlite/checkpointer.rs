//! `throughput`'s checkpointer: a `PASSIVE` checkpoint every second from a connection of its own, as Turso's
//! write-throughput harness runs beside its writers.

use std::path::Path;
use std::time::Duration;

use anyhow::{Context, Result};
use quicklite_lab_core::Knobs;

use super::connect;

/// Starts a thread that runs `PRAGMA wal_checkpoint(PASSIVE)` on `path` every second, on a connection of its own,
/// for as long as the runner lives. A checkpoint that fails (the database busy) is tried again a second later.
pub fn start(path: &Path, knobs: &Knobs) -> Result<()> {
    let conn = connect::open(path, knobs)?;
    std::thread::Builder::new()
        .name("lab-checkpointer".into())
        .spawn(move || {
            loop {
                std::thread::sleep(Duration::from_secs(1));
                let _ = conn.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |_| Ok(()));
            }
        })
        .context("cannot start the checkpointer thread")?;
    Ok(())
}
