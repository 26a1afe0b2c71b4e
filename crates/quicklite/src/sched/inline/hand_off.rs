//! The async runtime's worker handed to another thread when a read on it runs past its bound.
//!
//! A read runs on its caller's thread only where the runtime can go on without that thread: a worker of tokio's
//! multi-threaded runtime ([`can_hand_off`]). There, once a read has run past its bound
//! ([`LONG_AFTER`](crate::engine::bound::LONG_AFTER), watched by SQLite's progress handler through
//! [`crate::engine::bound`]), the worker's core — its queue of tasks,
//! its turn at the timers and the I/O driver — goes to another thread as `tokio::task::block_in_place` moves it,
//! and the rest of the read runs on a thread the runtime no longer counts on. A short read never pays for this.
//!
//! The progress handler is called in the middle of a statement, so the rest of the read cannot run inside
//! `block_in_place`'s closure; the closure only waits until the core has left (a task spawned just before, which
//! lands in the worker's own queue, runs on whichever thread has the core), after which `block_in_place` does not
//! take it back.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use tokio::runtime::{Handle, RuntimeFlavor};

/// How long the read waits for another thread to take the core. The thread has to be started (or woken) and given a
/// CPU: tens of microseconds on an idle machine, milliseconds when every CPU is busy — a read that gave up sooner
/// would run on holding the worker, and the runtime's tasks with it. A thread that has not come by then is not
/// coming soon (the runtime's blocking pool is at its limit): the read goes on, and tries again once it has run as
/// long again.
const TAKEN_WITHIN: Duration = Duration::from_millis(100);

/// Whether a read may run on this thread: the async runtime here is tokio's multi-threaded one, whose other
/// threads go on while this one reads — a worker hands its core away should the read turn long ([`hand_off`]), and
/// the thread of `Runtime::block_on` serves no other task. On a single-threaded runtime (and under other
/// executors) the read's thread may be the runtime's only one, which a read that turns long would stall: reads
/// there go to the reader threads. (Tasks of a `LocalSet` share one thread that cannot be handed away: a read of
/// theirs that turns long holds it.)
///
/// Asking tokio takes a shared count on its runtime's handle (tens of nanoseconds when every worker asks at
/// every read), so a worker's answer is kept: a task of a multi-threaded runtime's worker stays one for the
/// thread's life. The thread of a `block_on`, which may serve one runtime after another, asks each time.
pub(crate) fn can_hand_off() -> bool {
    thread_local! {
        /// Whether this thread was found a multi-threaded runtime's when running a task.
        static IN_TASK_OF_MULTI_THREADED: std::cell::Cell<Option<bool>> = const { std::cell::Cell::new(None) };
    }
    let ask =
        || Handle::try_current().is_ok_and(|h| h.runtime_flavor() == RuntimeFlavor::MultiThread);
    if tokio::task::try_id().is_none() {
        return ask();
    }
    IN_TASK_OF_MULTI_THREADED.with(|known| match known.get() {
        Some(answer) => answer,
        None => {
            let answer = ask();
            known.set(Some(answer));
            answer
        }
    })
}

/// Hands this worker's core to another thread ([`crate::engine::bound::Bound::past`]); returns whether the core
/// left (or there was none to hand), else the read tries again later.
pub(crate) fn hand_off() -> bool {
    let Ok(handle) = Handle::try_current() else {
        return true;
    };
    // Outside a task (the thread of `Runtime::block_on`) there is no core to hand.
    if handle.runtime_flavor() != RuntimeFlavor::MultiThread || tokio::task::try_id().is_none() {
        return true;
    }
    let left = Arc::new(AtomicBool::new(false));
    let (signal, this) = (left.clone(), std::thread::current());
    handle.spawn(async move {
        signal.store(true, Ordering::Release);
        this.unpark();
    });
    let waited = catch_unwind(AssertUnwindSafe(|| {
        tokio::task::block_in_place(|| {
            let give_up = Instant::now() + TAKEN_WITHIN;
            while !left.load(Ordering::Acquire) {
                let now = Instant::now();
                if now >= give_up {
                    break;
                }
                std::thread::park_timeout(give_up - now);
            }
        })
    }));
    match waited {
        Ok(()) if left.load(Ordering::Acquire) => {
            tracing::debug!(
                "a read on its caller's thread ran past its bound: the runtime's worker went to another thread"
            );
            true
        }
        Ok(()) => false,
        // A `LocalSet`'s thread, which tokio does not let go: nothing to try again.
        Err(_) => true,
    }
}
