//! One write transaction: a group of writes committed together, or one write that runs alone.
//!
//! A group runs in one `BEGIN IMMEDIATE` … `COMMIT`, each write in its own `SAVEPOINT` (released on success,
//! rolled back to on error, so a failing write takes only its own work with it). A commit (and, under
//! `synchronous=FULL`, its fsync) is the expensive part of a small write; a group shares one. The functions here
//! only run the transaction and say what happened to each write ([`Outcomes`]); nobody is answered before the
//! `COMMIT` returned, so no write is ever reported as committed that is not.

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use crate::changes::Mark;
use crate::cost::{Known, RanOn};
use crate::engine::Shared;
use crate::engine::bound::{self, Bound};
use crate::engine::guard::{Control, GuardedConnection};
use crate::engine::write_lock;
use crate::metrics::Metrics;
use crate::request::{Ran, WriteKind, WriteRequest};
use crate::util::blocking_work;
use crate::wal_frames::wal_counts;
use crate::{Error, RequestKind};

/// A write transaction's control statements.
pub(crate) const BEGIN: Control = Control::BeginImmediate;
pub(crate) const COMMIT: Control = Control::Commit;
pub(crate) const ROLLBACK: Control = Control::Rollback;

/// What happened to each write of a transaction, in order: `None` if its work was committed — or if its own
/// closure failed, which its own answer reports — and otherwise the failure that took its work with it (the
/// group's `COMMIT` failed, SQLite rolled the transaction back, its savepoint could not begin).
pub(crate) type Outcomes = Vec<Option<Error>>;

/// Why a write on its caller's thread was given back, not run ([`run_inline`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum NotRun {
    /// Another connection holds the write lock.
    LockHeld,
    /// Every frame of the WAL has been checkpointed: the next write starts the WAL over, which SQLite does with an
    /// fsync of its header even under `synchronous=NORMAL`.
    WalStartsOver,
}

/// The group's transaction could not begin: another connection held the write lock for as long as the busy handler
/// waited (`BEGIN IMMEDIATE` failed with `SQLITE_BUSY`). None of the group's writes ran.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct LockHeld;

