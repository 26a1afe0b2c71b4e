//! Requests as they travel through the queues: a type-erased closure plus the channel its answer goes back on.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use rusqlite::Connection;
use tokio::sync::oneshot;

use crate::error::panic_message;
use crate::{Error, Result};

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
    /// Nothing: only makes sure the connection is open (a registry's database opens on first use, and reports
    /// an unusable file there). Not counted as a write.
    Open,
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
    /// The thread the request was made on ([`origin`]).
    pub(crate) origin: usize,
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
    /// The thread the request was made on ([`origin`]).
    pub(crate) origin: usize,
    pub(crate) enqueued: Instant,
    /// The caller's span, parent of the reader's span for this request.
    pub(crate) span: tracing::Span,
    pub(crate) job: Box<dyn ReadJob>,
}

/// Sending a caller its answer, once the answer is settled.
pub(crate) trait Reply: Send {
    /// Sends the settled answer, with answers for the caller to pass on.
    fn reply(self: Box<Self>, relay: Option<Relay>);
}

/// A write closure, run in two steps: run now, answer after the group's `COMMIT`.
pub(crate) trait WriteJob: Reply {
    /// Runs the closure (catching a panic). `Err` carries a message describing the failure.
    fn run(&mut self, conn: &Connection) -> Result<(), String>;
    /// Settles the answer: the closure's own error if it failed, else `failure` if the group failed, else its
    /// value. Returns whether the answer is an error.
    fn settle(&mut self, failure: Option<Error>) -> bool;
    /// Whether the closure panicked.
    fn panicked(&self) -> bool;

    /// Settles the answer and sends it. Returns whether it is an error.
    fn finish(mut self: Box<Self>, failure: Option<Error>) -> bool {
        let failed = self.settle(failure);
        self.reply(None);
        failed
    }
}

/// A read closure: run, then answered (the reader may hold answers back briefly to hand them over together).
pub(crate) trait ReadJob: Reply {
    /// Runs the closure (catching a panic) and keeps its result. Returns `(ok, panicked)`.
    fn run(&mut self, conn: &Connection) -> (bool, bool);
    /// Answers the caller with `error` without running the closure (its database could not be opened).
    fn fail(self: Box<Self>, error: Error);
}

/// Answers one caller passes on to others once it has its own.
///
/// Waking a task from a thread outside its runtime takes a lock on the runtime's shared queue and often wakes a
/// sleeping worker thread; waking it from a worker thread is a push onto that worker's own queue. So a reader hands
/// a batch's answers to one caller, whose task delivers the rest from inside the runtime. The thread that issued
/// the relay keeps a handle on it ([`Relays`]) and delivers whatever is still undelivered after [`RELAY_GRACE`], so
/// a caller that is slow to be polled (or never is again) delays the others by that much at most. Dropping a relay
/// delivers what it still carries. Every answer is sent exactly once, by whoever comes first.
#[derive(Clone)]
pub(crate) struct Relay(Arc<Mutex<Vec<Box<dyn Reply>>>>);

impl Relay {
    /// Sends every answer the relay still carries.
    pub(crate) fn deliver(&self) {
        let jobs = std::mem::take(&mut *self.0.lock().unwrap_or_else(PoisonError::into_inner));
        for job in jobs {
            job.reply(None);
        }
    }
}

impl Drop for Relay {
    fn drop(&mut self) {
        self.deliver();
    }
}

/// How long a relay's carrier has to pass its answers on before the thread that issued it sends them itself.
pub(crate) const RELAY_GRACE: Duration = Duration::from_millis(1);

/// Settled answers waiting to be sent, each with the thread its request came from ([`origin`]).
pub(crate) type Answers = Vec<(usize, Box<dyn Reply>)>;

/// The relays a worker thread issued and may still have to deliver itself.
#[derive(Default)]
pub(crate) struct Relays {
    issued: Vec<(Instant, Relay)>,
}

