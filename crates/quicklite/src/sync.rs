//! The atomics and locks of the hand-written concurrency (the request queue, a pooled database's roles), swapped
//! for loom's under the `model-check` feature so that their model checks explore every interleaving. Only those
//! checks enable it.

#[cfg(feature = "model-check")]
pub(crate) use loom::sync::{Arc, Condvar, Mutex, MutexGuard, atomic};
#[cfg(not(feature = "model-check"))]
pub(crate) use std::sync::{Arc, Condvar, Mutex, MutexGuard, atomic};