/// Runs `group` (two or more grouped writes, or one) in one transaction; fills `outcomes`, one per write.
/// Returns whether a `COMMIT` succeeded (and was published to read-your-writes), or [`LockHeld`] with `outcomes`
/// left empty: the caller decides whether the group waits on.
///
/// Once the group's writes have run, and before it commits, `join` may add writes to a group of several (those
/// queued meanwhile): they run in the same transaction, each in its savepoint, and share its commit rather than
/// wait for the next one. It is asked again after they have run, until it adds none.
pub(crate) fn commit_group(
    conn: &GuardedConnection,
    shared: &Shared,
    group: &mut Vec<WriteRequest>,
    outcomes: &mut Outcomes,
    mut join: impl FnMut(&mut Vec<WriteRequest>),
) -> Result<bool, LockHeld> {
    let metrics = &shared.metrics;
    let began = Instant::now();
    outcomes.clear();
    // The change log holds this transaction's changes only.
    shared.changes.discard();
    match conn.control(BEGIN) {
        Ok(()) => {}
        Err(e) if e.sqlite_error_code() == Some(rusqlite::ErrorCode::DatabaseBusy) => {
            return Err(LockHeld);
        }
        Err(e) => {
            outcomes.extend(group.iter().map(|_| Some(Error::copy_sqlite(&e))));
            return Ok(false);
        }
    }
    let single = group.len() == 1;
    // Writes from `open_from` on have their work in the open transaction.
    let mut open_from = 0;
    let mut next = 0;
    loop {
        if next == group.len() && !single {
            join(group);
        }
        if next == group.len() {
            break;
        }
        let i = next;
        next += 1;
        let savepoint = !single && group[i].kind == WriteKind::Grouped;
        if savepoint && let Err(e) = conn.control(Control::Savepoint) {
            outcomes.push(Some(Error::copy_sqlite(&e)));
            continue;
        }
        // What the write changes is told to subscribers only if its work commits.
        let mark = shared.changes.mark();
        let changed_before = conn.conn().total_changes();
        let ran = {
            let request = &mut group[i];
            let _span = tracing::debug_span!(parent: &request.span, "quicklite.write").entered();
            run_learning(conn, shared, request)
        };
        if ran == Ran::Panicked {
            metrics.panics.fetch_add(1, Ordering::Relaxed);
        }
        if conn.conn().is_autocommit() {
            // SQLite rolled the whole transaction back by itself (I/O error, full disk, out of memory):
            // everything this group did so far is gone, including writes whose savepoints were released.
            let reason = group[i]
                .job
                .error_message()
                .unwrap_or_else(|| "the transaction was rolled back by SQLite".to_string());
            metrics.rolled_back_groups.fetch_add(1, Ordering::Relaxed);
            metrics.rollbacks.fetch_add(1, Ordering::Relaxed);
            tracing::warn!(%reason, "sqlite rolled back a write group");
            for outcome in outcomes[open_from..].iter_mut() {
                if outcome.is_none() {
                    *outcome = Some(Error::RolledBack {
                        reason: reason.clone(),
                    });
                }
            }
            outcomes.push(Some(Error::RolledBack { reason }));
            open_from = i + 1;
            if let Err(e) = conn.control(BEGIN) {
                // Nothing more can run in this group; the rest get the error.
                outcomes.extend((i + 1..group.len()).map(|_| Some(Error::copy_sqlite(&e))));
                open_from = group.len();
                break;
            }
            continue;
        }
        let undo = if single {
            // No savepoint around a lone write: its failure rolls back the whole transaction.
            (!ran.is_ok()).then(|| conn.control(ROLLBACK))
        } else if !savepoint {
            // A single statement: SQLite undid a failing one's changes itself.
            None
        } else if ran.is_ok() {
            Some(conn.control(Control::Release))
        } else {
            Some(
                conn.control(Control::RollbackTo)
                    .and_then(|_| conn.control(Control::Release)),
            )
        };
        // A failing statement without a savepoint keeps what SQLite kept of it (`OR FAIL`, a trigger's
        // `RAISE(FAIL)`: the rows it changed before failing, which SQLite counts as changes), committed with the
        // group like any other write's; one SQLite undid changed nothing (SQLite counts no change).
        let kept = !savepoint && !single && conn.conn().total_changes() > changed_before;
        if !ran.is_ok() && !kept {
            metrics.rollbacks.fetch_add(1, Ordering::Relaxed);
            // Rolled back to its savepoint, or its statement undone by SQLite (a whole transaction's rollback
            // empties the log by itself).
            shared.changes.undo_to(mark);
        }
        if let Some(Err(e)) = undo {
            tracing::error!(error = %e, "could not end a write's savepoint");
        }
        outcomes.push(None);
    }

    if conn.conn().is_autocommit() {
        return Ok(false);
    }
    let committing = Instant::now();
    let result = conn.committing(|| blocking_work(|| conn.control(COMMIT)));
    if conn.settle() {
        metrics.commit_us.record_duration(committing.elapsed());
        metrics
            .write_transaction_us
            .record_duration(began.elapsed());
        metrics.write_batch.record((group.len() - open_from) as u64);
        return Ok(true);
    }
    match result {
        // Nothing to commit after all (the witness saw no commit of a transaction that wrote nothing).
        Ok(()) => Ok(false),
        Err(e) => {
            metrics.failed_commits.fetch_add(1, Ordering::Relaxed);
            metrics.rollbacks.fetch_add(1, Ordering::Relaxed);
            conn.roll_back_open();
            let (extended_code, message) = crate::error::sqlite_parts(&e);
            let batch = group.len() - open_from;
            tracing::error!(%message, batch, "group commit failed");
            for outcome in outcomes[open_from..].iter_mut() {
                if outcome.is_none() {
                    *outcome = Some(Error::CommitFailed {
                        extended_code,
                        message: message.clone(),
                        batch,
                    });
                }
            }
            Ok(false)
        }
    }
}

/// One write in this many run on the writer's thread records its call site's cost (the first of a site not yet
/// known always does): under load the writer runs many a second, and callers read the entries they write.
const LEARN_EVERY: u32 = 16;

/// Runs `request`'s closure on `conn`, on the writer's thread, and learns what its call site costs if it has one
/// ([`WriteRequest::site`]): the next writes of a short one may run on their callers' threads.
fn run_learning(conn: &GuardedConnection, shared: &Shared, request: &mut WriteRequest) -> Ran {
    thread_local! {
        static RUN: std::cell::Cell<u32> = const { std::cell::Cell::new(0) };
    }
    let sampled = RUN.with(|n| {
        n.set(n.get().wrapping_add(1));
        n.get().is_multiple_of(LEARN_EVERY)
    });
    let Some((site, bound)) = request
        .site
        .filter(|&(site, _)| sampled || shared.costs.known(site) == Known::Unknown)
    else {
        return blocking_work(|| request.job.run(conn.conn()));
    };
    let started = Instant::now();
    let ran = blocking_work(|| request.job.run(conn.conn()));
    if ran != Ran::Panicked {
        shared
            .costs
            .record(site, started.elapsed(), bound, RanOn::Threads);
    }
    ran
}

