//! The caller's thread as a scheduler: short reads run where they are awaited, without a hand-off.
//!
//! Handing a read to a reader thread and its answer back costs more than a point read (docs/design.md). So a read
//! whose call site has lately run within [`Config::inline_read_max`] ([`crate::cost`]) runs on the thread that
//! polls it, on one of a few read-only connections of the database's own ([`Config::inline_connections`]), inside
//! the snapshot that connection keeps from one read to the next ([`KeptSnapshot`]). Everything else goes to the
//! reader threads or the pool: the first reads of a call site, reads of one that ran long lately, reads while every
//! connection is busy or still opening (a connection opens on a thread of its own: the set-up hook, a SQLCipher
//! key's derivation and the PRAGMAs are no work for an async worker).
//!
//! A thread takes the connection its number points at, or the next one free; a connection is held only while one
//! read runs on it, so no thread ever waits for another here. Where that connection's page cache is cold — the
//! database was written since its last snapshot began, and SQLite threw the cache away — a standalone database's
//! read takes the writer's connection instead if the writer is waiting for work ([`WriterSeat`]): the one
//! connection whose cache commits leave warm. Before it runs, a read yields once to the runtime
//! ([`take_turn`]): a task reading in a loop then takes its turn with the others like a task awaiting a reader
//! thread's answer, and the runtime's timers and woken tasks never wait behind a run of reads (docs/design.md has
//! the measurements behind the choice). An idle connection's snapshot is ended by the
//! [`janitor`] within [`janitor::PERIOD`], so that it holds no checkpoint back; a connection unused for
//! [`janitor::CLOSE_AFTER`] is closed.
//!
//! While another connection contends for the write lock (another process committing, [`Shared::write_lock_contended`]),
//! every read goes to the reader threads or the pool. Reads run inline without pause keep the runtime's threads busy,
//! and so the writes' callers, on the same threads, send their next writes late: the writer goes idle between its
//! groups, and the other connection, which takes the lock in any moment the writer leaves it free, keeps it. Beside
//! a Python process committing back to back, with eight tasks writing and eight reading, quicklite was left a tenth
//! of the commits (issue 45; docs/design.md has the figures).

mod janitor;

use std::cell::Cell;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, TryLockError};
use std::time::{Duration, Instant};

use crossbeam_utils::CachePadded;
use rusqlite::Connection;

use crate::config::Config;
use crate::cost::{RanOn, Site};
use crate::engine::Shared;
use crate::engine::seat::{Lent, WriterSeat};
use crate::engine::snapshot::KeptSnapshot;
use crate::error::panic_message;
use crate::request::Deadline;
use crate::sched::permits::{Permit, Permits};
use crate::util::{cpus, lock, spawn};
use crate::{Error, RequestKind, Result};

/// One inline read in this many records its cost (every one that ran past the bound does).
const SAMPLE_EVERY: u32 = 16;

/// How long a connection that failed to open waits before it is tried again.
const RETRY_OPEN_AFTER: Duration = Duration::from_secs(1);

/// Threads opening connections for inline reads now, in the whole process: at most one per CPU, so that many
/// databases read at once for the first time (a registry's) do not start a thread for every connection together.
static OPENERS: AtomicUsize = AtomicUsize::new(0);

/// One of the [`OPENERS`], given back when dropped.
struct Opener;

impl Opener {
    fn take() -> Option<Opener> {
        if OPENERS.fetch_add(1, Ordering::AcqRel) < cpus() {
            Some(Opener)
        } else {
            OPENERS.fetch_sub(1, Ordering::AcqRel);
            None
        }
    }
}

impl Drop for Opener {
    fn drop(&mut self) {
        OPENERS.fetch_sub(1, Ordering::AcqRel);
    }
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
    const BUSY: Kept = Kept {
        connections: true,
        snapshots: true,
    };

