//! The writer thread: one read-write connection, group commit.
//!
//! The writer drains what is queued (up to `write_batch_max`), opens one `BEGIN IMMEDIATE`, runs each request in
//! its own `SAVEPOINT` (released on success, rolled back to on error, so a failing request takes only its own work
//! with it), `COMMIT`s once and then answers everyone. A commit (and, under `synchronous=FULL`, its fsync) is the
//! expensive part of a small write; a group shares one. Nobody is answered before the `COMMIT` returns, so no
//! write is ever reported as committed that is not.

use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use rusqlite::Connection;
use rusqlite::config::DbConfig;

use crate::Error;
use crate::builder::Config;
use crate::checkpoint::{self, Background, Checkpointing, Mode, Policy};
#[cfg(test)]
use crate::connection::SAVEPOINT;
use crate::connection::{BusyLimit, TxGuard};
use crate::database::State;
use crate::queue::{Receiver, Spun};
use crate::reader::Reader;
use crate::request::{Answers, RELAY_GRACE, ReadRequest, Relays, Reply, WriteKind, WriteRequest};

/// WAL frames (4 KiB pages by default) below which a writer closed to be reopened later leaves the WAL as it is;
/// a longer WAL is checkpointed at close ([`Writer::shut_down`]).
const WAL_KEPT_AT_CLOSE: u64 = 256;

/// The writer thread's state.
pub(crate) struct Writer {
    conn: Connection,
    guard: TxGuard,
    rx: Receiver<WriteRequest>,
    state: Arc<State>,
    config: Config,
    /// The connection's busy-wait limit, shortened while a checkpoint waits for readers.
    busy: BusyLimit,
    /// Checkpoint decisions, under [`Checkpointing::Managed`].
    policy: Option<Policy>,
    /// The thread running `PASSIVE` checkpoints for a writer with a thread of its own ([`Writer::run`]).
    background: Option<Background>,
    /// Requests taken from the queue, not served yet: the writer takes what is queued in one go, and a request
    /// met while filling a group that must run alone waits here to be served next.
    taken: VecDeque<WriteRequest>,
    /// The group being committed (kept to reuse its allocation).
    group: Vec<WriteRequest>,
    /// Answers handed to callers to pass on, delivered from here if they are not passed on in time.
    relays: Relays,
    /// Each write's fate and settled answers in a group (kept to reuse their allocations).
    fates: Vec<Option<Error>>,
    answers: Answers,
}

/// Transaction-control statements, kept prepared in the statement cache.
const BEGIN: &str = "BEGIN IMMEDIATE";
const COMMIT: &str = "COMMIT";
const ROLLBACK: &str = "ROLLBACK";
const SAVEPOINT_SQL: &str = "SAVEPOINT quicklite_write";
const RELEASE_SQL: &str = "RELEASE quicklite_write";
const ROLLBACK_TO_SQL: &str = "ROLLBACK TO quicklite_write";
const QUERY_ONLY_ON: &str = "PRAGMA query_only = ON";
const QUERY_ONLY_OFF: &str = "PRAGMA query_only = OFF";

impl Writer {
    /// A writer on `conn`, serving `rx`.
    pub(crate) fn new(
        conn: Connection,
        guard: TxGuard,
        rx: Receiver<WriteRequest>,
        state: Arc<State>,
        config: Config,
        busy: BusyLimit,
    ) -> Writer {
        Writer {
            conn,
            guard,
            rx,
            state,
            busy,
            policy: Policy::new(config.checkpointing),
            background: None,
            taken: VecDeque::with_capacity(config.write_batch_max),
            group: Vec::with_capacity(config.write_batch_max),
            relays: Relays::default(),
            fates: Vec::with_capacity(config.write_batch_max),
            answers: Answers::with_capacity(config.write_batch_max),
            config,
        }
    }

    /// Serves requests until the queue is closed and drained, then checkpoints (a thread of its own).
    pub(crate) fn run(mut self) {
        if self.policy.is_some() {
            self.background = self.start_background();
        }
        while let Some(first) = self.taken.pop_front().or_else(|| self.next_request()) {
            self.serve(first);
        }
        self.shut_down(true);
    }

