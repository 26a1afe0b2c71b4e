//! Answers held until object storage holds their commits ([`Acknowledge::Replicated`](crate::Acknowledge)): the
//! writer commits locally and hands each committed turn's answers to the database's [`Gated`]; the [`Gate`]'s thread
//! asks Litestream (its control socket, `POST /sync` with `wait`) to upload everything committed so far and, once it
//! has, sends every answer committed before it asked. Pipelined: the writer goes on committing while an upload runs,
//! and the next upload carries every commit made meanwhile, as group commit shares one commit among many writes.
//! Bounded: a database's writes in flight (queued, or committed and held here) take a permit of its [`Gated::room`];
//! an answer held past its write's deadline is sent as [`Error::NotReplicated`].

use std::collections::{HashMap, VecDeque};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::{OwnedSemaphorePermit, Semaphore, oneshot};

use crate::metrics::Log2Histogram;
use crate::replica::Position;
use crate::request::{Deadline, WriteJob};
use crate::util::lock;
use crate::{Error, Result, control};

/// How long one upload may take before Litestream gives up on it (its timeout, in whole seconds) and the gate asks
/// again.
const SYNC_TIMEOUT: Duration = Duration::from_secs(5);

/// How long the gate waits after a failed upload before asking again.
const RETRY_AFTER: Duration = Duration::from_millis(100);

/// The longest the next upload waits for the writers an upload just answered to commit their next writes: their
/// callers mostly write again at once, and an upload begun without them would leave them to the one after, each
/// write waiting for two uploads instead of one. At most this, and an eighth of the last upload's time.
const GATHER_AT_MOST: Duration = Duration::from_millis(2);

/// The gate of one Litestream process: a thread that asks it for uploads, for every database it tracks.
pub(crate) struct Gate {
    core: Arc<Core>,
}

/// One database behind a [`Gate`]: the writer holds its answers here.
pub(crate) struct Gated {
    core: Arc<Core>,
    id: u64,
    /// Permits of the database's writes in flight: queued, or committed and held until replicated.
    room: Arc<Semaphore>,
    /// What its uploads did.
    pub(crate) metrics: Arc<GateMetrics>,
}

/// Counters of a database's uploads.
#[derive(Debug, Default)]
pub(crate) struct GateMetrics {
    /// Uploads object storage confirmed.
    pub(crate) syncs: AtomicU64,
    /// Uploads that failed (Litestream unreachable, object storage down or slow past the upload's timeout).
    pub(crate) sync_failures: AtomicU64,
    /// Writes committed here and answered with [`Error::NotReplicated`] at their deadline.
    pub(crate) not_replicated: AtomicU64,
    /// How long committed writes waited for their upload.
    pub(crate) wait_us: Log2Histogram,
}

/// A committed write's answer, held until object storage has its commit.
pub(crate) struct Held {
    pub(crate) job: Box<dyn WriteJob>,
    pub(crate) deadline: Option<Deadline>,
    /// Its room in the database's writes in flight, given back with the answer.
    pub(crate) permit: Option<OwnedSemaphorePermit>,
}

/// What waits for an upload: a write's answer, or a caller of
/// [`Database::until_replicated`](crate::Database::until_replicated).
enum Waiter {
    Write(Held),
    Caller {
        deadline: Option<Deadline>,
        tx: oneshot::Sender<Result<Position>>,
    },
}

impl Waiter {
    fn deadline(&self) -> Option<Deadline> {
        match self {
            Waiter::Write(held) => held.deadline,
            Waiter::Caller { deadline, .. } => *deadline,
        }
    }

    /// Tells it object storage has its commit, at `position`.
    fn replicated(self, position: Position) {
        match self {
            Waiter::Write(held) => {
                drop(held.permit);
                held.job.reply(None);
            }
            Waiter::Caller { tx, .. } => {
                let _ = tx.send(Ok(position));
            }
        }
    }

    /// Tells it object storage did not have its commit in time.
    fn failed(self, error: Error) {
        match self {
            Waiter::Write(mut held) => {
                drop(held.permit);
                held.job.fail_later(error);
                held.job.reply(None);
            }
            Waiter::Caller { tx, .. } => {
                let _ = tx.send(Err(error));
            }
        }
    }

