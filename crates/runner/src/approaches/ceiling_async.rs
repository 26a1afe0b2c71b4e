//! `ceiling-async`: the ceiling's statements — a plain connection for each of the runtime's workers, reads in a
//! snapshot kept until a commit moves past it, writes one at a time behind a lock — called on the worker inside the
//! lab's client loop, one request at a time. Nothing of a library: no hand-off, no grouping. What a request through
//! the async runtime can reach here at most, for the tables beside the ceiling, whose plain loop has no runtime at
//! all.

use std::cell::RefCell;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use anyhow::{Result, anyhow, bail};
use quicklite_lab_core::{
    Approach, ApproachName, Block, CeilingConnection, CeilingSnapshot, CeilingWrite, Cell,
    Environment, Knobs, NewItem, Workload,
};

use super::ceiling::Ceiling;

/// A worker thread's connection, and the commits counted when its snapshot began (`None`: none open yet).
struct Worker {
    conn: Ceiling,
    snapshot_at: Option<u64>,
}

thread_local! {
    /// The worker thread's connection, opened at its first request.
    static WORKER: RefCell<Option<Worker>> = const { RefCell::new(None) };
}

/// Where each worker thread opens its connection, and what the workers share: the turn to write, and the count of
/// commits that tells a kept snapshot it is behind.
pub struct CeilingAsync {
    cell: Cell,
    workload: Workload,
    knobs: Knobs,
    writing: Mutex<()>,
    commits: AtomicU64,
}

impl CeilingAsync {
    /// Opens a first connection here to describe the settings in effect into `env` (each worker opens its own).
    /// Refuses a workload it does not run: the lab never sends one, and a cell sent by hand is not measured as
    /// something it is not.
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
            writing: Mutex::new(()),
            commits: AtomicU64::new(0),
        })
    }

    /// Runs `f` with this worker thread's connection, opened if it has none yet.
    fn with_worker<T>(&self, f: impl FnOnce(&mut Worker) -> Result<T>) -> Result<T> {
        WORKER.with(|slot| {
            let mut slot = slot.borrow_mut();
            let worker = match &mut *slot {
                Some(worker) => worker,
                empty => empty.insert(Worker {
                    conn: Ceiling::open(&self.cell, self.workload, &self.knobs)?,
                    snapshot_at: None,
                }),
            };
            f(worker)
        })
    }

    /// One write in a transaction of its own, its turn taken as the ceiling's threads take theirs.
    fn write(&self, write: CeilingWrite) -> Result<()> {
        self.with_worker(|worker| {
            let _turn = self
                .writing
                .lock()
                .map_err(|_| anyhow!("another worker panicked while writing"))?;
            worker.conn.writes(&[write])?;
            worker.snapshot_at = None;
            self.commits.fetch_add(1, Ordering::Release);
            Ok(())
        })
    }
}

/// The error of an operation the approach does not implement ([`ApproachName::implements`] keeps it out of those
/// cells).
fn not_implemented() -> anyhow::Error {
    anyhow!(
        "{} runs single-row reads and writes only",
        ApproachName::CeilingAsync
    )
}

impl Approach for CeilingAsync {
    async fn point_read(&self, id: i64) -> Result<()> {
        self.with_worker(|worker| {
            // The snapshot stays until a commit (of either worker) moves past it.
            let now = self.commits.load(Ordering::Acquire);
            let snapshot = if worker.snapshot_at == Some(now) {
                CeilingSnapshot::Kept
            } else {
                CeilingSnapshot::New
            };
            worker.snapshot_at = Some(now);
            worker.conn.reads(&[id], snapshot)
        })
    }

    async fn insert(&self, item: NewItem) -> Result<()> {
        self.write(CeilingWrite::Insert(item))
    }

    async fn update(&self, id: i64, delta: i64) -> Result<()> {
        self.write(CeilingWrite::Update { id, delta })
    }

    async fn join_read(&self, _db: usize, _account: i64) -> Result<()> {
        Err(not_implemented())
    }

    async fn paced_write(&self, _db: usize, _block: Block, _delay: Duration) -> Result<()> {
        Err(not_implemented())
    }
}
