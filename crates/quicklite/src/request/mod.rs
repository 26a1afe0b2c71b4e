//! Requests as they travel through the queues: a type-erased closure, the thread it came from, and the channel its
//! answer goes back on.

pub(crate) mod held;
mod watch;

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::time::{Duration, Instant};

use rusqlite::Connection;
use tokio::sync::oneshot;

use crate::cost::Site;
use crate::error::panic_message;
use crate::reply::{Answer, CallerThread, Relay, Reply};
use crate::{Error, RequestKind, Result};
use watch::Watch;

pub(crate) use watch::caller_gone;

/// When a request times out, with the timeout it was given (for the error).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Deadline {
    pub(crate) at: Instant,
    timeout: Duration,
}

impl Deadline {
    /// The deadline of a request made now, by the shortest of `timeouts` that are set; `None` if none is.
    pub(crate) fn shortest(
        timeouts: impl IntoIterator<Item = Option<Duration>>,
    ) -> Option<Deadline> {
        let timeout = timeouts.into_iter().flatten().min()?;
        Some(Deadline {
            at: Instant::now() + timeout,
            timeout,
        })
    }

    /// Whether it has passed at `now`.
    pub(crate) fn passed(&self, now: Instant) -> bool {
        now >= self.at
    }

    /// The error of a `request` past this deadline, which `ran` (interrupted) or not.
    pub(crate) fn error(&self, request: RequestKind, ran: bool) -> Error {
        Error::Timeout {
            timeout: self.timeout,
            request,
            ran,
        }
    }
}

/// How a write request wants to be run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum WriteKind {
    /// Inside a savepoint of a group transaction, committed together with its neighbours.
    Grouped,
    /// One statement in a group transaction, without a savepoint: a statement is atomic by itself (SQLite undoes
    /// a failing statement's changes), and a savepoint would copy every page the statement touches into a journal.
    GroupedStatement,
    /// Alone, in a `BEGIN IMMEDIATE` … `COMMIT` of its own.
    Transaction,
    /// Alone, on the connection in autocommit mode, with transaction control allowed (VACUUM, PRAGMAs, migrations
    /// that manage their own transactions).
    Unmanaged,
    /// Alone, in a `BEGIN IMMEDIATE` … `COMMIT` whose steps its caller sends one by one while it awaits other
    /// things ([`held`]): the writer serves nothing else until it ends.
    Held,
}

impl WriteKind {
    /// Whether the request joins a group transaction.
    pub(crate) fn is_grouped(self) -> bool {
        matches!(self, WriteKind::Grouped | WriteKind::GroupedStatement)
    }
}

/// A write request in the writer's queue.
pub(crate) struct WriteRequest {
    pub(crate) kind: WriteKind,
    /// The thread the request was made on: its answer travels with that thread's others.
    pub(crate) caller: CallerThread,
    pub(crate) enqueued: Instant,
    /// The caller's span, parent of the writer's span for this request.
    pub(crate) span: tracing::Span,
    /// When the request times out, if it has a timeout. A grouped write must start by then; a write that runs alone
    /// ([`WriteKind::Transaction`], [`WriteKind::Unmanaged`]) must also finish by then (interrupting it rolls back
    /// nothing else).
    pub(crate) deadline: Option<Deadline>,
    /// Its call site, if its writes may run on their callers' threads, and the bound on their cost there
    /// ([`Config::inline_write_max`](crate::config::Config::inline_write_max)): what its runs cost is learnt wherever
    /// they run ([`crate::cost`]).
    pub(crate) site: Option<(Site, Duration)>,
    pub(crate) job: Box<dyn WriteJob>,
    /// Its room among the database's writes in flight, when their answers wait for object storage
    /// ([`Gated::room`](crate::gate::Gated::room)); given back with its answer.
    pub(crate) permit: Option<tokio::sync::OwnedSemaphorePermit>,
}

