//! Locks that know their rank in the pool's lock order ([`actor`](super::actor)'s "Lock order"), checked in debug
//! builds.
//!
//! A thread that takes a ranked lock while it holds one of the same rank or a later one is taking them out of
//! order: two threads doing so the other way round would wait for each other for ever. Deadlocks of that kind show
//! only under the interleaving that closes the circle; the order, checked at every `lock` in debug builds (every
//! test), fails the first test that takes a wrong turn, whatever the interleaving. A `try_lock` never waits, so it
//! is never out of order; what it holds counts for the locks taken after it. A database's writer slot has two
//! ranks in the order — its own database's, and another's closing it to make room — so the closer takes it at the
//! second ([`Ranked::lock_at`]).
//!
//! The mutex comes from [`crate::sync`], so that the models of the actor's closing and reopening
//! ([`lifecycle`](super::actor::lifecycle)) see these locks; so does the record of the ranks a thread holds, which
//! under loom is kept per model thread.

use std::ops::{Deref, DerefMut};
use std::sync::{PoisonError, TryLockError};

use crate::sync::{Mutex, MutexGuard};

/// A lock's rank in the order: a thread takes ranked locks in increasing rank, and never two of one rank (one
/// database's actor state is taken alone).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Rank {
    /// A database's writer slot.
    Writer,
    /// Another database's writer slot, taken by a database opening at the cap to close it and make room, once it
    /// holds all of that database's claims ([`Ranked::lock_at`]).
    OtherWriter,
    /// A database's readers, unserved writes or open waiters, each taken alone.
    ActorState,
    /// The pool's set of open databases.
    PoolOpen,
    /// The pool's waiting room.
    PoolWaiting,
}

/// A mutex with its [`Rank`]. Like [`crate::util::lock`], a lock poisoned by a panic is taken anyway: the state
/// these guard is whole at every step.
#[derive(Debug)]
pub(crate) struct Ranked<T> {
    rank: Rank,
    mutex: Mutex<T>,
}

/// The guard of a [`Ranked`] lock.
pub(crate) struct RankedGuard<'a, T> {
    guard: MutexGuard<'a, T>,
    _held: Held,
}

impl<T> Ranked<T> {
    pub(crate) fn new(rank: Rank, value: T) -> Ranked<T> {
        Ranked {
            rank,
            mutex: Mutex::new(value),
        }
    }

    /// Takes the lock, waiting for it. In debug builds, panics if this thread holds a ranked lock of this rank or a
    /// later one.
    pub(crate) fn lock(&self) -> RankedGuard<'_, T> {
        self.lock_at(self.rank)
    }

    /// Takes the lock, waiting for it, at `rank` rather than its own: for a lock whose rank depends
    /// on who takes it (a database's writer slot, taken by another database to close it).
    pub(crate) fn lock_at(&self, rank: Rank) -> RankedGuard<'_, T> {
        let held = Held::taking(rank);
        RankedGuard {
            guard: self.mutex.lock().unwrap_or_else(PoisonError::into_inner),
            _held: held,
        }
    }

    /// Takes the lock if no other thread holds it.
    pub(crate) fn try_lock(&self) -> Option<RankedGuard<'_, T>> {
        let guard = match self.mutex.try_lock() {
            Ok(guard) => guard,
            Err(TryLockError::Poisoned(p)) => p.into_inner(),
            Err(TryLockError::WouldBlock) => return None,
        };
        Some(RankedGuard {
            guard,
            _held: Held::tried(self.rank),
        })
    }
}

impl<T> Deref for RankedGuard<'_, T> {
    type Target = T;

    fn deref(&self) -> &T {
        &self.guard
    }
}

impl<T> DerefMut for RankedGuard<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        &mut self.guard
    }
}

#[cfg(all(debug_assertions, not(quicklite_loom)))]
thread_local! {
    /// The ranks of the ranked locks this thread holds, in the order it took them.
    static HELD: std::cell::RefCell<Vec<Rank>> = const { std::cell::RefCell::new(Vec::new()) };
}

