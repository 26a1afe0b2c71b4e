//! The schedule's own thread: hands every request to the runtime when it is due, or drops it past the bound.
//!
//! It runs on an OS thread of its own, not on the runtime's workers, so an approach that blocks the workers (SQLite
//! called on them) cannot delay the schedule: requests are sent on time and the workers' delay shows in their
//! latency, measured from the due time.

#[cfg(test)]
use std::cell::Cell as StdCell;
use std::sync::Arc;
#[cfg(test)]
use std::time::Duration;
use std::time::Instant;

use hdrhistogram::Histogram;

use super::arrivals::Arrivals;
use super::in_flight::{InFlight, Permit};
use crate::driver::window::Window;

/// Where the dispatcher reads the time and waits: the system's clock, or a fake one in tests.
pub(super) trait Clock {
    /// The current instant.
    fn now(&self) -> Instant;
    /// Blocks the calling thread until `deadline` (or a little after).
    fn sleep_until(&self, deadline: Instant);
}

/// The system's monotonic clock, waiting with `std::thread::sleep`.
///
/// The thread sleeps rather than spins: spinning would burn a core the cell's CPU per operation would charge to
/// the approach. Its timer slack is lowered to the minimum (Linux), so a sleep ends within microseconds of its
/// deadline instead of the default slack's tens; requests due closer together than a sleep takes are sent in
/// one batch when it ends, each timed from its own due instant.
pub(super) struct SystemClock;

impl SystemClock {
    /// The clock for the calling thread, its timer slack lowered.
    pub(super) fn for_this_thread() -> Self {
        #[cfg(target_os = "linux")]
        // SAFETY: PR_SET_TIMERSLACK takes one integer argument and only changes the calling thread's timer slack.
        unsafe {
            libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong);
        }
        Self
    }
}

impl Clock for SystemClock {
    fn now(&self) -> Instant {
        Instant::now()
    }

    fn sleep_until(&self, deadline: Instant) {
        let wait = deadline.saturating_duration_since(Instant::now());
        if !wait.is_zero() {
            std::thread::sleep(wait);
        }
    }
}

/// One request the dispatcher sends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Due {
    /// Its place in the schedule.
    pub(super) index: u64,
    /// When it was due: its latency runs from here.
    pub(super) at: Instant,
    /// Whether it was due inside the measured window, so its outcome counts.
    pub(super) counted: bool,
}

/// What the dispatcher did with the requests due inside the window.
#[derive(Debug, Clone)]
pub(super) struct Sent {
    /// Requests handed to the runtime.
    pub(super) issued: u64,
    /// Requests dropped because the bound of requests in flight was reached.
    pub(super) dropped: u64,
    /// How late each issued request was handed over after its due time, in nanoseconds.
    pub(super) lateness: Histogram<u64>,
}

impl Sent {
    fn new() -> Self {
        Self {
            issued: 0,
            dropped: 0,
            lateness: Histogram::new(3)
                .expect("3 significant figures is a valid histogram precision"),
        }
    }
}

/// Sends the requests of `arrivals` due before the window's end, at most `in_flight`'s bound at once.
pub(super) struct Dispatcher {
    /// When each request is due.
    pub(super) arrivals: Arrivals,
    /// The warm-up's end and the window's: requests due before the warm-up ends are sent but not counted.
    pub(super) window: Window,
    /// The bound on requests in flight.
    pub(super) in_flight: Arc<InFlight>,
}

impl Dispatcher {
    /// Runs the schedule to the window's end on `clock`, calling `send` for each request the bound lets through
    /// (the permit travels with the request and is dropped when it finishes), and returns what happened to the
    /// requests due inside the window.
    pub(super) fn run(&self, clock: &impl Clock, mut send: impl FnMut(Due, Permit)) -> Sent {
        let mut sent = Sent::new();
        for index in 0.. {
            let at = self.arrivals.due(index);
            if at >= self.window.end {
                break;
            }
            let mut now = clock.now();
            if now < at {
                clock.sleep_until(at);
                now = clock.now();
            }
            let counted = at >= self.window.measure_start;
            match self.in_flight.try_enter() {
                Some(permit) => {
                    send(Due { index, at, counted }, permit);
                    if counted {
                        sent.issued += 1;
                        let late = now.saturating_duration_since(at).as_nanos() as u64;
                        let _ = sent.lateness.record(late.max(1));
                    }
                }
                None if counted => sent.dropped += 1,
                None => {}
            }
        }
        sent
    }
}