    fn abandoned(&self) -> bool {
        match self {
            Waiter::Write(held) => held.job.abandoned(),
            Waiter::Caller { tx, .. } => tx.is_closed(),
        }
    }
}

struct Core {
    socket: PathBuf,
    /// Uploads running at once, at most (over all the databases).
    syncs_at_once: usize,
    state: Mutex<State>,
    changed: Condvar,
}

#[derive(Default)]
struct State {
    dbs: HashMap<u64, Db>,
    next_id: u64,
    /// Uploads running now.
    syncing: usize,
    /// Whether the gate's owner is gone: the thread ends once nothing waits.
    stopping: bool,
    /// The earliest deadline of what waits, if anything that waits has one: what waits is looked through for
    /// deadlines passed only then, not at every turn of the gate's thread.
    next_deadline: Option<Instant>,
}

#[derive(Default)]
struct Db {
    /// The file as Litestream's configuration names it, once the writer opened it.
    file: Option<PathBuf>,
    /// What waits, by commit number (in order).
    waiting: VecDeque<(u64, Instant, Waiter)>,
    /// The highest commit number held, or waited for.
    wanted: u64,
    /// Every commit up to this number is in object storage.
    replicated: u64,
    position: Position,
    syncing: bool,
    /// When to ask again after a failed upload.
    retry_at: Option<Instant>,
    /// After an upload answered writes: the next one waits until this many wait, or this instant
    /// ([`GATHER_AT_MOST`]).
    gather: Option<(Instant, usize)>,
    /// Why the last upload failed, if it did.
    failure: Option<String>,
    /// Whether its [`Gated`] is gone: forgotten once nothing waits.
    dropped: bool,
    metrics: Arc<GateMetrics>,
}

impl Db {
    fn needs_sync(&self, now: Instant) -> bool {
        self.file.is_some()
            && self.wanted > self.replicated
            && !self.syncing
            && self.retry_at.is_none_or(|at| at <= now)
            && self
                .gather
                .is_none_or(|(until, count)| now >= until || self.waiting.len() >= count)
    }
}

impl Gate {
    /// The gate of the Litestream listening at `socket`, running up to `syncs_at_once` uploads at once. Refused
    /// ([`Error::InvalidConfig`]) if nothing listens there: every write would wait for an upload nobody makes.
    pub(crate) fn start(socket: PathBuf, syncs_at_once: usize) -> Result<Gate> {
        if let Err(e) = std::os::unix::net::UnixStream::connect(&socket) {
            return Err(Error::InvalidConfig(format!(
                "Acknowledge::Replicated: nothing listens on Litestream's control socket {} ({e}); is `litestream \
                 replicate` running, with `socket: {{enabled: true, path: …}}` in its configuration?",
                socket.display()
            )));
        }
        let core = Arc::new(Core {
            socket,
            syncs_at_once: syncs_at_once.max(1),
            state: Mutex::new(State::default()),
            changed: Condvar::new(),
        });
        let thread = core.clone();
        std::thread::Builder::new()
            .name("quicklite-gate".into())
            .spawn(move || thread.run())?;
        Ok(Gate { core })
    }

    /// A database behind this gate, with room for `room` writes in flight.
    pub(crate) fn track(&self, room: usize) -> Arc<Gated> {
        let metrics = Arc::new(GateMetrics::default());
        let mut state = lock(&self.core.state);
        let id = state.next_id;
        state.next_id += 1;
        state.dbs.insert(
            id,
            Db {
                metrics: metrics.clone(),
                ..Db::default()
            },
        );
        Arc::new(Gated {
            core: self.core.clone(),
            id,
            room: Arc::new(Semaphore::new(room.max(1))),
            metrics,
        })
    }
}

impl Drop for Gate {
    fn drop(&mut self) {
        lock(&self.core.state).stopping = true;
        self.core.changed.notify_all();
    }
}

impl Gated {
    /// Names the file to upload (the writer's, as SQLite reports it).
    pub(crate) fn opened(&self, file: PathBuf) {
        if let Some(db) = lock(&self.core.state).dbs.get_mut(&self.id) {
            db.file = Some(file);
        }
    }

