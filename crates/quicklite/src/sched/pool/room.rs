//! Room to open a database under the cap: a permit reserved before it opens, another database closed to make room
//! when there is none ([`evict`](super::evict) chooses which), and the waiting room of tasks whose database cannot
//! open yet.

use std::sync::atomic::Ordering;

use crate::sched::pool::Pool;
use crate::sched::pool::evict::{DRAWS, SAMPLED, close_one};
use crate::sched::pool::task::{PooledDatabase, Task};

impl<D: PooledDatabase> Pool<D> {
    /// Reserves a permit under `max_open` for `opening`, closing another database first when the cap is reached;
    /// `false` if none could be closed now (every open database runs a task): the opening waits for room. Checking
    /// the count and taking the permit are one step, so databases opening at once cannot pass the cap together.
    pub(crate) fn reserve_open(&self, opening: &str) -> bool {
        while !self.open_permits.try_take() {
            if !self.evict_for(opening, self.max_open() - 1) {
                return false;
            }
        }
        true
    }

    /// Gives back the permit of a database that closed, or failed to open.
    pub(crate) fn release_open(&self) {
        self.open_permits.give_back(1);
    }

    /// Databases open, or opening.
    pub(crate) fn reserved(&self) -> usize {
        self.open_permits.taken()
    }

    /// The cap on open databases.
    pub(crate) fn max_open(&self) -> usize {
        self.open_permits.max()
    }

    /// Closes open databases (other than `opening`; `""` for none) until at most `target` are open — on the pool
    /// thread that wants to open one, so that evictions keep pace with opens, and in the registry's housekeeping.
    /// Returns whether it got there; if every open database is running a task, the housekeeping thread is asked to
    /// retry and the opening waits.
    ///
    /// An idle database goes first, the least recently used of [`SAMPLED`] open databases picked at random (as
    /// Redis approximates LRU): this runs once per open at the cap, up to thousands of times a second, where a
    /// scan of every open database each time would cost time in proportion to the cap. When none of them is idle,
    /// one whose write task waits in the run queue is closed ([`PooledDatabase::try_close_queued`]), the most recently used
    /// first (its task, queued after it last ran, is furthest back): when every database has work queued (more
    /// databases with writes due than the cap), waiting for one to go idle would stop every opening. A database whose
    /// `PASSIVE` checkpoint runs is closed only if no other sampled one can be (closing it waits for the
    /// checkpoint). Only after [`DRAWS`] samples are all the others tried.
    pub(crate) fn evict_for(&self, opening: &str, target: usize) -> bool {
        while self.reserved() > target {
            let mut closed = false;
            for _ in 0..DRAWS {
                let seed = self.draws.fetch_add(1, Ordering::Relaxed);
                let mut sampled = self.open.lock().sample(SAMPLED, seed);
                sampled.retain(|a| a.name() != opening);
                closed = close_one(&mut sampled);
                if closed {
                    break;
                }
            }
            if !closed {
                let mut rest = self.open_actors();
                rest.retain(|a| a.name() != opening);
                closed = close_one(&mut rest);
            }
            if !closed {
                self.wake_housekeeping();
                return false;
            }
            self.evictions.fetch_add(1, Ordering::Relaxed);
        }
        true
    }

    /// Sets `task` aside until room is made for its database to open.
    pub(crate) fn wait_for_room(&self, task: Task<D>) {
        {
            let mut waiting = self.waiting.lock();
            waiting.push_back(task);
            self.waiting_len.store(waiting.len(), Ordering::SeqCst);
        }
        // A database may have gone idle between the failed eviction and now, with nothing left to resume this
        // task: look once more. (The housekeeping tick resumes every waiting task as well.)
        if self.reserved() < self.max_open() || self.open_actors_idle() {
            self.resume_waiting(1);
        }
    }

    /// Whether some open database has nothing queued or running (one could be closed to make room).
    pub(super) fn open_actors_idle(&self) -> bool {
        self.open.lock().actors().iter().any(|a| a.is_idle())
    }

    /// Puts up to `n` tasks waiting for room back on their run queues, oldest first.
    pub(crate) fn resume_waiting(&self, n: usize) {
        if self.waiting_len.load(Ordering::SeqCst) == 0 {
            return;
        }
        let resumed: Vec<Task<D>> = {
            let mut waiting = self.waiting.lock();
            let k = n.min(waiting.len());
            let resumed = waiting.drain(..k).collect();
            self.waiting_len.store(waiting.len(), Ordering::SeqCst);
            resumed
        };
        for task in resumed {
            self.push(task);
        }
    }

    /// Tasks waiting for room to open their database.
    pub(super) fn waiting_tasks(&self) -> usize {
        self.waiting_len.load(Ordering::SeqCst)
    }
}
