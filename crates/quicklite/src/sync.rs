//! The atomics and locks of the hand-written concurrency (the request queue, a pooled database's claims, its closing
//! and reopening with the pool's ranked locks, the pool's permits under its caps), swapped for loom's when the crate
//! is built with `--cfg quicklite_loom` so that their model checks explore every interleaving: `RUSTFLAGS="--cfg quicklite_loom" cargo test -p quicklite --lib model_`
//! (scripts/test.sh runs it). A `cfg` rather than a Cargo feature, as tokio does with its own: features must be
//! additive, and one that swaps every lock for loom's would break every other test of a build that turns all features
//! on.

#[cfg(quicklite_loom)]
pub(crate) use loom::sync::{Arc, Condvar, Mutex, MutexGuard, atomic};
#[cfg(not(quicklite_loom))]
pub(crate) use std::sync::{Arc, Condvar, Mutex, MutexGuard, atomic};

use atomic::{AtomicUsize, Ordering};

/// Adds one to `counter` if it is below `cap`; whether it did. A compare-and-swap from a value below the cap, never
/// an increment checked afterwards, so the counter is never past the cap, even for a moment.
pub(crate) fn increment_below(counter: &AtomicUsize, cap: usize) -> bool {
    let mut n = counter.load(Ordering::SeqCst);
    while n < cap {
        match counter.compare_exchange_weak(n, n + 1, Ordering::SeqCst, Ordering::SeqCst) {
            Ok(_) => return true,
            Err(now) => n = now,
        }
    }
    false
}
