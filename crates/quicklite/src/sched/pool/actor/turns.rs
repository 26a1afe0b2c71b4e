//! A pooled database's turns on the pool: a write task, a read task, and what they ask of the connections — opening
//! them, serving a turn, closing them ([`Host`]).

use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use crate::engine::read::Reader;
use crate::engine::write::Close;
use crate::sched::pool::actor::lifecycle::{Host, Opened};
use crate::sched::pool::actor::{Actor, OpenWriter};
use crate::sched::pool::task::{PooledDatabase, Task};
use crate::{Error, Result};

/// Read batches a database serves on its writer's connection, per open, before it opens a reader connection
/// ([`Actor::reads_on`]).
const READS_ON_WRITER: u32 = 8;

/// Where a read task serves its batch ([`Actor::reads_on`]).
enum ReadsOn {
    /// A reader connection of the database's own.
    Reader(Box<Reader>),
    /// The writer's connection; the batch is served.
    Writer,
    /// Nowhere now: the writer is busy and the registry's budget of reader connections is spent.
    NothingFree,
}

impl Actor {
    /// Where this read task serves its batch: an idle reader connection; else the writer's connection if it is
    /// free (then already served); else a new reader connection if the registry's budget allows; else nowhere.
    ///
    /// A database read often gets a reader connection after [`READS_ON_WRITER`] batches on the writer's: each
    /// batch there turns `query_only` on and off, and SQLite expires every prepared statement of the connection
    /// when a flag PRAGMA changes, so the next reads and writes prepare their statements again. A database opened
    /// for a read or two (most of them when thousands are opened and closed in turn) never pays for a second
    /// connection.
    fn reads_on(self: &Arc<Self>) -> Result<ReadsOn> {
        if let Some(reader) = self.readers.lock().pop() {
            return Ok(ReadsOn::Reader(Box::new(reader)));
        }
        let frequent = self.writer_reads.load(Ordering::Relaxed) >= READS_ON_WRITER;
        if !frequent && self.read_on_writer() {
            self.writer_reads.fetch_add(1, Ordering::Relaxed);
            return Ok(ReadsOn::Writer);
        }
        if !self.pool.reserve_reader() {
            return Ok(if frequent && self.read_on_writer() {
                ReadsOn::Writer
            } else {
                ReadsOn::NothingFree
            });
        }
        match Reader::open(&self.path, &self.config, &self.shared, self.read_rx.clone()) {
            Ok(reader) => {
                self.reader_connections.fetch_add(1, Ordering::SeqCst);
                Ok(ReadsOn::Reader(Box::new(reader)))
            }
            Err(e) => {
                self.pool.release_readers(1);
                Err(e)
            }
        }
    }

    /// Serves one batch of reads on the writer's connection, if no write task is running on it; returns whether
    /// it did. A database whose reads find the writer's connection free needs no reader connection: opening one
    /// costs as much again as opening the writer, and holds two more files. A write task that starts meanwhile
    /// waits for the batch to end. Reads that find the writer's connection in use (a database written and read at
    /// once) open a reader connection, which then serves its later reads.
    fn read_on_writer(&self) -> bool {
        let Some(mut slot) = self.life.slot().try_lock() else {
            return false;
        };
        match slot.as_mut() {
            Some(OpenWriter { writer, reads }) => {
                writer.lend_read_only(|conn| reads.serve_turn(conn));
                true
            }
            None => false,
        }
    }
}

impl PooledDatabase for Actor {
    fn name(&self) -> &str {
        &self.name
    }

    fn is_checkpointing(&self) -> bool {
        self.checkpointing.load(Ordering::SeqCst)
    }

    /// When a task last ran, on [`Pool::now_ms`](crate::sched::pool::Pool::now_ms)'s clock.
    fn last_used_ms(&self) -> u64 {
        self.last_used_ms.load(Ordering::Relaxed)
    }

    /// A write task: one group on the writer connection, opening it first if needed ([`Lifecycle::write_turn`]);
    /// a database opened again tells its subscribers of commits from outside.
    ///
    /// [`Lifecycle::write_turn`]: crate::sched::pool::actor::lifecycle::Lifecycle::write_turn
    fn run_write(self: &Arc<Self>) {
        self.life.write_turn(self);
    }

    /// A read task: one batch on a reader connection, opening the database first if needed.
    fn run_read(self: &Arc<Self>) {
        let opened = self.life.open_for_reads(self);
        if let Ok(Opened::Deferred) = opened {
            self.pool.wait_for_room(Task::Read(self.clone()));
            return;
        }
        match opened.and_then(|_| self.reads_on()) {
            Ok(ReadsOn::Reader(mut reader)) => {
                // Kept until the database closes: SQLite keeps the descriptor of a connection closed while another
                // is open on the same file (POSIX locks would be lost with it), so closing it alone frees nothing.
                reader.serve_turn();
                self.readers.lock().push(*reader);
            }
            Ok(ReadsOn::Writer) => {}
            Ok(ReadsOn::NothingFree) => {
                // The write task using the writer's connection serves queued reads before it ends, and looks at the
                // read queue when it ends (`release_write`), scheduling a read task then; if it ended meanwhile,
                // schedule one here.
                self.life.claims.end_read();
                if !self.life.claims.write_scheduled() && !self.read_rx.is_empty() {
                    self.wake_reader();
                }
                self.task_ended.notify_waiters();
                return;
            }
            Err(e) => {
                self.fail_queued(&e);
                self.release_read();
                return;
            }
        }
        self.touch();
        if self.read_rx.is_empty() {
            self.release_read();
        } else {
            self.pool.push(Task::Read(self.clone()));
        }
    }

