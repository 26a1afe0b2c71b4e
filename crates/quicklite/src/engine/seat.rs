//! The writer's connection, lent to reads on callers' threads while the writer waits for work.
//!
//! SQLite throws a connection's page cache and memory map away when a read transaction begins after another
//! connection committed (`pagerBeginReadTransaction` → `pager_reset`); the connection that committed keeps its own.
//! So beside a writer every read connection refills its cache after each commit, and the one connection whose cache
//! stays warm is the writer's. While a standalone database's writer thread waits for work it leaves its connection
//! here; a short read on a caller's thread whose own connection would begin its snapshot after a commit takes it
//! instead ([`sched::inline`](crate::sched::inline)), and keeps a snapshot on it between reads like any connection
//! for such reads. While it is lent the connection commits nothing and keeps the writer's settings
//! ([`GuardedConnection::set_lent`]). When work comes, the writer takes it back ([`WriterSeat::take_back`]): it says
//! so first, so that no read starts there meanwhile, then waits for the read running there, if any — a short one, as
//! only reads whose call site ran short lately come here, but a short site's read can turn long: past
//! [`TAKE_BACK_WAIT`] the writer leaves the connection to that read and writes on a second connection of its own
//! ([`Writer`](crate::engine::write::Writer)), and collects the first once the read is over
//! ([`WriterSeat::collect`]).

use std::ops::{Deref, DerefMut};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard, TryLockError};
use std::time::{Duration, Instant};

use crossbeam_utils::{Backoff, CachePadded};

use crate::engine::Shared;
use crate::engine::duty::Duty;
use crate::engine::guard::GuardedConnection;
use crate::engine::snapshot::KeptSnapshot;
use crate::util::Coarse;

/// How long the writer waits for the read running on its lent connection before it writes on its second
/// connection instead: reads come to the lent connection only from call sites that ran within a fraction of this.
pub(crate) const TAKE_BACK_WAIT: Duration = Duration::from_millis(1);

/// Writes on the lent connection keep it busy while they hold it at least one part in this many of the time
/// ([`WriterSeat::writes_busy`]).
const WRITES_BUSY_SHARE: u32 = 2;

/// What [`WriterSeat::take_back`] found.
pub(crate) enum TakenBack {
    /// The connection, with its snapshot ended.
    Conn(GuardedConnection),
    /// The connection was not lent.
    NotLent,
    /// A read still runs on it past the wait: it stays here, lent to that read only, until collected.
    Busy,
}

/// Where a writer leaves its connection while it waits for work.
pub(crate) struct WriterSeat {
    /// The connection, while it is lent; written at every read that takes it.
    lent: CachePadded<Mutex<Option<Lent>>>,
    /// Set while the writer holds its connection, or is taking it back: no read starts on it. Read by every read
    /// that could take the connection, written twice per idle spell of the writer.
    held: CachePadded<AtomicBool>,
    /// Writes may run on the lent connection while the WAL has fewer frames than this (0: none may): past it, the
    /// writer's next turn checkpoints ([`WriterSeat::writes_below`]).
    writes_below: AtomicU64,
    /// Set while a write runs on the lent connection: the writer taking it back waits for it (it holds the write
    /// lock, which a second connection would wait for too).
    writing: AtomicBool,
    /// Whether writes held the lent connection at least half the time over the last whole window ([`Lent::writes`]).
    writes_busy: AtomicBool,
    /// How long writes have held the lent connection, in all, in nanoseconds ([`WriterSeat::written`]).
    written: AtomicU64,
}

impl std::fmt::Debug for WriterSeat {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WriterSeat")
            .field("held", &self.held.load(Ordering::Relaxed))
            .finish_non_exhaustive()
    }
}

/// The writer's connection, lent, when a read last ended on it (by the coarse clock), and how busy writes have kept
/// it since it was lent.
pub(crate) struct Lent {
    pub(crate) snapshot: KeptSnapshot,
    pub(crate) last_used: Coarse,
    writes: Duty,
}

/// The lent connection, taken by one read.
pub(crate) struct Borrowed<'a>(MutexGuard<'a, Option<Lent>>);

impl Deref for Borrowed<'_> {
    type Target = Lent;

    fn deref(&self) -> &Lent {
        self.0
            .as_ref()
            .expect("a borrowed seat holds the connection")
    }
}

impl DerefMut for Borrowed<'_> {
    fn deref_mut(&mut self) -> &mut Lent {
        self.0
            .as_mut()
            .expect("a borrowed seat holds the connection")
    }
}

