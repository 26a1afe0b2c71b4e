//! A caller's wait for its answer: awake (polling) while few callers wait, asleep otherwise.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use tokio::sync::oneshot;

use crate::util::cpus;

/// Waits for what comes on `rx`: awake while few callers wait, asleep otherwise ([`Awaiting`]).
pub(super) async fn wait_for<T>(
    rx: oneshot::Receiver<T>,
    asked: Asked,
) -> std::result::Result<T, oneshot::error::RecvError> {
    let limits = Limits {
        awake: awake_limit(asked),
        yielding: yielding_past(asked),
        poll_for: POLL_FOR,
    };
    Awaiting::new(rx, &WAITING, limits).await
}

/// Callers of the whole process waiting for an answer, less those that stayed awake for [`POLL_FOR`] without one
/// (they sleep until answered).
static WAITING: AtomicUsize = AtomicUsize::new(0);

/// How long a caller keeps its task awake, polling for its answer, before it lets the task sleep: longer than
/// most requests' round trips, a commit's included (docs/design.md, "Figures behind the design choices").
const POLL_FOR: Duration = Duration::from_micros(250);

/// What a caller asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Asked {
    /// A read.
    Read,
    /// A write.
    Write,
}

/// The most callers waiting at once for which a caller keeps its task awake. For a read, four per CPU: its answer
/// comes from one of several reader threads, within microseconds. For a write, one per CPU: its answer comes after
/// its group's commit on the one writer thread, whose CPU the callers kept awake would take. Past the limit answers
/// come in batches, relayed from inside the runtime, and its threads are better left to the other tasks.
fn awake_limit(asked: Asked) -> usize {
    match asked {
        Asked::Read => 4 * cpus(),
        Asked::Write => cpus(),
    }
}

/// Past how many callers waiting one that stays awake yields its thread's CPU at each poll. For a read, past one per
/// CPU: the threads that tasks kept busy would otherwise hold every CPU for whole time slices. For a write, always:
/// its answer needs the one writer thread, spinning or woken, to get a CPU, and so does the runtime's next timer; a
/// caller that polled without yielding and a spinning writer held both CPUs of a two-core machine, which left the
/// writer's wake-ups and the runtime's timers waiting for a time slice (docs/design.md, "Figures behind the design
/// choices").
fn yielding_past(asked: Asked) -> usize {
    match asked {
        Asked::Read => cpus(),
        Asked::Write => 0,
    }
}

/// When a caller stays awake, and how.
#[derive(Debug, Clone, Copy)]
struct Limits {
    /// The most callers waiting for which a caller stays awake.
    awake: usize,
    /// Past this many callers waiting, one that stays awake yields its thread's CPU at each poll.
    yielding: usize,
    /// How long a caller stays awake at most.
    poll_for: Duration,
}

/// A caller's wait for its answer. At low load, waking a sleeping runtime thread from a database thread costs more
/// than the request itself (the kernel's scheduling latency, paid on every round trip). So while few callers wait
/// (`waiting` counts them, up to `awake_limit`), the task wakes itself after each poll, and its runtime polls it
/// again as soon as its other tasks have had their turn, for up to `poll_for`; the database thread, spinning too,
/// finds the next request before it sleeps. Past `yielding` callers awake ([`yielding_past`]: more than CPUs for
/// reads, any for writes), each also yields its thread's CPU at every poll: threads that tasks kept busy this way
/// would otherwise hold the CPUs for whole time slices, and a database thread woken meanwhile (a writer's next
/// task) would wait for one. A caller still unanswered after `poll_for` (a long write) sleeps until answered and no
/// longer counts. With more callers waiting, each sleeps until answered: the price of staying awake, a runtime
/// thread kept busy, is then paid for nothing.
struct Awaiting<T> {
    rx: oneshot::Receiver<T>,
    since: Instant,
    waiting: &'static AtomicUsize,
    /// Whether this caller is in `waiting`.
    counted: bool,
    limits: Limits,
}

impl<T> Awaiting<T> {
    fn new(rx: oneshot::Receiver<T>, waiting: &'static AtomicUsize, limits: Limits) -> Awaiting<T> {
        waiting.fetch_add(1, Ordering::Relaxed);
        Awaiting {
            rx,
            since: Instant::now(),
            waiting,
            counted: true,
            limits,
        }
    }

