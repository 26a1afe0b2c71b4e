//! Who may serve a pooled database right now: at most one write task, a few read tasks, or whoever closes it.
//!
//! A task is *scheduled* from the moment it is pushed onto the pool's run queue until it ends. The write claim is
//! one flag: a database has at most one write task, so its writes stay serialized. Read claims are
//! counted, one per read task, up to the database's `readers`. Closing a database's connections takes the write claim and shuts reads
//! off (no read task may be scheduled meanwhile); requests that arrive meanwhile wait in their queues and
//! schedule tasks once the claims are given back.
//!
//! Every transition is one atomic operation, and the model check at the bottom of this file (run with
//! `RUSTFLAGS="--cfg quicklite_loom" cargo test -p quicklite --lib model_`) explores their interleavings.

use crate::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use crate::sync::increment_below;

/// The read-task count while reads are shut off for closing: no count of read tasks ever reaches it, so an
/// attempt to schedule one fails while it is set.
const READS_SHUT: usize = usize::MAX / 2;

/// A database's claims (see the module documentation).
#[derive(Debug, Default)]
pub(crate) struct Claims {
    /// Whether a write task is scheduled (queued or running), or the database is being closed.
    write: AtomicBool,
    /// Read tasks scheduled, or [`READS_SHUT`].
    reads: AtomicUsize,
}

impl Claims {
    /// Takes the write claim for a new write task; `false` if one is scheduled already (it will see the request).
    pub(crate) fn schedule_write(&self) -> bool {
        !self.write.swap(true, Ordering::SeqCst)
    }

    /// Gives the write claim back. A swap, not a store: the caller's look at the queue after this must not move
    /// before it (a push and this release each write one side and read the other).
    pub(crate) fn end_write(&self) {
        self.write.swap(false, Ordering::SeqCst);
    }

    /// Whether a write task is scheduled.
    pub(crate) fn write_scheduled(&self) -> bool {
        self.write.load(Ordering::SeqCst)
    }

    /// Takes a read claim for a new read task, if fewer than `max` are scheduled and reads are not shut off.
    pub(crate) fn schedule_read(&self, max: usize) -> bool {
        increment_below(&self.reads, max.min(READS_SHUT))
    }

    /// Gives a read claim back.
    pub(crate) fn end_read(&self) {
        self.reads.fetch_sub(1, Ordering::SeqCst);
    }

    /// Whether no task is scheduled and the database is not being closed.
    pub(crate) fn idle(&self) -> bool {
        !self.write.load(Ordering::SeqCst) && self.reads.load(Ordering::SeqCst) == 0
    }

    /// Takes the write claim and shuts reads off, if no task is scheduled. Returns whether it took them: the caller
    /// may then close the connections, and gives them back with [`Claims::reopen_reads`] and [`Claims::end_write`]
    /// (or never, when closing for good). When it fails after holding the write claim for a moment, a request that
    /// found the claim taken meanwhile scheduled nothing: the caller looks at the write queue again.
    pub(crate) fn take_all(&self) -> bool {
        if self.write.swap(true, Ordering::SeqCst) {
            return false;
        }
        if self.shut_reads() {
            return true;
        }
        // A swap, as in `end_write`: the caller looks at the write queue next.
        self.write.swap(false, Ordering::SeqCst);
        false
    }

    /// Shuts reads off if no read task is scheduled (the caller holds the writer by other means); returns whether
    /// it did.
    pub(crate) fn shut_reads(&self) -> bool {
        self.reads
            .compare_exchange(0, READS_SHUT, Ordering::SeqCst, Ordering::SeqCst)
            .is_ok()
    }

    /// Lets read tasks be scheduled again after [`Claims::shut_reads`] (or [`Claims::take_all`]). A swap, not a
    /// store: the caller then looks at the read queue for requests that found reads shut, and that look must not
    /// move before this.
    pub(crate) fn reopen_reads(&self) {
        self.reads.swap(0, Ordering::SeqCst);
    }
}