    fn of(seat: &Seat) -> Kept {
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

    fn busy(&mut self) {
        *self = self.or(Kept::BUSY);
    }

    fn or(self, other: Kept) -> Kept {
        Kept {
            connections: self.connections || other.connections,
            snapshots: self.snapshots || other.snapshots,
        }
    }

    fn is_empty(self) -> bool {
        !self.connections
    }
}

/// A read to run on its caller's thread: its call site, and on what grounds it runs there.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Attempt {
    site: Site,
    ran_on: RanOn,
}

/// Locks `seat` if no other thread holds it (also after a panic: a seat's state is whole at every step).
fn try_lock(seat: &Mutex<Seat>) -> Option<MutexGuard<'_, Seat>> {
    match seat.try_lock() {
        Ok(seat) => Some(seat),
        Err(TryLockError::Poisoned(p)) => Some(p.into_inner()),
        Err(TryLockError::WouldBlock) => None,
    }
}

/// A seat of an [`Inline`] set: where one of its own connections waits for reads, taken by one read at a time
/// (as the writer's connection in its [`WriterSeat`]).
enum Seat {
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
struct OwnConnection {
    snapshot: KeptSnapshot,
    /// When a read last ended on it.
    last_used: Instant,
    /// The commit sequence at which a read found the writer's connection lent but in use by another thread: until
    /// the next commit this connection serves its thread's reads, cold or not, rather than contend for it.
    writer_seat_taken_at: Option<u64>,
    _permit: Option<Permit>,
}

/// The connections of one database for reads on callers' threads.
pub(crate) struct Inline {
    path: PathBuf,
    config: Config,
    shared: Arc<Shared>,
    /// One cache line each: threads on different seats touch no line in common.
    seats: Box<[CachePadded<Mutex<Seat>>]>,
    /// Shared with other databases, for a registry's.
    budget: Option<Arc<Permits>>,
    /// Where the writer lends its connection while it waits for work, if it does (a standalone database's).
    writer_seat: Option<Arc<WriterSeat>>,
    /// Set once the database closes: no read runs here afterwards.
    closed: AtomicBool,
    /// Whether the janitor tends this set.
    tended: AtomicBool,
}

thread_local! {
    /// Inline reads run on this thread, counted for sampling their costs.
    static SAMPLED: Cell<u32> = const { Cell::new(0) };
    /// This thread's number, which picks the connection it tries first.
    static NUMBER: usize = {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        NEXT.fetch_add(1, Ordering::Relaxed)
    };
}

/// Waits for this task's turn to run a read inline: yields once to the runtime, which polls the task again after
/// the others ready to run (tokio's `yield_now`: the task goes behind them, not to the front of the line).
///
/// A read on the caller's thread costs about as much as a yield; a task that read without yielding would hold its
/// worker for as long as it has reads to make (a task's cooperative budget, 128 of them, is a quarter of a
/// millisecond), and every task woken meanwhile — an answer from the writer, a timer — would wait behind it.
/// Yielding before every read measured faster than yielding after each slice of reads on a thread (10 µs), with
/// the runtime's lateness no worse (docs/design.md).
pub(crate) async fn take_turn() {
    tokio::task::yield_now().await;
}

impl Inline {
    /// The set for the database at `path`; `budget` bounds its connections together with other databases'; reads
    /// may also take the writer's connection at `writer_seat` while the writer waits.
    pub(crate) fn new(
        path: PathBuf,
        config: Config,
        shared: Arc<Shared>,
        budget: Option<Arc<Permits>>,
        writer_seat: Option<Arc<WriterSeat>>,
    ) -> Arc<Inline> {
        let seats = (0..config.inline_connections.max(1))
            .map(|_| CachePadded::new(Mutex::new(Seat::Empty)))
            .collect();
        Arc::new(Inline {
            path,
            config,
            shared,
            seats,
            budget,
            writer_seat,
            closed: AtomicBool::new(false),
            tended: AtomicBool::new(false),
        })
    }