/// Runs a write alone: one that asked for a transaction of its own or for none, or a single statement that
/// nothing queued could share a commit with. Returns its outcome (see [`Outcomes`]).
pub(crate) fn run_alone(
    conn: &mut GuardedConnection,
    shared: &Shared,
    request: &mut WriteRequest,
) -> Option<Error> {
    let metrics = &shared.metrics;
    let started = Instant::now();
    shared.changes.discard();
    let (ran, outcome) = match request.kind {
        _ if let Some(deadline) = request.deadline
            && !request.kind.is_grouped()
            && deadline.passed(Instant::now()) =>
        {
            // Past its deadline already (it waited in the queue): answered without running.
            request
                .job
                .fail_later(deadline.error(RequestKind::Write, false));
            (Ran::Failed, None)
        }
        WriteKind::Grouped | WriteKind::Transaction => match conn.control(BEGIN) {
            Err(e) => return Some(Error::copy_sqlite(&e)),
            Ok(()) => {
                // A grouped write's deadline bounds its wait only, wherever it runs.
                let deadline = request
                    .deadline
                    .filter(|_| request.kind == WriteKind::Transaction);
                let ran = conn.run_until(deadline.map(|d| d.at), || {
                    blocking_work(|| request.job.run(conn.conn()))
                });
                let outcome = if let Some(deadline) = deadline
                    && !ran.is_ok()
                    && deadline.passed(Instant::now())
                {
                    // Interrupted: rolled back (by SQLite already, if the statement was writing), and answered
                    // with the timeout rather than the interruption.
                    request
                        .job
                        .fail_later(deadline.error(RequestKind::Write, true));
                    conn.roll_back_open();
                    metrics.rollbacks.fetch_add(1, Ordering::Relaxed);
                    None
                } else if conn.conn().is_autocommit() {
                    metrics.rollbacks.fetch_add(1, Ordering::Relaxed);
                    Some(Error::RolledBack {
                        reason: request
                            .job
                            .error_message()
                            .unwrap_or_else(|| "rolled back by SQLite".into()),
                    })
                } else if !ran.is_ok() {
                    let _ = conn.control(ROLLBACK);
                    metrics.rollbacks.fetch_add(1, Ordering::Relaxed);
                    None
                } else {
                    commit_alone(conn, shared, started)
                };
                (ran, outcome)
            }
        },
        WriteKind::Held => {
            // A held transaction keeps the writer for its steps: the writer runs it with `engine::held::run`.
            debug_assert!(false, "a held transaction run as a write that runs alone");
            return Some(Error::Closed);
        }
        WriteKind::GroupedStatement => {
            let mark = shared.changes.mark();
            // One statement with nothing queued to share its commit: in autocommit mode it is a transaction by
            // itself (a writing statement takes the write lock when it starts and commits when it ends, or undoes
            // everything it did), which spares executing `BEGIN IMMEDIATE` and `COMMIT`. If the commit fails, the
            // statement returns that error.
            // Its commit, and its fsync, happen inside the statement: blocking work as much as the statement.
            let ran = conn.committing(|| run_learning(conn, shared, request));
            let (outcome, _) = settle_statement(conn, shared, ran, mark, started);
            (ran, outcome)
        }
        WriteKind::Unmanaged => {
            // It may commit at any point; it is published after it returns, whatever it did.
            let deadline = request.deadline;
            let ran = conn.run_until_mut(deadline.map(|d| d.at), |conn| {
                conn.committing_mut(|conn| {
                    blocking_work(|| conn.allow_tx_control_mut(|c| request.job.run_mut(c)))
                })
            });
            if let Some(deadline) = deadline
                && !ran.is_ok()
                && deadline.passed(Instant::now())
            {
                // Interrupted: SQLite rolled back the statement (and the transaction it was in, if one was open).
                request
                    .job
                    .fail_later(deadline.error(RequestKind::Write, true));
            }
            let outcome = conn.roll_back_open().then(|| {
                metrics.rollbacks.fetch_add(1, Ordering::Relaxed);
                Error::TransactionLeftOpen
            });
            // It may have committed anything; readers must not serve older snapshots to later reads.
            conn.settle_all();
            (ran, outcome)
        }
    };
    if ran == Ran::Panicked {
        metrics.panics.fetch_add(1, Ordering::Relaxed);
    }
    outcome
}