    /// Serves what is queued now, one group (or one request that runs alone), without waiting for more; returns
    /// whether there was anything to serve (a turn on a shared pool thread).
    pub(crate) fn step(&mut self) -> bool {
        if self.taken.is_empty() {
            let _ = self
                .rx
                .try_take(self.config.write_batch_max, &mut self.taken);
        }
        match self.taken.pop_front() {
            Some(first) => {
                self.serve(first);
                // Nothing here waits to deliver late relays: deliver them now (callers already passing them on
                // get there first).
                self.relays.deliver_all();
                true
            }
            None => false,
        }
    }

    /// Serves one batch of what `reads` holds on the writer's connection, made read-only for the batch
    /// (`query_only`, so a read closure that writes fails with `SQLITE_READONLY` as on a reader connection);
    /// returns whether there was anything to serve. A registry's database that is read rarely needs no reader
    /// connection of its own: one connection per database halves what opening it costs (each connection SQLite
    /// opens walks a list of every database file the process has open) and the file descriptors it holds.
    pub(crate) fn step_reads(&mut self, reads: &Receiver<ReadRequest>) -> bool {
        if let Err(e) = self.exec(QUERY_ONLY_ON) {
            tracing::warn!(error = %e, "could not make the writer's connection read-only for reads");
            return false;
        }
        let served = Reader {
            conn: &self.conn,
            guard: self.guard.clone(),
            rx: reads.clone(),
            taken: RefCell::default(),
            state: self.state.clone(),
            config: self.config.clone(),
            began: Cell::new(None),
            held: RefCell::default(),
            relays: RefCell::default(),
        }
        .step();
        if let Err(e) = self.exec(QUERY_ONLY_OFF) {
            // Writes on this connection would now fail with SQLITE_READONLY, each with that clear error.
            tracing::error!(error = %e, "could not make the writer's connection writable again");
        }
        served
    }

    /// Takes the requests this writer took from its queue and has not served, for the next writer of the same
    /// database ([`Writer::serve_first`]) when this one closes with work left.
    pub(crate) fn take_unserved(&mut self) -> VecDeque<WriteRequest> {
        std::mem::take(&mut self.taken)
    }

    /// Serves `requests` (taken from the queue by a writer that closed since) before anything queued.
    pub(crate) fn serve_first(&mut self, requests: VecDeque<WriteRequest>) {
        for r in requests.into_iter().rev() {
            self.taken.push_front(r);
        }
    }

    /// Whether requests are waiting for [`Writer::step`].
    pub(crate) fn has_work(&self) -> bool {
        !self.taken.is_empty() || !self.rx.is_empty()
    }

    /// Serves `first` and, if it is a grouped write, the grouped writes queued behind it.
    fn serve(&mut self, mut first: WriteRequest) {
        if first.kind == WriteKind::Open {
            // The connection is open: that is all this request asks. Its closure does nothing.
            let _ = first.job.run(&self.conn);
            first.job.finish(None);
            return;
        }
        if !first.kind.is_grouped() {
            self.run_alone(first);
            return;
        }
        let mut group = std::mem::take(&mut self.group);
        group.push(first);
        self.fill(&mut group);
        if let [lone] = group.as_slice()
            && lone.kind == WriteKind::GroupedStatement
        {
            let lone = group.pop().expect("the group holds one request");
            self.group = group;
            self.run_alone(lone);
            return;
        }
        self.run_group(&mut group);
        self.group = group;
        self.checkpoint_if_due();
    }

