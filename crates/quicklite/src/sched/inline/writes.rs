//! Writes on their callers' threads: a short write that finds the writer idle runs where it is awaited, on the
//! writer's own connection, without a hand-off.
//!
//! Group commit repays the hand-off to the writer thread when writes come together; a write that finds the writer
//! waiting for work has no one to share its commit with, and the hand-off — the writer woken, the answer sent
//! back — costs more than the write. So while the writer waits it lends its connection ([`WriterSeat`](crate::engine::seat::WriterSeat)) to writes
//! as well as reads; a write of a call site that ran short lately ([`Config::inline_write_max`](crate::config::Config::inline_write_max)) takes it, runs in a
//! transaction of its own — a closure between `BEGIN IMMEDIATE` and `COMMIT`, a statement in autocommit mode, as on
//! the writer ([`group::run_inline`]) — and is answered at once. A write that finds another caller's write
//! running there waits for it, briefly ([`WRITE_ENDS_WITHIN`]): under a steady load of writes one by one, many
//! come while another runs, and each that went to the writer had it woken, answering and spinning for a next write,
//! holding the connection meanwhile from the writes behind it (docs/design.md). Everything else goes to the writer's
//! queue, as before: a write that finds writes queued (group commit serves it best with them), a write while the
//! connection is in use past that wait (another caller's write that runs on, a read, or the writer's own
//! turn — the writer takes over as soon as writes queue), the first writes of a call site, a write that
//! would find a checkpoint due ([`WriterSeat::takes_writes`](crate::engine::seat::WriterSeat::takes_writes): the writer runs it after the write, in its turn), one
//! past its deadline (the writer answers it), one that would start the WAL over (every frame checkpointed: SQLite
//! syncs a new WAL's header even under `synchronous=NORMAL`), and every write while another connection contends for
//! the write lock, and every write while the writes run here keep the connection busy and their tasks wait for their
//! turns: many tasks on few workers each finding the writer idle, whose writes group commit would serve. A closure
//! that finds the lock held goes to the writer unrun; a statement cannot (its parameters
//! are bound as it meets the lock), so it waits for the lock here as it would on the writer — up to its deadline or
//! `write_lock_wait` — once the runtime's worker has gone to another thread. A write's commit is witnessed on the
//! writer's connection whoever runs it: read-your-writes and change notices hold, and the writer learns of the
//! commits at its next turn.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use crate::cost::Site;
use crate::engine::group;
use crate::engine::seat::Lent;
use crate::engine::write::GROUPED_AT;
use crate::request::{Ran, WriteRequest};
use crate::util::Coarse;

use super::{Attempt, Inline, hand_off};

/// How long a write that finds another caller's write on the lent connection waits for it to end, rather than go
/// to the writer thread: about what the writer's wake-up and the answer's way back cost (a write of a call site
/// that ran short takes a fraction of it).
const WRITE_ENDS_WITHIN: Duration = Duration::from_micros(50);

impl Inline {
    /// Whether a write of `site` (a write `closure`, or a statement helper's) should run on its caller's thread
    /// now, and on what grounds: the writer lends its connection (it waits for work, and writes may run there), the
    /// application allows it ([`Config::inline_writes`](crate::config::Config::inline_writes), and
    /// [`Config::inline_write_closures`](crate::config::Config::inline_write_closures) for a closure), the runtime
    /// goes on without this thread should the write turn long, no other connection contends for the write lock,
    /// writes do not come together, and the site has run short lately.
    ///
    /// Writes come together, here, when those run here keep the connection busy at least half the time
    /// ([`WriterSeat::writes_busy`](crate::engine::seat::WriterSeat::writes_busy)) and the tasks of the last few
    /// still wait for their turns ([`Inline::wrote`]): many tasks writing on few workers (one, in a service on one
    /// CPU) each find the writer idle — the others wait for their worker, not for the writer — and would each
    /// commit alone, one after the other, where the writer commits them together. (A task writing in a loop keeps
    /// the connection busy too, but alone: it has no one to share a commit with.)
    pub(crate) fn suits_write(&self, site: Site, closure: bool) -> Option<Attempt> {
        let writer_seat = self.writer_seat.as_ref()?;
        if !self.config.inline_writes
            || (closure && !self.config.inline_write_closures)
            || (self.wrote_awaiting_turn.load(Ordering::Relaxed) + 1 >= GROUPED_AT
                && writer_seat.writes_busy())
            || !writer_seat.lent()
            || !writer_seat.takes_writes(self.shared.metrics.wal_frames.load(Ordering::Relaxed))
            || self.closed.load(Ordering::Relaxed)
            || self.shared.write_lock_contended()
            || !hand_off::can_hand_off()
        {
            return None;
        }
        let ran_on = self
            .shared
            .costs
            .decide(site, self.config.inline_write_max)?;
        Some(Attempt { site, ran_on })
    }