    /// Permits of the database's writes in flight.
    pub(crate) fn room(&self) -> &Arc<Semaphore> {
        &self.room
    }

    /// Holds the answers of writes committed up to commit number `seq` until object storage has them.
    pub(crate) fn hold(&self, seq: u64, answers: impl IntoIterator<Item = Held>) {
        let now = Instant::now();
        self.waiting(seq, answers.into_iter().map(Waiter::Write), now);
    }

    /// A receiver of the position object storage reached once it has every commit up to number `seq`, or of
    /// [`Error::NotReplicated`] at `deadline`.
    pub(crate) fn wait_for(
        &self,
        seq: u64,
        deadline: Option<Deadline>,
    ) -> oneshot::Receiver<Result<Position>> {
        let (tx, rx) = oneshot::channel();
        self.waiting(seq, [Waiter::Caller { deadline, tx }], Instant::now());
        rx
    }

    fn waiting(&self, seq: u64, waiters: impl IntoIterator<Item = Waiter>, now: Instant) {
        let mut guard = lock(&self.core.state);
        let state = &mut *guard;
        let Some(db) = state.dbs.get_mut(&self.id) else {
            return;
        };
        if seq <= db.replicated {
            let position = db.position;
            drop(guard);
            for waiter in waiters {
                waiter.replicated(position);
            }
            return;
        }
        db.wanted = db.wanted.max(seq);
        for waiter in waiters {
            if let Some(deadline) = waiter.deadline() {
                state.next_deadline = Some(
                    state
                        .next_deadline
                        .map_or(deadline.at, |d| d.min(deadline.at)),
                );
            }
            db.waiting.push_back((seq, now, waiter));
        }
        drop(guard);
        self.core.changed.notify_all();
    }
}

impl std::fmt::Debug for Gated {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Gated")
            .field("id", &self.id)
            .finish_non_exhaustive()
    }
}

impl Drop for Gated {
    fn drop(&mut self) {
        if let Some(db) = lock(&self.core.state).dbs.get_mut(&self.id) {
            db.dropped = true;
        }
        self.core.changed.notify_all();
    }
}

/// Takes what waited past its deadline at `now` out of `dbs` into `expired` (with when it began to wait and the
/// last upload failure of its database), and what nobody waits for any more; returns the earliest deadline left.
fn expire(
    dbs: &mut HashMap<u64, Db>,
    now: Instant,
    expired: &mut Vec<(Instant, Option<String>, Waiter)>,
) -> Option<Instant> {
    let mut next: Option<Instant> = None;
    for db in dbs.values_mut() {
        let before = expired.len();
        let mut kept = VecDeque::with_capacity(db.waiting.len());
        for (seq, since, waiter) in db.waiting.drain(..) {
            match waiter.deadline() {
                Some(deadline) if deadline.passed(now) => {
                    expired.push((since, db.failure.clone(), waiter))
                }
                // Nobody to answer: its room goes back now.
                _ if waiter.abandoned() => {}
                deadline => {
                    if let Some(deadline) = deadline {
                        next = Some(next.map_or(deadline.at, |n| n.min(deadline.at)));
                    }
                    kept.push_back((seq, since, waiter));
                }
            }
        }
        db.waiting = kept;
        db.metrics
            .not_replicated
            .fetch_add((expired.len() - before) as u64, Ordering::Relaxed);
    }
    next
}

