//! What the pool runs, and what it asks of the databases it serves.

use std::sync::Arc;

use crate::Error;

/// A unit of work on the pool: one turn of a database's writer or of one of its readers, or the end of an extra
/// write thread ([`super::elastic`]).
pub(crate) enum Task<D> {
    Write(Arc<D>),
    Read(Arc<D>),
    /// The thread that takes it exits.
    Retire,
}

/// A database served by the pool (the pool's [`Actor`](crate::sched::pool::actor::Actor)), as the pool's run
/// queues, waiting room and eviction see it.
pub(crate) trait PooledDatabase: Send + Sync + Sized + 'static {
    /// The database's name in its registry.
    fn name(&self) -> &str;
    /// Runs one write task.
    fn run_write(self: &Arc<Self>);
    /// Runs one read task.
    fn run_read(self: &Arc<Self>);
    /// Answers every queued request with `error`.
    fn fail_queued(&self, error: &Error);
    /// Open, with no task queued or running.
    fn is_idle(&self) -> bool;
    /// When a task last ran, on the pool's clock.
    fn last_used_ms(&self) -> u64;
    /// Whether a checkpoint of its own runs beside it: closing it now would wait for the checkpoint to end.
    fn is_checkpointing(&self) -> bool;
    /// Closes the connections if no task is queued or running; returns whether it did.
    fn try_close(self: &Arc<Self>) -> bool;
    /// Closes the connections of a database whose write task waits in the run queue, if no task runs on it;
    /// returns whether it did.
    fn try_close_queued(self: &Arc<Self>) -> bool;
}