    /// Whether a read of `site` should run inline, and on what grounds ([`Costs::decide`](crate::cost::Costs::decide)):
    /// the site has run lately within the bound, or the read probes it; never while another connection contends
    /// for the write lock ([`Shared::write_lock_contended`]).
    pub(crate) fn suits(&self, site: Site) -> Option<Attempt> {
        if self.closed.load(Ordering::Relaxed) || self.shared.write_lock_contended() {
            return None;
        }
        let ran_on = self
            .shared
            .costs
            .decide(site, self.config.inline_read_max)?;
        Some(Attempt { site, ran_on })
    }

    /// Runs `f` here, in a snapshot that contains every write acknowledged before this call, if a connection is
    /// free and a snapshot can be had; otherwise gives `f` back, not run, for the reader threads.
    ///
    /// The connection: one of the set's whose page cache is warm (no commit since its last snapshot, nor just
    /// before it), else the writer's while the writer waits for work ([`WriterSeat`]), whose cache every commit
    /// leaves warm, else any of the set's that is free. A thread that found the writer's connection in use by
    /// another stays on its own until the next commit, so that two threads do not contend for it at every read.
    pub(crate) fn run<T, F>(
        self: &Arc<Self>,
        attempt: Attempt,
        deadline: Option<Deadline>,
        f: F,
    ) -> std::result::Result<Result<T>, F>
    where
        F: FnOnce(&Connection) -> rusqlite::Result<T>,
    {
        // Read-your-writes, and no read older than one already made: one load; a snapshot that may lack a commit
        // visible now ends before this read.
        let commit_seq = self.shared.visible_seq();
        let mut seat = self.free_seat();
        let stay = matches!(seat.as_deref(), Some(Seat::Open(own))
            if own.snapshot.warm(commit_seq) || own.writer_seat_taken_at == Some(commit_seq));
        if !stay && let Some(writer_seat) = &self.writer_seat {
            if let Some(mut lent) = writer_seat.borrow() {
                drop(seat);
                let Lent {
                    snapshot,
                    last_used,
                } = &mut *lent;
                let out = self.read_on(snapshot, last_used, attempt, deadline, commit_seq, f);
                drop(lent);
                self.tend();
                return out;
            }
            if writer_seat.lent()
                && let Some(Seat::Open(own)) = seat.as_deref_mut()
            {
                own.writer_seat_taken_at = Some(commit_seq);
            }
        }
        let Some(mut seat) = seat else {
            return Err(f);
        };
        let Seat::Open(own) = &mut *seat else {
            return Err(f);
        };
        let OwnConnection {
            snapshot,
            last_used,
            ..
        } = &mut **own;
        let out = self.read_on(snapshot, last_used, attempt, deadline, commit_seq, f);
        drop(seat);
        self.tend();
        out
    }