impl Relays {
    /// Sends every answer in `answers`: per thread the requests came from, one caller gets its answer together
    /// with the others', to pass on. A thread belongs to one runtime at a time, so no caller waits for a task of
    /// another runtime (which may be busy) to deliver its answer. First delivers what relays older than
    /// [`RELAY_GRACE`] still carry.
    pub(crate) fn answer_all(&mut self, answers: &mut Answers) {
        let now = Instant::now();
        if let Some(due) = now.checked_sub(RELAY_GRACE) {
            self.deliver_issued_before(due);
        }
        while let Some((origin, leader)) = answers.pop() {
            let others: Vec<Box<dyn Reply>> = answers
                .extract_if(.., |(from, _)| *from == origin)
                .map(|(_, job)| job)
                .collect();
            if others.is_empty() {
                leader.reply(None);
            } else {
                let relay = Relay(Arc::new(Mutex::new(others)));
                self.issued.push((now, relay.clone()));
                leader.reply(Some(relay));
            }
        }
    }

    /// Delivers what relays issued before `due` still carry, and forgets them.
    fn deliver_issued_before(&mut self, due: Instant) {
        let keep = self.issued.partition_point(|(at, _)| *at < due);
        // Dropping a relay delivers it.
        self.issued.drain(..keep);
    }

    /// Delivers what every issued relay still carries, and forgets them.
    pub(crate) fn deliver_all(&mut self) {
        self.issued.clear();
    }

    /// Whether relays may still carry undelivered answers.
    pub(crate) fn pending(&self) -> bool {
        !self.issued.is_empty()
    }
}

/// An identifier of the calling thread, unique among live threads (the address of a thread-local).
pub(crate) fn origin() -> usize {
    thread_local!(static MARK: u8 = const { 0 });
    MARK.with(|mark| std::ptr::from_ref(mark) as usize)
}

/// What a caller receives: its result, and maybe answers to pass on.
pub(crate) struct Answer<T> {
    result: Result<T>,
    relay: Option<Relay>,
}

/// Waits for the answer on `rx`, passes on what came with it, and returns the caller's own result.
pub(crate) async fn receive<T>(rx: oneshot::Receiver<Answer<T>>) -> Result<T> {
    let Answer { result, relay } = rx.await.map_err(|_| Error::Closed)?;
    drop(relay);
    result
}

/// The concrete job behind both traits.
pub(crate) struct Job<F, T> {
    f: Option<F>,
    out: Option<Result<T>>,
    panicked: bool,
    reply: oneshot::Sender<Answer<T>>,
}

