//! The caller's thread as a scheduler: short reads run where they are awaited, without a hand-off.
//!
//! Handing a read to a reader thread and its answer back costs more than a point read (docs/design.md). So a read
//! whose call site has lately run within [`Config::inline_read_max`] ([`crate::cost`]) runs on the thread that
//! polls it, on one of a few read-only connections of the database's own ([`Config::inline_connections`]), inside
//! the snapshot that connection keeps from one read to the next ([`KeptSnapshot`]) — a statement helper's read,
//! or a read closure's where the application allows it ([`Config::inline_read_closures`]), and only where the async
//! runtime goes on without the thread ([`hand_off::can_hand_off`]). Everything else goes to the reader threads or
//! the pool: the first reads of a call site, reads of one that ran long lately, reads while every connection is
//! busy or still opening (a connection opens on a thread of its own: the set-up hook, a SQLCipher key's derivation
//! and the PRAGMAs are no work for an async worker).
//!
//! Every run here has a bound it enforces while it runs, not only a cost learnt afterwards: past
//! [`LONG_AFTER`](crate::engine::bound::LONG_AFTER) the runtime's worker goes to another thread, and the read takes
//! its turn among the process's long reads ([`crate::engine::bound`]), and the
//! writer never waits long for a read on its lent connection ([`crate::engine::seat`]).
//!
//! A thread takes the connection its number points at, or the next one free; a connection is held only while one
//! read runs on it, so no thread ever waits for another here. Where that connection's page cache is cold — the
//! database was written since its last snapshot began, and SQLite threw the cache away — a standalone database's
//! statement read takes the writer's connection instead if the writer is waiting for work ([`WriterSeat`]): the
//! one connection whose cache commits leave warm. Before it runs, a read (or write) takes a turn on the runtime if
//! its task ran the last request on this thread ([`owes_turn`], [`take_turn`], [`Inline::turn`]): a task reading in
//! a loop then takes its turn with the others like a task awaiting a reader thread's answer, and while writes wait
//! for the writer every read takes one, so that the tasks its answers wake and the runtime's timers never wait
//! behind a run of reads (docs/design.md has the measurements behind the choice). An
//! idle connection's snapshot is ended by the [`janitor`] within [`janitor::PERIOD`], so that it holds no
//! checkpoint back; a connection unused for [`janitor::CLOSE_AFTER`] is closed.
//!
//! While another connection contends for the write lock (another process committing, [`Shared::write_lock_contended`]),
//! every read goes to the reader threads or the pool. Reads run inline without pause keep the runtime's threads busy,
//! and so the writes' callers, on the same threads, send their next writes late: the writer goes idle between its
//! groups, and the other connection, which takes the lock in any moment the writer leaves it free, keeps it. Beside
//! a Python process committing back to back, with eight tasks writing and eight reading, quicklite was left a tenth
//! of the commits (issue 45; docs/design.md has the figures).

mod hand_off;
mod janitor;
mod seats;
mod writes;

use std::cell::Cell;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::Poll;
use std::time::{Duration, Instant};

use crossbeam_utils::CachePadded;
use rusqlite::Connection;

use crate::Result;
use crate::config::Config;
use crate::cost::{RanOn, Site};
use crate::engine::Shared;
use crate::engine::seat::{Lent, WriterSeat};
use crate::engine::snapshot::KeptSnapshot;
use crate::permits::Permits;
use crate::request::Deadline;
use crate::util::{Coarse, lock, spawn};
use seats::{Kept, OwnConnection, RETRY_OPEN_AFTER, Seat, try_lock};

/// One inline read in this many records its cost (every one that ran past the bound does).
const SAMPLE_EVERY: u32 = 16;

/// A read to run on its caller's thread: its call site, and on what grounds it runs there.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Attempt {
    site: Site,
    ran_on: RanOn,
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
    /// Tasks whose write ran here and that wait for their turn ([`Inline::wrote`]).
    wrote_awaiting_turn: AtomicUsize,
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

/// Where a task that runs inline goes while others take their turns ([`take_turn`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Turn {
    /// Behind the tasks ready on its worker: it wakes itself and returns to the runtime once, as a task whose
    /// cooperative budget ran out does.
    Worker,
    /// Behind every task of the runtime, its timers and its I/O (tokio's `yield_now`: the worker runs the task
    /// again only once it finds nothing else to run, anywhere).
    Runtime,
}

