//! The seats of a database's connections for reads on callers' threads: where each connection waits for reads,
//! taken by one read at a time (as the writer's connection in its
//! [`WriterSeat`](crate::engine::seat::WriterSeat)), what the janitor learns of them, and the process-wide bound on
//! threads opening such connections.

use std::sync::{Arc, Mutex, MutexGuard, OnceLock, TryLockError};
use std::time::{Duration, Instant};

use crate::engine::snapshot::KeptSnapshot;
use crate::permits::{Permit, Permits};
use crate::util::{Coarse, cpus};

/// How long a connection that failed to open waits before it is tried again.
pub(super) const RETRY_OPEN_AFTER: Duration = Duration::from_secs(1);

/// Threads opening connections for inline reads now, in the whole process: at most one per CPU, so that many
/// databases read at once for the first time (a registry's) do not start a thread for every connection together.
pub(super) fn opener() -> Option<Permit> {
    static OPENERS: OnceLock<Arc<Permits>> = OnceLock::new();
    OPENERS
        .get_or_init(|| Arc::new(Permits::new(cpus())))
        .take_owned()
}

/// What a set's seats keep, for the janitor.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(super) struct Kept {
    /// Some connection is open (or opening).
    connections: bool,
    /// Some connection keeps a snapshot.
    snapshots: bool,
}

impl Kept {
    /// A seat in use: it may keep a snapshot when the read on it ends.
    pub(super) const BUSY: Kept = Kept {
        connections: true,
        snapshots: true,
    };

    pub(super) fn of(seat: &Seat) -> Kept {
        match seat {
            Seat::Open(own) => Kept {
                connections: true,
                snapshots: own.snapshot.began().is_some(),
            },
            Seat::Opening => Kept {
                connections: true,
                snapshots: false,
            },
            Seat::Empty | Seat::Failed(_) => Kept::default(),
        }
    }

    pub(super) fn busy(&mut self) {
        *self = self.or(Kept::BUSY);
    }

    pub(super) fn or(self, other: Kept) -> Kept {
        Kept {
            connections: self.connections || other.connections,
            snapshots: self.snapshots || other.snapshots,
        }
    }

    pub(super) fn is_empty(self) -> bool {
        !self.connections
    }

    /// Whether some connection keeps a snapshot.
    pub(super) fn snapshots(self) -> bool {
        self.snapshots
    }
}

/// Locks `seat` if no other thread holds it (also after a panic: a seat's state is whole at every step).
pub(super) fn try_lock(seat: &Mutex<Seat>) -> Option<MutexGuard<'_, Seat>> {
    match seat.try_lock() {
        Ok(seat) => Some(seat),
        Err(TryLockError::Poisoned(p)) => Some(p.into_inner()),
        Err(TryLockError::WouldBlock) => None,
    }
}

/// A seat: where one of the set's own connections waits for reads.
pub(super) enum Seat {
    /// No connection.
    Empty,
    /// A connection is being opened for it.
    Opening,
    /// The connection failed to open at this time.
    Failed(Instant),
    /// A connection.
    Open(Box<OwnConnection>),
}

/// One of the set's own connections, open, and what the janitor needs to know of it.
pub(super) struct OwnConnection {
    pub(super) snapshot: KeptSnapshot,
    /// When a read last ended on it (by the coarse clock).
    pub(super) last_used: Coarse,
    /// The commit sequence at which a read found the writer's connection lent but in use by another thread: until
    /// the next commit this connection serves its thread's reads, cold or not, rather than contend for it.
    pub(super) writer_seat_taken_at: Option<u64>,
    pub(super) _permit: Option<Permit>,
}