#[cfg(all(test, quicklite_loom))]
mod model {
    use super::*;
    use loom::sync::Arc;
    use loom::sync::atomic::AtomicUsize as Count;

    /// A write task, a read task and a closer race; whatever the interleaving, a closer never runs while a task
    /// holds a claim, and at most `max` read tasks run at once.
    #[test]
    fn model_closing_never_overlaps_a_task() {
        loom::model(|| {
            let claims = Arc::new(Claims::default());
            // Tasks running (holding a claim) and closers running.
            let tasks = Arc::new(Count::new(0));
            let closers = Arc::new(Count::new(0));
            let writer = {
                let (claims, tasks, closers) = (claims.clone(), tasks.clone(), closers.clone());
                loom::thread::spawn(move || {
                    if claims.schedule_write() {
                        tasks.fetch_add(1, Ordering::SeqCst);
                        assert_eq!(
                            closers.load(Ordering::SeqCst),
                            0,
                            "a write task beside a closer"
                        );
                        tasks.fetch_sub(1, Ordering::SeqCst);
                        claims.end_write();
                    }
                })
            };
            let reader = {
                let (claims, tasks, closers) = (claims.clone(), tasks.clone(), closers.clone());
                loom::thread::spawn(move || {
                    if claims.schedule_read(1) {
                        tasks.fetch_add(1, Ordering::SeqCst);
                        assert_eq!(
                            closers.load(Ordering::SeqCst),
                            0,
                            "a read task beside a closer"
                        );
                        assert!(!claims.schedule_read(1), "two read tasks with one reader");
                        tasks.fetch_sub(1, Ordering::SeqCst);
                        claims.end_read();
                    }
                })
            };
            if claims.take_all() {
                closers.fetch_add(1, Ordering::SeqCst);
                assert_eq!(tasks.load(Ordering::SeqCst), 0, "a closer beside a task");
                closers.fetch_sub(1, Ordering::SeqCst);
                claims.reopen_reads();
                claims.end_write();
            }
            writer.join().unwrap();
            reader.join().unwrap();
            assert!(claims.idle(), "every claim was given back");
        });
    }

    /// A closer that gives up (a task was scheduled) leaves the claims as it found them.
    #[test]
    fn model_a_closer_that_gives_up_changes_nothing() {
        loom::model(|| {
            let claims = Arc::new(Claims::default());
            let reader = {
                let claims = claims.clone();
                loom::thread::spawn(move || {
                    let scheduled = claims.schedule_read(2);
                    if scheduled {
                        claims.end_read();
                    }
                    scheduled
                })
            };
            let closed = claims.take_all();
            if closed {
                claims.reopen_reads();
                claims.end_write();
            }
            let read = reader.join().unwrap();
            assert!(closed || read, "one of them got through");
            assert!(claims.idle());
            assert!(claims.schedule_write(), "the write claim is free again");
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn claims_are_taken_and_given_back_by_name() {
        let claims = Claims::default();
        assert!(claims.idle());
        assert!(claims.schedule_write());
        assert!(!claims.schedule_write(), "one write task at a time");
        assert!(!claims.take_all(), "a scheduled task keeps the closer out");
        claims.end_write();
        assert!(claims.schedule_read(2));
        assert!(claims.schedule_read(2));
        assert!(!claims.schedule_read(2), "at most `readers` read tasks");
        assert!(!claims.take_all());
        assert!(
            !claims.write_scheduled(),
            "a closer that gives up leaves the write claim free"
        );
        claims.end_read();
        claims.end_read();
        assert!(claims.take_all());
        assert!(
            !claims.schedule_read(usize::MAX),
            "reads are shut while closing"
        );
        assert!(!claims.schedule_write());
        claims.reopen_reads();
        claims.end_write();
        assert!(claims.idle());
    }
}
