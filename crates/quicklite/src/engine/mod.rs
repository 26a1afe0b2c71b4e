//! The engine: the SQLite work of a database over its connections — opening them, one write transaction, one
//! batch of reads, checkpoints. It runs no thread and waits for no work: a scheduler
//! ([`sched`](crate::sched)) decides who serves a database and when.

pub(crate) mod bound;
pub(crate) mod busy;
pub(crate) mod checkpoint;
mod duty;
mod external;
pub(crate) mod group;
pub(crate) mod guard;
pub(crate) mod held;
pub(crate) mod hooks;
pub(crate) mod map;
pub(crate) mod open;
pub(crate) mod policy;
pub(crate) mod read;
pub(crate) mod seat;
mod shared;
pub(crate) mod snapshot;
pub(crate) mod witness;
pub(crate) mod write;
mod write_lock;

pub(crate) use shared::Shared;
