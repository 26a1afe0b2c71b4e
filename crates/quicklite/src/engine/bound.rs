//! Bounds on a read's run: what happens once a read has run long, enforced while it runs (SQLite's progress handler,
//! called every so many virtual-machine instructions of every statement, looks: [`check`]), not only learnt after.
//!
//! Past its bound ([`LONG_AFTER`]) a read is a long one, and two things happen:
//! - what its scheduler asked for ([`Bound::past`]): a read on its caller's thread hands the async runtime's worker
//!   to another thread ([`crate::sched`]; the engine knows nothing of who calls it);
//! - it takes its turn among the process's long reads ([`LongReads`]): at most one fewer than the CPUs run at once,
//!   the others wait (asleep, in the progress handler) for a turn. A read whose cost depends on its parameters may
//!   run short a thousand times and then for hundreds of milliseconds on several threads at once; run all together,
//!   such reads would take every CPU from the threads whose latency the service depends on — the async runtime's
//!   workers, its timers, the writer — and the runtime's timers would be late by tens of milliseconds. One CPU is
//!   always left to them. A read waiting for its turn still stops at its deadline, or once its caller stops waiting.

use std::cell::RefCell;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use crate::permits::{Permit, Permits};
use crate::util::cpus;

/// How long a read runs before it is a long one.
pub(crate) const LONG_AFTER: Duration = Duration::from_millis(1);

/// How long a long read that waits for its turn sleeps between two looks.
const TURN_LOOK_EVERY: Duration = Duration::from_micros(500);

/// A read's bound: when it is passed, and what its scheduler does then.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Bound {
    /// When the run passes it.
    pub(crate) at: Instant,
    /// Called once the run is past `at`, on the run's thread; returns whether it did what it had to (then it is
    /// not called again in this run), else is called again once the run is as long again.
    pub(crate) past: Option<fn() -> bool>,
}

impl Bound {
    /// The bound of a read that starts now and whose scheduler does nothing past it (a reader thread's).
    pub(crate) fn starting_now() -> Bound {
        Bound {
            at: Instant::now() + LONG_AFTER,
            past: None,
        }
    }
}

/// The process's turns for long reads: one fewer than the CPUs (at least one).
pub(crate) struct LongReads;

impl LongReads {
    fn turns() -> &'static Arc<Permits> {
        static TURNS: OnceLock<Arc<Permits>> = OnceLock::new();
        TURNS.get_or_init(|| Arc::new(Permits::new(cpus().saturating_sub(1).max(1))))
    }
}

/// The run bounded on this thread.
struct Run {
    bound: Bound,
    began: Instant,
    /// Whether `past` has done what it had to.
    past_done: bool,
    /// The long reads' turn it holds, once past its bound.
    turn: Option<Permit>,
}

thread_local! {
    /// The run bounded on this thread, if any.
    static RUN: RefCell<Option<Run>> = const { RefCell::new(None) };
}

/// Runs `f` with `bound` watched on this thread (a run within another keeps the outer one's bound); a turn among
/// the long reads that `f` took is given back when it ends.
pub(crate) fn within<T>(bound: Bound, f: impl FnOnce() -> T) -> T {
    struct End;
    impl Drop for End {
        fn drop(&mut self) {
            RUN.with(|run| run.borrow_mut().take());
        }
    }
    if RUN.with(|run| run.borrow().is_some()) {
        return f();
    }
    RUN.with(|run| {
        *run.borrow_mut() = Some(Run {
            bound,
            began: Instant::now(),
            past_done: bound.past.is_none(),
            turn: None,
        })
    });
    let _end = End;
    f()
}

/// For SQLite's progress handler: if the run on this thread is past its bound, does what its scheduler asked, then
/// waits for a turn among the long reads — until `stop` says the read is to stop (its deadline passed, its caller
/// left), which the progress handler then does.
pub(crate) fn check(stop: impl Fn() -> bool) {
    let now = Instant::now();
    let past = RUN.with(|run| {
        let mut run = run.borrow_mut();
        let run = run.as_mut()?;
        if now < run.bound.at || (run.past_done && run.turn.is_some()) {
            return None;
        }
        Some((run.past_done, run.bound.past, run.began))
    });
    let Some((past_done, past, began)) = past else {
        return;
    };
    if !past_done && let Some(past) = past {
        let done = past();
        RUN.with(|run| {
            if let Some(run) = run.borrow_mut().as_mut() {
                run.past_done = done;
                if !done {
                    // Not done: try again once the run is as long again.
                    let ran = now
                        .saturating_duration_since(began)
                        .max(Duration::from_micros(1));
                    run.bound.at = now + ran;
                }
            }
        });
    }
    if RUN.with(|run| run.borrow().as_ref().is_some_and(|run| run.turn.is_some())) {
        return;
    }
    let turns = LongReads::turns();
    let turn = loop {
        if let Some(turn) = turns.take_owned() {
            break Some(turn);
        }
        if stop() {
            break None;
        }
        std::thread::sleep(TURN_LOOK_EVERY);
    };
    RUN.with(|run| {
        if let Some(run) = run.borrow_mut().as_mut() {
            run.turn = turn;
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    static CALLS: AtomicUsize = AtomicUsize::new(0);

    fn counted() -> bool {
        CALLS.fetch_add(1, Ordering::SeqCst);
        true
    }

    #[test]
    fn past_its_bound_a_run_calls_past_once_takes_a_turn_and_gives_it_back() {
        CALLS.store(0, Ordering::SeqCst);
        let turns = LongReads::turns();
        let bound = Bound {
            at: Instant::now(),
            past: Some(counted),
        };
        within(bound, || {
            check(|| false);
            check(|| false);
            assert!(turns.taken() >= 1, "the run holds a turn");
        });
        assert_eq!(CALLS.load(Ordering::SeqCst), 1);
        check(|| false);
        assert_eq!(CALLS.load(Ordering::SeqCst), 1, "no run is bounded now");
        let later = Bound {
            at: Instant::now() + Duration::from_secs(3600),
            past: Some(counted),
        };
        within(later, || check(|| false));
        assert_eq!(CALLS.load(Ordering::SeqCst), 1, "not past the bound");
    }

    #[test]
    fn a_long_read_waits_for_a_turn_and_stops_waiting_when_told() {
        let turns = LongReads::turns();
        // Every turn taken elsewhere.
        let taken: Vec<_> = std::iter::from_fn(|| turns.take_owned()).collect();
        let stops = AtomicUsize::new(0);
        within(Bound::starting_now(), || {
            std::thread::sleep(LONG_AFTER);
            check(|| stops.fetch_add(1, Ordering::SeqCst) >= 3);
        });
        assert_eq!(
            stops.load(Ordering::SeqCst),
            4,
            "it waited until told to stop"
        );
        drop(taken);
    }
}