    /// Waits for the next request; `None` once the queue is closed and empty. When the WAL should be truncated
    /// after an idle spell, waits at most that long first, then truncates and goes on waiting.
    fn next_request(&mut self) -> Option<WriteRequest> {
        let max = self.config.write_batch_max;
        match self.rx.spin_take(max, &mut self.taken) {
            Spun::Got(_) => return self.taken.pop_front(),
            Spun::Closed => return None,
            Spun::Empty => {}
        }
        if self.relays.pending() {
            // Callers carrying answers for others have that long to pass them on; then they go from here.
            match self
                .rx
                .take_timeout(max, &mut self.taken, Some(RELAY_GRACE))
            {
                Spun::Got(_) => return self.taken.pop_front(),
                Spun::Closed => return None,
                Spun::Empty => self.relays.deliver_all(),
            }
        }
        if let Some(idle) = self.policy.as_ref().and_then(Policy::idle_wait) {
            match self.rx.take_timeout(max, &mut self.taken, Some(idle)) {
                Spun::Got(_) => return self.taken.pop_front(),
                Spun::Closed => return None,
                Spun::Empty => self.checkpoint(Mode::Truncate),
            }
        }
        match self.rx.take_timeout(max, &mut self.taken, None) {
            Spun::Got(_) => self.taken.pop_front(),
            Spun::Closed | Spun::Empty => None,
        }
    }

    /// Starts the background checkpoint thread; without it (its connection could not open), the writer runs its
    /// `PASSIVE` checkpoints itself.
    fn start_background(&self) -> Option<Background> {
        let path = self.conn.path().filter(|p| !p.is_empty())?;
        match Background::start(path.as_ref(), &self.config, self.state.clone()) {
            Ok(background) => Some(background),
            Err(e) => {
                tracing::warn!(error = %e, "no checkpoint thread; the writer checkpoints by itself");
                None
            }
        }
    }

    /// Runs the checkpoint the policy asks for after the last commit, if any (a `PASSIVE` one on the background
    /// thread, if there is one). Callers have their answers already.
    fn checkpoint_if_due(&mut self) {
        let frames = self.state.metrics.wal_frames.load(Ordering::Relaxed);
        let frames = u32::try_from(frames).unwrap_or(u32::MAX);
        let Some(policy) = self.policy.as_mut() else {
            return;
        };
        match (policy.after_commit(frames), &self.background) {
            (Some(Mode::Passive), Some(background)) => {
                background.request();
                policy.passive_requested(frames);
            }
            (Some(mode), _) => self.checkpoint(mode),
            (None, _) => {}
        }
    }

    /// Runs one checkpoint and records it.
    fn checkpoint(&mut self, mode: Mode) {
        let Checkpointing::Managed { reader_wait, .. } = self.config.checkpointing else {
            return;
        };
        let _span = tracing::debug_span!("quicklite.checkpoint", ?mode).entered();
        let metrics = &self.state.metrics;
        let outcome = {
            // A background checkpoint running now would make this one fail as busy: let it end first.
            let _background = self.background.as_ref().map(Background::hold);
            if mode.waits_for_readers() {
                self.busy
                    .with(reader_wait, || checkpoint::run(&self.conn, mode))
            } else {
                checkpoint::run(&self.conn, mode)
            }
        };
        match checkpoint::record(metrics, mode, outcome) {
            Ok(outcome) => {
                if !outcome.busy && mode.waits_for_readers() {
                    // The WAL starts over (or is empty): the hook reports again at the next commit.
                    metrics.wal_frames.store(0, Ordering::Relaxed);
                }
                if let Some(policy) = self.policy.as_mut() {
                    policy.checkpointed(mode, &outcome);
                }
            }
            Err(_) => {
                if let Some(policy) = self.policy.as_mut() {
                    let frames = metrics.wal_frames.load(Ordering::Relaxed);
                    let failed = checkpoint::Outcome {
                        busy: true,
                        log_frames: i64::try_from(frames).unwrap_or(i64::MAX),
                        checkpointed_frames: 0,
                        took: Duration::ZERO,
                    };
                    policy.checkpointed(mode, &failed);
                }
            }
        }
    }

