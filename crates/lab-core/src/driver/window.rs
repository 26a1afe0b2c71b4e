//! The measured window of the workloads driven by client tasks (every one but `orm` and `http`): its instants,
//! the timekeeper, the ticker and the statistics started with it, and the part of the [`Measurement`] they all
//! share.

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use tokio::sync::oneshot;

use crate::approach::Approach;
use crate::cell::Cell;
use crate::measurement::Measurement;
use crate::stats::{OpKind, StatsSink, TaskStats};
use crate::ticker::Ticker;
use crate::timekeeper::{Edges, spawn_timekeeper};

/// The measured window, fixed before the first task starts.
#[derive(Debug, Clone, Copy)]
pub(super) struct Window {
    /// End of the warm-up; operations completing before it are not counted.
    pub(super) measure_start: Instant,
    /// End of the measurement; tasks stop issuing operations at this instant.
    pub(super) end: Instant,
}

impl Window {
    /// Whether an operation completing at `done` is counted.
    pub(super) fn counts(&self, done: Instant) -> bool {
        done >= self.measure_start && done < self.end
    }

    /// Length of the window in seconds.
    fn secs(&self) -> f64 {
        self.end.duration_since(self.measure_start).as_secs_f64()
    }
}

/// A cell being measured by client tasks: the window, the timekeeper keeping it, the ticker beside it, and where
/// the tasks record.
pub(super) struct WindowedRun {
    /// When the warm-up began: the origin of the paced writers' schedules.
    pub(super) start: Instant,
    /// The warm-up's end and the window's.
    pub(super) window: Window,
    /// Where the client tasks record their operations, one block per thread.
    pub(super) stats: Arc<StatsSink>,
    /// The timekeeper's samples, sent when the window closes.
    edges: oneshot::Receiver<Edges>,
    /// The ticker on the runtime, how late its ticks in the window fired.
    ticker: Ticker,
}

impl WindowedRun {
    /// Fixes the window from now (`warmup_ms`, then `duration_ms`) and starts the timekeeper and the ticker; the
    /// caller spawns its client tasks next.
    pub(super) fn begin(cell: &Cell) -> Result<Self> {
        let start = Instant::now();
        let measure_start = start + Duration::from_millis(cell.warmup_ms);
        let window = Window {
            measure_start,
            end: measure_start + Duration::from_millis(cell.duration_ms),
        };
        let edges = spawn_timekeeper(window.measure_start, window.end)?;
        let ticker = Ticker::spawn(window.measure_start, window.end);
        Ok(Self {
            start,
            window,
            stats: StatsSink::new(),
            edges,
            ticker,
        })
    }

    /// Waits for the window to close and returns what every windowed workload reports, with the merged statistics
    /// for the workload's own figures. Tasks still inside an operation are not waited for.
    pub(super) async fn finish<A: Approach>(
        self,
        approach: &A,
    ) -> Result<(Measurement, TaskStats)> {
        let (open_databases, database_opens) =
            (approach.open_databases(), approach.database_opens());
        self.finish_with(open_databases, database_opens).await
    }

    /// [`WindowedRun::finish`] for a run that knows its open databases and database opens itself.
    pub(super) async fn finish_with(
        self,
        open_databases: Option<u64>,
        database_opens: Option<u64>,
    ) -> Result<(Measurement, TaskStats)> {
        let edges = self
            .edges
            .await
            .context("the timekeeper thread stopped early")?;
        // The window's last tick may be late itself: the ticker ends when it has fired.
        let lateness = self.ticker.finish().await;
        let total = self.stats.merged();
        let wall_secs = self.window.secs();
        let measurement = Measurement {
            reads: total.op_stats(OpKind::Read, wall_secs),
            writes: total.op_stats(OpKind::Write, wall_secs),
            errors: total.errors(),
            error_samples: total.error_samples().to_vec(),
            wall_secs,
            cpu_secs: edges.cpu_secs,
            threads: edges.threads,
            rss_bytes: edges.rss_bytes,
            open_databases,
            database_opens,
            window_allocations: edges.allocations.map(|a| a.allocations),
            window_alloc_bytes: edges.allocations.map(|a| a.bytes),
            lateness,
            ..Measurement::default()
        };
        Ok((measurement, total))
    }
}
