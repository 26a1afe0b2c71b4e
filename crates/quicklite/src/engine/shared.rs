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
    /// The number of the last commit a snapshot begun now may hold: one past `commit_seq` while a commit is under
    /// way (it is visible to new snapshots before its `COMMIT` returns and it is published), else `commit_seq`.
    visible_seq: AtomicU64,
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
        self.published.commit_seq.load(Ordering::SeqCst)
    }

    /// The commits a read made now must see, at least: every one that a snapshot begun now may hold, which is one
    /// more than [`Shared::commit_seq`] while a commit is under way. A read that reuses a snapshot needs one
    /// whose [`Shared::commit_seq`] at its beginning was at least this: otherwise a read on another connection may
    /// already have seen a commit this snapshot lacks, and the caller would see the database go back.
    pub(crate) fn visible_seq(&self) -> u64 {
        self.published.visible_seq.load(Ordering::SeqCst)
    }

    /// Says a commit is under way: called before its `COMMIT` (or the autocommit statement, or the application's
    /// own transaction control) runs; [`Shared::publish_commit`] or [`Shared::commit_abandoned`] follows.
    pub(crate) fn commit_starts(&self) {
        self.published
            .visible_seq
            .store(self.commit_seq() + 1, Ordering::SeqCst);
    }

    /// The commit under way did not happen.
    pub(crate) fn commit_abandoned(&self) {
        self.published
            .visible_seq
            .store(self.commit_seq(), Ordering::SeqCst);
    }

    /// Makes a commit visible to read-your-writes: readers serving requests made after this point start a new
    /// snapshot if theirs is older. Called once the `COMMIT` has returned.
    pub(crate) fn publish_commit(&self) {
        let seq = self.published.commit_seq.fetch_add(1, Ordering::SeqCst) + 1;
        self.published.visible_seq.store(seq, Ordering::SeqCst);
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
