//! Databases as actors on a shared, bounded thread pool (the engine behind [`Registry`](crate::Registry)).
//!
//! Each database keeps the queues and the group-commit / batched-read logic of a standalone [`Database`]; what
//! changes is who runs them. Instead of a writer thread and reader threads of its own, a database with queued
//! work puts a *task* on the pool's run queue: a write task serves one group (or one request that runs alone) on
//! the database's writer connection, a read task one batch of reads on one of its reader connections. A database
//! has at most one write task at a time, so its writes stay serialized, and at most `readers` read tasks. A task
//! that leaves work behind goes to the back of the run queue instead of looping, so a busy database cannot starve
//! the others: every database with work gets a turn per round.
//!
//! Connections open on a database's first task and close when it has been idle for a while, or when the number of
//! open databases passes its cap (least recently used first). Closing takes both roles (no task may run), so a
//! request that arrives meanwhile waits in its queue and reopens the database when the roles are released.

use std::collections::{HashMap, VecDeque};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc::SyncSender;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, PoisonError};
use std::time::Instant;

use async_channel::{Receiver, Sender};
use tokio::sync::Notify;

use crate::Error;
use crate::builder::Config;
use crate::database::{State, open_reader, open_writer};
use crate::queue;
use crate::reader::Reader;
use crate::request::{ReadRequest, WriteRequest};
use crate::writer::Writer;

/// Open databases sampled to choose one to close (see [`PoolShared::evict_for`]).
const SAMPLED: usize = 16;

/// Samples drawn before falling back to a scan of every open database, when all sampled ones are busy.
const DRAWS: usize = 4;

/// The open databases, in a vector for sampling at random, with each one's place by name for removal.
#[derive(Default)]
struct OpenSet {
    actors: Vec<Arc<Actor>>,
    places: HashMap<String, usize>,
}

impl OpenSet {
    fn insert(&mut self, actor: Arc<Actor>) {
        if !self.places.contains_key(&actor.name) {
            self.places.insert(actor.name.clone(), self.actors.len());
            self.actors.push(actor);
        }
    }

    fn remove(&mut self, name: &str) {
        if let Some(place) = self.places.remove(name) {
            self.actors.swap_remove(place);
            if let Some(moved) = self.actors.get(place) {
                self.places.insert(moved.name.clone(), place);
            }
        }
    }

    /// Up to `n` distinct open databases at pseudo-random places.
    fn sample(&self, n: usize, seed: u64) -> Vec<Arc<Actor>> {
        sample_places(self.actors.len(), n, seed)
            .map(|place| self.actors[place].clone())
            .collect()
    }
}

/// `n` distinct places in `0..len` (all of them if `len <= n`), spread pseudo-randomly by `seed`: a start and a
/// stride coprime with `len`.
fn sample_places(len: usize, n: usize, seed: u64) -> impl Iterator<Item = usize> {
    let mut x = seed.wrapping_add(1).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    x ^= x >> 29;
    let (start, mut stride) = if len <= n {
        (0, 1)
    } else {
        ((x % len as u64) as usize, (x >> 32) as usize % len)
    };
    while len > n && (stride == 0 || gcd(stride, len) != 1) {
        stride = (stride + 1) % len;
    }
    (0..n.min(len)).map(move |i| (start + i * stride) % len)
}

fn gcd(mut a: usize, mut b: usize) -> usize {
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}

/// Closes one of `candidates`: the least recently used idle one, else the most recently used one whose work
/// waits in the run queue. Returns whether it closed one.
fn close_one(candidates: &mut [Arc<Actor>]) -> bool {
    candidates.sort_by_key(|a| a.last_used_ms());
    candidates.iter().any(|a| a.try_close())
        || candidates.iter().rev().any(|a| a.try_close_queued())
}

/// `read_tasks` while the database is being closed: no read task may start.
const CLOSING: usize = usize::MAX / 2;

/// Whether [`Actor::ensure_writer`] opened (or found open) the database, or must wait for room.
enum Opened {
    Yes,
    Deferred,
}

