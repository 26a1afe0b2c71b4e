//! How a consumer waits before it sleeps: it spins ([`Spin`]), and the queue knows when the spinning consumer last
//! looked ([`Heartbeat`]), so that a push does not leave its request to a consumer that was descheduled.

#[cfg(not(quicklite_loom))]
use std::time::{Duration, Instant};

#[cfg(not(quicklite_loom))]
use crate::sync::atomic::Ordering;

/// How long a spinning consumer goes on yielding its CPU once the backoff's own spins (a few microseconds) are
/// over: longer than one task's round trip (the answer wakes its runtime, which polls it, and it sends the next
/// request), so that a caller with one request in flight finds its reader still awake (docs/design.md, "Figures
/// behind the design choices"). The price: a consumer whose queue stays empty burns up to this much CPU, yielding,
/// before it sleeps.
#[cfg(not(quicklite_loom))]
pub(super) const SPIN_FOR: Duration = Duration::from_micros(50);

/// How long a consumer spins: crossbeam's backoff, then yielding the CPU until [`SPIN_FOR`] has passed.
#[cfg(not(quicklite_loom))]
pub(super) struct Spin {
    backoff: crossbeam_utils::Backoff,
    started: Option<Instant>,
}

#[cfg(not(quicklite_loom))]
impl Spin {
    pub(super) fn new() -> Spin {
        Spin {
            backoff: crossbeam_utils::Backoff::new(),
            started: None,
        }
    }

    /// Waits a little; `false` once the spin is over.
    pub(super) fn again(&mut self) -> bool {
        if self.backoff.is_completed() {
            let since = *self.started.get_or_insert_with(Instant::now);
            if since.elapsed() >= SPIN_FOR {
                return false;
            }
        }
        self.backoff.snooze();
        true
    }
}

/// In a model check, a spin is two yields to the model's scheduler (time does not pass there).
#[cfg(quicklite_loom)]
pub(super) struct Spin(usize);

#[cfg(quicklite_loom)]
impl Spin {
    pub(super) fn new() -> Spin {
        Spin(2)
    }

    pub(super) fn again(&mut self) -> bool {
        if self.0 == 0 {
            return false;
        }
        self.0 -= 1;
        loom::thread::yield_now();
        true
    }
}

/// How long the spinning consumer may go without looking at the queue before a push takes it for descheduled and
/// wakes a sleeping consumer instead: far longer than a look and a yield take while CPUs are to be had (a few
/// microseconds), far shorter than a time slice.
#[cfg(not(quicklite_loom))]
pub(super) const STALLED_AFTER: Duration = Duration::from_micros(20);

/// When the spinning consumer last looked at the queue. A consumer that yields its CPU while every CPU is busy may
/// not get it back for a time slice (milliseconds); a push that left the request to it would wait as long, while
/// a sleeping consumer, once woken, is scheduled ahead of the busy threads.
#[cfg(not(quicklite_loom))]
pub(super) struct Heartbeat {
    epoch: Instant,
    /// Microseconds from `epoch` to the last look.
    at_us: std::sync::atomic::AtomicU64,
}

#[cfg(not(quicklite_loom))]
impl Heartbeat {
    pub(super) fn new() -> Heartbeat {
        Heartbeat {
            epoch: Instant::now(),
            at_us: std::sync::atomic::AtomicU64::new(0),
        }
    }

    fn now_us(&self) -> u64 {
        u64::try_from(self.epoch.elapsed().as_micros()).unwrap_or(u64::MAX)
    }

    /// The spinning consumer looks.
    pub(super) fn beat(&self) {
        self.at_us.store(self.now_us(), Ordering::Relaxed);
    }

    /// Whether the spinning consumer has not looked for [`STALLED_AFTER`].
    pub(super) fn stalled(&self) -> bool {
        let at = self.at_us.load(Ordering::Relaxed);
        self.now_us().saturating_sub(at) > STALLED_AFTER.as_micros() as u64
    }
}

/// In a model check, time does not pass: the spinning consumer never stalls.
#[cfg(quicklite_loom)]
pub(super) struct Heartbeat;

#[cfg(quicklite_loom)]
impl Heartbeat {
    pub(super) fn new() -> Heartbeat {
        Heartbeat
    }

    pub(super) fn beat(&self) {}

    pub(super) fn stalled(&self) -> bool {
        false
    }
}
