//! The driver: runs a cell's workload against an [`Approach`] and measures it.
//!
//! Every approach is measured through this one piece of code, so differences in the results come from the
//! approaches, not from how each was driven. Clients are closed-loop: each task issues its next operation
//! when the previous one returns; a cell with a rate runs [`open_loop`] instead, requests sent on a schedule. Operations that *complete* inside the measured window count; the warm-up
//! before it warms caches, connections and thread pools. The window is kept by the [`crate::timekeeper`].
//!
//! The [`ceiling`] runs the same statements with no async hand-off, for reference.
//!
//! One file per workload: [`closed_loop`] (`point-read`, `insert`, `mixed`), [`multi_db`], [`queue`], [`orm`],
//! [`throughput`], [`held_tx`], [`long_read`], `http` and [`custom`]; the ones driven by client tasks share their [`window`] and the way a [`client_loop`]
//! times an operation.

mod ceiling;
mod client_loop;
mod closed_loop;
mod custom;
mod held_tx;
#[cfg(feature = "http")]
mod http;
mod long_read;
mod multi_db;
mod open_loop;
mod orm;
mod queue;
mod throughput;
mod window;

use std::sync::Arc;

use anyhow::Result;

use crate::approach::Approach;
use crate::cell::Cell;
use crate::idle::{IDLE_WINDOW, measure_idle};
use crate::measurement::Measurement;
use crate::workload::Workload;

pub use ceiling::{CeilingConnection, CeilingSnapshot, CeilingWrite};
pub use long_read::LONG_READ;
pub use open_loop::DRAIN_GRACE;
pub use queue::QUEUE_PROBE_CYCLES;

/// Runs `cell` against `approach`: spawns the client tasks, waits out the warm-up and the window, keeps the
/// approach open and idle for [`IDLE_WINDOW`], and returns what was measured, CPU per operation and idle CPU
/// included. Tasks still inside an operation at the end are left to finish on their own; the runner exits without
/// waiting for them.
pub async fn drive<A: Approach>(cell: &Cell, approach: Arc<A>) -> Result<Measurement> {
    let measurement = drive_workload(cell, approach.clone()).await?;
    let measurement = with_cpu_figures(measurement).await;
    // Held to here: the approach's threads and connections stay open through the idle window.
    drop(approach);
    Ok(measurement)
}

/// Runs `cell` as the ceiling (the driver's `ceiling` module): `open` gives each of its threads a connection, all
/// opened before the warm-up begins. Its threads end with the window and close their connections, so its idle window
/// measures that closing and then the runner's runtime alone.
pub async fn drive_ceiling<C, F>(cell: &Cell, open: F) -> Result<Measurement>
where
    C: CeilingConnection,
    F: FnMut() -> Result<C>,
{
    if cell.rate.is_some() {
        anyhow::bail!("the ceiling runs flat out (closed loop) only: it takes no rate");
    }
    let measurement = ceiling::drive(cell, open).await?;
    Ok(with_cpu_figures(measurement).await)
}

/// `measurement` with its CPU per operation, and the idle window measured now: the caller keeps its approach
/// open until this returns.
async fn with_cpu_figures(mut measurement: Measurement) -> Measurement {
    measurement.cpu_per_op_us = measurement.cpu_per_op_us_of_window();
    measurement.idle_cpu = Some(measure_idle(IDLE_WINDOW).await);
    measurement
}

/// The workload's own driver.
async fn drive_workload<A: Approach>(cell: &Cell, approach: Arc<A>) -> Result<Measurement> {
    let workload = Workload::of_cell(cell)?;
    if let Some(rate) = cell.rate {
        // Validated above: only the workloads with an open-loop driver take a rate.
        return open_loop::drive(cell, workload, approach, rate).await;
    }
    match workload {
        workload @ (Workload::PointRead
        | Workload::Insert
        | Workload::Mixed
        | Workload::WriteRead) => closed_loop::drive(cell, workload, approach).await,
        Workload::MultiDb => multi_db::drive(cell, approach).await,
        Workload::Queue => queue::drive(cell, approach).await,
        Workload::Orm => orm::drive(cell, &*approach).await,
        Workload::Throughput => throughput::drive(cell, approach).await,
        Workload::HeldTx => held_tx::drive(cell, approach).await,
        Workload::LongRead => long_read::drive(cell, approach).await,
        Workload::Custom => custom::drive(cell, approach).await,
        #[cfg(feature = "http")]
        Workload::Http => http::drive(cell, approach).await,
        #[cfg(not(feature = "http"))]
        Workload::Http => anyhow::bail!(
            "this runner was built without the http workload (lab-core's `http` feature)"
        ),
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::drive;
    use crate::test_support::{Fake, sample_cell};

    #[tokio::test]
    async fn unknown_workload_is_an_error() {
        let cell = sample_cell("point-reads", "fake");
        let err = drive(&cell, Arc::new(Fake::default())).await.unwrap_err();
        assert!(err.to_string().contains("unknown workload"), "{err}");
    }
}