/// A clock that moves only when slept on, each sleep ending `overshoot` past its deadline: a schedule tested
/// without real time.
#[cfg(test)]
pub(super) struct FakeClock {
    /// The fake current instant.
    now: StdCell<Instant>,
    /// How late every sleep wakes.
    overshoot: Duration,
}

#[cfg(test)]
impl FakeClock {
    /// A clock at `start` whose sleeps end `overshoot` late.
    pub(super) fn new(start: Instant, overshoot: Duration) -> Self {
        Self {
            now: StdCell::new(start),
            overshoot,
        }
    }
}

#[cfg(test)]
impl Clock for FakeClock {
    fn now(&self) -> Instant {
        self.now.get()
    }

    fn sleep_until(&self, deadline: Instant) {
        self.now.set(self.now.get().max(deadline + self.overshoot));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    fn dispatcher(origin: Instant, rate: u64, bound: u32) -> Dispatcher {
        Dispatcher {
            arrivals: Arrivals::new(origin, rate),
            window: Window {
                measure_start: origin + 10 * MS,
                end: origin + 110 * MS,
            },
            in_flight: InFlight::new(bound),
        }
    }

    #[test]
    fn every_request_due_is_sent_at_its_due_time_when_answers_are_quick() {
        let origin = Instant::now();
        let clock = FakeClock::new(origin, Duration::ZERO);
        let d = dispatcher(origin, 1_000, 4);
        let mut sends = Vec::new();
        // Each request finishes at once: its permit is dropped as soon as it is sent.
        let sent = d.run(&clock, |due, _permit| sends.push((due, clock.now())));
        // 110 requests due before the end, 100 of them inside the window.
        assert_eq!(sends.len(), 110);
        assert_eq!((sent.issued, sent.dropped), (100, 0));
        assert_eq!(sends.iter().filter(|(due, _)| due.counted).count(), 100);
        for (due, sent_at) in &sends {
            assert_eq!(*sent_at, due.at, "request {} sent late", due.index);
            assert_eq!(due.at, origin + Duration::from_millis(due.index));
        }
        assert_eq!(
            sent.lateness.max(),
            1,
            "no lateness beyond the histogram's floor"
        );
    }

    #[test]
    fn a_slow_approach_does_not_slow_the_schedule_past_the_bound_requests_are_dropped() {
        let origin = Instant::now();
        let clock = FakeClock::new(origin, Duration::ZERO);
        let d = dispatcher(origin, 1_000, 4);
        // An approach that never answers: every permit is kept.
        let mut held = Vec::new();
        let mut due_times = Vec::new();
        let sent = d.run(&clock, |due, permit| {
            held.push(permit);
            due_times.push(due.at);
        });
        // The first four (due in the warm-up) fill the bound; every later one is dropped, and counted if due
        // inside the window. The schedule still reached the window's end on time.
        assert_eq!(held.len(), 4);
        assert_eq!((sent.issued, sent.dropped), (0, 100));
        assert_eq!(clock.now(), origin + 109 * MS);
        drop(held);
    }

    #[test]
    fn a_late_wake_up_sends_the_overdue_requests_at_once_timed_from_their_due_times() {
        let origin = Instant::now();
        // Every sleep ends 2.5 ms late: at 1,000 requests a second, three are due by the time it ends.
        let clock = FakeClock::new(origin, Duration::from_micros(2_500));
        let d = dispatcher(origin, 1_000, 64);
        let mut sends = Vec::new();
        let sent = d.run(&clock, |due, _permit| sends.push((due, clock.now())));
        assert_eq!(sends.len(), 110, "no request is lost to a late clock");
        assert_eq!(sent.issued + sent.dropped, 100);
        // Due instants stay on the schedule; the lateness is what the request waited to be sent.
        for (due, sent_at) in &sends {
            assert_eq!(due.at, origin + Duration::from_millis(due.index));
            assert!(*sent_at >= due.at);
        }
        assert!(sends.iter().any(|(due, at)| *at - due.at >= 2 * MS));
        assert!(sent.lateness.max() >= 2_000_000);
    }
}
