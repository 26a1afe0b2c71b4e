//! A write transaction held across `.await`: once its `BEGIN IMMEDIATE` ran, the writer runs the steps its caller
//! sends, one at a time, and waits for the next one in between — up to the transaction's limit, past which it rolls
//! the transaction back and goes back to its queue.
//!
//! The transaction ends on the caller's commit or rollback, when its handle is dropped (the channel closes), at its
//! limit, or when a step leaves it in a state that cannot commit: a step panicked, its caller stopped waiting for
//! its answer (so it cannot know what ran), or SQLite rolled the transaction back. A step that merely fails (a
//! constraint, malformed SQL) leaves the transaction open, as sqlx's does: SQLite undoes a failing statement, and
//! a step of several statements runs in a savepoint of its own, rolled back to when it fails.
//!
//! The commit is the one a write that runs alone makes ([`group`]): the witness publishes it to read-your-writes
//! and tells it to subscribers, and the writer checkpoints after it as after any other.

use std::sync::atomic::Ordering;
use std::sync::mpsc::RecvTimeoutError;
use std::time::{Duration, Instant};

use crate::engine::Shared;
use crate::engine::group::{self, BEGIN};
use crate::engine::guard::{Control, GuardedConnection};
use crate::request::held::{Held, Message, STEP_DROPPED};
use crate::request::{Ran, WriteJob, WriteRequest};
use crate::util::blocking_work;
use crate::{Error, RequestKind};

/// Runs a held transaction's request ([`WriteKind::Held`](crate::request::WriteKind::Held)): its `BEGIN
/// IMMEDIATE`, then its steps until it ends. Returns its outcome, as [`group::run_alone`] does: a `BEGIN` that
/// failed, or how the transaction ended if not as its caller asked.
pub(crate) fn run(
    conn: &GuardedConnection,
    shared: &Shared,
    request: &mut WriteRequest,
) -> Option<Error> {
    if let Some(deadline) = request.deadline
        && deadline.passed(Instant::now())
    {
        // Past its deadline already (it waited in the queue): answered without running.
        request
            .job
            .fail_later(deadline.error(RequestKind::Write, false));
        return None;
    }
    let Some(held) = request.job.held() else {
        debug_assert!(false, "a held transaction's request without its channels");
        return Some(Error::Closed);
    };
    let began = Instant::now();
    // The change log holds this transaction's changes only.
    shared.changes.discard();
    if let Err(e) = conn.control(BEGIN) {
        return Some(Error::copy_sqlite(&e));
    }
    serve(conn, shared, held, began)
}

/// Serves the transaction `held`, whose `BEGIN` ran at `began`, until it ends; returns the failure its request is
/// answered with (`None` once committed or rolled back as asked, or if nobody waits any more).
fn serve(
    conn: &GuardedConnection,
    shared: &Shared,
    held: &mut Held,
    began: Instant,
) -> Option<Error> {
    let outcome = serve_steps(conn, shared, held, began);
    held.end();
    if conn.roll_back_open() {
        // Not committed: rolled back, whatever ended it.
        shared.metrics.rollbacks.fetch_add(1, Ordering::Relaxed);
    }
    shared
        .metrics
        .held_transaction_us
        .record_duration(began.elapsed());
    outcome
}