impl Core {
    /// The gate's thread: answers what waited past its deadline, starts the uploads that are due, and sleeps until
    /// something changes or the next deadline.
    fn run(self: Arc<Core>) {
        let mut state = lock(&self.state);
        loop {
            let now = Instant::now();
            let mut expired = Vec::new();
            let mut wake_at: Option<Instant> = None;
            let mut earliest = |at: Instant| wake_at = Some(wake_at.map_or(at, |w| w.min(at)));
            state
                .dbs
                .retain(|_, db| !(db.dropped && db.waiting.is_empty() && !db.syncing));
            if state.next_deadline.is_some_and(|at| at <= now) {
                state.next_deadline = expire(&mut state.dbs, now, &mut expired);
            }
            if let Some(at) = state.next_deadline {
                earliest(at);
            }
            let mut starts = Vec::new();
            let mut room = self.syncs_at_once.saturating_sub(state.syncing);
            for (&id, db) in &mut state.dbs {
                if db.needs_sync(now) && room > 0 {
                    room -= 1;
                    db.syncing = true;
                    db.retry_at = None;
                    db.gather = None;
                    starts.push((id, db.wanted, db.file.clone().unwrap_or_default()));
                } else if db.wanted > db.replicated && !db.syncing {
                    let gathered = db.gather.map(|(until, _)| until);
                    if let Some(at) = db.retry_at.into_iter().chain(gathered).max() {
                        earliest(at);
                    }
                }
            }
            state.syncing += starts.len();
            let idle = state.syncing == 0 && state.dbs.values().all(|db| db.waiting.is_empty());
            if state.stopping && idle {
                return;
            }
            if !expired.is_empty() || !starts.is_empty() {
                drop(state);
                for (since, failure, waiter) in expired {
                    waiter.failed(Error::NotReplicated {
                        waited: now.saturating_duration_since(since),
                        reason: failure.unwrap_or_else(|| "its upload is under way".into()),
                    });
                }
                for (id, target, file) in starts {
                    self.start_sync(id, target, file);
                }
                state = lock(&self.state);
                continue;
            }
            state = match wake_at {
                Some(at) => {
                    self.changed
                        .wait_timeout(state, at.saturating_duration_since(now))
                        .unwrap_or_else(|e| e.into_inner())
                        .0
                }
                None => self.changed.wait(state).unwrap_or_else(|e| e.into_inner()),
            };
        }
    }

    /// Asks Litestream, on a thread of its own, to upload every commit of database `id` up to number `target`.
    fn start_sync(self: &Arc<Core>, id: u64, target: u64, file: PathBuf) {
        let core = self.clone();
        let started = Instant::now();
        let spawned = std::thread::Builder::new()
            .name("quicklite-upload".into())
            .spawn(move || {
                let result = control::sync(&core.socket, &file, SYNC_TIMEOUT);
                core.synced(id, target, started, result);
            });
        if let Err(e) = spawned {
            self.synced(id, target, started, Err(Error::Io(e)));
        }
    }

    /// Records the result of an upload begun at `started`, and answers what it replicated.
    fn synced(&self, id: u64, target: u64, started: Instant, result: Result<u64>) {
        let now = Instant::now();
        let mut state = lock(&self.state);
        state.syncing -= 1;
        let mut done = Vec::new();
        if let Some(db) = state.dbs.get_mut(&id) {
            db.syncing = false;
            match result {
                Ok(txid) => {
                    db.metrics.syncs.fetch_add(1, Ordering::Relaxed);
                    db.replicated = db.replicated.max(target);
                    db.position = db.position.max(Position::from_txid(txid));
                    db.failure = None;
                    while db
                        .waiting
                        .front()
                        .is_some_and(|(seq, ..)| *seq <= db.replicated)
                    {
                        let (_, since, waiter) = db.waiting.pop_front().expect("a front");
                        db.metrics.wait_us.record_duration(now - since);
                        done.push(waiter);
                    }
                    let answered = done
                        .iter()
                        .filter(|w| matches!(w, Waiter::Write(_)))
                        .count();
                    db.gather = (answered > 0).then(|| {
                        let wait = ((now - started) / 8).min(GATHER_AT_MOST);
                        (now + wait, db.waiting.len() + answered)
                    });
                }
                Err(e) => {
                    db.metrics.sync_failures.fetch_add(1, Ordering::Relaxed);
                    tracing::warn!(error = %e, "Litestream did not confirm an upload: the writes waiting for it wait on");
                    db.failure = Some(e.to_string());
                    db.retry_at = Some(now + RETRY_AFTER);
                }
            }
            let position = db.position;
            drop(state);
            for waiter in done {
                waiter.replicated(position);
            }
        } else {
            drop(state);
        }
        self.changed.notify_all();
    }
}

#[cfg(test)]
mod tests;
