//! A bound on a run on a thread the database does not own: the scheduler that runs a read on its caller's thread
//! says when the run is past its bound and what to do then ([`within`]); SQLite's progress handler, called every
//! so many virtual-machine instructions of every statement, looks ([`check`]). The engine knows nothing of who
//! calls it: what happens past the bound (the async runtime's worker handed to another thread) is the scheduler's.

use std::cell::Cell;
use std::time::{Duration, Instant};

/// A run's bound: when it is passed, and what to call then.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Bound {
    /// When the run passes it.
    pub(crate) at: Instant,
    /// Called once the run is past `at`, on the run's thread; returns whether it did what it had to (then it is
    /// not called again in this run), else is called again once the run is as long again.
    pub(crate) past: fn() -> bool,
}

thread_local! {
    /// The bound of the run on this thread, with when the run began; `None` if no run is bounded here.
    static BOUND: Cell<Option<(Bound, Instant)>> = const { Cell::new(None) };
}

/// Runs `f` with `bound` watched on this thread (a run within another keeps the outer one's bound).
pub(crate) fn within<T>(bound: Bound, f: impl FnOnce() -> T) -> T {
    struct Reset(Option<(Bound, Instant)>);
    impl Drop for Reset {
        fn drop(&mut self) {
            BOUND.with(|b| b.set(self.0));
        }
    }
    let outer = BOUND.with(|b| b.get());
    if outer.is_some() {
        return f();
    }
    let _reset = Reset(outer);
    BOUND.with(|b| b.set(Some((bound, Instant::now()))));
    f()
}

/// Calls the bound's `past` if the run on this thread has passed it (for SQLite's progress handler).
pub(crate) fn check() {
    let Some((bound, began)) = BOUND.with(|b| b.get()) else {
        return;
    };
    let now = Instant::now();
    if now < bound.at {
        return;
    }
    let next = if (bound.past)() {
        None
    } else {
        // Not done: try again once the run is as long again.
        let ran = now
            .saturating_duration_since(began)
            .max(Duration::from_micros(1));
        Some((
            Bound {
                at: now + ran,
                ..bound
            },
            began,
        ))
    };
    BOUND.with(|b| b.set(next));
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
    fn past_its_bound_a_run_calls_past_once_and_the_bound_ends_with_the_run() {
        CALLS.store(0, Ordering::SeqCst);
        let bound = Bound {
            at: Instant::now(),
            past: counted,
        };
        within(bound, || {
            check();
            check();
        });
        assert_eq!(CALLS.load(Ordering::SeqCst), 1);
        check();
        assert_eq!(CALLS.load(Ordering::SeqCst), 1, "no run is bounded now");
        let later = Bound {
            at: Instant::now() + Duration::from_secs(3600),
            past: counted,
        };
        within(later, check);
        assert_eq!(CALLS.load(Ordering::SeqCst), 1, "not past the bound");
    }
}