/// [`serve`]'s loop; a transaction it leaves open is rolled back by the caller.
fn serve_steps(
    conn: &GuardedConnection,
    shared: &Shared,
    held: &mut Held,
    began: Instant,
) -> Option<Error> {
    let limit = held.limit;
    let expires = began + limit;
    let expired = || Error::TransactionExpired { limit };
    if !held.begun() {
        // Its caller stopped waiting (the future of `begin` dropped).
        return None;
    }
    loop {
        let wait = expires.saturating_duration_since(Instant::now());
        // Waiting for the caller is time spent outside quicklite, as a closure's is: a registry's write lane
        // counts the thread as blocked and grows while other databases' writes wait.
        let message = blocking_work(|| held.next(wait));
        let (mut job, savepoint) = match message {
            Ok(Message::Step { job, savepoint }) => (job, savepoint),
            Ok(Message::Commit) => {
                return group::commit_alone(conn, shared, began);
            }
            Ok(Message::Rollback) | Err(RecvTimeoutError::Disconnected) => return None,
            Err(RecvTimeoutError::Timeout) => {
                return Some(expire(shared, limit));
            }
        };
        if job.abandoned() {
            // Its caller dropped the step's future: it can never know whether the step ran.
            return Some(aborted(STEP_DROPPED));
        }
        match run_step(conn, shared, job.as_mut(), savepoint, expires) {
            Step::Open if job.abandoned() => {
                job.answer(None);
                return Some(aborted(STEP_DROPPED));
            }
            Step::Open => {
                job.answer(None);
            }
            Step::Expired => {
                held.end();
                job.fail_later(expired());
                job.answer(None);
                return Some(expire(shared, limit));
            }
            Step::Ended(reason) => {
                // The step's own error is its answer; the transaction's says why it ended.
                held.end();
                job.answer(None);
                return Some(aborted(&reason));
            }
        }
    }
}

/// How a step left the transaction.
enum Step {
    /// Open: the caller may go on.
    Open,
    /// Interrupted at the transaction's limit.
    Expired,
    /// Unable to commit, for this reason.
    Ended(String),
}

/// Runs one step, in a savepoint of its own if `savepoint`, interrupted at `expires`.
fn run_step(
    conn: &GuardedConnection,
    shared: &Shared,
    job: &mut dyn WriteJob,
    savepoint: bool,
    expires: Instant,
) -> Step {
    let metrics = &shared.metrics;
    if savepoint && let Err(e) = conn.control(Control::Savepoint) {
        job.fail_later(Error::copy_sqlite(&e));
        return Step::Open;
    }
    let mark = shared.changes.mark();
    let changed_before = conn.conn().total_changes();
    let ran = conn.run_until(Some(expires), || blocking_work(|| job.run(conn.conn())));
    if !ran.is_ok() && Instant::now() >= expires {
        return Step::Expired;
    }
    if ran == Ran::Panicked {
        metrics.panics.fetch_add(1, Ordering::Relaxed);
        return Step::Ended(
            job.error_message()
                .unwrap_or_else(|| "a step panicked".into()),
        );
    }
    if conn.conn().is_autocommit() {
        // SQLite rolled the whole transaction back by itself (`RAISE(ROLLBACK)`, an `OR ROLLBACK` conflict, an I/O
        // error, a full disk).
        let reason = job
            .error_message()
            .unwrap_or_else(|| "rolled back by SQLite".into());
        return Step::Ended(format!("SQLite rolled it back: {reason}"));
    }
    if savepoint {
        let ended = if ran.is_ok() {
            conn.control(Control::Release)
        } else {
            conn.control(Control::RollbackTo)
                .and_then(|()| conn.control(Control::Release))
        };
        if let Err(e) = ended {
            tracing::error!(error = %e, "could not end a held transaction's savepoint");
            return Step::Ended(format!("its savepoint could not end: {e}"));
        }
    }
    // What a failing step undid is not told to subscribers (a statement `OR FAIL` keeps what it changed).
    if !ran.is_ok() && (savepoint || conn.conn().total_changes() == changed_before) {
        shared.changes.undo_to(mark);
    }
    Step::Open
}

/// Counts and logs a transaction that ran past its `limit`; returns its failure.
fn expire(shared: &Shared, limit: Duration) -> Error {
    shared
        .metrics
        .held_transactions_expired
        .fetch_add(1, Ordering::Relaxed);
    tracing::warn!(
        ?limit,
        "a transaction held across .await ran past its limit: rolled back"
    );
    Error::TransactionExpired { limit }
}

/// The failure of a transaction ended for `reason`.
fn aborted(reason: &str) -> Error {
    Error::TransactionAborted {
        reason: reason.to_owned(),
    }
}