// Loom runs a model's threads on one thread of the process: each keeps its own record.
#[cfg(all(debug_assertions, quicklite_loom))]
loom::thread_local! {
    /// The ranks of the ranked locks this model thread holds, in the order it took them.
    static HELD: std::cell::RefCell<Vec<Rank>> = std::cell::RefCell::new(Vec::new());
}

/// One rank this thread holds, given back when dropped (in debug builds; nothing otherwise).
struct Held {
    #[cfg(debug_assertions)]
    rank: Rank,
}

impl Held {
    /// Holds `rank`, taken by a `lock`: it must come after every rank held.
    fn taking(rank: Rank) -> Held {
        #[cfg(debug_assertions)]
        HELD.with(|held| {
            let held = held.borrow();
            if let Some(later) = held.iter().find(|h| **h >= rank) {
                panic!("lock order: took a {rank:?} lock while holding a {later:?} lock (held: {held:?})");
            }
        });
        Held::tried(rank)
    }

    /// Holds `rank`, taken by a `try_lock`.
    fn tried(rank: Rank) -> Held {
        #[cfg(debug_assertions)]
        HELD.with(|held| held.borrow_mut().push(rank));
        #[cfg(not(debug_assertions))]
        let _ = rank;
        Held {
            #[cfg(debug_assertions)]
            rank,
        }
    }
}

#[cfg(debug_assertions)]
impl Drop for Held {
    fn drop(&mut self) {
        HELD.with(|held| {
            let mut held = held.borrow_mut();
            if let Some(at) = held.iter().rposition(|h| *h == self.rank) {
                held.remove(at);
            }
        });
    }
}

#[cfg(all(test, debug_assertions))]
mod tests {
    use super::*;

    #[test]
    fn locks_taken_in_rank_order_are_fine_and_given_back() {
        let (writer, state, open) = (
            Ranked::new(Rank::Writer, ()),
            Ranked::new(Rank::ActorState, ()),
            Ranked::new(Rank::PoolOpen, ()),
        );
        {
            let _w = writer.lock();
            let _s = state.lock();
            let _o = open.lock();
        }
        // All given back: the first rank again, then a later one, out of the order they were dropped in.
        let s = state.lock();
        let o = open.lock();
        drop(s);
        drop(o);
        let _w = writer.lock();
    }

    #[test]
    #[should_panic(expected = "lock order: took a Writer lock while holding a PoolOpen lock")]
    fn a_lock_of_an_earlier_rank_panics() {
        let (writer, open) = (
            Ranked::new(Rank::Writer, ()),
            Ranked::new(Rank::PoolOpen, ()),
        );
        let _o = open.lock();
        let _w = writer.lock();
    }

    #[test]
    #[should_panic(expected = "lock order: took a ActorState lock while holding a ActorState lock")]
    fn two_locks_of_one_rank_panic() {
        let (readers, unserved) = (
            Ranked::new(Rank::ActorState, ()),
            Ranked::new(Rank::ActorState, ()),
        );
        let _r = readers.lock();
        let _u = unserved.lock();
    }

    #[test]
    fn a_try_lock_is_never_out_of_order_but_counts_for_what_follows() {
        let (own, other, state) = (
            Ranked::new(Rank::Writer, ()),
            Ranked::new(Rank::Writer, ()),
            Ranked::new(Rank::ActorState, ()),
        );
        let _own = own.lock();
        let _other = other.try_lock().unwrap();
        let _state = state.lock();
    }

    #[test]
    fn another_databases_writer_slot_comes_after_ones_own() {
        let (own, other, state) = (
            Ranked::new(Rank::Writer, ()),
            Ranked::new(Rank::Writer, ()),
            Ranked::new(Rank::ActorState, ()),
        );
        let _own = own.lock();
        let _other = other.lock_at(Rank::OtherWriter);
        let _state = state.lock();
    }

    #[test]
    #[should_panic(expected = "while holding a Writer lock")]
    fn a_lock_after_a_try_lock_of_its_rank_panics() {
        let (own, other) = (Ranked::new(Rank::Writer, ()), Ranked::new(Rank::Writer, ()));
        let _other = other.try_lock().unwrap();
        let _own = own.lock();
    }
}
