//! Requests as they travel through the queues: a type-erased closure plus the channel its answer goes back on.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::time::Instant;

use rusqlite::Connection;
use tokio::sync::oneshot;

use crate::error::panic_message;
use crate::{Error, Result};

/// How a write request wants to be run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum WriteKind {
    /// Inside a savepoint of a group transaction, committed together with its neighbours.
    Grouped,
    /// Alone, in a `BEGIN IMMEDIATE` … `COMMIT` of its own.
    Transaction,
    /// Alone, on the connection in autocommit mode, with transaction control allowed (VACUUM, PRAGMAs, migrations
    /// that manage their own transactions).
    Unmanaged,
    /// Nothing: only makes sure the connection is open (a registry's database opens on first use, and reports
    /// an unusable file there). Not counted as a write.
    Open,
}

/// A write request in the writer's queue.
pub(crate) struct WriteRequest {
    pub(crate) kind: WriteKind,
    pub(crate) enqueued: Instant,
    /// The caller's span, parent of the writer's span for this request.
    pub(crate) span: tracing::Span,
    pub(crate) job: Box<dyn WriteJob>,
}

/// A read request in the readers' queue.
pub(crate) struct ReadRequest {
    /// The writer's commit sequence number when the request was made: the snapshot that serves it must be at
    /// least this new (read-your-writes).
    pub(crate) min_seq: u64,
    pub(crate) enqueued: Instant,
    /// The caller's span, parent of the reader's span for this request.
    pub(crate) span: tracing::Span,
    pub(crate) job: Box<dyn ReadJob>,
}

/// A write closure, run in two steps: run now, answer after the group's `COMMIT`.
pub(crate) trait WriteJob: Send {
    /// Runs the closure (catching a panic). `Err` carries a message describing the failure.
    fn run(&mut self, conn: &Connection) -> Result<(), String>;
    /// Answers the caller: with the closure's own error if it failed, else with `failure` if the group did not
    /// commit, else with the closure's value.
    /// Answers the caller: the closure's own error if it failed, else `failure` if the group failed, else its
    /// value. Returns whether the answer is an error.
    fn finish(self: Box<Self>, failure: Option<Error>) -> bool;
    /// Whether the closure panicked.
    fn panicked(&self) -> bool;
}

/// A read closure: run, then answered (the reader may hold answers back briefly to hand them over together).
pub(crate) trait ReadJob: Send {
    /// Runs the closure (catching a panic) and keeps its result. Returns `(ok, panicked)`.
    fn run(&mut self, conn: &Connection) -> (bool, bool);
    /// Sends the kept result to the caller.
    fn reply(self: Box<Self>);
    /// Answers the caller with `error` without running the closure (its database could not be opened).
    fn fail(self: Box<Self>, error: Error);
}

/// The concrete job behind both traits.
pub(crate) struct Job<F, T> {
    f: Option<F>,
    out: Option<Result<T>>,
    panicked: bool,
    reply: oneshot::Sender<Result<T>>,
}

impl<F, T> Job<F, T>
where
    F: FnOnce(&Connection) -> rusqlite::Result<T> + Send + 'static,
    T: Send + 'static,
{
    /// Wraps `f`; the answer arrives on the returned receiver.
    pub(crate) fn new(f: F) -> (Box<Self>, oneshot::Receiver<Result<T>>) {
        let (reply, rx) = oneshot::channel();
        let job = Box::new(Job {
            f: Some(f),
            out: None,
            panicked: false,
            reply,
        });
        (job, rx)
    }

    fn call(&mut self, conn: &Connection) -> Result<T> {
        let Some(f) = self.f.take() else {
            return Err(Error::InvalidConfig("request ran twice".into()));
        };
        match catch_unwind(AssertUnwindSafe(|| f(conn))) {
            Ok(Ok(v)) => Ok(v),
            Ok(Err(e)) => Err(Error::Sqlite(e)),
            Err(payload) => {
                self.panicked = true;
                Err(Error::Panic {
                    message: panic_message(payload.as_ref()),
                })
            }
        }
    }
}

impl<F, T> WriteJob for Job<F, T>
where
    F: FnOnce(&Connection) -> rusqlite::Result<T> + Send + 'static,
    T: Send + 'static,
{
    fn run(&mut self, conn: &Connection) -> Result<(), String> {
        let out = self.call(conn);
        let status = match &out {
            Ok(_) => Ok(()),
            Err(e) => Err(e.to_string()),
        };
        self.out = Some(out);
        status
    }

    fn finish(self: Box<Self>, failure: Option<Error>) -> bool {
        let answer = match (self.out, failure) {
            (Some(Err(own)), _) => Err(own),
            (_, Some(failure)) => Err(failure),
            (Some(Ok(v)), None) => Ok(v),
            (None, None) => Err(Error::Closed),
        };
        let failed = answer.is_err();
        // The caller may have stopped waiting; the write's fate does not depend on it.
        let _ = self.reply.send(answer);
        failed
    }

    fn panicked(&self) -> bool {
        self.panicked
    }
}

impl<F, T> ReadJob for Job<F, T>
where
    F: FnOnce(&Connection) -> rusqlite::Result<T> + Send + 'static,
    T: Send + 'static,
{
    fn run(&mut self, conn: &Connection) -> (bool, bool) {
        let out = self.call(conn);
        let ok = out.is_ok();
        self.out = Some(out);
        (ok, self.panicked)
    }

    fn reply(self: Box<Self>) {
        let answer = self.out.unwrap_or(Err(Error::Closed));
        let _ = self.reply.send(answer);
    }

    fn fail(self: Box<Self>, error: Error) {
        let _ = self.reply.send(Err(error));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn write_job_reports_own_error_before_group_failure() {
        let conn = Connection::open_in_memory().unwrap();
        let (mut job, mut rx) = Job::new(|c: &Connection| c.execute("not sql", []));
        assert!(WriteJob::run(job.as_mut(), &conn).is_err());
        job.finish(Some(Error::Closed));
        assert!(matches!(rx.try_recv().unwrap(), Err(Error::Sqlite(_))));
    }

    #[test]
    fn write_job_success_turns_into_group_failure() {
        let conn = Connection::open_in_memory().unwrap();
        let (mut job, mut rx) = Job::new(|_: &Connection| Ok(5));
        assert!(WriteJob::run(job.as_mut(), &conn).is_ok());
        job.finish(Some(Error::RolledBack { reason: "x".into() }));
        assert!(matches!(
            rx.try_recv().unwrap(),
            Err(Error::RolledBack { .. })
        ));
    }

    #[test]
    fn panics_are_caught() {
        let conn = Connection::open_in_memory().unwrap();
        let (mut job, mut rx) =
            Job::new(|_: &Connection| -> rusqlite::Result<()> { panic!("boom") });
        assert_eq!(ReadJob::run(job.as_mut(), &conn), (false, true));
        assert!(rx.try_recv().is_err(), "answered only on reply");
        ReadJob::reply(job);
        match rx.try_recv().unwrap() {
            Err(Error::Panic { message }) => assert_eq!(message, "boom"),
            other => panic!("unexpected {other:?}"),
        }
    }
}