    /// Adds queued grouped writes to `group`, up to the batch limit; stops at a request that must run alone (left
    /// first in `taken`). With a linger time, waits up to that long for more writes to join.
    fn fill(&mut self, group: &mut Vec<WriteRequest>) {
        let deadline = (!self.config.write_linger.is_zero())
            .then(|| Instant::now() + self.config.write_linger);
        let max = self.config.write_batch_max;
        while group.len() < max {
            if self.taken.is_empty() {
                let _ = self.rx.try_take(max - group.len(), &mut self.taken);
            }
            match self.taken.pop_front() {
                Some(r) if r.kind.is_grouped() => group.push(r),
                Some(r) => {
                    self.taken.push_front(r);
                    return;
                }
                None => match deadline {
                    Some(d) if Instant::now() < d => {
                        std::thread::sleep((d - Instant::now()).min(Duration::from_micros(50)))
                    }
                    _ => break,
                },
            }
        }
    }

    fn exec(&self, sql: &str) -> rusqlite::Result<()> {
        self.guard.internal(|| {
            self.conn.prepare_cached(sql)?.execute([])?;
            Ok(())
        })
    }

    /// Runs a group of writes in one transaction.
    fn run_group(&mut self, group: &mut Vec<WriteRequest>) {
        let _span = tracing::debug_span!("quicklite.write_group", writes = group.len()).entered();
        let metrics = &self.state.metrics;
        let now = Instant::now();
        for r in group.iter() {
            metrics.write_wait_us.record_duration(now - r.enqueued);
        }
        if let Err(e) = self.exec(BEGIN) {
            metrics
                .writes
                .fetch_add(group.len() as u64, Ordering::Relaxed);
            for r in group.drain(..) {
                r.job.finish(Some(Error::copy_sqlite(&e)));
                metrics.write_errors.fetch_add(1, Ordering::Relaxed);
            }
            return;
        }
        let single = group.len() == 1;
        // Requests whose work is in the open transaction, and the ones SQLite rolled back under us.
        let mut fates = std::mem::take(&mut self.fates);
        fates.clear();
        let mut open_from = 0;
        for i in 0..group.len() {
            let savepoint = !single && group[i].kind == WriteKind::Grouped;
            if savepoint && let Err(e) = self.exec(SAVEPOINT_SQL) {
                fates.push(Some(Error::copy_sqlite(&e)));
                continue;
            }
            let outcome = {
                let request = &mut group[i];
                let _span =
                    tracing::debug_span!(parent: &request.span, "quicklite.write").entered();
                request.job.run(&self.conn)
            };
            if group[i].job.panicked() {
                metrics.panics.fetch_add(1, Ordering::Relaxed);
            }
            if self.conn.is_autocommit() {
                // SQLite rolled the whole transaction back by itself (I/O error, full disk, out of memory):
                // everything this group did so far is gone, including writes whose savepoints were released.
                let reason = match &outcome {
                    Err(msg) => msg.clone(),
                    Ok(()) => "the transaction was rolled back by SQLite".to_string(),
                };
                metrics.rolled_back_groups.fetch_add(1, Ordering::Relaxed);
                metrics.rollbacks.fetch_add(1, Ordering::Relaxed);
                tracing::warn!(%reason, "sqlite rolled back a write group");
                for fate in fates[open_from..].iter_mut() {
                    if fate.is_none() {
                        *fate = Some(Error::RolledBack {
                            reason: reason.clone(),
                        });
                    }
                }
                fates.push(Some(Error::RolledBack { reason }));
                open_from = i + 1;
                if let Err(e) = self.exec(BEGIN) {
                    // Nothing more can run in this group; the rest get the error.
                    for _ in i + 1..group.len() {
                        fates.push(Some(Error::copy_sqlite(&e)));
                    }
                    open_from = group.len();
                    break;
                }
                continue;
            }
            let undo = if single {
                // No savepoint around a lone write: its failure rolls back the whole transaction.
                outcome.is_err().then(|| self.exec(ROLLBACK))
            } else if !savepoint {
                // A single statement: SQLite undid a failing one's changes itself.
                None
            } else if outcome.is_ok() {
                Some(self.exec(RELEASE_SQL))
            } else {
                Some(
                    self.exec(ROLLBACK_TO_SQL)
                        .and_then(|_| self.exec(RELEASE_SQL)),
                )
            };
            if outcome.is_err() {
                metrics.rollbacks.fetch_add(1, Ordering::Relaxed);
            }
            if let Some(Err(e)) = undo {
                tracing::error!(error = %e, "could not end a write's savepoint");
            }
            fates.push(None);
        }

        let mut committed = false;
        if !self.conn.is_autocommit() {
            let started = Instant::now();
            match self.exec(COMMIT) {
                Ok(()) => {
                    committed = true;
                    metrics.commit_us.record_duration(started.elapsed());
                    metrics.write_txn_us.record_duration(now.elapsed());
                }
                Err(e) => {
                    metrics.failed_commits.fetch_add(1, Ordering::Relaxed);
                    metrics.rollbacks.fetch_add(1, Ordering::Relaxed);
                    if !self.conn.is_autocommit() {
                        let _ = self.exec(ROLLBACK);
                    }
                    let (extended_code, message) = crate::error::sqlite_parts(&e);
                    let batch = group.len() - open_from;
                    tracing::error!(%message, batch, "group commit failed");
                    for fate in fates[open_from..].iter_mut() {
                        if fate.is_none() {
                            *fate = Some(Error::CommitFailed {
                                extended_code,
                                message: message.clone(),
                                batch,
                            });
                        }
                    }
                }
            }
        }
        if committed {
            self.publish_commit();
            metrics.write_batch.record((group.len() - open_from) as u64);
        }
        metrics
            .writes
            .fetch_add(group.len() as u64, Ordering::Relaxed);
        let mut answers = std::mem::take(&mut self.answers);
        for (mut r, fate) in group.drain(..).zip(fates.drain(..)) {
            if r.job.settle(fate) {
                metrics.write_errors.fetch_add(1, Ordering::Relaxed);
            }
            answers.push((r.origin, r.job as Box<dyn Reply>));
        }
        self.relays.answer_all(&mut answers);
        // Both are empty again; their room serves the next group.
        (self.fates, self.answers) = (fates, answers);
    }