/// Runs a grouped write on the writer's connection borrowed by its caller's thread ([`crate::sched::inline`]), with
/// the promises it has on the writer's thread: answered after its `COMMIT` returned, rolled back alone if it fails,
/// every commit witnessed. A closure runs in a transaction of its own; one statement runs in autocommit mode, as on
/// the writer ([`run_alone`]), and a statement that fails after changing rows it keeps (`OR FAIL`) commits them. Past
/// its bound the run calls `past` ([`Bound::write`]). Returns how its closure ended and its outcome (see
/// [`Outcomes`]), or why it was not run ([`NotRun`]): the write would start the WAL over, with an fsync, or the
/// write lock is held elsewhere and a closure's `BEGIN IMMEDIATE` found it so (the connection waits for no lock on a
/// caller's thread before a closure runs). A statement that finds the lock held waits for it as on the writer, up to
/// its deadline or `write_lock_wait`: its parameters are bound by then, so it cannot be given back unrun, and the
/// busy handler hands the runtime's worker away before it sleeps ([`bound::before_waiting`]).
pub(crate) fn run_inline(
    conn: &GuardedConnection,
    shared: &Shared,
    request: &mut WriteRequest,
    past: Option<fn() -> bool>,
    write_lock_wait: Duration,
) -> Result<(Ran, Option<Error>), NotRun> {
    let metrics = &shared.metrics;
    let started = Instant::now();
    if let Some((frames, copied_back)) = wal_counts(conn.conn())
        && frames > 0
        && copied_back >= frames
    {
        return Err(NotRun::WalStartsOver);
    }
    shared.changes.discard();
    if request.kind == WriteKind::GroupedStatement {
        return Ok(run_statement_inline(
            conn,
            shared,
            request,
            started,
            past,
            write_lock_wait,
        ));
    }
    match conn.control(BEGIN) {
        Ok(()) => {}
        Err(e) if e.sqlite_error_code() == Some(rusqlite::ErrorCode::DatabaseBusy) => {
            return Err(NotRun::LockHeld);
        }
        Err(e) => return Ok((Ran::Failed, Some(Error::copy_sqlite(&e)))),
    }
    let (ran, passed) = bound::within(Bound::write(started, past), || {
        let _span = tracing::debug_span!(parent: &request.span, "quicklite.write").entered();
        request.job.run(conn.conn())
    });
    count_inline_run(metrics, ran, passed);
    if conn.conn().is_autocommit() {
        // SQLite rolled the transaction back by itself (I/O error, full disk, an `OR ROLLBACK` conflict).
        metrics.rollbacks.fetch_add(1, Ordering::Relaxed);
        return Ok((
            ran,
            Some(Error::RolledBack {
                reason: request
                    .job
                    .error_message()
                    .unwrap_or_else(|| "rolled back by SQLite".into()),
            }),
        ));
    }
    if ran.is_ok() {
        return Ok((ran, commit_alone(conn, shared, started)));
    }
    if let Err(e) = conn.control(ROLLBACK) {
        tracing::error!(error = %e, "could not roll back a write on its caller's thread");
    }
    metrics.rollbacks.fetch_add(1, Ordering::Relaxed);
    Ok((ran, None))
}

/// Counts what a run on its caller's thread did beside its work: a panic, the runtime's worker handed away.
fn count_inline_run(metrics: &Metrics, ran: Ran, passed: bound::Passed) {
    if ran == Ran::Panicked {
        metrics.panics.fetch_add(1, Ordering::Relaxed);
    }
    if passed.past {
        metrics.runtime_hand_offs.fetch_add(1, Ordering::Relaxed);
    }
}

/// One statement of [`run_inline`], begun at `started`, with `past` for its bound, in autocommit mode: a
/// transaction by itself that takes the write lock when it starts — waiting for it up to the statement's deadline
/// or `write_lock_wait` — and commits as it ends.
fn run_statement_inline(
    conn: &GuardedConnection,
    shared: &Shared,
    request: &mut WriteRequest,
    started: Instant,
    past: Option<fn() -> bool>,
    write_lock_wait: Duration,
) -> (Ran, Option<Error>) {
    let metrics = &shared.metrics;
    let mark = shared.changes.mark();
    let wait = write_lock::gives_up_at(request, started, write_lock_wait)
        .saturating_duration_since(started);
    let (ran, passed) = bound::within(Bound::write(started, past), || {
        let _span = tracing::debug_span!(parent: &request.span, "quicklite.write").entered();
        conn.waiting_up_to(wait, || conn.committing(|| request.job.run(conn.conn())))
    });
    count_inline_run(metrics, ran, passed);
    let (outcome, failed) = settle_statement(conn, shared, ran, mark, started);
    if failed && request.job.failed_busy() {
        // It waited for the write lock as long as it could, and changed nothing.
        let path = conn.conn().path().filter(|p| !p.is_empty());
        let error = write_lock::gave_up(request, path, started.elapsed());
        request.job.fail_later(error);
    }
    (ran, outcome)
}

