//! How a pooled database's connections close and reopen while requests keep coming: the writer's slot, the open
//! flag, the requests a closed writer hands over to the next one, and the closers and the write task that use them.
//!
//! A database closes to reopen when it has been idle for a while ([`Lifecycle::try_close`]), or to make room for
//! another at the cap on open databases — even with its write task queued ([`Lifecycle::try_close_queued`]). Three
//! promises hold whatever the interleaving:
//!
//! - a request a writer took from the queue and had not served when the database closed is handed over
//!   (`unserved`) and served by the next writer, before anything queued, exactly once;
//! - a request that arrives while a closer holds the claims is not stranded: the closer gives the write claim back and
//!   then looks at the queue, as a write task does when it ends, so the database is either open and serving it, or
//!   closed with the request queued and a write task scheduled to reopen it;
//! - a closer that gives up changes nothing: the database stays open with its writer, and every claim it took for a
//!   moment is free again, the write queue looked at once more for requests that found it taken.
//!
//! The model checks in `lifecycle/model.rs` explore these over every interleaving, on a fake [`Host`] with the real
//! queue, inbox, claims and locks (`RUSTFLAGS="--cfg quicklite_loom" cargo test -p quicklite --lib model_`). What
//! touches SQLite (opening a writer, serving a turn, closing the readers) and the pool's bookkeeping are the host's:
//! the registry's [`Actor`](super::Actor).

#[cfg(all(test, quicklite_loom))]
mod model;

use std::collections::VecDeque;

use crate::Result;
use crate::engine::write::Close;
use crate::sched::pool::claims::Claims;
use crate::sched::pool::ranked::{Rank, Ranked};
use crate::sync::atomic::{AtomicBool, Ordering};

/// An open writer as the protocol sees it: the requests it took from its queue and has not served, handed over
/// when it closes.
pub(crate) trait HandsOver {
    /// A request of the write queue.
    type Request;
    /// The requests taken and not served, for the next writer.
    fn take_unserved(&mut self) -> VecDeque<Self::Request>;
    /// Serves `requests`, taken by a writer closed since, before anything queued.
    fn serve_first(&mut self, requests: VecDeque<Self::Request>);
}

/// What the protocol asks of the database around it: its queues, the pool's run queues and permits, and the
/// connections themselves.
pub(crate) trait Host {
    /// The open writer.
    type Writer: HandsOver;
    /// Whether writes are queued, or callers wait for the database to open (a write task opens it).
    fn writes_wait(&self) -> bool;
    /// Whether reads are queued.
    fn reads_wait(&self) -> bool;
    /// Most read tasks scheduled at once.
    fn read_tasks(&self) -> usize;
    /// Puts a write task on the run queue; the caller holds the write claim for it.
    fn push_write(&self);
    /// Puts a read task on the run queue; the caller holds a read claim for it.
    fn push_read(&self);
    /// Sets the write task aside until there is room to open the database; it keeps its claim.
    fn defer_write(&self);
    /// A task ended or a closer gave its claims back: whoever waits for that (room to open, closing for good) may
    /// look again.
    fn claims_released(&self);
    /// Reserves a permit under the cap on open databases, closing another database if need be; `false` if none
    /// could be closed now.
    fn reserve_open(&self) -> bool;
    /// Opens the writer (with the permit reserved; given back if it fails).
    fn open_writer(&self) -> Result<Self::Writer>;
    /// The database just opened: it counts among the open ones, and callers waiting for it hear so.
    fn opened(&self);
    /// A write task found the writer in its slot: callers waiting for the database to open hear that it is.
    fn found_open(&self);
    /// Serves one turn of the writer; returns whether it left work behind (taken or queued).
    fn serve_turn(&self, writer: &mut Self::Writer) -> bool;
    /// Answers every request waiting for the database with `error` (it could not be opened).
    fn fail_waiting(&self, error: &crate::Error);
    /// Closes the reader connections (the caller holds every claim).
    fn close_readers(&self);
    /// Closes the writer, whose unserved requests were handed over.
    fn shut_down(&self, writer: Self::Writer, close: Close);
    /// The database, open until now, closed: its permit under the cap is free.
    fn closed(&self);
}