/// A unit of work on the pool.
pub(crate) enum Task {
    Write(Arc<Actor>),
    Read(Arc<Actor>),
}

/// What the pool's threads and the registry share.
pub(crate) struct PoolShared {
    /// The run queue of write tasks.
    writes: Sender<Task>,
    /// The run queue of read tasks: reads have threads of their own, so writes that hold their thread for long
    /// (a slow closure, a commit waiting for the disk) never leave reads without one.
    reads: Sender<Task>,
    /// Databases with open connections.
    open: Mutex<OpenSet>,
    /// Cap on open databases, enforced by the registry's housekeeping thread.
    pub(crate) max_open: usize,
    /// Wakes the housekeeping thread (when the cap is passed); a full channel means a wake-up is pending already.
    wake: SyncSender<()>,
    pub(crate) opens: AtomicU64,
    pub(crate) evictions: AtomicU64,
    pub(crate) idle_closes: AtomicU64,
    /// Samples drawn for eviction: the seed of the next one.
    draws: AtomicU64,
    /// Tasks of databases that could not open because every open one was busy, oldest first. They leave the run
    /// queues, so that the tasks of open databases (whose ending makes room) are not stuck behind them, and come
    /// back when a task ends or a database closes ([`PoolShared::resume_waiting`]).
    waiting: Mutex<VecDeque<Task>>,
    /// `waiting.len()`, readable without the lock.
    waiting_len: AtomicUsize,
    /// Cap on reader connections open at once, over all databases (each holds two file descriptors).
    max_readers: usize,
    /// Reader connections open now.
    readers_open: AtomicUsize,
    epoch: Instant,
}

impl PoolShared {
    /// A pool state and the receiving ends of its write and read run queues, for the pool threads.
    pub(crate) fn new(
        max_open: usize,
        max_readers: usize,
        wake: SyncSender<()>,
    ) -> (Arc<PoolShared>, Receiver<Task>, Receiver<Task>) {
        let (writes, write_rx) = async_channel::unbounded();
        let (reads, read_rx) = async_channel::unbounded();
        let shared = Arc::new(PoolShared {
            writes,
            reads,
            open: Mutex::new(OpenSet::default()),
            max_open,
            wake,
            opens: AtomicU64::new(0),
            evictions: AtomicU64::new(0),
            idle_closes: AtomicU64::new(0),
            draws: AtomicU64::new(0),
            waiting: Mutex::new(VecDeque::new()),
            waiting_len: AtomicUsize::new(0),
            max_readers,
            readers_open: AtomicUsize::new(0),
            epoch: Instant::now(),
        });
        (shared, write_rx, read_rx)
    }

    fn push(&self, task: Task) {
        // Refused only once the pool is stopped (the registry closed or dropped): nothing will serve the
        // database any more, so whatever it has queued is answered `Closed` rather than left waiting.
        let lane = match task {
            Task::Write(_) => &self.writes,
            Task::Read(_) => &self.reads,
        };
        if let Err(refused) = lane.try_send(task) {
            let (Task::Write(actor) | Task::Read(actor)) = refused.into_inner();
            actor.fail_queued(&Error::Closed);
        }
    }

