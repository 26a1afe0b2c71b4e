//! The timekeeper: a plain OS thread that keeps a cell's measured window and samples the process at its edges.
//!
//! The window is kept by a plain OS thread, not a tokio timer: the `direct-blocking` approach blocks every
//! worker thread, which would also stop the runtime's timers (and that is exactly the effect being measured).

use std::time::Instant;

use anyhow::{Context, Result};

use crate::alloc::{self, AllocCount};
use crate::process;

/// Samples of the process taken at the edges of the window by the timekeeper thread.
pub(crate) struct Edges {
    /// CPU seconds used during the window.
    pub(crate) cpu_secs: f64,
    /// Threads at the end.
    pub(crate) threads: Option<u64>,
    /// RSS at the end.
    pub(crate) rss_bytes: Option<u64>,
    /// Heap allocations during the window, when counted.
    pub(crate) allocations: Option<AllocCount>,
}

/// Starts the timekeeper: a plain OS thread (tokio's timers stop when direct-blocking calls hold every worker)
/// that samples CPU time, allocations, threads and memory at `measure_start` and `end`.
pub(crate) fn spawn_timekeeper(
    measure_start: Instant,
    end: Instant,
) -> Result<tokio::sync::oneshot::Receiver<Edges>> {
    let (edges_tx, edges_rx) = tokio::sync::oneshot::channel();
    std::thread::Builder::new()
        .name("lab-timekeeper".into())
        .spawn(move || {
            // Opened before the approach gets to use up the file descriptors.
            let mut status = process::StatusFile::open();
            sleep_until(measure_start);
            let cpu_start = process::cpu_time();
            let allocs_start = alloc::allocations();
            sleep_until(end);
            let cpu_end = process::cpu_time();
            let allocs_end = alloc::allocations();
            let _ = edges_tx.send(Edges {
                cpu_secs: (cpu_end - cpu_start).as_secs_f64(),
                threads: status.threads(),
                rss_bytes: status.rss_bytes(),
                allocations: allocs_end
                    .zip(allocs_start)
                    .map(|(end, start)| end.since(start)),
            });
        })
        .context("cannot start the timekeeper thread")?;
    Ok(edges_rx)
}

/// Sleeps the current OS thread until `deadline`.
fn sleep_until(deadline: Instant) {
    let now = Instant::now();
    if deadline > now {
        std::thread::sleep(deadline - now);
    }
}
