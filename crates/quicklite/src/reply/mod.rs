//! Answers on their way back to callers: one caller per thread carries a batch's answers to the others
//! ([`Relays`]); a caller waits for its own awake or asleep ([`wait`]).

mod wait;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::oneshot;

use crate::util::lock;
use crate::{Error, Result};

pub(crate) use wait::Asked;

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
        self.answer_all_at(answers, Instant::now());
    }

    /// [`Relays::answer_all`] at `now`.
    fn answer_all_at(&mut self, answers: &mut Answers, now: Instant) {
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

/// Waits for the answer on `rx`, passes on what came with it, and returns the caller's own result.
pub(crate) async fn receive<T>(rx: oneshot::Receiver<Answer<T>>, asked: Asked) -> Result<T> {
    let Answer { result, relay } = wait::wait_for(rx, asked).await.map_err(|_| Error::Closed)?;
    drop(relay);
    result
}

/// The answer already sent on `rx` (a request answered on its caller's thread).
pub(crate) fn answered<T>(mut rx: oneshot::Receiver<Answer<T>>) -> Result<T> {
    let Answer { result, relay } = rx.try_recv().map_err(|_| Error::Closed)?;
    drop(relay);
    result
}

/// What a caller receives: its result, and maybe answers to pass on.
pub(crate) struct Answer<T> {
    pub(crate) result: Result<T>,
    pub(crate) relay: Option<Relay>,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An answer decided: `i`, for the caller at the other end of the channel.
    struct Decided(usize, oneshot::Sender<Answer<usize>>);

    impl Reply for Decided {
        fn reply(self: Box<Self>, relay: Option<Relay>) {
            // A caller that gave up drops the answer, and with it the relay, which delivers what it carries.
            let _ = self.1.send(Answer {
                result: Ok(self.0),
                relay,
            });
        }

        fn abandoned(&self) -> bool {
            self.1.is_closed()
        }
    }

    /// The result that came on `rx`, if any (dropping any relay with it, which delivers what it carries).
    fn result<T>(rx: &mut oneshot::Receiver<Answer<T>>) -> Option<Result<T>> {
        rx.try_recv().ok().map(|answer| answer.result)
    }

    /// Answers decided: `callers[i]` is the thread request `i` came from.
    fn answered(callers: &[usize]) -> (Answers, Vec<oneshot::Receiver<Answer<usize>>>) {
        let mut answers = Answers::new();
        let mut receivers = Vec::new();
        for (i, &caller) in callers.iter().enumerate() {
            let (tx, rx) = oneshot::channel();
            answers.push((CallerThread::numbered(caller), Box::new(Decided(i, tx))));
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
        relays.answer_all_at(&mut Answers::new(), Instant::now() + RELAY_GRACE * 2);
        assert!(!relays.pending());
        for (i, rx) in receivers.iter_mut().enumerate() {
            assert_eq!(result(rx).unwrap().unwrap(), i);
        }
    }
}