    /// Runs `f` on `snapshot`'s connection (see [`Inline::run`]).
    fn read_on<T, F>(
        &self,
        snapshot: &mut KeptSnapshot,
        last_used: &mut Instant,
        attempt: Attempt,
        deadline: Option<Deadline>,
        commit_seq: u64,
        f: F,
    ) -> std::result::Result<Result<T>, F>
    where
        F: FnOnce(&Connection) -> rusqlite::Result<T>,
    {
        let now = Instant::now();
        if let Some(deadline) = deadline
            && deadline.passed(now)
        {
            // Counted as the reader threads count a read answered past its deadline without running.
            snapshot.count(true, false);
            return Ok(Err(deadline.error(RequestKind::Read, false)));
        }
        let max_age = self.config.read_snapshot_max_age;
        match snapshot.current(&self.shared, commit_seq, now, max_age) {
            Ok(true) => janitor::snapshot_begun(),
            Ok(false) => {}
            Err(_) => return Err(f),
        }
        let conn = snapshot.conn();
        // What the site costs is its closure's run: a snapshot begun above serves many reads.
        let started = Instant::now();
        let outcome = conn.run_until(deadline.map(|d| d.at), || {
            catch_unwind(AssertUnwindSafe(|| f(conn.conn())))
        });
        let ended = Instant::now();
        let took = ended - started;
        *last_used = ended;
        // Only the writer's connection, lent, lets a read write: undone here, before anyone can see it.
        let wrote = snapshot.undo_write(&self.shared);
        if self.shared.checkpoint_waits() {
            // A snapshot kept now would hold the checkpoint back for as long as this thread keeps reading.
            snapshot.end(&self.shared);
        }
        // A panic's time is the panic hook's as much as the read's: it says nothing of what the site costs. Of the
        // others, a sample: threads writing one site's entry on every read would pass its cache line back and forth.
        let sampled = SAMPLED.with(|n| {
            n.set(n.get().wrapping_add(1));
            n.get() % SAMPLE_EVERY == 0
        });
        if outcome.is_ok()
            && (sampled || attempt.ran_on == RanOn::Probe || took > self.config.inline_read_max)
        {
            self.shared.costs.record(
                attempt.site,
                took,
                self.config.inline_read_max,
                attempt.ran_on,
            );
        }
        let result = match outcome {
            Ok(_) if wrote => {
                snapshot.count(true, false);
                Err(Error::from_closure(rusqlite::Error::SqliteFailure(
                    rusqlite::ffi::Error::new(rusqlite::ffi::SQLITE_READONLY),
                    Some(
                        "attempt to write a readonly database: a read ran a statement that writes"
                            .into(),
                    ),
                )))
            }
            Ok(Ok(value)) => {
                snapshot.count(false, false);
                Ok(value)
            }
            Ok(Err(e)) => {
                snapshot.count(true, false);
                match deadline {
                    // Failed past its deadline: interrupted (or failing anyway, too late to tell).
                    Some(deadline) if deadline.passed(ended) => {
                        Err(deadline.error(RequestKind::Read, true))
                    }
                    _ => Err(Error::from_closure(e)),
                }
            }
            Err(payload) => {
                // The closure may have left a statement half-stepped: begin afresh next time.
                snapshot.count(true, true);
                snapshot.end(&self.shared);
                Err(Error::Panic {
                    message: panic_message(payload.as_ref()),
                })
            }
        };
        Ok(result)
    }

    /// An open connection no other thread is using: the one this thread's number points at, or the next free one.
    /// The first seat with no connection met on the way starts opening one.
    fn free_seat(self: &Arc<Self>) -> Option<MutexGuard<'_, Seat>> {
        let n = self.seats.len();
        let first = NUMBER.with(|number| *number) % n;
        let mut may_open = true;
        for i in 0..n {
            let index = (first + i) % n;
            let Some(mut seat) = try_lock(&self.seats[index]) else {
                continue;
            };
            match &*seat {
                Seat::Open(_) => return Some(seat),
                Seat::Opening => {}
                Seat::Failed(at) if at.elapsed() < RETRY_OPEN_AFTER => {}
                Seat::Empty | Seat::Failed(_) if may_open => {
                    may_open = false;
                    self.open_in_background(index, &mut seat);
                }
                Seat::Empty | Seat::Failed(_) => {}
            }
        }
        None
    }

