//! One database on a registry's pool: its queues, its connections while open, and how they close.
//!
//! # Lock order
//!
//! A thread that holds several of these locks took them in this order, and takes none of an earlier rank while it
//! holds a later one:
//!
//! 1. the database's `writer` slot (held by a write task for its turn, by a closer that took every claim, and by the
//!    opening of the connections);
//! 2. another database's `writer` slot — only by a database opening at the cap, which closes another to make room
//!    ([`Pool::reserve_open`]), and only after taking all of that database's claims ([`Claims::take_all`]), so that
//!    no task of it holds its slot or waits for the opener's (a slot that may be held is only ever tried:
//!    `try_lock`);
//! 3. the database's `readers`, `unserved` and `open_waiters`, each taken alone;
//! 4. the pool's open set (`Pool::open`), then its waiting room, then its run queues.
//!
//! Debug builds check it: these locks are [`Ranked`], and taking one while holding one of the same rank or a later
//! one panics (a `try_lock` never waits, so it is allowed anywhere). The run queues' lock is not ranked: the queue
//! takes it inside its own calls and takes none of these meanwhile.
//!
//! Claims are not locks: they are taken with one atomic operation that fails rather than waits ([`Claims`]).
//!
//! [`Claims`]: crate::sched::pool::claims::Claims
//! [`Claims::take_all`]: crate::sched::pool::claims::Claims::take_all
//!
//! How the connections close and reopen while requests keep coming — the writer's slot, the open flag, the requests
//! handed over across a close, the closers and the write task — is [`lifecycle`], model-checked on its own; the actor
//! is its [`Host`](lifecycle::Host), with the SQLite side and the pool's bookkeeping.

pub(crate) mod lifecycle;
mod turns;

use std::collections::{BTreeMap, VecDeque};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use tokio::sync::{Notify, oneshot};

use crate::config::{Checkpointing, Config};
use crate::engine::Shared;
use crate::engine::open::refuse_links;
use crate::engine::read::{BatchedReads, Reader};
use crate::engine::write::{Close, Writer};
use crate::queue;
use crate::request::{ReadRequest, WriteRequest};
use crate::sched::pool::Pool;
use crate::sched::pool::checkpoints::CheckpointsBeside;
use crate::sched::pool::ranked::{Rank, Ranked};
use crate::sched::pool::task::PooledDatabase;
use crate::util::companion;
use crate::{Error, Result};
use lifecycle::{HandsOver, Lifecycle};

/// The writer of an open database, with the reads it serves on its connection while the database has no reader
/// connection.
pub(crate) struct OpenWriter {
    writer: Writer,
    reads: BatchedReads,
}

impl HandsOver for OpenWriter {
    type Request = WriteRequest;

    fn take_unserved(&mut self) -> VecDeque<WriteRequest> {
        self.writer.inbox().take_unserved()
    }

    fn serve_first(&mut self, requests: VecDeque<WriteRequest>) {
        self.writer.inbox().serve_first(requests);
    }
}

/// One database on the pool.
pub(crate) struct Actor {
    pub(crate) name: String,
    path: PathBuf,
    config: Config,
    shared: Arc<Shared>,
    pool: Arc<Pool<Actor>>,
    write_rx: queue::Receiver<WriteRequest>,
    read_rx: queue::Receiver<ReadRequest>,
    /// Filled once, when the writer first opens.
    pragmas: Arc<OnceLock<BTreeMap<String, String>>>,
    /// The writer's slot, the open flag, the claims and the requests handed over across a close: how the
    /// connections close and reopen ([`Lifecycle`]).
    life: Lifecycle<OpenWriter>,
    /// Callers waiting for the database to open ([`Actor::open_now`]); `None` once it is closed for good.
    open_waiters: Ranked<Option<Vec<oneshot::Sender<Result<()>>>>>,
    /// Open reader connections not serving a task right now.
    readers: Ranked<Vec<Reader>>,
    /// Reader connections open (idle or serving), for the write task: with none, it serves queued reads too.
    reader_connections: AtomicUsize,
    /// Read batches served on the writer's connection since it opened.
    writer_reads: AtomicU32,
    /// When a task last served a request, on [`Pool::now_ms`]'s clock.
    last_used_ms: AtomicU64,
    /// Whether writes were committed since the WAL was last truncated.
    wal_dirty: AtomicBool,
    /// Whether the next write task should truncate the WAL if it finds nothing to serve.
    truncate_asked: AtomicBool,
    /// Whether a `PASSIVE` checkpoint thread of its writer runs ([`CheckpointsBeside`]).
    checkpointing: Arc<AtomicBool>,
    /// Signalled whenever a task ends, for [`Actor::close`].
    task_ended: Notify,
}

