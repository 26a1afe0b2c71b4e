//! Scheduling: who serves a database's queues, and when. A standalone database has threads of its own
//! ([`threads`]); a registry's databases take turns on a shared, bounded pool ([`pool`]). Both serve the same
//! engine turns. Short reads of either run on their callers' threads instead ([`inline`]).

pub(crate) mod inline;
pub(crate) mod pool;
pub(crate) mod threads;

use std::sync::Arc;

use crate::Result;
use pool::actor::Actor;
use threads::Threads;

/// What serves a database's queues.
pub(crate) enum Backend {
    /// Threads of its own: one writer, `readers` readers ([`Database::open`](crate::Database::open)).
    Threads(Threads),
    /// Turns on a registry's shared pool.
    Pool(Arc<Actor>),
}

impl Backend {
    /// A write request was queued.
    pub(crate) fn notify_write(&self) {
        if let Backend::Pool(actor) = self {
            actor.wake_writer();
        }
    }

    /// A read request was queued.
    pub(crate) fn notify_read(&self) {
        if let Backend::Pool(actor) = self {
            actor.wake_reader();
        }
    }

    /// Serves what is queued (the queues are closed), then closes the connections for good.
    pub(crate) async fn close(&self) -> Result<()> {
        match self {
            Backend::Threads(threads) => threads.close().await,
            Backend::Pool(actor) => {
                actor.close().await;
                Ok(())
            }
        }
    }
}