/// After one statement in autocommit mode, which began at `started`: publishes its commit if it made one — also
/// when it failed after changing rows it keeps (`OR FAIL`): every commit that reaches the file is published and
/// told, whatever the statement returned — or else, if it failed, undoes the changes it recorded since `mark`. A
/// statement that began a transaction and left it open (as a `SAVEPOINT` outside one would: SQLite's `BEGIN
/// DEFERRED`; `execute` refuses savepoints before they run) has it rolled back, and fails with
/// [`Error::TransactionLeftOpen`]: the writes after it would run in it, answered before anything committed them.
///
/// Returns the statement's outcome (see [`Outcomes`]), and whether it failed having committed nothing.
fn settle_statement(
    conn: &GuardedConnection,
    shared: &Shared,
    ran: Ran,
    mark: Mark,
    started: Instant,
) -> (Option<Error>, bool) {
    let metrics = &shared.metrics;
    if conn.roll_back_open() {
        metrics.rollbacks.fetch_add(1, Ordering::Relaxed);
        shared.changes.undo_to(mark);
        return (Some(Error::TransactionLeftOpen), false);
    }
    if committed_alone(conn, metrics, started) || ran.is_ok() {
        return (None, false);
    }
    metrics.rollbacks.fetch_add(1, Ordering::Relaxed);
    shared.changes.undo_to(mark);
    (None, true)
}

/// Whether a write's own transaction, begun at `started`, reached the file: its commit published
/// ([`GuardedConnection::settle`]) and counted, a commit of one write.
fn committed_alone(conn: &GuardedConnection, metrics: &Metrics, started: Instant) -> bool {
    if !conn.settle() {
        return false;
    }
    metrics.write_batch.record(1);
    metrics
        .write_transaction_us
        .record_duration(started.elapsed());
    true
}

/// Commits a write's own transaction.
pub(crate) fn commit_alone(
    conn: &GuardedConnection,
    shared: &Shared,
    started: Instant,
) -> Option<Error> {
    let metrics = &shared.metrics;
    let result = conn.committing(|| blocking_work(|| conn.control(COMMIT)));
    if committed_alone(conn, metrics, started) {
        return None;
    }
    match result {
        Ok(()) => None,
        Err(e) => {
            metrics.failed_commits.fetch_add(1, Ordering::Relaxed);
            metrics.rollbacks.fetch_add(1, Ordering::Relaxed);
            let _ = conn.control(ROLLBACK);
            let (extended_code, message) = crate::error::sqlite_parts(&e);
            Some(Error::CommitFailed {
                extended_code,
                message,
                batch: 1,
            })
        }
    }
}

#[cfg(test)]
mod tests {
    //! The group-commit engine alone: no threads, no queue; each write's outcome and answer checked directly.

    use std::time::Instant;

    use std::sync::Arc;

    use rusqlite::Connection;
    use tokio::sync::oneshot;

    use super::*;
    use crate::reply::{Answer, CallerThread};
    use crate::request::Job;

    /// A witnessed connection ([`crate::engine::witness`]), as the writer's, and the state it publishes to.
    fn connection() -> (GuardedConnection, Arc<Shared>) {
        let conn = Connection::open_in_memory().unwrap();
        conn.execute_batch(
            "PRAGMA foreign_keys = ON;
             CREATE TABLE t (a INTEGER PRIMARY KEY);
             CREATE TABLE parent (id INTEGER PRIMARY KEY);
             CREATE TABLE child (parent INTEGER REFERENCES parent (id) DEFERRABLE INITIALLY DEFERRED);
             CREATE TABLE undo (a);
             CREATE TRIGGER undo_all BEFORE INSERT ON undo BEGIN SELECT RAISE(ROLLBACK, 'undone'); END;",
        )
        .unwrap();
        witnessed(conn)
    }

    fn witnessed(conn: Connection) -> (GuardedConnection, Arc<Shared>) {
        let shared = Arc::new(Shared::default());
        let mut conn = GuardedConnection::new(conn).unwrap();
        let witness = crate::engine::witness::install(conn.conn_mut(), &shared).unwrap();
        conn.set_witness(witness);
        (conn, shared)
    }

    type Reply = oneshot::Receiver<Answer<usize>>;

    fn request(
        kind: WriteKind,
        f: impl FnOnce(&Connection) -> rusqlite::Result<usize> + Send + 'static,
    ) -> (WriteRequest, Reply) {
        let (job, rx) = Job::new(f);
        let request = WriteRequest {
            kind,
            caller: CallerThread::current(),
            enqueued: Instant::now(),
            span: tracing::Span::none(),
            deadline: None,
            site: None,
            job,
            permit: None,
        };
        (request, rx)
    }

    fn insert(a: i64) -> (WriteRequest, Reply) {
        request(WriteKind::Grouped, move |c| {
            c.execute("INSERT INTO t VALUES (?1)", [a])
        })
    }

