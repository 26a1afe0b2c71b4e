//! How a client task times one operation: whether it gave its worker back, and whether it counts.
//!
//! Clients are closed-loop: each task issues its next operation when the previous one returns, and records it
//! into the statistics of the thread it ran on ([`StatsSink`]) when it completed inside the window.

use std::future::Future;
use std::time::{Duration, Instant};

use anyhow::Result;

use super::window::Window;
use crate::alloc;
use crate::stats::{OpKind, StatsSink};

/// Awaits an operation and tells whether it completed on its first poll, i.e. without ever giving its worker
/// thread back to the runtime (the direct-blocking approach).
pub(super) async fn observe<F: Future>(operation: F) -> (F::Output, bool) {
    let mut operation = std::pin::pin!(operation);
    let mut polls = 0u32;
    let output = std::future::poll_fn(|cx| {
        polls += 1;
        operation.as_mut().poll(cx)
    })
    .await;
    (output, polls == 1)
}

/// Gives the worker thread back to the runtime before the next operation if the previous one never did.
///
/// In a service every request is its own task and ends after one operation; a client loop that never awaits
/// anything pending would instead keep its worker for the whole run and hide the queueing that blocking calls
/// cause. The yield happens after the next operation's clock started, so the wait for a worker counts in its
/// latency, as a request's wait for a worker does. Approaches that await a reply already yielded, so they pay
/// nothing here.
pub(super) async fn yield_if_never_pending(ready_at_once: bool) {
    if ready_at_once {
        tokio::task::yield_now().await;
    }
}

/// Records the outcome of one operation that started at `started`, if it completed inside the window.
pub(super) fn record(
    stats: &StatsSink,
    window: &Window,
    kind: OpKind,
    started: Instant,
    outcome: Result<()>,
) {
    let done = Instant::now();
    if window.counts(done) {
        store(stats, kind, done - started, outcome);
    }
}

/// Adds one counted operation to the statistics of the thread it ran on.
pub(super) fn store(stats: &StatsSink, kind: OpKind, latency: Duration, outcome: Result<()>) {
    // The lab's own allocations (a histogram growing, an error message) are not the approach's: not counted.
    alloc::uncounted(|| {
        stats.with(|stats| match outcome {
            Ok(()) => stats.record(kind, latency.as_nanos() as u64),
            Err(e) => stats.record_error(format!("{e:#}")),
        })
    });
}

/// Adds one counted operation under its own name only, apart from the reads and writes (`long-read`'s long reads).
pub(super) fn store_named(
    stats: &StatsSink,
    name: &'static str,
    latency: Duration,
    outcome: Result<()>,
) {
    alloc::uncounted(|| {
        stats.with(|stats| match outcome {
            Ok(()) => stats.record_named(name, latency.as_nanos() as u64),
            Err(e) => stats.record_error(format!("{name}: {e:#}")),
        })
    });
}

/// Adds one counted transaction of a custom workload: to its kind's statistics, and to its own by name.
pub(super) fn store_transaction(
    stats: &StatsSink,
    kind: OpKind,
    name: &'static str,
    latency: Duration,
    outcome: Result<()>,
) {
    alloc::uncounted(|| {
        stats.with(|stats| match outcome {
            Ok(()) => {
                let nanos = latency.as_nanos() as u64;
                stats.record(kind, nanos);
                stats.record_named(name, nanos);
            }
            Err(e) => stats.record_error(format!("{name}: {e:#}")),
        })
    });
}