    /// Opens a connection for seat `index` on a thread of its own, if the budget and the process's openers allow.
    fn open_in_background(self: &Arc<Self>, index: usize, seat: &mut Seat) {
        let Some(opener) = Opener::take() else {
            return;
        };
        let permit = match &self.budget {
            Some(budget) => match budget.take_owned() {
                Some(permit) => Some(permit),
                None => return,
            },
            None => None,
        };
        *seat = Seat::Opening;
        let set = self.clone();
        let opened = spawn("quicklite-open", move || {
            let _opener = opener;
            let opened = KeptSnapshot::open(&set.path, &set.config, &set.shared);
            let mut seat = lock(&set.seats[index]);
            *seat = match opened {
                Ok(snapshot) if set.closed.load(Ordering::Acquire) => {
                    snapshot.close(&set.shared);
                    Seat::Empty
                }
                Ok(snapshot) => Seat::Open(Box::new(OwnConnection {
                    snapshot,
                    last_used: Instant::now(),
                    writer_seat_taken_at: None,
                    _permit: permit,
                })),
                Err(e) => {
                    tracing::debug!(error = %e, "no connection for reads on callers' threads");
                    Seat::Failed(Instant::now())
                }
            };
            drop(seat);
            set.tend();
        });
        if let Err(e) = opened {
            tracing::debug!(error = %e, "no thread to open a connection for reads on callers' threads");
            *seat = Seat::Failed(Instant::now());
        }
    }

    /// Has the janitor tend this set, if it does not already.
    fn tend(self: &Arc<Self>) {
        if !self.tended.load(Ordering::Relaxed) && !self.tended.swap(true, Ordering::AcqRel) {
            janitor::tend(Arc::downgrade(self));
        }
    }

    /// Ends snapshots unused for `idle` (or older than the snapshot age bound) and closes connections unused for
    /// `close_after`; returns what the set still keeps.
    fn sweep(&self, now: Instant, idle: Duration, close_after: Duration) -> Kept {
        let mut kept = Kept::default();
        for seat in self.seats.iter() {
            let Some(mut seat) = try_lock(seat) else {
                kept.busy();
                continue;
            };
            if let Seat::Open(own) = &mut *seat {
                let unused = now.saturating_duration_since(own.last_used);
                if unused >= close_after || self.closed.load(Ordering::Acquire) {
                    if let Seat::Open(own) = std::mem::replace(&mut *seat, Seat::Empty) {
                        own.snapshot.close(&self.shared);
                    }
                    continue;
                }
                let old = own.snapshot.began().is_some_and(|began| {
                    now.saturating_duration_since(began) >= self.config.read_snapshot_max_age
                });
                if unused >= idle || old {
                    own.snapshot.end(&self.shared);
                } else {
                    own.snapshot.flush(&self.shared);
                }
            }
            kept = kept.or(Kept::of(&seat));
        }
        if let Some(writer_seat) = &self.writer_seat
            && writer_seat.sweep(&self.shared, now, idle, self.config.read_snapshot_max_age)
        {
            kept.busy();
        }
        kept
    }

    /// What the set keeps now (a seat in use counts as a connection with a snapshot).
    fn kept(&self) -> Kept {
        let mut kept = self.seats.iter().fold(Kept::default(), |kept, seat| {
            kept.or(match try_lock(seat) {
                Some(seat) => Kept::of(&seat),
                None => Kept::BUSY,
            })
        });
        if self
            .writer_seat
            .as_ref()
            .is_some_and(|writer_seat| writer_seat.keeps_snapshot())
        {
            kept.busy();
        }
        kept
    }

    /// Adds the reads counted on idle connections to the shared metrics (a connection in use adds its own later).
    pub(crate) fn flush_counts(&self) {
        for seat in self.seats.iter() {
            if let Some(mut seat) = try_lock(seat)
                && let Seat::Open(own) = &mut *seat
            {
                own.snapshot.flush(&self.shared);
            }
        }
        if let Some(writer_seat) = &self.writer_seat {
            writer_seat.flush(&self.shared);
        }
    }

    /// Closes every connection (waiting for reads running on them): no read runs here afterwards.
    pub(crate) fn close(&self) {
        self.closed.store(true, Ordering::Release);
        for seat in self.seats.iter() {
            let mut seat = lock(seat);
            if let Seat::Open(own) = std::mem::replace(&mut *seat, Seat::Empty) {
                own.snapshot.close(&self.shared);
            }
        }
    }
}