    /// Runs a request alone: one that asked for a transaction of its own or for none, or a single statement that
    /// nothing queued could share a commit with.
    fn run_alone(&mut self, mut r: WriteRequest) {
        let span = tracing::debug_span!(parent: &r.span, "quicklite.write", kind = ?r.kind);
        let _span = span.enter();
        let metrics = &self.state.metrics;
        let started = Instant::now();
        metrics.write_wait_us.record_duration(started - r.enqueued);
        metrics.writes.fetch_add(1, Ordering::Relaxed);
        let fate = match r.kind {
            WriteKind::GroupedStatement => {
                // One statement with nothing queued to share its commit: in autocommit mode it is a transaction
                // by itself (a writing statement takes the write lock when it starts and commits when it ends,
                // or undoes everything it did), which spares executing `BEGIN IMMEDIATE` and `COMMIT`. If the
                // commit fails, the statement returns that error.
                if r.job.run(&self.conn).is_ok() {
                    self.publish_commit();
                    metrics.write_batch.record(1);
                    metrics.write_txn_us.record_duration(started.elapsed());
                } else {
                    metrics.rollbacks.fetch_add(1, Ordering::Relaxed);
                }
                None
            }
            WriteKind::Unmanaged => {
                let outcome = self.guard.internal(|| r.job.run(&self.conn));
                let fate = if self.conn.is_autocommit() {
                    None
                } else {
                    let _ = self.exec(ROLLBACK);
                    metrics.rollbacks.fetch_add(1, Ordering::Relaxed);
                    Some(Error::TransactionLeftOpen)
                };
                let _ = outcome;
                // It may have committed anything; readers must not serve older snapshots to later reads.
                self.publish_commit();
                fate
            }
            _ => match self.exec(BEGIN) {
                Err(e) => Some(Error::copy_sqlite(&e)),
                Ok(()) => {
                    let outcome = r.job.run(&self.conn);
                    if self.conn.is_autocommit() {
                        metrics.rollbacks.fetch_add(1, Ordering::Relaxed);
                        Some(Error::RolledBack {
                            reason: outcome
                                .err()
                                .unwrap_or_else(|| "rolled back by SQLite".into()),
                        })
                    } else if outcome.is_err() {
                        let _ = self.exec(ROLLBACK);
                        metrics.rollbacks.fetch_add(1, Ordering::Relaxed);
                        None
                    } else {
                        match self.exec(COMMIT) {
                            Ok(()) => {
                                self.publish_commit();
                                metrics.write_batch.record(1);
                                metrics.write_txn_us.record_duration(started.elapsed());
                                None
                            }
                            Err(e) => {
                                metrics.failed_commits.fetch_add(1, Ordering::Relaxed);
                                metrics.rollbacks.fetch_add(1, Ordering::Relaxed);
                                let _ = self.exec(ROLLBACK);
                                let (extended_code, message) = crate::error::sqlite_parts(&e);
                                Some(Error::CommitFailed {
                                    extended_code,
                                    message,
                                    batch: 1,
                                })
                            }
                        }
                    }
                }
            },
        };
        if r.job.panicked() {
            metrics.panics.fetch_add(1, Ordering::Relaxed);
        }
        if r.job.finish(fate) {
            metrics.write_errors.fetch_add(1, Ordering::Relaxed);
        }
        drop(_span);
        self.checkpoint_if_due();
    }