impl<F, T> Job<F, T>
where
    F: FnOnce(&Connection) -> rusqlite::Result<T> + Send + 'static,
    T: Send + 'static,
{
    /// Wraps `f`; the answer arrives on the returned receiver.
    pub(crate) fn new(f: F) -> (Box<Self>, oneshot::Receiver<Answer<T>>) {
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

    fn settle(&mut self, failure: Option<Error>) -> bool {
        let answer = match (self.out.take(), failure) {
            (Some(Err(own)), _) => Err(own),
            (_, Some(failure)) => Err(failure),
            (Some(Ok(v)), None) => Ok(v),
            (None, None) => Err(Error::Closed),
        };
        let failed = answer.is_err();
        self.out = Some(answer);
        failed
    }

    fn panicked(&self) -> bool {
        self.panicked
    }
}

impl<F, T> Reply for Job<F, T>
where
    F: FnOnce(&Connection) -> rusqlite::Result<T> + Send + 'static,
    T: Send + 'static,
{
    fn reply(self: Box<Self>, relay: Option<Relay>) {
        let result = self.out.unwrap_or(Err(Error::Closed));
        // A caller that stopped waiting (the write's fate does not depend on it) drops the answer here, and with it
        // the relay, which then delivers what it carries.
        let _ = self.reply.send(Answer { result, relay });
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

    fn fail(mut self: Box<Self>, error: Error) {
        self.out = Some(Err(error));
        self.reply(None);
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
        assert!(WriteJob::run(job.as_mut(), &conn).is_err());
        assert!(job.finish(Some(Error::Closed)));
        assert!(matches!(result(&mut rx), Some(Err(Error::Sqlite(_)))));
    }

    #[test]
    fn write_job_success_turns_into_group_failure() {
        let conn = Connection::open_in_memory().unwrap();
        let (mut job, mut rx) = Job::new(|_: &Connection| Ok(5));
        assert!(WriteJob::run(job.as_mut(), &conn).is_ok());
        assert!(job.finish(Some(Error::RolledBack { reason: "x".into() })));
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
        assert_eq!(ReadJob::run(job.as_mut(), &conn), (false, true));
        assert!(rx.try_recv().is_err(), "answered only on reply");
        Reply::reply(job, None);
        match result(&mut rx) {
            Some(Err(Error::Panic { message })) => assert_eq!(message, "boom"),
            other => panic!("unexpected {other:?}"),
        }
    }

    /// Five answered reads: `origins[i]` is the thread request `i` came from.
    fn answered(origins: &[usize]) -> (Answers, Vec<oneshot::Receiver<Answer<usize>>>) {
        let conn = Connection::open_in_memory().unwrap();
        let mut answers = Answers::new();
        let mut receivers = Vec::new();
        for (i, &origin) in origins.iter().enumerate() {
            let (mut job, rx) = Job::new(move |_: &Connection| Ok(i));
            assert_eq!(ReadJob::run(job.as_mut(), &conn), (true, false));
            answers.push((origin, job));
            receivers.push(rx);
        }
        (answers, receivers)
    }

    #[test]
    fn one_caller_per_thread_carries_the_others_answers() {
        let (mut answers, mut receivers) = answered(&[7, 8, 7, 7, 8]);
        let mut relays = Relays::default();
        relays.answer_all(&mut answers);
        assert!(answers.is_empty());
        // The last request of each thread leads: 4 for thread 7, 3 for thread 8; the others wait for them.
        let mut leaders = Vec::new();
        let mut carried = Vec::new();
        for (i, rx) in receivers.iter_mut().enumerate() {
            if let Ok(answer) = rx.try_recv() {
                assert_eq!(answer.result.unwrap(), i);
                let relay = answer.relay.expect("a leader carries the others' answers");
                leaders.push((i, relay.0.lock().unwrap().len()));
                carried.push(relay);
            }
        }
        assert_eq!(leaders, vec![(3, 2), (4, 1)]);
        for i in [0, 1, 2] {
            assert!(
                result(&mut receivers[i]).is_none(),
                "{i} waits for its leader"
            );
        }
        // The leaders pass their answers on.
        drop(carried);
        for (i, rx) in receivers.iter_mut().enumerate() {
            if i != 3 && i != 4 {
                assert_eq!(result(rx).unwrap().unwrap(), i);
            }
        }
        // Already delivered: the issuing side finds nothing left to send.
        relays.deliver_all();
        assert!(!relays.pending());
    }

    #[test]
    fn a_relay_whose_carrier_stopped_waiting_still_delivers() {
        let mut relays = Relays::default();
        let (mut answers, mut receivers) = answered(&[1, 1, 1]);
        // The leader (the last request) has given up: its receiver is gone before the answers are sent.
        drop(receivers.pop());
        relays.answer_all(&mut answers);
        for (i, rx) in receivers.iter_mut().enumerate() {
            assert_eq!(result(rx).unwrap().unwrap(), i);
        }

        // The leader gives up after its answer (and the relay) arrived, without reading it.
        let (mut answers, mut receivers) = answered(&[1, 1, 1]);
        relays.answer_all(&mut answers);
        assert!(result(&mut receivers[0]).is_none(), "waits for the leader");
        drop(receivers.pop());
        for (i, rx) in receivers.iter_mut().enumerate() {
            assert_eq!(result(rx).unwrap().unwrap(), i);
        }
    }

    #[test]
    fn answers_a_carrier_sits_on_are_sent_after_the_grace() {
        let mut relays = Relays::default();
        let (mut answers, mut receivers) = answered(&[1, 1, 1]);
        relays.answer_all(&mut answers);
        // The leader has its answer and the relay in its channel, but is never polled.
        let _leader = receivers.pop();
        assert!(relays.pending());
        assert!(
            result(&mut receivers[0]).is_none(),
            "within the grace, the leader is waited for"
        );
        // Past the grace, the next hand-over sends what the relay still carries.
        std::thread::sleep(RELAY_GRACE * 2);
        relays.answer_all(&mut Answers::new());
        assert!(!relays.pending());
        for (i, rx) in receivers.iter_mut().enumerate() {
            assert_eq!(result(rx).unwrap().unwrap(), i);
        }
    }
}
