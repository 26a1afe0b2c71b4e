//! What a database's handle and every connection serving it share: the commit sequence and the live counters.

use std::sync::atomic::{AtomicU64, Ordering};

use crossbeam_utils::CachePadded;

use crate::cost::Costs;
use crate::metrics::Metrics;

/// State shared by a database's handle, its writer and its readers.
#[derive(Debug, Default)]
pub(crate) struct Shared {
    /// Number of transactions the writer has committed; readers compare it with a request's `min_seq`
    /// (read-your-writes).
    /// On a cache line of its own: every read loads it, and the counters beside it change on every request.
    commit_seq: CachePadded<AtomicU64>,
    /// Live counters.
    pub(crate) metrics: Metrics,
    /// What each call site's reads have cost lately.
    pub(crate) costs: Costs,
}

impl Shared {
    /// The commit sequence now: a snapshot begun after this load contains every commit numbered up to it.
    pub(crate) fn commit_seq(&self) -> u64 {
        self.commit_seq.load(Ordering::Acquire)
    }

    /// Makes a commit visible to read-your-writes: readers serving requests made after this point start a new
    /// snapshot if theirs is older. Called once the `COMMIT` has returned.
    pub(crate) fn publish_commit(&self) {
        self.commit_seq.fetch_add(1, Ordering::Release);
        self.metrics.commits.fetch_add(1, Ordering::Relaxed);
    }
}
