//! A write transaction held across `.await` ([`Database::begin`](crate::Database::begin)): one request in the
//! writer's queue that, once its `BEGIN IMMEDIATE` ran, keeps the writer and runs the steps its caller sends one by
//! one, until a commit, a rollback, the caller's handle dropped, or its limit.
//!
//! The caller and the writer share three channels: `begun` (the writer tells the caller the transaction began),
//! the steps (bounded: a caller awaits each step's answer before it sends the next) and the request's own answer,
//! which carries how the transaction ended.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::time::Duration;

use rusqlite::Connection;
use tokio::sync::oneshot;

use crate::reply::{Answer, Relay, Reply};
use crate::request::{Ran, WriteJob};
use crate::{Error, Result};

/// Why a transaction ended whose step's future was dropped before its answer: its caller cannot know whether the
/// step ran, so the transaction must not commit.
pub(crate) const STEP_DROPPED: &str = "a statement's future was dropped before its answer";

/// What a held transaction's caller sends the writer.
pub(crate) enum Message {
    /// Run this step (a statement, or the caller's closure) in the open transaction, in a savepoint of its own if
    /// `savepoint` (a step of several statements, which must fail as a whole).
    Step {
        /// The step, answered by the writer once it ran.
        job: Box<dyn WriteJob>,
        /// Whether it runs in a savepoint of its own.
        savepoint: bool,
    },
    /// Commit; the request's answer says whether it did.
    Commit,
    /// Roll back.
    Rollback,
}

/// The writer's side of a held transaction.
pub(crate) struct Held {
    /// Told once the `BEGIN IMMEDIATE` ran; `None` after.
    begun: Option<oneshot::Sender<()>>,
    /// The caller's steps, commit or rollback; closed when its handle is dropped.
    steps: Receiver<Message>,
    /// How long the transaction may keep the writer, from its `BEGIN`.
    pub(crate) limit: Duration,
    /// Raised (before the answer of the step that ended it, if one did) once the transaction is over: the caller
    /// then learns why from the request's answer.
    over: Arc<AtomicBool>,
}

impl Held {
    /// Tells the caller that the transaction began; `false` if it stopped waiting for it.
    pub(crate) fn begun(&mut self) -> bool {
        self.begun.take().is_some_and(|tx| tx.send(()).is_ok())
    }

    /// The caller's next message, waiting up to `timeout`.
    pub(crate) fn next(&self, timeout: Duration) -> Result<Message, RecvTimeoutError> {
        self.steps.recv_timeout(timeout)
    }

    /// Marks the transaction over, for the caller's next step.
    pub(crate) fn end(&self) {
        self.over.store(true, Ordering::Release);
    }
}

/// The request of a held transaction: its job runs no closure of its own, its answer is how the transaction ended.
pub(crate) struct HeldJob {
    /// The writer's side of the channels.
    held: Held,
    /// How the transaction ended: set by the writer ([`WriteJob::resolve`], [`WriteJob::fail_later`]).
    result: Result<()>,
    /// Where that goes: the caller reads it when the transaction turns out to be over, or as its commit's answer.
    reply: oneshot::Sender<Answer<()>>,
}

/// The caller's side of a held transaction's channels, as [`HeldJob::new`] makes them.
pub(crate) struct HeldEnds {
    /// Receives once the transaction began; dropped unanswered if it never did (the answer on `ended` says why).
    pub(crate) begun: oneshot::Receiver<()>,
    /// Where the steps go.
    pub(crate) steps: std::sync::mpsc::SyncSender<Message>,
    /// How the transaction ended.
    pub(crate) ended: oneshot::Receiver<Answer<()>>,
    /// Raised once the transaction is over.
    pub(crate) over: Arc<AtomicBool>,
}

impl HeldJob {
    /// The job of a transaction that may keep the writer `limit` long, and the caller's ends of its channels.
    pub(crate) fn new(limit: Duration) -> (Box<HeldJob>, HeldEnds) {
        let (begun_tx, begun) = oneshot::channel();
        // One message at a time: a caller awaits each step's answer before it sends the next, and sends nothing
        // once a step's answer was lost (its future dropped).
        let (steps, steps_rx) = std::sync::mpsc::sync_channel(1);
        let (reply, ended) = oneshot::channel();
        let over = Arc::new(AtomicBool::new(false));
        let job = Box::new(HeldJob {
            held: Held {
                begun: Some(begun_tx),
                steps: steps_rx,
                limit,
                over: over.clone(),
            },
            result: Ok(()),
            reply,
        });
        let ends = HeldEnds {
            begun,
            steps,
            ended,
            over,
        };
        (job, ends)
    }
}

impl WriteJob for HeldJob {
    fn run(&mut self, _conn: &Connection) -> Ran {
        debug_assert!(
            false,
            "a held transaction is served by the writer's loop, not run"
        );
        Ran::Failed
    }

    fn run_mut(&mut self, _conn: &mut Connection) -> Ran {
        debug_assert!(
            false,
            "a held transaction is served by the writer's loop, not run"
        );
        Ran::Failed
    }

    fn error_message(&self) -> Option<String> {
        self.result.as_ref().err().map(ToString::to_string)
    }

    fn failed_busy(&self) -> bool {
        false
    }

    fn fail_later(&mut self, error: Error) {
        self.result = Err(error);
    }

    fn resolve(&mut self, failure: Option<Error>) -> bool {
        if let Some(failure) = failure {
            self.result = Err(failure);
        }
        self.result.is_err()
    }

    fn held(&mut self) -> Option<&mut Held> {
        Some(&mut self.held)
    }
}

impl Reply for HeldJob {
    fn reply(self: Box<Self>, relay: Option<Relay>) {
        self.held.end();
        let _ = self.reply.send(Answer {
            result: self.result,
            relay,
        });
    }

    fn abandoned(&self) -> bool {
        // Before it began, its caller waits on `begun`; after, on its steps and its end.
        match &self.held.begun {
            Some(begun) => begun.is_closed(),
            None => self.reply.is_closed(),
        }
    }
}
