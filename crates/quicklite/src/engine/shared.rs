//! What a database's handle and every connection serving it share: the commit sequence, whether a checkpoint waits
//! for readers, the live counters, and the change notifications.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use crossbeam_utils::CachePadded;

use crate::changes::Changes;
use crate::cost::Costs;
use crate::metrics::Metrics;

/// State shared by a database's handle, its writer and its readers.
#[derive(Debug, Default)]
pub(crate) struct Shared {
    /// On a cache line of their own: every read loads them, and the counters beside them change on every request.
    published: CachePadded<Published>,
    /// Live counters.
    pub(crate) metrics: Metrics,
    /// What each call site's reads have cost lately.
    pub(crate) costs: Costs,
    /// What each commit changed, for subscribers.
    pub(crate) changes: Changes,
}

/// What the writer tells every reader.
#[derive(Debug, Default)]
struct Published {
    /// Number of transactions the writer has committed; readers compare it with a request's `min_seq`
    /// (read-your-writes).
    commit_seq: AtomicU64,
    /// Whether a checkpoint is waiting for readers to leave the WAL (`RESTART`, `TRUNCATE`): snapshots kept between
    /// reads end after their next read meanwhile.
    checkpoint_waits: AtomicBool,
}

impl Shared {
    /// State whose commits are told to subscribers through `changes`.
    pub(crate) fn new(changes: Changes) -> Shared {
        Shared {
            changes,
            ..Shared::default()
        }
    }

    /// The commit sequence now: a snapshot begun after this load contains every commit numbered up to it.
    pub(crate) fn commit_seq(&self) -> u64 {
        self.published.commit_seq.load(Ordering::Acquire)
    }

    /// Makes a commit visible to read-your-writes: readers serving requests made after this point start a new
    /// snapshot if theirs is older. Called once the `COMMIT` has returned.
    pub(crate) fn publish_commit(&self) {
        let seq = self.published.commit_seq.fetch_add(1, Ordering::Release) + 1;
        self.metrics.commits.fetch_add(1, Ordering::Relaxed);
        self.changes.committed(seq);
    }

    /// Whether a checkpoint is waiting for readers now.
    pub(crate) fn checkpoint_waits(&self) -> bool {
        self.published.checkpoint_waits.load(Ordering::Relaxed)
    }

    /// Runs `checkpoint`, one that waits for readers, saying so to the readers that keep snapshots.
    pub(crate) fn while_checkpoint_waits<T>(&self, checkpoint: impl FnOnce() -> T) -> T {
        self.published
            .checkpoint_waits
            .store(true, Ordering::Relaxed);
        let out = checkpoint();
        self.published
            .checkpoint_waits
            .store(false, Ordering::Relaxed);
        out
    }
}
