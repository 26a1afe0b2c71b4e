//! Answers on their way back to callers: one caller per thread carries a batch's answers to the others.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::oneshot;

use crate::util::lock;
use crate::{Error, Result};

/// Sending a caller its answer, once the answer is decided.
pub(crate) trait Reply: Send {
    /// Sends the answer, with answers for the caller to pass on.
    fn reply(self: Box<Self>, relay: Option<Relay>);
    /// Whether the caller has stopped waiting for the answer (its future was dropped).
    fn abandoned(&self) -> bool;
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
pub(crate) struct Relay(pub(crate) Arc<Mutex<Vec<Box<dyn Reply>>>>);

impl Relay {
    /// Sends every answer the relay still carries.
    pub(crate) fn deliver(&self) {
        let jobs = std::mem::take(&mut *lock(&self.0));
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

/// Decided answers waiting to be sent, each with the thread its request came from.
pub(crate) type Answers = Vec<(CallerThread, Box<dyn Reply>)>;

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
        while let Some((caller, leader)) = answers.pop() {
            let others: Vec<Box<dyn Reply>> = answers
                .extract_if(.., |(from, _)| *from == caller)
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

/// The thread a request was made on, unique among live threads (the address of a thread-local): answers of one
/// batch travel together per caller thread.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct CallerThread(usize);

impl CallerThread {
    /// The calling thread.
    pub(crate) fn current() -> CallerThread {
        thread_local!(static MARK: u8 = const { 0 });
        MARK.with(|mark| CallerThread(std::ptr::from_ref(mark) as usize))
    }

    /// A made-up thread, for tests.
    #[cfg(test)]
    pub(crate) fn numbered(n: usize) -> CallerThread {
        CallerThread(n)
    }
}

/// What a caller receives: its result, and maybe answers to pass on.
pub(crate) struct Answer<T> {
    pub(crate) result: Result<T>,
    pub(crate) relay: Option<Relay>,
}

/// Waits for the answer on `rx`, passes on what came with it, and returns the caller's own result.
pub(crate) async fn receive<T>(rx: oneshot::Receiver<Answer<T>>) -> Result<T> {
    let Answer { result, relay } = rx.await.map_err(|_| Error::Closed)?;
    drop(relay);
    result
}