/// A read request in the readers' queue.
pub(crate) struct ReadRequest {
    /// The writer's commit sequence number when the request was made: the snapshot that serves it must be at
    /// least this new (read-your-writes).
    pub(crate) min_seq: u64,
    /// When the request times out, if it has a timeout.
    pub(crate) deadline: Option<Deadline>,
    /// Whether the closure runs exactly one statement (`query_row`, `query_all`): alone in the queue, it needs no
    /// read transaction around it, as one statement sees one snapshot by itself.
    pub(crate) one_statement: bool,
    /// The call site, whose cost the reader records, if reads of it may run on their callers' threads.
    pub(crate) site: Option<Site>,
    /// The thread the request was made on: its answer travels with that thread's others.
    pub(crate) caller: CallerThread,
    pub(crate) enqueued: Instant,
    /// The caller's span, parent of the reader's span for this request.
    pub(crate) span: tracing::Span,
    pub(crate) job: Box<dyn ReadJob>,
}

/// How running a request's closure ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Ran {
    /// It returned `Ok`.
    Ok,
    /// It returned an error.
    Failed,
    /// It panicked (the panic was caught).
    Panicked,
}

impl Ran {
    pub(crate) fn is_ok(self) -> bool {
        self == Ran::Ok
    }
}

/// A write closure, run in two steps: run now, answered once its group's fate is known.
pub(crate) trait WriteJob: Reply {
    /// Runs the closure (catching a panic) and keeps its result.
    fn run(&mut self, conn: &Connection) -> Ran;
    /// Runs the closure with the connection itself (a write that runs alone).
    fn run_mut(&mut self, conn: &mut Connection) -> Ran;
    /// The closure's own error, described, if it failed.
    fn error_message(&self) -> Option<String>;
    /// Whether the closure failed with `SQLITE_BUSY`: a lock it needed was held elsewhere past the busy handler's
    /// wait.
    fn failed_busy(&self) -> bool;
    /// Replaces the answer with `error` (the write ran past its deadline, or never ran because of it).
    fn fail_later(&mut self, error: Error);
    /// The writer's side of a held transaction, if this is one's request ([`WriteKind::Held`]).
    fn held(&mut self) -> Option<&mut held::Held> {
        None
    }
    /// Decides the answer: the closure's own error if it failed, else `group_failure` if its group failed, else
    /// its value. Returns whether the answer is an error.
    fn resolve(&mut self, group_failure: Option<Error>) -> bool;

    /// Decides the answer and sends it. Returns whether it is an error.
    fn answer(mut self: Box<Self>, group_failure: Option<Error>) -> bool {
        let failed = self.resolve(group_failure);
        self.reply(None);
        failed
    }
}

/// A read closure: run, then answered (the reader may hold answers back briefly to hand them over together).
pub(crate) trait ReadJob: Reply {
    /// Runs the closure (catching a panic) and keeps its result.
    fn run(&mut self, conn: &Connection) -> Ran;
    /// Answers the caller with `error` without running the closure (its database could not be opened).
    fn fail(self: Box<Self>, error: Error);
    /// Replaces the answer with `error` (the request ran past its deadline).
    fn fail_later(&mut self, error: Error);
}

/// A request's closure, as its caller gave it: one that takes the connection shared (`&Connection`), or one that
/// takes it exclusively (`&mut Connection`, for work that runs alone on the writer).
pub(crate) trait Closure<T>: Send + 'static {
    /// Calls the closure with a shared connection.
    fn call(self, conn: &Connection) -> rusqlite::Result<T>;
    /// Calls the closure with the connection itself.
    fn call_mut(self, conn: &mut Connection) -> rusqlite::Result<T>;
}

/// A closure that takes `&Connection`.
pub(crate) struct RefClosure<F>(F);

impl<F, T> Closure<T> for RefClosure<F>
where
    F: FnOnce(&Connection) -> rusqlite::Result<T> + Send + 'static,
{
    fn call(self, conn: &Connection) -> rusqlite::Result<T> {
        (self.0)(conn)
    }

    fn call_mut(self, conn: &mut Connection) -> rusqlite::Result<T> {
        (self.0)(conn)
    }
}

