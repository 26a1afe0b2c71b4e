//! The atomics of the hand-written scheduling protocols, swapped for loom's under the `model-check` feature so
//! that their model checks explore every interleaving. Only those checks enable it.

#[cfg(feature = "model-check")]
pub(crate) use loom::sync::atomic;
#[cfg(not(feature = "model-check"))]
pub(crate) use std::sync::atomic;
