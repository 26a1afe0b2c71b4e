//! What a database's handle and every connection serving it share: the commit sequence, whether a checkpoint waits
//! for readers, whether another connection contends for the write lock, the live counters, and the change
//! notifications.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};

use crossbeam_utils::CachePadded;

use crate::changes::Changes;
use crate::cost::Costs;
use crate::gate::Gated;
use crate::metrics::Metrics;
use crate::util::clock_ms;

/// How long after the writer last found the write lock held by another connection that connection still counts as
/// contending for it ([`Shared::write_lock_contended`]): SQLite's longest sleep between two tries for a lock, so
/// that another connection retrying on SQLite's schedule is not forgotten between two of its tries.
pub(crate) const CONTENDED_FOR_MS: u32 = 100;

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
    /// Where committed writes' answers wait for object storage, if they do
    /// ([`Acknowledge::Replicated`](crate::Acknowledge::Replicated)).
    pub(crate) gate: Option<Arc<Gated>>,
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
    /// Whether another connection has lately held the write lock when the writer wanted it
    /// ([`Shared::write_lock_contended`]): read by every read that could run on its caller's thread, so a flag
    /// beside the commit sequence, and the time below read only while it is set.
    write_lock_contended: AtomicBool,
    /// When the writer last found the write lock held by another connection, in [`clock_ms`].
    write_lock_held_at: AtomicU32,
}

impl Shared {
    /// State whose commits are told to subscribers through `changes`.
    pub(crate) fn new(changes: Changes, gate: Option<Arc<Gated>>) -> Shared {
        Shared {
            changes,
            gate,
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
    /// snapshot if theirs is older. Called once the `COMMIT` has returned, by the one thread that holds the writer's
    /// connection.
    ///
    /// The commit's notice goes out before its number: whoever reads the commit sequence finds the notices of every
    /// commit up to it (`Database::commit_seq`'s promise), also those of other callers' commits. Reads made
    /// meanwhile see the commit already: the sequence they must see moved when it began ([`Shared::commit_starts`]).
    pub(crate) fn publish_commit(&self) {
        let seq = self.commit_seq() + 1;
        self.changes.committed(seq);
        self.published.commit_seq.store(seq, Ordering::SeqCst);
        self.published.visible_seq.store(seq, Ordering::SeqCst);
        self.metrics.commits.fetch_add(1, Ordering::Relaxed);
    }

    /// Says the writer has just found the write lock held by another connection: its busy handler is waiting for
    /// it (quicklite has one writer per database, so the holder is another process, or a connection of this one
    /// the handle does not own).
    pub(crate) fn write_lock_held_elsewhere(&self) {
        let published = &self.published;
        published
            .write_lock_held_at
            .store(clock_ms(), Ordering::Relaxed);
        published
            .write_lock_contended
            .store(true, Ordering::Release);
    }

    /// Whether the writer found the write lock held by another connection within the last [`CONTENDED_FOR_MS`].
    /// While it did, reads stay off their callers' threads (issue 45): that connection takes the lock in any moment
    /// the writer leaves it free, and one committing back to back leaves it free for microseconds between its
    /// commits, which the writer's busy handler, trying every millisecond, seldom meets. So the writer keeps the
    /// lock only while its next writes come in before it has finished the last ones, and those come from tasks on
    /// the runtime's threads, which reads run inline without pause keep busy. An expired contention is cleared by
    /// the read that finds it so; a clear racing the writer's next mark loses that mark until its next try, a
    /// millisecond later.
    pub(crate) fn write_lock_contended(&self) -> bool {
        let published = &self.published;
        if !published.write_lock_contended.load(Ordering::Acquire) {
            return false;
        }
        let held_at = published.write_lock_held_at.load(Ordering::Relaxed);
        if clock_ms().wrapping_sub(held_at) < CONTENDED_FOR_MS {
            return true;
        }
        published
            .write_lock_contended
            .store(false, Ordering::Relaxed);
        false
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_commit_is_numbered_only_once_its_notice_is_out() {
        use crate::Notice;

        const COMMITS: u64 = 20_000;
        let shared = Arc::new(Shared::new(Changes::new(COMMITS as usize, 8), None));
        let mut notices = shared.changes.subscribe();
        let done = Arc::new(AtomicBool::new(false));
        // Another thread reads the sequence as a caller does and takes every notice up to it, without waiting.
        let reader = {
            let (shared, done) = (shared.clone(), done.clone());
            std::thread::spawn(move || {
                let mut told = 0;
                while !done.load(Ordering::SeqCst) || told < shared.commit_seq() {
                    let seq = shared.commit_seq();
                    while told < seq {
                        match notices.try_recv() {
                            Ok(Notice::Committed(commit)) => told = commit.seq,
                            other => panic!(
                                "commit {seq} read, its notice not out after {told}: {other:?}"
                            ),
                        }
                    }
                }
                told
            })
        };
        for _ in 0..COMMITS {
            shared.commit_starts();
            shared.publish_commit();
        }
        done.store(true, Ordering::SeqCst);
        assert_eq!(reader.join().unwrap(), COMMITS);
    }

    #[test]
    fn the_write_lock_is_contended_from_the_writers_wait_until_it_is_that_old() {
        let shared = Shared::default();
        assert!(!shared.write_lock_contended());
        shared.write_lock_held_elsewhere();
        assert!(shared.write_lock_contended());
        assert!(shared.write_lock_contended(), "a read does not clear it");
        // The writer's last wait, as long ago as the contention lasts.
        shared
            .published
            .write_lock_held_at
            .store(clock_ms().wrapping_sub(CONTENDED_FOR_MS), Ordering::Relaxed);
        assert!(!shared.write_lock_contended());
        assert!(
            !shared
                .published
                .write_lock_contended
                .load(Ordering::Relaxed),
            "cleared by the read that found it expired"
        );
        shared.write_lock_held_elsewhere();
        assert!(shared.write_lock_contended());
    }
}