/// A closure that takes `&mut Connection`: queued only as a write that runs alone
/// ([`WriteKind::Unmanaged`]), which the writer runs with [`WriteJob::run_mut`].
pub(crate) struct MutClosure<F>(F);

impl<F, T> Closure<T> for MutClosure<F>
where
    F: FnOnce(&mut Connection) -> rusqlite::Result<T> + Send + 'static,
{
    fn call(self, _conn: &Connection) -> rusqlite::Result<T> {
        debug_assert!(
            false,
            "a closure that needs the connection itself was given a shared one"
        );
        Err(rusqlite::Error::InvalidQuery)
    }

    fn call_mut(self, conn: &mut Connection) -> rusqlite::Result<T> {
        (self.0)(conn)
    }
}

/// The concrete job behind both traits.
pub(crate) struct Job<C, T> {
    state: JobState<C, T>,
    reply: oneshot::Sender<Answer<T>>,
}

/// Where a job is in its life.
enum JobState<C, T> {
    /// Queued: the closure has not run.
    Queued(C),
    /// Run (or failed without running): the answer to send.
    Done(Result<T>),
}

impl<F, T> Job<RefClosure<F>, T>
where
    F: FnOnce(&Connection) -> rusqlite::Result<T> + Send + 'static,
    T: Send + 'static,
{
    /// Wraps `f`; the answer arrives on the returned receiver.
    pub(crate) fn new(f: F) -> (Box<Self>, oneshot::Receiver<Answer<T>>) {
        Job::with(RefClosure(f))
    }
}

impl<F, T> Job<MutClosure<F>, T>
where
    F: FnOnce(&mut Connection) -> rusqlite::Result<T> + Send + 'static,
    T: Send + 'static,
{
    /// Wraps `f`, which needs the connection itself; the answer arrives on the returned receiver.
    pub(crate) fn exclusive(f: F) -> (Box<Self>, oneshot::Receiver<Answer<T>>) {
        Job::with(MutClosure(f))
    }
}

impl<C, T> Job<C, T>
where
    C: Closure<T>,
    T: Send + 'static,
{
    fn with(closure: C) -> (Box<Self>, oneshot::Receiver<Answer<T>>) {
        let (reply, rx) = oneshot::channel();
        let job = Box::new(Job {
            state: JobState::Queued(closure),
            reply,
        });
        (job, rx)
    }

    fn call(&mut self, call: impl FnOnce(C) -> rusqlite::Result<T>) -> Ran {
        self.call_watched(false, call)
    }

    /// Runs the closure; with `watched`, [`caller_gone`] answers for this job's caller meanwhile.
    fn call_watched(&mut self, watched: bool, call: impl FnOnce(C) -> rusqlite::Result<T>) -> Ran {
        let state = std::mem::replace(&mut self.state, JobState::Done(Err(Error::Closed)));
        let JobState::Queued(closure) = state else {
            // Each request is taken from its queue once and run once; nothing runs a job twice.
            debug_assert!(false, "a request ran twice");
            self.state = state;
            return Ran::Failed;
        };
        let outcome = {
            let _watch = watched.then(|| Watch::set(&self.reply));
            catch_unwind(AssertUnwindSafe(|| call(closure)))
        };
        let (out, ran) = match outcome {
            Ok(Ok(v)) => (Ok(v), Ran::Ok),
            Ok(Err(e)) => (Err(Error::from_closure(e)), Ran::Failed),
            Err(payload) => (
                Err(Error::Panic {
                    message: panic_message(payload.as_ref()),
                }),
                Ran::Panicked,
            ),
        };
        self.state = JobState::Done(out);
        ran
    }
}