    /// Open, with no task queued or running: a database that could be closed now.
    fn is_idle(&self) -> bool {
        self.life.is_idle()
    }

    /// Answers every queued request with `error` (the database could not be opened, or the pool is stopped).
    fn fail_queued(&self, error: &Error) {
        if !matches!(error, Error::Closed) {
            tracing::warn!(database = %self.name, %error, "could not open a registry database");
        }
        self.answer_open_waiters(|| Err(error.duplicate()));
        let mut writes = self.life.take_unserved();
        loop {
            for r in writes.drain(..) {
                r.job.answer(Some(error.duplicate()));
            }
            if self.write_rx.try_take(usize::MAX, &mut writes).is_err() {
                break;
            }
        }
        let mut reads = VecDeque::new();
        while self.read_rx.try_take(usize::MAX, &mut reads).is_ok() {
            for r in reads.drain(..) {
                r.job.fail(error.duplicate());
            }
        }
    }

    /// Closes the connections if no task is queued or running ([`Lifecycle::try_close`]).
    ///
    /// [`Lifecycle::try_close`]: crate::sched::pool::actor::lifecycle::Lifecycle::try_close
    fn try_close(self: &Arc<Self>) -> bool {
        self.life.try_close(self)
    }

    /// Closes the connections of a database whose write task waits in the run queue, if no task runs on it
    /// ([`Lifecycle::try_close_queued`]).
    ///
    /// [`Lifecycle::try_close_queued`]: crate::sched::pool::actor::lifecycle::Lifecycle::try_close_queued
    fn try_close_queued(self: &Arc<Self>) -> bool {
        self.life.try_close_queued(self)
    }
}

impl Host for Arc<Actor> {
    type Writer = OpenWriter;

    fn writes_wait(&self) -> bool {
        !self.write_rx.is_empty() || self.has_open_waiters()
    }

    fn reads_wait(&self) -> bool {
        !self.read_rx.is_empty()
    }

    fn read_tasks(&self) -> usize {
        self.config.readers
    }

    fn push_write(&self) {
        self.pool.push(Task::Write(self.clone()));
    }

    fn push_read(&self) {
        self.pool.push(Task::Read(self.clone()));
    }

    fn defer_write(&self) {
        self.pool.wait_for_room(Task::Write(self.clone()));
    }

    fn claims_released(&self) {
        self.made_room();
        self.task_ended.notify_waiters();
    }

    fn reserve_open(&self) -> bool {
        self.pool.reserve_open(&self.name)
    }

    /// Opens the writer; on the first open also runs the migration and keeps the PRAGMAs read back.
    fn open_writer(&self) -> Result<OpenWriter> {
        let first = self.pragmas.get().is_none();
        let (open, pragmas) = match self.connect_writer(first) {
            Ok(opened) => opened,
            Err(e) => {
                self.pool.release_open();
                return Err(e);
            }
        };
        if first {
            let _ = self.pragmas.set(pragmas);
        } else if self.config.external_commits.is_some() {
            // Whatever was committed from outside while the database was closed went unseen.
            self.shared.changes.external();
        }
        self.writer_reads.store(0, Ordering::Relaxed);
        Ok(open)
    }

    fn opened(&self) {
        self.pool.opens.fetch_add(1, Ordering::Relaxed);
        self.touch();
        self.pool.open.lock().insert(self.clone());
        self.answer_open_waiters(|| Ok(()));
    }

    fn found_open(&self) {
        self.answer_open_waiters(|| Ok(()));
    }

    fn serve_turn(&self, open: &mut OpenWriter) -> bool {
        let mut served = open.writer.serve_turn();
        if served {
            self.wal_dirty.store(true, Ordering::Relaxed);
        } else if self.truncate_asked.swap(false, Ordering::Relaxed) {
            // The writer knows whether anything was written since it opened or last truncated.
            if open.writer.idle_truncate_after().is_some() {
                open.writer.truncate_wal();
            }
            self.wal_dirty.store(false, Ordering::Relaxed);
        }
        if !served {
            // Housekeeping wakes the writer of a database that looks for commits from outside.
            open.writer.look_outside_if_due();
        }
        if !self.read_rx.is_empty() && self.reader_connections.load(Ordering::SeqCst) == 0 {
            // Reads that found this task queued or running (and no reader connection to open) ride along.
            let OpenWriter { writer, reads } = open;
            served |= writer.lend_read_only(|conn| reads.serve_turn(conn));
        }
        if served {
            self.touch();
        }
        open.writer.inbox().has_work()
    }

    fn fail_waiting(&self, error: &Error) {
        self.fail_queued(error);
    }

    fn close_readers(&self) {
        let readers = std::mem::take(&mut *self.readers.lock());
        let closed = readers.len();
        drop(readers);
        self.reader_connections.store(0, Ordering::SeqCst);
        self.pool.release_readers(closed);
    }

    fn shut_down(&self, open: OpenWriter, close: Close) {
        open.writer.shut_down(close);
    }

    fn closed(&self) {
        self.pool.open.lock().remove(&self.name);
        self.pool.release_open();
        self.pool.resume_waiting(1);
    }
}