thread_local! {
    /// The task that last ran a request on this thread (or was about to: [`runs_here`]).
    static LAST_HERE: Cell<Option<tokio::task::Id>> = const { Cell::new(None) };
}

/// Whether this task owes the runtime a turn before it runs a request on this thread: the last one that ran here
/// was its own, with none of another task's since — it may still be in the poll that ran it, and a task running
/// request after request there would hold the worker. A task that finds another's request the last one here was
/// polled after that task's, behind it: it has had its turn, and runs its first request at once, as a blocking
/// call would (a yield asks the runtime to wake a sleeping worker to look for the task: a request a new task makes,
/// as a service's handler does, paid that wake-up and a second poll for nothing). Outside a task (the thread of
/// `Runtime::block_on`, which serves no other task), never.
pub(crate) fn owes_turn() -> bool {
    let this = tokio::task::try_id();
    this.is_some() && LAST_HERE.get() == this
}

/// Notes that this task runs a request on this thread now, after its turn if it owed one ([`owes_turn`]).
pub(crate) fn runs_here() {
    LAST_HERE.set(tokio::task::try_id());
}

/// Waits for this task's turn to run inline (`turn` says behind whom).
///
/// A read on the caller's thread costs about as much as a yield; a task that read without yielding would hold its
/// worker for as long as it has reads to make (a task's cooperative budget, 128 of them, is a quarter of a
/// millisecond), and every task woken meanwhile — an answer from the writer, a timer — would wait behind it.
/// Yielding before every read measured faster than yielding after each slice of reads on a thread (10 µs), with
/// the runtime's lateness no worse (docs/design.md).
pub(crate) async fn take_turn(turn: Turn) {
    match turn {
        Turn::Runtime => tokio::task::yield_now().await,
        Turn::Worker => {
            let mut woken = false;
            std::future::poll_fn(|cx| {
                if woken {
                    return Poll::Ready(());
                }
                woken = true;
                cx.waker().wake_by_ref();
                Poll::Pending
            })
            .await;
        }
    }
}

impl Inline {
    /// Behind whom a task that runs inline now takes its turn: while writes wait for the writer (`writes_queued`,
    /// or the writer in a turn), behind every task of the runtime — the writer wakes their callers from its thread,
    /// and tasks woken from another thread wait for a worker to look beyond its own — else behind its worker's: to
    /// find out that nothing else waits, `yield_now` makes the worker look for work to steal, poll its I/O driver (a
    /// system call) and wake a sleeping worker to look as well, at every read and write of a task alone.
    pub(crate) fn turn(&self, writes_queued: bool) -> Turn {
        let writer_busy = self.writer_seat.as_ref().is_some_and(|seat| !seat.lent());
        if writes_queued || writer_busy {
            Turn::Runtime
        } else {
            Turn::Worker
        }
    }

    /// The set for the database at `path`; `budget` bounds its connections together with other databases'; reads
    /// may also take the writer's connection at `writer_seat` while the writer waits.
    pub(crate) fn new(
        path: PathBuf,
        config: Config,
        shared: Arc<Shared>,
        budget: Option<Arc<Permits>>,
        writer_seat: Option<Arc<WriterSeat>>,
    ) -> Arc<Inline> {
        // A read replica's inline reads have no connections of their own: its one connection is the writer's
        // (`sched::threads`), lent at `writer_seat`.
        let own = match config.replica {
            Some(_) => 0,
            None => config.inline_connections.max(1),
        };
        let seats = (0..own)
            .map(|_| CachePadded::new(Mutex::new(Seat::Empty)))
            .collect();
        Arc::new(Inline {
            path,
            config,
            shared,
            seats,
            budget,
            writer_seat,
            wrote_awaiting_turn: AtomicUsize::new(0),
            closed: AtomicBool::new(false),
            tended: AtomicBool::new(false),
        })
    }