/// Whether [`Lifecycle::ensure_open`] opened the database (or found it open), or must wait for room.
pub(crate) enum Opened {
    Yes,
    Deferred,
}

/// A pooled database's connections as they open and close (see the module documentation).
pub(crate) struct Lifecycle<W: HandsOver> {
    /// Which tasks are scheduled, and whether the connections are being closed.
    pub(crate) claims: Claims,
    /// The writer, while the database is open.
    writer: Ranked<Option<W>>,
    /// Requests a writer took from the queue and had not served when the database was closed with its write task
    /// queued ([`Lifecycle::try_close_queued`]): the next writer serves them first.
    unserved: Ranked<VecDeque<W::Request>>,
    /// Whether the connections are open.
    open: AtomicBool,
}

impl<W: HandsOver> Lifecycle<W> {
    /// Closed, with nothing scheduled.
    pub(crate) fn new() -> Self {
        Lifecycle {
            claims: Claims::default(),
            writer: Ranked::new(Rank::Writer, None),
            unserved: Ranked::new(Rank::ActorState, VecDeque::new()),
            open: AtomicBool::new(false),
        }
    }

    /// The writer's slot, held by a write task for its turn, by reads on the writer's connection and by closers: where
    /// the writer lives while the database is open (a standalone writer keeps its connection on its own thread, and
    /// lends it to reads at a [`WriterSeat`](crate::engine::seat::WriterSeat) only while it waits for work).
    pub(crate) fn slot(&self) -> &Ranked<Option<W>> {
        &self.writer
    }

    /// Whether the connections are open.
    pub(crate) fn is_open(&self) -> bool {
        self.open.load(Ordering::Acquire)
    }

    /// Open, with no task scheduled: a database that could be closed now.
    pub(crate) fn is_idle(&self) -> bool {
        self.is_open() && self.claims.idle()
    }

    /// Requests handed over by a closed writer, not served yet.
    pub(crate) fn unserved(&self) -> usize {
        self.unserved.lock().len()
    }

    /// The requests handed over by a closed writer, to be answered otherwise (the database could not open).
    pub(crate) fn take_unserved(&self) -> VecDeque<W::Request> {
        std::mem::take(&mut *self.unserved.lock())
    }

    /// Whether requests wait for the database: handed over by a closed writer, queued, or waiting for it to open.
    fn has_work(&self, host: &impl Host<Writer = W>) -> bool {
        let unserved = !self.unserved.lock().is_empty();
        unserved || host.writes_wait() || host.reads_wait()
    }

    /// Schedules a write task unless one is queued or running.
    pub(crate) fn wake_writer(&self, host: &impl Host<Writer = W>) {
        if self.claims.schedule_write() {
            host.push_write();
        }
    }

    /// Schedules a read task unless as many as allowed are queued or running.
    pub(crate) fn wake_reader(&self, host: &impl Host<Writer = W>) {
        if self.claims.schedule_read(host.read_tasks()) {
            host.push_read();
        }
    }

    /// Gives the write claim back, then schedules tasks for what came meanwhile.
    pub(crate) fn release_write(&self, host: &impl Host<Writer = W>) {
        self.claims.end_write();
        // A request queued after the last look but before the claim was given back found it taken: look again.
        if host.writes_wait() {
            self.wake_writer(host);
        }
        // Reads that found the writer busy and no reader connection to open wait for this.
        if host.reads_wait() {
            self.wake_reader(host);
        }
        host.claims_released();
    }

    /// Gives a read claim back, then schedules a read task for reads that came meanwhile.
    pub(crate) fn release_read(&self, host: &impl Host<Writer = W>) {
        self.claims.end_read();
        if host.reads_wait() {
            self.wake_reader(host);
        }
        host.claims_released();
    }

    /// Closes the connections (the caller holds both claims and the writer's slot): readers first, then the writer,
    /// whose unserved requests go to the next one.
    pub(crate) fn close(&self, slot: &mut Option<W>, host: &impl Host<Writer = W>, close: Close) {
        host.close_readers();
        if let Some(mut writer) = slot.take() {
            self.unserved.lock().extend(writer.take_unserved());
            host.shut_down(writer, close);
        }
        if self.open.swap(false, Ordering::AcqRel) {
            host.closed();
        }
    }

