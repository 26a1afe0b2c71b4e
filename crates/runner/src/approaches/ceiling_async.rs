//! `ceiling-async`: the ceiling's point reads — a plain connection, a snapshot kept for the whole run — called on
//! the runtime's worker threads inside the lab's client loop, one connection per worker. Nothing of a library: no
//! hand-off, no lock, no statement beyond the read. What a read request through the async runtime can reach here at
//! most, for the tables beside the ceiling, whose plain loop has no runtime at all.

use std::cell::RefCell;
use std::time::Duration;

use anyhow::{Result, bail};
use quicklite_lab_core::{
    Approach, ApproachName, Block, CeilingConnection, CeilingSnapshot, Cell, Environment, Knobs,
    NewItem, Workload,
};

use super::ceiling::Ceiling;

thread_local! {
    /// The worker thread's connection, opened at its first read; its snapshot stays open until the process ends.
    static CONNECTION: RefCell<Option<Ceiling>> = const { RefCell::new(None) };
}

/// Where each worker thread opens its connection.
pub struct CeilingAsync {
    cell: Cell,
    workload: Workload,
    knobs: Knobs,
}

impl CeilingAsync {
    /// Opens a first connection here to describe the settings in effect into `env` (each worker opens its own).
    /// Refuses a workload other than point reads: the lab never sends one, and a cell sent by hand is not measured
    /// as something it is not.
    pub fn open(
        cell: &Cell,
        workload: Workload,
        knobs: &Knobs,
        env: &mut Environment,
    ) -> Result<Self> {
        let approach = ApproachName::CeilingAsync;
        if !approach.implements(workload) {
            bail!("unsupported: `{approach}` does not run the {workload} workload");
        }
        Ceiling::open(cell, workload, knobs)?.describe(env)?;
        Ok(Self {
            cell: cell.clone(),
            workload,
            knobs: knobs.clone(),
        })
    }
}

/// The error of an operation the approach does not implement ([`ApproachName::implements`] keeps it out of those
/// cells).
fn only_point_reads() -> anyhow::Error {
    anyhow::anyhow!("{} runs point reads only", ApproachName::CeilingAsync)
}

impl Approach for CeilingAsync {
    async fn point_read(&self, id: i64) -> Result<()> {
        CONNECTION.with(|slot| {
            let mut slot = slot.borrow_mut();
            let conn = match &mut *slot {
                Some(conn) => conn,
                empty => empty.insert(Ceiling::open(&self.cell, self.workload, &self.knobs)?),
            };
            // Nothing writes in the cells it runs: the first read's snapshot serves every later one.
            conn.reads(&[id], CeilingSnapshot::Kept)
        })
    }

    async fn insert(&self, _item: NewItem) -> Result<()> {
        bail!(only_point_reads())
    }

    async fn update(&self, _id: i64, _delta: i64) -> Result<()> {
        bail!(only_point_reads())
    }

    async fn join_read(&self, _db: usize, _account: i64) -> Result<()> {
        bail!(only_point_reads())
    }

    async fn paced_write(&self, _db: usize, _block: Block, _delay: Duration) -> Result<()> {
        bail!(only_point_reads())
    }
}