    /// Runs `request` here, on the writer's connection, and answers it (its answer waits on its receiver), if the
    /// connection is lent and free (or another caller's write on it ends within [`WRITE_ENDS_WITHIN`], while writes
    /// do not keep it busy), no checkpoint is due, the request is not past its deadline, the write would not
    /// start the WAL over, and — for a closure — the write lock can be had at once (then returns `None`); otherwise
    /// gives it back, not run, for the writer's queue. A statement waits for the lock here ([`group::run_inline`]).
    pub(crate) fn write(
        self: &Arc<Self>,
        attempt: Attempt,
        mut request: WriteRequest,
    ) -> Option<WriteRequest> {
        let Some(writer_seat) = &self.writer_seat else {
            return Some(request);
        };
        if request
            .deadline
            .is_some_and(|deadline| deadline.passed(Instant::now()))
        {
            return Some(request);
        }
        // While writes keep it busy, they come together: the writer serves them best, and a wait here would only
        // hold a worker.
        let wait = if writer_seat.writes_busy() {
            Duration::ZERO
        } else {
            WRITE_ENDS_WITHIN
        };
        let Some(mut lent) = writer_seat.borrow_for_write(wait) else {
            return Some(request);
        };
        let metrics = &self.shared.metrics;
        if !writer_seat.takes_writes(metrics.wal_frames.load(Ordering::Relaxed)) {
            return Some(request);
        }
        let started = Instant::now();
        let past: fn() -> bool = hand_off::hand_off;
        let (ran, ended) = writer_seat.write(&mut lent, started, |lent: &mut Lent| {
            let ran = lent.snapshot.write(&self.shared, |conn| {
                group::run_inline(
                    conn,
                    &self.shared,
                    &mut request,
                    Some(past),
                    self.config.write_lock_wait,
                )
            });
            lent.last_used = Coarse::now();
            ran
        });
        drop(lent);
        let (ran, outcome) = match ran {
            Ok(ran) => ran,
            Err(_not_run) => return Some(request),
        };
        let took = ended - started;
        metrics.writes.fetch_add(1, Ordering::Relaxed);
        metrics.inline_writes.fetch_add(1, Ordering::Relaxed);
        if request.job.answer(outcome) {
            metrics.write_errors.fetch_add(1, Ordering::Relaxed);
        }
        // A panic's time is the panic hook's as much as the write's: it says nothing of what the site costs.
        if ran != Ran::Panicked {
            self.shared.costs.record(
                attempt.site,
                took,
                self.config.inline_write_max,
                attempt.ran_on,
            );
        }
        self.tend();
        None
    }

    /// Whether writes on the lent connection keep it busy ([`WriterSeat::writes_busy`](crate::engine::seat::WriterSeat::writes_busy)).
    pub(crate) fn writes_busy(&self) -> bool {
        self.writer_seat
            .as_ref()
            .is_some_and(|seat| seat.writes_busy())
    }

    /// Counts a task whose write ran here among those waiting for their turn, until the guard drops (the turn
    /// taken, or the caller gone).
    pub(crate) fn wrote(&self) -> AwaitingTurn<'_> {
        self.wrote_awaiting_turn.fetch_add(1, Ordering::Relaxed);
        AwaitingTurn(&self.wrote_awaiting_turn)
    }
}

/// A task whose write ran on its caller's thread, counted while it waits for its turn ([`Inline::wrote`]).
pub(crate) struct AwaitingTurn<'a>(&'a AtomicUsize);

impl Drop for AwaitingTurn<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}