    /// Closes the connections if no task is queued or running, taking both claims meanwhile so none can start.
    /// Returns whether it closed them. Requests that arrive meanwhile wait in their queues; they reopen the
    /// database when the claims are released.
    pub(crate) fn try_close(&self, host: &impl Host<Writer = W>) -> bool {
        if !self.is_open() {
            return false;
        }
        if !self.claims.take_all() {
            // A request that came while the write claim was held for a moment found it taken: look again.
            if host.writes_wait() {
                self.wake_writer(host);
            }
            return false;
        }
        // Taken by housekeeping, or by a database opening at the cap that holds its own slot (lock order, rank 2).
        self.close(
            &mut self.writer.lock_at(Rank::OtherWriter),
            host,
            Close::ToReopen,
        );
        self.claims.reopen_reads();
        if host.reads_wait() {
            self.wake_reader(host);
        }
        self.release_write(host);
        true
    }

    /// Closes the connections of a database whose write task waits in the run queue, if no task runs on it and no
    /// read task is queued; returns whether it closed them. The queued write task reopens the database when its
    /// turn comes (one whose turn comes meanwhile waits for the writer's slot, then finds it empty), and serves
    /// first what its writer had taken and not served.
    pub(crate) fn try_close_queued(&self, host: &impl Host<Writer = W>) -> bool {
        if !self.is_open() {
            return false;
        }
        // Held by a running write task, or by reads on the writer's connection.
        let Some(mut slot) = self.writer.try_lock() else {
            return false;
        };
        if slot.is_none() || !self.claims.shut_reads() {
            return false;
        }
        self.close(&mut slot, host, Close::ToReopen);
        drop(slot);
        self.claims.reopen_reads();
        if host.reads_wait() {
            self.wake_reader(host);
        }
        true
    }

    /// Opens the writer into `slot` if it is not open, its first requests those a closed writer handed over —
    /// unless the registry is at its cap on open databases and none can be closed now, in which case opening waits
    /// ([`Opened::Deferred`]).
    pub(crate) fn ensure_open(
        &self,
        slot: &mut Option<W>,
        host: &impl Host<Writer = W>,
    ) -> Result<Opened> {
        if slot.is_some() {
            host.found_open();
            return Ok(Opened::Yes);
        }
        if !host.reserve_open() {
            return Ok(Opened::Deferred);
        }
        let mut writer = host.open_writer()?;
        writer.serve_first(std::mem::take(&mut *self.unserved.lock()));
        *slot = Some(writer);
        self.open.store(true, Ordering::Release);
        host.opened();
        Ok(Opened::Yes)
    }

    /// Opens the database for a read task, if it is not open.
    pub(crate) fn open_for_reads(&self, host: &impl Host<Writer = W>) -> Result<Opened> {
        if self.is_open() {
            Ok(Opened::Yes)
        } else {
            self.ensure_open(&mut self.writer.lock(), host)
        }
    }

    /// A write task: one turn on the writer, opening it first if needed — and only if there is work for it:
    /// housekeeping wakes the writer of an open database (to look for commits from outside, to truncate the WAL),
    /// and one closed meanwhile has nothing to open for. A turn that leaves work behind puts the task back on the
    /// run queue, still holding the write claim; one that leaves none gives the claim back.
    pub(crate) fn write_turn(&self, host: &impl Host<Writer = W>) {
        let more = {
            let mut slot = self.writer.lock();
            if slot.is_none() && !self.has_work(host) {
                drop(slot);
                self.release_write(host);
                return;
            }
            match self.ensure_open(&mut slot, host) {
                Ok(Opened::Yes) => {}
                Ok(Opened::Deferred) => {
                    drop(slot);
                    host.defer_write();
                    return;
                }
                Err(e) => {
                    drop(slot);
                    host.fail_waiting(&e);
                    self.release_write(host);
                    return;
                }
            }
            host.serve_turn(slot.as_mut().expect("the writer was just opened"))
        };
        if more {
            // To the back of the run queue: every other database with work gets a turn first.
            host.push_write();
        } else {
            self.release_write(host);
        }
    }
}