    /// Answers every request with its outcome, as the writer does; returns the answers in order.
    fn answer(
        group: Vec<WriteRequest>,
        outcomes: Outcomes,
        replies: Vec<Reply>,
    ) -> Vec<crate::Result<usize>> {
        for (r, outcome) in group.into_iter().zip(outcomes) {
            r.job.answer(outcome);
        }
        replies
            .into_iter()
            .map(|mut rx| rx.try_recv().expect("answered").result)
            .collect()
    }

    fn rows(conn: &GuardedConnection) -> Vec<i64> {
        let mut stmt = conn.conn().prepare("SELECT a FROM t ORDER BY a").unwrap();
        stmt.query_map([], |r| r.get(0))
            .unwrap()
            .collect::<rusqlite::Result<_>>()
            .unwrap()
    }

    fn split(requests: Vec<(WriteRequest, Reply)>) -> (Vec<WriteRequest>, Vec<Reply>) {
        requests.into_iter().unzip()
    }

    #[test]
    fn a_group_that_finds_the_write_lock_held_elsewhere_runs_nothing_and_can_be_run_again() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.db");
        let conn = Connection::open(&path).unwrap();
        conn.execute_batch("PRAGMA journal_mode = WAL; CREATE TABLE t (a INTEGER PRIMARY KEY)")
            .unwrap();
        // No wait: the writer's busy handler would give up the same way, later.
        conn.busy_timeout(std::time::Duration::ZERO).unwrap();
        let (conn, shared) = witnessed(conn);
        let other = Connection::open(&path).unwrap();
        other.execute_batch("BEGIN IMMEDIATE").unwrap();
        let (mut group, replies) = split(vec![insert(1), insert(2)]);
        let mut outcomes = Outcomes::new();
        assert_eq!(
            commit_group(&conn, &shared, &mut group, &mut outcomes, |_| {}),
            Err(LockHeld)
        );
        assert!(outcomes.is_empty(), "{outcomes:?}");
        assert!(conn.conn().is_autocommit());
        assert_eq!(shared.commit_seq(), 0);
        // Nothing ran, so the same writes run once the lock is let go (a job that ran twice would fail).
        other.execute_batch("COMMIT").unwrap();
        assert_eq!(
            commit_group(&conn, &shared, &mut group, &mut outcomes, |_| {}),
            Ok(true)
        );
        let answers = answer(group, outcomes, replies);
        assert!(answers.iter().all(|a| matches!(a, Ok(1))), "{answers:?}");
        assert_eq!(rows(&conn), [1, 2]);
    }

    #[test]
    fn writes_joined_before_the_commit_run_in_their_savepoints_and_share_it() {
        let (conn, shared) = connection();
        let (mut group, mut replies) = split(vec![insert(1), insert(2)]);
        // Joined after the first two ran: a write, and one that fails (its savepoint undoes it alone); then, once
        // those ran, one more; then none.
        let mut later = vec![
            vec![
                insert(3),
                request(WriteKind::Grouped, |c| {
                    c.execute("INSERT INTO t VALUES (4)", [])?;
                    c.execute("INSERT INTO nowhere VALUES (1)", [])
                }),
            ],
            vec![insert(5)],
        ]
        .into_iter();
        let mut asked = 0;
        let mut outcomes = Outcomes::new();
        let committed = commit_group(&conn, &shared, &mut group, &mut outcomes, |group| {
            asked += 1;
            // Asked once every write so far has run, in the open transaction.
            assert_eq!(group.len(), [2, 4, 5][asked - 1]);
            assert_eq!(rows(&conn).len(), [2, 3, 4][asked - 1]);
            for (request, reply) in later.next().into_iter().flatten() {
                group.push(request);
                replies.push(reply);
            }
        });
        assert_eq!(committed, Ok(true));
        assert_eq!(asked, 3, "asked until it added none");
        let answers = answer(group, outcomes, replies);
        assert!(
            matches!(answers[..], [Ok(1), Ok(1), Ok(1), Err(_), Ok(1)]),
            "{answers:?}"
        );
        assert_eq!(rows(&conn), [1, 2, 3, 5]);
        assert_eq!(shared.commit_seq(), 1, "one commit for all of them");
    }

    #[test]
    fn a_lone_write_is_joined_by_nothing() {
        let (conn, shared) = connection();
        let (mut group, replies) = split(vec![insert(1)]);
        let mut outcomes = Outcomes::new();
        let committed = commit_group(&conn, &shared, &mut group, &mut outcomes, |_| {
            panic!("a lone write runs without a savepoint: nothing may join it")
        });
        assert_eq!(committed, Ok(true));
        assert!(matches!(answer(group, outcomes, replies)[..], [Ok(1)]));
    }

    #[test]
    fn a_failing_write_rolls_back_alone_and_the_group_commits() {
        let (conn, shared) = connection();
        let (mut group, replies) = split(vec![
            insert(1),
            request(WriteKind::Grouped, |c| {
                c.execute("INSERT INTO t VALUES (2)", [])?;
                c.execute("INSERT INTO nowhere VALUES (1)", [])
            }),
            insert(3),
        ]);
        let mut outcomes = Outcomes::new();
        assert_eq!(
            commit_group(&conn, &shared, &mut group, &mut outcomes, |_| {}),
            Ok(true)
        );
        assert!(outcomes.iter().all(Option::is_none), "{outcomes:?}");
        let answers = answer(group, outcomes, replies);
        assert!(matches!(answers[0], Ok(1)));
        assert!(matches!(&answers[1], Err(Error::Sqlite(e)) if e.to_string().contains("nowhere")));
        assert!(matches!(answers[2], Ok(1)));
        // The failing write's first insert went with its savepoint.
        assert_eq!(rows(&conn), [1, 3]);
        assert_eq!(shared.commit_seq(), 1);
        assert_eq!(shared.metrics.rollbacks.load(Ordering::Relaxed), 1);
    }

    #[test]
    fn a_panicking_write_rolls_back_alone() {
        let (conn, shared) = connection();
        let (mut group, replies) = split(vec![
            insert(1),
            request(WriteKind::Grouped, |c| {
                c.execute("INSERT INTO t VALUES (2)", [])?;
                panic!("boom")
            }),
            insert(3),
        ]);
        let mut outcomes = Outcomes::new();
        assert_eq!(
            commit_group(&conn, &shared, &mut group, &mut outcomes, |_| {}),
            Ok(true)
        );
        let answers = answer(group, outcomes, replies);
        assert!(matches!(&answers[1], Err(Error::Panic { message }) if message == "boom"));
        assert_eq!(rows(&conn), [1, 3]);
        assert_eq!(shared.metrics.panics.load(Ordering::Relaxed), 1);
    }

    #[test]
    fn a_failed_commit_fails_every_write_of_the_group() {
        let (conn, shared) = connection();
        // The orphan passes its own statement (the key is checked at COMMIT), so only the COMMIT fails.
        let (mut group, replies) = split(vec![
            insert(1),
            request(WriteKind::Grouped, |c| {
                c.execute("INSERT INTO child VALUES (42)", [])
            }),
            request(WriteKind::GroupedStatement, |c| {
                c.execute("INSERT INTO t VALUES (3)", [])
            }),
        ]);
        let mut outcomes = Outcomes::new();
        assert_eq!(
            commit_group(&conn, &shared, &mut group, &mut outcomes, |_| {}),
            Ok(false)
        );
        for outcome in &outcomes {
            assert!(
                matches!(outcome, Some(Error::CommitFailed { batch: 3, .. })),
                "{outcome:?}"
            );
        }
        let answers = answer(group, outcomes, replies);
        assert!(
            answers
                .iter()
                .all(|a| matches!(a, Err(Error::CommitFailed { .. })))
        );
        assert!(rows(&conn).is_empty(), "nothing of the group was committed");
        assert!(conn.conn().is_autocommit(), "the transaction is over");
        assert_eq!(shared.commit_seq(), 0, "no commit is published");
        assert_eq!(shared.metrics.failed_commits.load(Ordering::Relaxed), 1);
    }

    #[test]
    fn a_transaction_sqlite_rolls_back_fails_the_writes_before_and_the_group_goes_on() {
        let (conn, shared) = connection();
        let (mut group, replies) = split(vec![
            insert(1),
            request(WriteKind::Grouped, |c| {
                c.execute("INSERT INTO undo VALUES (1)", [])
            }),
            insert(3),
        ]);
        let mut outcomes = Outcomes::new();
        assert_eq!(
            commit_group(&conn, &shared, &mut group, &mut outcomes, |_| {}),
            Ok(true)
        );
        assert!(
            matches!(&outcomes[0], Some(Error::RolledBack { reason }) if reason.contains("undone"))
        );
        assert!(matches!(&outcomes[1], Some(Error::RolledBack { .. })));
        assert!(outcomes[2].is_none(), "the rest ran in a new transaction");
        let answers = answer(group, outcomes, replies);
        // The write that caused it reports its own error; the one before it hears that it was rolled back.
        assert!(matches!(answers[0], Err(Error::RolledBack { .. })));
        assert!(
            matches!(&answers[1], Err(Error::Sqlite(_))),
            "{:?}",
            answers[1]
        );
        assert!(matches!(answers[2], Ok(1)));
        assert_eq!(rows(&conn), [3]);
        assert_eq!(shared.metrics.rolled_back_groups.load(Ordering::Relaxed), 1);
    }

    #[test]
    fn transaction_control_in_a_write_is_refused_and_rolls_back_alone() {
        let (conn, shared) = connection();
        let (mut group, replies) = split(vec![
            insert(1),
            request(WriteKind::Grouped, |c| {
                c.execute("INSERT INTO t VALUES (2)", [])?;
                c.execute_batch("COMMIT").map(|()| 0)
            }),
            insert(3),
        ]);
        let mut outcomes = Outcomes::new();
        assert_eq!(
            commit_group(&conn, &shared, &mut group, &mut outcomes, |_| {}),
            Ok(true)
        );
        let answers = answer(group, outcomes, replies);
        assert!(
            matches!(&answers[1], Err(e) if e.sqlite_code() == Some(rusqlite::ErrorCode::AuthorizationForStatementDenied)),
            "{:?}",
            answers[1]
        );
        assert_eq!(rows(&conn), [1, 3]);
    }

    #[test]
    fn a_write_that_needs_its_own_transaction_runs_alone() {
        let (mut conn, shared) = connection();
        // Committed: its own BEGIN … COMMIT, published.
        let (mut ok, ok_rx) = request(WriteKind::Transaction, |c| {
            c.execute("INSERT INTO t VALUES (1)", [])?;
            c.execute("INSERT INTO t VALUES (2)", [])
        });
        assert!(run_alone(&mut conn, &shared, &mut ok).is_none());
        assert_eq!(shared.commit_seq(), 1);
        // Failing: rolled back whole; its own error is its answer.
        let (mut failing, failing_rx) = request(WriteKind::Transaction, |c| {
            c.execute("INSERT INTO t VALUES (3)", [])?;
            c.execute("INSERT INTO t VALUES (1)", [])
        });
        assert!(run_alone(&mut conn, &shared, &mut failing).is_none());
        // Managing its own transactions, and leaving one open: rolled back and reported.
        let (mut unmanaged, unmanaged_rx) = request(WriteKind::Unmanaged, |c| {
            c.execute_batch("BEGIN; INSERT INTO t VALUES (4);")?;
            Ok(0)
        });
        let left_open = run_alone(&mut conn, &shared, &mut unmanaged);
        assert!(
            matches!(left_open, Some(Error::TransactionLeftOpen)),
            "{left_open:?}"
        );
        let answers = answer(
            vec![ok, failing, unmanaged],
            vec![None, None, left_open],
            vec![ok_rx, failing_rx, unmanaged_rx],
        );
        assert!(matches!(answers[0], Ok(1)));
        assert!(
            matches!(&answers[1], Err(Error::Sqlite(_))),
            "{:?}",
            answers[1]
        );
        assert!(matches!(answers[2], Err(Error::TransactionLeftOpen)));
        assert_eq!(rows(&conn), [1, 2]);
        assert!(conn.conn().is_autocommit());
    }

    #[test]
    fn a_lone_statement_commits_without_begin() {
        let (mut conn, shared) = connection();
        let (mut lone, rx) = request(WriteKind::GroupedStatement, |c| {
            c.execute("INSERT INTO t VALUES (7)", [])
        });
        assert!(run_alone(&mut conn, &shared, &mut lone).is_none());
        assert!(matches!(answer(vec![lone], vec![None], vec![rx])[0], Ok(1)));
        assert_eq!((rows(&conn), shared.commit_seq()), (vec![7], 1));
    }

    #[test]
    fn every_kind_of_write_runs_as_blocking_work() {
        use std::sync::Arc;
        use std::sync::atomic::{AtomicBool, AtomicUsize};

        // A registry's write thread raises its flag while a write runs, so that its lane grows for a write that
        // blocks and its read threads do not yield to a thread that is merely outside work.
        let (flag, raised) = (
            Arc::new(AtomicBool::new(false)),
            Arc::new(AtomicUsize::new(0)),
        );
        crate::util::flag_blocking_work(flag.clone(), raised);
        let (mut conn, shared) = connection();
        for kind in [
            WriteKind::Grouped,
            WriteKind::GroupedStatement,
            WriteKind::Transaction,
            WriteKind::Unmanaged,
        ] {
            let seen = flag.clone();
            let (mut write, rx) =
                request(kind, move |_| Ok(usize::from(seen.load(Ordering::SeqCst))));
            let outcome = run_alone(&mut conn, &shared, &mut write);
            let answers = answer(vec![write], vec![outcome], vec![rx]);
            assert!(
                matches!(answers[0], Ok(1)),
                "{kind:?} ran outside blocking work: {:?}",
                answers[0]
            );
            assert!(!flag.load(Ordering::SeqCst), "lowered after {kind:?}");
        }
    }
}