    /// Whether the caller should stay awake (few callers wait, and it has not waited long; one that has leaves the
    /// count), and whether it should yield its thread's CPU meanwhile.
    fn stays_awake(&mut self) -> Awake {
        if !self.counted {
            return Awake::No;
        }
        if self.since.elapsed() >= self.limits.poll_for {
            self.leave();
            return Awake::No;
        }
        match self.waiting.load(Ordering::Relaxed) {
            n if n > self.limits.awake => Awake::No,
            n if n > self.limits.yielding => Awake::Yielding,
            _ => Awake::Yes,
        }
    }

    fn leave(&mut self) {
        if std::mem::replace(&mut self.counted, false) {
            self.waiting.fetch_sub(1, Ordering::Relaxed);
        }
    }
}

impl<T> Future for Awaiting<T> {
    type Output = std::result::Result<T, oneshot::error::RecvError>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let answer = Pin::new(&mut self.rx).poll(cx);
        if answer.is_pending() {
            match self.stays_awake() {
                Awake::No => {}
                Awake::Yes => cx.waker().wake_by_ref(),
                Awake::Yielding => {
                    std::thread::yield_now();
                    cx.waker().wake_by_ref();
                }
            }
        }
        answer
    }
}

/// Whether a caller stays awake.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Awake {
    No,
    Yes,
    /// Awake, yielding its thread's CPU at each poll.
    Yielding,
}