    /// Whether a read of `site` should run inline, and on what grounds ([`Costs::decide`](crate::cost::Costs::decide)):
    /// the site has run lately within the bound, or the read probes it — where the runtime can go on without this
    /// thread should the read turn long ([`hand_off::can_hand_off`]), for a read closure (`closure`) only if the
    /// application says its closures may run there ([`Config::inline_read_closures`]), and never while another
    /// connection contends for the write lock ([`Shared::write_lock_contended`]).
    pub(crate) fn suits(&self, site: Site, closure: bool) -> Option<Attempt> {
        if self.closed.load(Ordering::Relaxed)
            || (closure && !self.config.inline_read_closures)
            || self.shared.write_lock_contended()
            || !hand_off::can_hand_off()
        {
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
    /// Only the statement helpers' reads (`on_writer`) go to the writer's connection: a read closure could change
    /// the connection it is given in ways no guard sees (its functions, its limits), which must not reach the
    /// writer.
    pub(crate) fn run<T, F>(
        self: &Arc<Self>,
        attempt: Attempt,
        deadline: Option<Deadline>,
        on_writer: bool,
        f: F,
    ) -> std::result::Result<Result<T>, F>
    where
        F: FnOnce(&Connection) -> rusqlite::Result<T>,
    {
        // Read-your-writes, and no read older than one already made: one load; a snapshot that may lack a commit
        // visible now ends before this read.
        let visible_seq = self.shared.visible_seq();
        let mut seat = self.free_seat();
        let stay = matches!(seat.as_deref(), Some(Seat::Open(own))
            if own.snapshot.warm(visible_seq) || own.writer_seat_taken_at == Some(visible_seq));
        if !stay
            && on_writer
            && let Some(writer_seat) = &self.writer_seat
        {
            if let Some(mut lent) = writer_seat.borrow() {
                drop(seat);
                let Lent {
                    snapshot,
                    last_used,
                    ..
                } = &mut *lent;
                let out = self.read_on(snapshot, last_used, attempt, deadline, visible_seq, f);
                if writer_seat.wanted_back() {
                    // The writer wants it back, or writes on its other connection meanwhile: no snapshot may stay
                    // open here to hold its checkpoints back.
                    snapshot.end(&self.shared);
                }
                drop(lent);
                self.tend();
                return out;
            }
            if writer_seat.lent()
                && let Some(Seat::Open(own)) = seat.as_deref_mut()
            {
                own.writer_seat_taken_at = Some(visible_seq);
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
        let out = self.read_on(snapshot, last_used, attempt, deadline, visible_seq, f);
        drop(seat);
        self.tend();
        out
    }

    /// Runs `f` on `snapshot`'s connection (see [`Inline::run`]), with the runtime's worker handed to another
    /// thread should it run past [`LONG_AFTER`](crate::engine::bound::LONG_AFTER), and learns what its site costs.
    fn read_on<T, F>(
        &self,
        snapshot: &mut KeptSnapshot,
        last_used: &mut Coarse,
        attempt: Attempt,
        deadline: Option<Deadline>,
        visible_seq: u64,
        f: F,
    ) -> std::result::Result<Result<T>, F>
    where
        F: FnOnce(&Connection) -> rusqlite::Result<T>,
    {
        let past: fn() -> bool = hand_off::hand_off;
        // A panic's time is the panic hook's as much as the read's: it says nothing of what the site costs. Of the
        // others, a sample is timed and recorded (threads writing one site's entry on every read would pass its cache
        // line back and forth; and the fine clock, read twice a read, is a sizeable part of a point read), and every
        // read known to have run past the bound: looked at while it ran, or for a tick of the coarse clock.
        let sampled = SAMPLED.with(|n| {
            n.set(n.get().wrapping_add(1));
            n.get() % SAMPLE_EVERY == 0
        });
        let timed = sampled || attempt.ran_on == RanOn::Probe;
        let read = snapshot.read(
            &self.shared,
            visible_seq,
            &self.config,
            deadline,
            Some(past),
            timed,
            f,
        )?;
        if read.began {
            janitor::snapshot_begun();
        }
        if let Some(ended) = read.ended {
            *last_used = ended;
        }
        if let Some(took) = read.took
            && (timed || took > self.config.inline_read_max)
        {
            self.shared.costs.record(
                attempt.site,
                took,
                self.config.inline_read_max,
                attempt.ran_on,
            );
        }
        Ok(read.result)
    }

    /// An open connection no other thread is using: the one this thread's number points at, or the next free one.
    /// The first seat with no connection met on the way starts opening one.
    fn free_seat(self: &Arc<Self>) -> Option<MutexGuard<'_, Seat>> {
        let n = self.seats.len();
        if n == 0 {
            return None;
        }
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
        let Some(opener) = seats::opener() else {
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
                    last_used: Coarse::now(),
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
        let used_now = Coarse::now();
        let mut kept = Kept::default();
        for seat in self.seats.iter() {
            let Some(mut seat) = try_lock(seat) else {
                kept.busy();
                continue;
            };
            if let Seat::Open(own) = &mut *seat {
                let unused = used_now.since(own.last_used);
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