    /// Milliseconds since the pool started: the clock of `last_used`.
    pub(crate) fn now_ms(&self) -> u64 {
        u64::try_from(self.epoch.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    /// The databases open now.
    pub(crate) fn open_actors(&self) -> Vec<Arc<Actor>> {
        lock(&self.open).actors.clone()
    }

    pub(crate) fn open_count(&self) -> usize {
        lock(&self.open).actors.len()
    }

    /// Tasks waiting for a pool thread, or for room to open their database.
    pub(crate) fn queued_tasks(&self) -> usize {
        self.writes.len() + self.reads.len() + self.waiting_tasks()
    }

    /// Closes open databases (other than `opening`; `""` for none) until at most `target` are open — on the pool
    /// thread that wants to open one, so that evictions keep pace with opens, and in the registry's housekeeping.
    /// Returns whether it got there; if every open database is running a task, the housekeeping thread is asked to
    /// retry and the opening waits.
    ///
    /// An idle database goes first, the least recently used of [`SAMPLED`] open databases picked at random (as
    /// Redis approximates LRU): this runs once per open at the cap, up to thousands of times a second, where a
    /// scan of every open database each time would cost time in proportion to the cap. When none of them is idle,
    /// one whose write task waits in the run queue is closed ([`Actor::try_close_queued`]), the most recently used
    /// first (its task, queued after it last ran, is furthest back): when every database has work queued (more
    /// databases with writes due than the cap), waiting for one to go idle would stop every opening. Only after
    /// [`DRAWS`] samples are all the others tried.
    pub(crate) fn evict_for(&self, opening: &str, target: usize) -> bool {
        while self.open_count() > target {
            let mut closed = false;
            for _ in 0..DRAWS {
                let seed = self.draws.fetch_add(1, Ordering::Relaxed);
                let mut sampled = lock(&self.open).sample(SAMPLED, seed);
                sampled.retain(|a| a.name != opening);
                closed = close_one(&mut sampled);
                if closed {
                    break;
                }
            }
            if !closed {
                let mut rest = self.open_actors();
                rest.retain(|a| a.name != opening);
                closed = close_one(&mut rest);
            }
            if !closed {
                self.wake_housekeeping();
                return false;
            }
            self.evictions.fetch_add(1, Ordering::Relaxed);
        }
        true
    }

    /// Asks the registry's housekeeping thread for a sweep now.
    pub(crate) fn wake_housekeeping(&self) {
        let _ = self.wake.try_send(());
    }

    /// Stops the pool threads once the run queue is empty; tasks waiting for room are answered `Closed`.
    pub(crate) fn stop(&self) {
        self.writes.close();
        self.reads.close();
        self.resume_waiting(usize::MAX);
    }

    /// Sets `task` aside until room is made for its database to open.
    fn wait_for_room(&self, task: Task) {
        {
            let mut waiting = lock(&self.waiting);
            waiting.push_back(task);
            self.waiting_len.store(waiting.len(), Ordering::SeqCst);
        }
        // A database may have gone idle between the failed eviction and now, with nothing left to resume this
        // task: look once more. (The housekeeping tick resumes every waiting task as well.)
        if self.open_count() < self.max_open || self.open_actors_idle() {
            self.resume_waiting(1);
        }
    }

    /// Whether some open database has nothing queued or running (one could be closed to make room).
    fn open_actors_idle(&self) -> bool {
        lock(&self.open).actors.iter().any(|a| a.is_idle())
    }

    /// Puts up to `n` tasks waiting for room back on their run queues, oldest first.
    pub(crate) fn resume_waiting(&self, n: usize) {
        if self.waiting_len.load(Ordering::SeqCst) == 0 {
            return;
        }
        let resumed: Vec<Task> = {
            let mut waiting = lock(&self.waiting);
            let k = n.min(waiting.len());
            let resumed = waiting.drain(..k).collect();
            self.waiting_len.store(waiting.len(), Ordering::SeqCst);
            resumed
        };
        for task in resumed {
            self.push(task);
        }
    }

    /// Takes one reader connection from the budget, if any is left.
    fn reserve_reader(&self) -> bool {
        let mut n = self.readers_open.load(Ordering::SeqCst);
        while n < self.max_readers {
            match self.readers_open.compare_exchange_weak(
                n,
                n + 1,
                Ordering::SeqCst,
                Ordering::SeqCst,
            ) {
                Ok(_) => return true,
                Err(current) => n = current,
            }
        }
        false
    }

    /// Gives `n` closed reader connections back to the budget.
    fn release_readers(&self, n: usize) {
        if n > 0 {
            self.readers_open.fetch_sub(n, Ordering::SeqCst);
        }
    }

    /// Reader connections open now.
    pub(crate) fn reader_connections(&self) -> usize {
        self.readers_open.load(Ordering::SeqCst)
    }

    /// Tasks waiting for room to open their database.
    fn waiting_tasks(&self) -> usize {
        self.waiting_len.load(Ordering::SeqCst)
    }
}

/// The body of a pool thread: runs tasks until the run queue is closed and empty.
pub(crate) fn run_pool_thread(tasks: Receiver<Task>) {
    while let Ok(task) = tasks.recv_blocking() {
        match task {
            Task::Write(actor) => actor.run_write(),
            Task::Read(actor) => actor.run_read(),
        }
    }
}

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

/// One database on the pool.
pub(crate) struct Actor {
    pub(crate) name: String,
    path: PathBuf,
    config: Config,
    state: Arc<State>,
    pool: Arc<PoolShared>,
    write_rx: queue::Receiver<WriteRequest>,
    read_rx: queue::Receiver<ReadRequest>,
    /// Filled once, when the writer first opens.
    pragmas: Arc<OnceLock<std::collections::BTreeMap<String, String>>>,
    /// The writer, while the database is open.
    writer: Mutex<Option<Writer>>,
    /// Requests a writer took from the queue and had not served when the database was closed with its write task
    /// queued ([`Actor::try_close_queued`]): the next writer serves them first.
    unserved: Mutex<VecDeque<WriteRequest>>,
    /// Open reader connections not serving a task right now.
    readers: Mutex<Vec<Reader>>,
    /// Reader connections open (idle or serving), for the write task: with none, it serves queued reads too.
    reader_connections: AtomicUsize,
    /// Read batches served on the writer's connection since it opened.
    writer_reads: AtomicU32,
    /// Whether a write task is queued or running (at most one).
    write_scheduled: AtomicBool,
    /// Read tasks queued or running (at most `config.readers`), or [`CLOSING`].
    read_tasks: AtomicUsize,
    /// Whether the connections are open.
    open: AtomicBool,
    /// When a task last ran, on [`PoolShared::now_ms`]'s clock.
    last_used_ms: AtomicU64,
    /// Signalled whenever a task ends, for [`Actor::close`].
    settled: Notify,
}

impl Actor {
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn new(
        name: String,
        path: PathBuf,
        config: Config,
        state: Arc<State>,
        pool: Arc<PoolShared>,
        write_rx: queue::Receiver<WriteRequest>,
        read_rx: queue::Receiver<ReadRequest>,
        pragmas: Arc<OnceLock<std::collections::BTreeMap<String, String>>>,
    ) -> Arc<Actor> {
        let now = pool.now_ms();
        Arc::new(Actor {
            name,
            path,
            config,
            state,
            pool,
            write_rx,
            read_rx,
            pragmas,
            writer: Mutex::new(None),
            unserved: Mutex::new(VecDeque::new()),
            readers: Mutex::new(Vec::new()),
            reader_connections: AtomicUsize::new(0),
            writer_reads: AtomicU32::new(0),
            write_scheduled: AtomicBool::new(false),
            read_tasks: AtomicUsize::new(0),
            open: AtomicBool::new(false),
            last_used_ms: AtomicU64::new(now),
            settled: Notify::new(),
        })
    }

    /// Schedules a write task unless one is queued or running.
    pub(crate) fn wake_writer(self: &Arc<Self>) {
        if !self.write_scheduled.swap(true, Ordering::SeqCst) {
            self.pool.push(Task::Write(self.clone()));
        }
    }

    /// Schedules a read task unless `readers` of them are queued or running.
    pub(crate) fn wake_reader(self: &Arc<Self>) {
        let mut n = self.read_tasks.load(Ordering::SeqCst);
        while n < self.config.readers {
            match self.read_tasks.compare_exchange_weak(
                n,
                n + 1,
                Ordering::SeqCst,
                Ordering::SeqCst,
            ) {
                Ok(_) => {
                    self.pool.push(Task::Read(self.clone()));
                    return;
                }
                Err(current) => n = current,
            }
        }
    }

    /// When a task last ran, on [`PoolShared::now_ms`]'s clock.
    pub(crate) fn last_used_ms(&self) -> u64 {
        self.last_used_ms.load(Ordering::Relaxed)
    }

    /// Whether the connections are open.
    pub(crate) fn is_open(&self) -> bool {
        self.open.load(Ordering::Acquire)
    }

    /// Closed, with nothing queued or scheduled: safe to forget.
    pub(crate) fn is_quiet(&self) -> bool {
        !self.is_open()
            && !self.write_scheduled.load(Ordering::Acquire)
            && self.read_tasks.load(Ordering::Acquire) == 0
            && self.write_rx.is_empty()
            && self.read_rx.is_empty()
    }

    /// Queued write and read requests.
    pub(crate) fn queued(&self) -> (usize, usize) {
        (
            self.write_rx.len() + lock(&self.unserved).len(),
            self.read_rx.len(),
        )
    }

    /// A write task: one group on the writer connection, opening it first if needed.
    fn run_write(self: &Arc<Self>) {
        let more = {
            let mut slot = lock(&self.writer);
            match self.ensure_writer(&mut slot) {
                Ok(Opened::Yes) => {}
                Ok(Opened::Deferred) => {
                    drop(slot);
                    self.defer(Task::Write(self.clone()));
                    return;
                }
                Err(e) => {
                    drop(slot);
                    self.fail_queued(&e);
                    self.release_write();
                    return;
                }
            }
            let writer = slot.as_mut().expect("the writer was just opened");
            writer.step();
            if !self.read_rx.is_empty() && self.reader_connections.load(Ordering::SeqCst) == 0 {
                // Reads that found this task queued or running (and no reader connection to open) ride along.
                writer.step_reads(&self.read_rx);
            }
            writer.has_work()
        };
        self.touch();
        if more {
            // To the back of the run queue: every other database with work gets a turn first.
            self.pool.push(Task::Write(self.clone()));
        } else {
            self.release_write();
        }
    }

    /// A read task: one batch on a reader connection, opening the database first if needed.
    fn run_read(self: &Arc<Self>) {
        let opened = if self.open.load(Ordering::Acquire) {
            Ok(Opened::Yes)
        } else {
            let mut slot = lock(&self.writer);
            self.ensure_writer(&mut slot)
        };
        if let Ok(Opened::Deferred) = opened {
            self.defer(Task::Read(self.clone()));
            return;
        }
        let reads_on = opened.and_then(|_| self.reads_on());
        match reads_on {
            Ok(ReadsOn::Reader(reader)) => {
                // Kept until the database closes: SQLite keeps the descriptor of a connection closed while another
                // is open on the same file (POSIX locks would be lost with it), so closing it alone frees nothing.
                reader.step();
                lock(&self.readers).push(*reader);
            }
            Ok(ReadsOn::Writer) => {}
            Ok(ReadsOn::NothingFree) => {
                // The write task using the writer's connection serves queued reads before it ends, and looks at the
                // read queue when it ends (`release_write`), scheduling a read task then; if it ended meanwhile,
                // schedule one here.
                self.read_tasks.fetch_sub(1, Ordering::SeqCst);
                if !self.write_scheduled.load(Ordering::SeqCst) && !self.read_rx.is_empty() {
                    self.wake_reader();
                }
                self.settled.notify_waiters();
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

    /// Where this read task serves its batch: an idle reader connection; else the writer's connection if it is
    /// free (then already served); else a new reader connection if the registry's budget allows; else nowhere.
    ///
    /// A database read often gets a reader connection after [`READS_ON_WRITER`] batches on the writer's: each
    /// batch there turns `query_only` on and off, and SQLite expires every prepared statement of the connection
    /// when a flag PRAGMA changes, so the next reads and writes prepare their statements again. A database opened
    /// for a read or two (most of them when thousands are opened and closed in turn) never pays for a second
    /// connection.
    fn reads_on(self: &Arc<Self>) -> crate::Result<ReadsOn> {
        if let Some(reader) = lock(&self.readers).pop() {
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
        match open_reader(&self.path, &self.config, &self.state, self.read_rx.clone()) {
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
        let Ok(mut slot) = self.writer.try_lock() else {
            return false;
        };
        match slot.as_mut() {
            Some(writer) => {
                writer.step_reads(&self.read_rx);
                true
            }
            None => false,
        }
    }

    /// Opens the writer connection into `slot` if it is not open — unless the registry is at its cap on open
    /// databases and none can be closed now, in which case opening waits ([`Opened::Deferred`]).
    fn ensure_writer(
        self: &Arc<Self>,
        slot: &mut MutexGuard<'_, Option<Writer>>,
    ) -> crate::Result<Opened> {
        if slot.is_some() {
            return Ok(Opened::Yes);
        }
        if self.pool.open_count() >= self.pool.max_open
            && !self.pool.evict_for(&self.name, self.pool.max_open - 1)
        {
            return Ok(Opened::Deferred);
        }
        crate::registry::check_file(&self.path)?;
        let read_back = self.pragmas.get().is_none();
        let opened = open_writer(
            &self.path,
            &self.config,
            &self.state,
            self.write_rx.clone(),
            read_back,
        )?;
        if read_back {
            let _ = self.pragmas.set(opened.pragmas);
        }
        let mut writer = opened.writer;
        writer.serve_first(std::mem::take(&mut *lock(&self.unserved)));
        **slot = Some(writer);
        self.writer_reads.store(0, Ordering::Relaxed);
        self.open.store(true, Ordering::Release);
        self.pool.opens.fetch_add(1, Ordering::Relaxed);
        lock(&self.pool.open).insert(self.clone());
        Ok(Opened::Yes)
    }

    /// Sets `task` aside: the database waits for another to close before it opens.
    fn defer(&self, task: Task) {
        self.pool.wait_for_room(task);
    }

    /// Open, with no task queued or running: a database that could be closed now.
    fn is_idle(&self) -> bool {
        self.is_open()
            && !self.write_scheduled.load(Ordering::SeqCst)
            && self.read_tasks.load(Ordering::SeqCst) == 0
    }

    /// Answers every queued request with `error` (the database could not be opened, or the pool is stopped).
    fn fail_queued(&self, error: &Error) {
        if !matches!(error, Error::Closed) {
            tracing::warn!(database = %self.name, %error, "could not open a registry database");
        }
        let mut writes = std::mem::take(&mut *lock(&self.unserved));
        loop {
            for r in writes.drain(..) {
                r.job.finish(Some(error.duplicate()));
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

    fn touch(&self) {
        self.last_used_ms
            .store(self.pool.now_ms(), Ordering::Relaxed);
    }

    fn release_write(self: &Arc<Self>) {
        // A swap, not a store: the look at the queue below must not move before it (a push and this release
        // each write one side and read the other).
        self.write_scheduled.swap(false, Ordering::SeqCst);
        // A request queued after the last look but before the flag was cleared found the flag set: look again.
        if !self.write_rx.is_empty() {
            self.wake_writer();
        }
        // Reads that found the writer busy and no reader connection to open wait for this.
        if !self.read_rx.is_empty() {
            self.wake_reader();
        }
        self.made_room();
        self.settled.notify_waiters();
    }

    fn release_read(self: &Arc<Self>) {
        self.read_tasks.fetch_sub(1, Ordering::SeqCst);
        if !self.read_rx.is_empty() {
            self.wake_reader();
        }
        self.made_room();
        self.settled.notify_waiters();
    }

    /// Lets a task waiting for room try again if this database could now be closed for it.
    fn made_room(&self) {
        if self.is_idle() {
            self.pool.resume_waiting(1);
        }
    }

    /// Closes the connections if no task is queued or running, taking both roles meanwhile so none can start.
    /// Returns whether it closed them. Requests that arrive meanwhile wait in their queues; they reopen the
    /// database when the roles are released.
    pub(crate) fn try_close(self: &Arc<Self>) -> bool {
        if !self.open.load(Ordering::Acquire) {
            return false;
        }
        if self.write_scheduled.swap(true, Ordering::AcqRel) {
            return false;
        }
        if self
            .read_tasks
            .compare_exchange(0, CLOSING, Ordering::AcqRel, Ordering::Acquire)
            .is_err()
        {
            self.release_write();
            return false;
        }
        self.close_connections(false);
        self.read_tasks.store(0, Ordering::Release);
        if !self.read_rx.is_empty() {
            self.wake_reader();
        }
        self.release_write();
        true
    }

    /// Closes the connections of a database whose write task waits in the run queue, if no task runs on it and no
    /// read task is queued; returns whether it closed them. The queued write task reopens the database when its
    /// turn comes (one whose turn comes meanwhile waits for the writer's slot, then finds it empty).
    pub(crate) fn try_close_queued(self: &Arc<Self>) -> bool {
        if !self.open.load(Ordering::Acquire) {
            return false;
        }
        // Held by a running write task, or by reads on the writer's connection.
        let Ok(mut slot) = self.writer.try_lock() else {
            return false;
        };
        if slot.is_none()
            || self
                .read_tasks
                .compare_exchange(0, CLOSING, Ordering::AcqRel, Ordering::Acquire)
                .is_err()
        {
            return false;
        }
        self.close_connections_in(&mut slot, false);
        drop(slot);
        self.read_tasks.store(0, Ordering::Release);
        if !self.read_rx.is_empty() {
            self.wake_reader();
        }
        true
    }

    /// Closes the connections (the caller holds both roles): readers first, then the writer. `thoroughly` (for
    /// good) runs `PRAGMA optimize` and a `TRUNCATE` checkpoint first; otherwise (idle or evicted, likely to be
    /// reopened) the connection just closes, and SQLite's own checkpoint at the last close folds the WAL back.
    fn close_connections(&self, thoroughly: bool) {
        self.close_connections_in(&mut lock(&self.writer), thoroughly);
    }

    /// [`Actor::close_connections`] with the writer's slot held by the caller.
    fn close_connections_in(&self, slot: &mut Option<Writer>, thoroughly: bool) {
        let readers = std::mem::take(&mut *lock(&self.readers));
        let closed = readers.len();
        drop(readers);
        self.reader_connections.store(0, Ordering::SeqCst);
        self.pool.release_readers(closed);
        if let Some(mut writer) = slot.take() {
            lock(&self.unserved).extend(writer.take_unserved());
            writer.shut_down(thoroughly);
        }
        if self.open.swap(false, Ordering::AcqRel) {
            lock(&self.pool.open).remove(&self.name);
            self.pool.resume_waiting(1);
        }
    }

    /// Serves what is queued, then closes the connections for good (the queues are closed already).
    pub(crate) async fn close(self: &Arc<Self>) {
        loop {
            let mut settled = std::pin::pin!(self.settled.notified());
            settled.as_mut().enable();
            let (writes, reads) = self.queued();
            if writes == 0 && reads == 0 && !self.write_scheduled.swap(true, Ordering::AcqRel) {
                if self
                    .read_tasks
                    .compare_exchange(0, CLOSING, Ordering::AcqRel, Ordering::Acquire)
                    .is_ok()
                {
                    // Both roles stay taken: the queues are closed, nothing may run any more.
                    self.close_connections(true);
                    return;
                }
                self.write_scheduled.store(false, Ordering::Release);
            }
            if writes > 0 {
                self.wake_writer();
            }
            if reads > 0 {
                self.wake_reader();
            }
            settled.await;
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sampled_places_are_distinct_and_in_range() {
        for len in [1, 2, 15, 16, 17, 100, 3948, 4096] {
            for seed in 0..50 {
                let places: Vec<usize> = sample_places(len, SAMPLED, seed).collect();
                assert_eq!(places.len(), len.min(SAMPLED), "len {len}");
                let distinct: std::collections::BTreeSet<_> = places.iter().collect();
                assert_eq!(distinct.len(), places.len(), "len {len} seed {seed}");
                assert!(places.iter().all(|&p| p < len));
            }
        }
        // Different seeds look at different databases.
        let firsts: std::collections::BTreeSet<usize> = (0..50)
            .map(|seed| sample_places(4000, SAMPLED, seed).next().unwrap())
            .collect();
        assert!(firsts.len() > 25, "{firsts:?}");
    }
}