impl WriterSeat {
    /// A seat whose writer holds its connection.
    pub(crate) fn new() -> WriterSeat {
        WriterSeat {
            lent: CachePadded::new(Mutex::new(None)),
            held: CachePadded::new(AtomicBool::new(true)),
            writes_below: AtomicU64::new(0),
            writing: AtomicBool::new(false),
            writes_busy: AtomicBool::new(false),
            written: AtomicU64::new(0),
        }
    }

    /// Lets writes run on the lent connection, on their callers' threads, while the WAL has fewer than `frames`
    /// frames (0: none may): the writer runs what is due after commits — a checkpoint — in its own turns, and a
    /// write that would find one due goes to the writer ([`sched::inline`](crate::sched::inline)).
    pub(crate) fn writes_below(&self, frames: u64) {
        self.writes_below.store(frames, Ordering::Relaxed);
    }

    /// Whether a write may run on the lent connection with `frames` frames in the WAL.
    pub(crate) fn takes_writes(&self, frames: u64) -> bool {
        frames < self.writes_below.load(Ordering::Relaxed)
    }

    /// Leaves `conn` here for reads, until [`WriterSeat::take_back`]; `commit_seq` is the commit sequence now.
    /// Gives `conn` back if the seat still holds the connection a read kept past a take-back
    /// ([`WriterSeat::collect`] first), or a read holds the seat.
    pub(crate) fn lend(
        &self,
        conn: GuardedConnection,
        commit_seq: u64,
    ) -> Option<GuardedConnection> {
        // Never waits: a read may still run on the connection kept past a take-back, for as long as it runs.
        let mut seat = match self.lent.try_lock() {
            Ok(seat) => seat,
            Err(TryLockError::Poisoned(p)) => p.into_inner(),
            Err(TryLockError::WouldBlock) => return Some(conn),
        };
        if seat.is_some() {
            return Some(conn);
        }
        conn.set_lent(true);
        *seat = Some(Lent {
            snapshot: KeptSnapshot::lent(conn, commit_seq),
            last_used: Coarse::now(),
            writes: Duty::busy_from(Instant::now(), WRITES_BUSY_SHARE),
        });
        self.writes_busy.store(false, Ordering::Relaxed);
        self.held.store(false, Ordering::Release);
        None
    }

    /// Takes the connection back, once the read running on it (if any) ends, with its snapshot ended — waiting up
    /// to `wait` for that read (`None`: as long as it runs).
    pub(crate) fn take_back(&self, shared: &Shared, wait: Option<Duration>) -> TakenBack {
        self.held.store(true, Ordering::Relaxed);
        let give_up = wait.map(|wait| Instant::now() + wait);
        let backoff = Backoff::new();
        let mut seat = loop {
            match self.lent.try_lock() {
                Ok(seat) => break seat,
                Err(TryLockError::Poisoned(p)) => break p.into_inner(),
                Err(TryLockError::WouldBlock)
                    if give_up.is_some_and(|at| Instant::now() >= at)
                        && !self.writing.load(Ordering::Acquire) =>
                {
                    return TakenBack::Busy;
                }
                Err(TryLockError::WouldBlock) if backoff.is_completed() => {
                    std::thread::sleep(Duration::from_micros(20))
                }
                Err(TryLockError::WouldBlock) => backoff.snooze(),
            }
        };
        match seat.take() {
            Some(lent) => TakenBack::Conn(Self::give_back(lent, shared)),
            None => TakenBack::NotLent,
        }
    }

    /// The connection a read kept past a take-back, once that read has ended (`None` while it runs, or if there is
    /// none).
    pub(crate) fn collect(&self, shared: &Shared) -> Option<GuardedConnection> {
        let mut seat = match self.lent.try_lock() {
            Ok(seat) => seat,
            Err(TryLockError::Poisoned(p)) => p.into_inner(),
            Err(TryLockError::WouldBlock) => return None,
        };
        seat.take().map(|lent| Self::give_back(lent, shared))
    }

    /// Ends the snapshot on a connection taken from the seat and makes it the writer's again.
    fn give_back(lent: Lent, shared: &Shared) -> GuardedConnection {
        let mut conn = lent.snapshot.into_conn(shared);
        conn.set_lent(false);
        conn.rearm();
        conn
    }

    /// Whether the writer wants its connection back (or holds it): a read that ends on it now ends its snapshot.
    pub(crate) fn wanted_back(&self) -> bool {
        self.held.load(Ordering::Relaxed)
    }

    /// Whether the connection is lent now (a read may be running on it).
    pub(crate) fn lent(&self) -> bool {
        !self.held.load(Ordering::Relaxed)
    }