    /// Makes a commit visible to read-your-writes: readers serving requests made after this point start a new
    /// snapshot if theirs is older.
    fn publish_commit(&self) {
        self.state.commit_seq.fetch_add(1, Ordering::Release);
        self.state.metrics.commits.fetch_add(1, Ordering::Relaxed);
    }

    /// Ends the writer: rolls back anything open and closes the connection; `thoroughly` (closing for good)
    /// also runs `PRAGMA optimize` and, under the managed policy, a `TRUNCATE` checkpoint first.
    pub(crate) fn shut_down(mut self, thoroughly: bool) {
        // The checkpoint thread ends (its checkpoint, if one runs) and closes its connection first.
        drop(self.background.take());
        if !self.conn.is_autocommit() {
            let _ = self.exec(ROLLBACK);
        }
        if !thoroughly {
            // Likely to reopen soon: leave a short WAL for the next open instead of the checkpoint (and fsyncs)
            // SQLite runs when the last connection closes. The next open reads the whole WAL to rebuild its index,
            // so a long one is checkpointed now, once, rather than read again at every reopen.
            let frames = self.state.metrics.wal_frames.load(Ordering::Relaxed);
            if self.policy.is_some()
                && frames < WAL_KEPT_AT_CLOSE
                && let Err(e) = self
                    .conn
                    .set_db_config(DbConfig::SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, true)
            {
                tracing::debug!(error = %e, "could not skip the checkpoint at close");
            }
            match self.conn.close() {
                Ok(()) if frames >= WAL_KEPT_AT_CLOSE => {
                    // Checkpointed by SQLite as the last connection closed.
                    self.state.metrics.wal_frames.store(0, Ordering::Relaxed);
                }
                Ok(()) => {}
                Err((_, e)) => tracing::warn!(error = %e, "closing the writer connection failed"),
            }
            return;
        }
        // `PRAGMA optimize` before closing is what SQLite recommends for long-lived connections.
        if let Err(e) = self.conn.execute_batch("PRAGMA optimize") {
            tracing::debug!(error = %e, "PRAGMA optimize at close failed");
        }
        let wal = self
            .conn
            .query_row("PRAGMA journal_mode", [], |r| r.get::<_, String>(0))
            .map(|m| m.eq_ignore_ascii_case("wal"))
            .unwrap_or(false);
        if wal && self.policy.is_some() {
            // Fold the WAL back into the database so the file is complete on its own after close. (SQLite itself
            // checkpoints when the last connection closes, unless checkpoints are external.)
            self.checkpoint(Mode::Truncate);
        }
        if let Err((_, e)) = self.conn.close() {
            tracing::warn!(error = %e, "closing the writer connection failed");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn savepoint_statements_name_the_guarded_savepoint() {
        for sql in [SAVEPOINT_SQL, RELEASE_SQL, ROLLBACK_TO_SQL] {
            assert!(sql.ends_with(SAVEPOINT));
        }
    }
}