impl Actor {
    /// A database of `pool` served from these queues; nothing opens before its first task.
    pub(crate) fn new(
        name: String,
        path: PathBuf,
        config: Config,
        shared: Arc<Shared>,
        pool: Arc<Pool<Actor>>,
        queues: (queue::Receiver<WriteRequest>, queue::Receiver<ReadRequest>),
        pragmas: Arc<OnceLock<BTreeMap<String, String>>>,
    ) -> Arc<Actor> {
        let now = pool.now_ms();
        let (write_rx, read_rx) = queues;
        Arc::new(Actor {
            name,
            path,
            config,
            shared,
            pool,
            write_rx,
            read_rx,
            pragmas,
            life: Lifecycle::new(),
            open_waiters: Ranked::new(Rank::ActorState, Some(Vec::new())),
            readers: Ranked::new(Rank::ActorState, Vec::new()),
            reader_connections: AtomicUsize::new(0),
            writer_reads: AtomicU32::new(0),
            last_used_ms: AtomicU64::new(now),
            wal_dirty: AtomicBool::new(false),
            checkpointing: Arc::new(AtomicBool::new(false)),
            truncate_asked: AtomicBool::new(false),
            task_ended: Notify::new(),
        })
    }

    /// Schedules a write task unless one is queued or running.
    pub(crate) fn wake_writer(self: &Arc<Self>) {
        self.life.wake_writer(self);
    }

    /// Schedules a read task unless `readers` of them are queued or running.
    pub(crate) fn wake_reader(self: &Arc<Self>) {
        self.life.wake_reader(self);
    }

    /// Opens the database's connections if they are not open (on a pool thread, by a write task); the answer says
    /// whether the database could be opened.
    pub(crate) fn open_now(self: &Arc<Self>) -> oneshot::Receiver<Result<()>> {
        let (tx, rx) = oneshot::channel();
        match self.open_waiters.lock().as_mut() {
            Some(waiters) => waiters.push(tx),
            None => {
                let _ = tx.send(Err(Error::Closed));
                return rx;
            }
        }
        self.wake_writer();
        rx
    }

    /// Answers the callers waiting for the database to open.
    fn answer_open_waiters(&self, result: impl Fn() -> Result<()>) {
        let waiters = match self.open_waiters.lock().as_mut() {
            Some(waiters) if !waiters.is_empty() => std::mem::take(waiters),
            _ => return,
        };
        for waiter in waiters {
            let _ = waiter.send(result());
        }
    }

    fn has_open_waiters(&self) -> bool {
        self.open_waiters
            .lock()
            .as_ref()
            .is_some_and(|w| !w.is_empty())
    }

    /// Whether the connections are open.
    pub(crate) fn is_open(&self) -> bool {
        self.life.is_open()
    }

    /// Whether the database was closed for good ([`Actor::close`]).
    pub(crate) fn is_closed(&self) -> bool {
        self.open_waiters.lock().is_none()
    }

    /// Closed, with nothing queued or scheduled: safe to forget.
    pub(crate) fn is_quiet(&self) -> bool {
        if self.is_closed() {
            return true;
        }
        !self.is_open()
            && self.life.claims.idle()
            && self.write_rx.is_empty()
            && self.read_rx.is_empty()
            && !self.has_open_waiters()
    }

    /// Queued write and read requests.
    pub(crate) fn queued(&self) -> (usize, usize) {
        (
            self.write_rx.len() + self.life.unserved(),
            self.read_rx.len(),
        )
    }