impl<C, T> WriteJob for Job<C, T>
where
    C: Closure<T>,
    T: Send + 'static,
{
    fn run(&mut self, conn: &Connection) -> Ran {
        self.call(|c| c.call(conn))
    }

    fn run_mut(&mut self, conn: &mut Connection) -> Ran {
        self.call(|c| c.call_mut(conn))
    }

    fn fail_later(&mut self, error: Error) {
        self.state = JobState::Done(Err(error));
    }

    fn error_message(&self) -> Option<String> {
        match &self.state {
            JobState::Done(Err(e)) => Some(e.to_string()),
            _ => None,
        }
    }

    fn failed_busy(&self) -> bool {
        matches!(&self.state, JobState::Done(Err(e)) if e.sqlite_code() == Some(rusqlite::ErrorCode::DatabaseBusy))
    }

    fn resolve(&mut self, group_failure: Option<Error>) -> bool {
        let state = std::mem::replace(&mut self.state, JobState::Done(Err(Error::Closed)));
        let answer = match (state, group_failure) {
            (JobState::Done(Err(own)), _) => Err(own),
            (_, Some(failure)) => Err(failure),
            (JobState::Done(Ok(v)), None) => Ok(v),
            // Never run, and its group did not fail: nothing can be said of it but that it did not run.
            (JobState::Queued(_), None) => Err(Error::Closed),
        };
        let failed = answer.is_err();
        self.state = JobState::Done(answer);
        failed
    }
}

impl<C, T> Reply for Job<C, T>
where
    C: Closure<T>,
    T: Send + 'static,
{
    fn reply(self: Box<Self>, relay: Option<Relay>) {
        let result = match self.state {
            JobState::Done(result) => result,
            JobState::Queued(_) => Err(Error::Closed),
        };
        // A caller that stopped waiting (the write's fate does not depend on it) drops the answer here, and with it
        // the relay, which then delivers what it carries.
        let _ = self.reply.send(Answer { result, relay });
    }

    fn abandoned(&self) -> bool {
        self.reply.is_closed()
    }
}

impl<C, T> ReadJob for Job<C, T>
where
    C: Closure<T>,
    T: Send + 'static,
{
    fn run(&mut self, conn: &Connection) -> Ran {
        // A read has no effect but its answer: once nobody waits for it, SQLite's progress handler stops it.
        self.call_watched(true, |c| c.call(conn))
    }

    fn fail(mut self: Box<Self>, error: Error) {
        self.state = JobState::Done(Err(error));
        self.reply(None);
    }

    fn fail_later(&mut self, error: Error) {
        self.state = JobState::Done(Err(error));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The result that came on `rx`, if any (dropping any relay with it, which delivers what it carries).
    fn result<T>(rx: &mut oneshot::Receiver<Answer<T>>) -> Option<Result<T>> {
        rx.try_recv().ok().map(|answer| answer.result)
    }

    #[test]
    fn write_job_reports_own_error_before_group_failure() {
        let conn = Connection::open_in_memory().unwrap();
        let (mut job, mut rx) = Job::new(|c: &Connection| c.execute("not sql", []));
        assert_eq!(WriteJob::run(job.as_mut(), &conn), Ran::Failed);
        assert!(job.answer(Some(Error::Closed)));
        assert!(matches!(result(&mut rx), Some(Err(Error::Sqlite(_)))));
    }

    #[test]
    fn write_job_success_turns_into_group_failure() {
        let conn = Connection::open_in_memory().unwrap();
        let (mut job, mut rx) = Job::new(|_: &Connection| Ok(5));
        assert_eq!(WriteJob::run(job.as_mut(), &conn), Ran::Ok);
        assert!(job.answer(Some(Error::RolledBack { reason: "x".into() })));
        assert!(matches!(
            result(&mut rx),
            Some(Err(Error::RolledBack { .. }))
        ));
    }

    #[test]
    fn panics_are_caught() {
        let conn = Connection::open_in_memory().unwrap();
        let (mut job, mut rx) =
            Job::new(|_: &Connection| -> rusqlite::Result<()> { panic!("boom") });
        assert_eq!(ReadJob::run(job.as_mut(), &conn), Ran::Panicked);
        assert!(rx.try_recv().is_err(), "answered only on reply");
        Reply::reply(job, None);
        match result(&mut rx) {
            Some(Err(Error::Panic { message })) => assert_eq!(message, "boom"),
            other => panic!("unexpected {other:?}"),
        }
    }
}