impl<T> Drop for Awaiting<T> {
    fn drop(&mut self) {
        self.leave();
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::task::{Wake, Waker};

    use super::*;
    use crate::Error;
    use crate::reply::{Answer, receive};

    /// A waker that counts its wake-ups.
    #[derive(Default)]
    struct Wakes(AtomicUsize);

    impl Wake for Wakes {
        fn wake(self: Arc<Self>) {
            self.wake_by_ref();
        }

        fn wake_by_ref(self: &Arc<Self>) {
            self.0.fetch_add(1, Ordering::Relaxed);
        }
    }

    fn poll<T>(awaiting: &mut Awaiting<T>, wakes: &Arc<Wakes>) -> bool {
        let waker = Waker::from(Arc::clone(wakes));
        Pin::new(awaiting)
            .poll(&mut Context::from_waker(&waker))
            .is_ready()
    }

    fn answer(value: u8) -> Answer<u8> {
        Answer {
            result: Ok(value),
            relay: None,
        }
    }

    /// Long enough for a test never to see it pass.
    const FOREVER: Duration = Duration::from_secs(3600);

    /// Up to `awake` callers stay awake, for `poll_for`, never yielding.
    fn limits(awake: usize, poll_for: Duration) -> Limits {
        Limits {
            awake,
            yielding: usize::MAX,
            poll_for,
        }
    }

    #[test]
    fn a_caller_waiting_alone_stays_awake_until_answered() {
        static WAITING: AtomicUsize = AtomicUsize::new(0);
        let (tx, rx) = oneshot::channel();
        let mut awaiting = Awaiting::new(rx, &WAITING, limits(1, FOREVER));
        let wakes = Arc::new(Wakes::default());

        assert!(!poll(&mut awaiting, &wakes));
        assert!(!poll(&mut awaiting, &wakes));
        assert_eq!(
            wakes.0.load(Ordering::Relaxed),
            2,
            "it woke itself after each poll"
        );

        tx.send(answer(7)).ok().unwrap();
        assert!(poll(&mut awaiting, &wakes));
        drop(awaiting);
        assert_eq!(WAITING.load(Ordering::Relaxed), 0);
    }

    #[test]
    fn a_caller_whose_time_is_up_sleeps_leaves_the_count_and_is_woken_by_its_answer() {
        static WAITING: AtomicUsize = AtomicUsize::new(0);
        let (tx, rx) = oneshot::channel();
        // Its time is up at the first poll.
        let mut awaiting = Awaiting::new(rx, &WAITING, limits(1, Duration::ZERO));
        let wakes = Arc::new(Wakes::default());

        assert!(!poll(&mut awaiting, &wakes));
        assert_eq!(wakes.0.load(Ordering::Relaxed), 0);
        assert_eq!(
            WAITING.load(Ordering::Relaxed),
            0,
            "a long wait does not keep others asleep"
        );

        // A caller that comes meanwhile is alone.
        let (_other_tx, other_rx) = oneshot::channel::<Answer<u8>>();
        let mut other = Awaiting::new(other_rx, &WAITING, limits(1, FOREVER));
        assert!(!poll(&mut other, &wakes));
        assert_eq!(wakes.0.load(Ordering::Relaxed), 1);

        tx.send(answer(7)).ok().unwrap();
        assert_eq!(wakes.0.load(Ordering::Relaxed), 2, "the answer wakes it");
        assert!(poll(&mut awaiting, &wakes));
        drop((awaiting, other));
        assert_eq!(WAITING.load(Ordering::Relaxed), 0);
    }

    #[test]
    fn callers_stay_awake_up_to_the_limit_and_sleep_past_it() {
        static WAITING: AtomicUsize = AtomicUsize::new(0);
        let channels: Vec<_> = (0..3).map(|_| oneshot::channel::<Answer<u8>>()).collect();
        let mut callers: Vec<_> = channels
            .into_iter()
            .map(|(tx, rx)| (tx, Awaiting::new(rx, &WAITING, limits(2, FOREVER))))
            .collect();
        let wakes = Arc::new(Wakes::default());

        assert!(!poll(&mut callers[0].1, &wakes));
        assert_eq!(
            wakes.0.load(Ordering::Relaxed),
            0,
            "three wait, two may stay awake"
        );

        let (_gone_tx, gone) = callers.pop().unwrap();
        drop(gone);
        assert!(!poll(&mut callers[0].1, &wakes));
        assert_eq!(wakes.0.load(Ordering::Relaxed), 1);
    }

    #[test]
    fn a_caller_awake_for_a_write_yields_at_each_poll_even_alone() {
        static WAITING: AtomicUsize = AtomicUsize::new(0);
        let limits = |asked| Limits {
            awake: awake_limit(asked),
            yielding: yielding_past(asked),
            poll_for: FOREVER,
        };
        let (_tx, rx) = oneshot::channel::<Answer<u8>>();
        let mut write = Awaiting::new(rx, &WAITING, limits(Asked::Write));
        assert_eq!(write.stays_awake(), Awake::Yielding);
        drop(write);
        let (_tx, rx) = oneshot::channel::<Answer<u8>>();
        let mut read = Awaiting::new(rx, &WAITING, limits(Asked::Read));
        assert_eq!(read.stays_awake(), Awake::Yes);
    }

    #[test]
    fn callers_awake_past_the_cpus_yield_at_each_poll() {
        static WAITING: AtomicUsize = AtomicUsize::new(0);
        let limits = Limits {
            awake: 4,
            yielding: 2,
            poll_for: FOREVER,
        };
        let channels: Vec<_> = (0..3).map(|_| oneshot::channel::<Answer<u8>>()).collect();
        let mut callers: Vec<_> = channels
            .into_iter()
            .map(|(tx, rx)| (tx, Awaiting::new(rx, &WAITING, limits)))
            .collect();
        assert_eq!(callers[0].1.stays_awake(), Awake::Yielding);
        drop(callers.pop());
        assert_eq!(callers[0].1.stays_awake(), Awake::Yes);
    }

    #[test]
    fn a_caller_that_gives_up_is_no_longer_counted() {
        static WAITING: AtomicUsize = AtomicUsize::new(0);
        let (_tx, rx) = oneshot::channel::<Answer<u8>>();
        let awaiting = Awaiting::new(rx, &WAITING, limits(1, FOREVER));
        assert_eq!(WAITING.load(Ordering::Relaxed), 1);
        drop(awaiting);
        assert_eq!(WAITING.load(Ordering::Relaxed), 0);
    }

    #[tokio::test]
    async fn a_closed_channel_is_an_error() {
        let (tx, rx) = oneshot::channel::<Answer<u8>>();
        drop(tx);
        assert!(matches!(receive(rx, Asked::Read).await, Err(Error::Closed)));
    }
}