    /// The connection, if it is lent and no read is running on it.
    pub(crate) fn borrow(&self) -> Option<Borrowed<'_>> {
        if self.held.load(Ordering::Acquire) {
            return None;
        }
        let lent = match self.lent.try_lock() {
            Ok(lent) => lent,
            // A read panicked with it: its state is whole (the read's transaction is rolled back after a panic).
            Err(TryLockError::Poisoned(p)) => p.into_inner(),
            Err(TryLockError::WouldBlock) => return None,
        };
        lent.is_some().then(|| Borrowed(lent))
    }

    /// The connection, for a write: as [`WriterSeat::borrow`], but if a write runs on it now, waits up to `wait` for
    /// that write to end (a short one: only writes of call sites that ran short come here), unless the writer takes
    /// it back meanwhile.
    pub(crate) fn borrow_for_write(&self, wait: Duration) -> Option<Borrowed<'_>> {
        if let Some(lent) = self.borrow() {
            return Some(lent);
        }
        if wait.is_zero() || !self.writing.load(Ordering::Relaxed) {
            return None;
        }
        let give_up = Instant::now() + wait;
        let backoff = Backoff::new();
        loop {
            backoff.snooze();
            if let Some(lent) = self.borrow() {
                return Some(lent);
            }
            // A write that ended may not have let the connection go yet: the wait goes on to its end.
            if self.held.load(Ordering::Relaxed) || Instant::now() >= give_up {
                return None;
            }
        }
    }

    /// Runs `f`, a write begun at `began`, on the lent connection `lent` borrowed from this seat, said to be a write
    /// for the while ([`WriterSeat::take_back`] waits for it), and counted in the time writes hold it
    /// ([`WriterSeat::writes_busy`]); returns what `f` returned and when it ended.
    pub(crate) fn write<T>(
        &self,
        lent: &mut Borrowed<'_>,
        began: Instant,
        f: impl FnOnce(&mut Lent) -> T,
    ) -> (T, Instant) {
        struct Writing<'a>(&'a AtomicBool);
        impl Drop for Writing<'_> {
            fn drop(&mut self) {
                self.0.store(false, Ordering::Release);
            }
        }
        let out = {
            self.writing.store(true, Ordering::Release);
            let _writing = Writing(&self.writing);
            f(lent)
        };
        let ended = Instant::now();
        let took = ended.saturating_duration_since(began);
        self.written.fetch_add(
            took.as_nanos().try_into().unwrap_or(u64::MAX),
            Ordering::Relaxed,
        );
        lent.writes.turn(began, ended);
        self.writes_busy
            .store(lent.writes.busy(), Ordering::Relaxed);
        (out, ended)
    }

    /// How long writes on callers' threads have held the lent connection, in all, since the seat was made: the
    /// writer counts it as its own time in turns ([`Duty::also`]).
    pub(crate) fn written(&self) -> Duration {
        Duration::from_nanos(self.written.load(Ordering::Relaxed))
    }

    /// Whether writes on callers' threads held the lent connection at least half the time over the last whole
    /// window of [`duty::WINDOW`](crate::engine::duty::WINDOW): they come as fast as they commit one by one.
    pub(crate) fn writes_busy(&self) -> bool {
        self.writes_busy.load(Ordering::Relaxed)
    }

    /// Whether a snapshot may be kept on the lent connection now (one in use may).
    pub(crate) fn keeps_snapshot(&self) -> bool {
        match self.borrow() {
            Some(lent) => lent.snapshot.began().is_some(),
            None => !self.held.load(Ordering::Relaxed),
        }
    }

    /// Adds the reads counted on the lent connection to the shared metrics, unless a read is running there.
    pub(crate) fn flush(&self, shared: &Shared) {
        if let Some(mut lent) = self.borrow() {
            lent.snapshot.flush(shared);
        }
    }

    /// Ends the snapshot kept on the lent connection if it has stood unused for `idle` or is older than `max_age`
    /// (for the janitor); returns whether one may still be kept.
    pub(crate) fn sweep(
        &self,
        shared: &Shared,
        now: Instant,
        idle: Duration,
        max_age: Duration,
    ) -> bool {
        let Some(mut lent) = self.borrow() else {
            // Not lent (the writer ended the snapshot), or in use (the read's end counts as use).
            return !self.held.load(Ordering::Relaxed);
        };
        let old = lent
            .snapshot
            .began()
            .is_some_and(|began| now.saturating_duration_since(began) >= max_age);
        if Coarse::now().since(lent.last_used) >= idle || old {
            lent.snapshot.end(shared);
        } else {
            lent.snapshot.flush(shared);
        }
        lent.snapshot.began().is_some()
    }
}