    fn touch(&self) {
        self.last_used_ms
            .store(self.pool.now_ms(), Ordering::Relaxed);
    }

    fn release_read(self: &Arc<Self>) {
        self.life.release_read(self);
    }

    /// Lets a task waiting for room try again if this database could now be closed for it.
    fn made_room(&self) {
        if self.is_idle() {
            self.pool.resume_waiting(1);
        }
    }

    /// Serves what is queued, then closes the connections for good (the queues are closed already). Closing a
    /// closed database returns at once.
    pub(crate) async fn close(self: &Arc<Self>) {
        loop {
            if self.is_closed() {
                return;
            }
            let mut ended = std::pin::pin!(self.task_ended.notified());
            ended.as_mut().enable();
            let (writes, reads) = self.queued();
            let opening = self.has_open_waiters();
            if writes == 0 && reads == 0 && !opening && self.life.claims.take_all() {
                // Both claims stay taken: the queues are closed, nothing may run any more.
                let mut slot = self.life.slot().lock();
                self.open_to_fold_the_wal(&mut slot);
                self.life.close(&mut slot, self, Close::ForGood);
                drop(slot);
                // Callers asking to open from now on hear that the database is closed.
                self.open_waiters.lock().take();
                self.task_ended.notify_waiters();
                return;
            }
            if writes > 0 || opening {
                self.wake_writer();
            }
            if reads > 0 {
                self.wake_reader();
            }
            ended.await;
        }
    }

    /// Opens the writer of a database closed to make room (or when idle) whose WAL still holds commits, so that
    /// closing it for good folds them into the database file, as closing an open one does.
    fn open_to_fold_the_wal(&self, slot: &mut Option<OpenWriter>) {
        let managed = matches!(self.config.checkpointing, Checkpointing::Managed { .. });
        let wal = std::fs::metadata(companion(&self.path, "-wal")).map_or(0, |m| m.len());
        if slot.is_some() || !managed || wal == 0 {
            return;
        }
        match self.connect_writer(false) {
            Ok((open, _)) => *slot = Some(open),
            Err(e) => {
                tracing::warn!(database = %self.name, error = %e, "could not open to checkpoint at close")
            }
        }
    }

    /// Opens the writer's connection (refusing linked files), with the reads it may serve; on the `first` open
    /// also runs the migration and returns the PRAGMAs read back.
    fn connect_writer(&self, first: bool) -> Result<(OpenWriter, BTreeMap<String, String>)> {
        refuse_links(&self.path)?;
        let opened = Writer::open(
            &self.path,
            &self.config,
            &self.shared,
            self.write_rx.clone(),
            first,
        )?;
        let mut writer = opened.writer;
        if writer.manages_checkpoints() && writer.file().is_some() {
            writer.hand_passive_checkpoints_to(Box::new(CheckpointsBeside::new(
                &self.path,
                &self.config,
                self.shared.clone(),
                self.checkpointing.clone(),
            )));
        }
        let open = OpenWriter {
            writer,
            reads: BatchedReads::new(self.read_rx.clone(), &self.config, &self.shared),
        };
        Ok((open, opened.pragmas))
    }

    /// How often the database looks for commits from outside, while it does: it looks for them and someone
    /// subscribes to its changes.
    pub(crate) fn outside_look_interval(&self) -> Option<Duration> {
        self.config
            .external_commits
            .filter(|_| self.shared.changes.has_subscribers())
    }

    /// Asks for the WAL to be truncated if the database has been idle for `idle_for_ms` and its checkpoints are
    /// managed, as a standalone database's writer does when no write arrives for `truncate_when_idle`.
    pub(crate) fn truncate_wal_if_idle(self: &Arc<Self>, idle_for_ms: u64) {
        let Checkpointing::Managed {
            truncate_when_idle: Some(after),
            ..
        } = self.config.checkpointing
        else {
            return;
        };
        let due = u128::from(idle_for_ms) >= after.as_millis();
        if due && self.wal_dirty.load(Ordering::Relaxed) && self.is_idle() {
            self.truncate_asked.store(true, Ordering::Relaxed);
            self.wake_writer();
        }
    }
}
