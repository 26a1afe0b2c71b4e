//! A budget of permits under a cap, taken and given back from any thread: the pool's open databases under
//! `max_open` and its reader connections under `max_reader_connections`, a registry's connections for reads on
//! callers' threads under `inline_connections` ([`Permit`]s, given back when the connection closes), the threads
//! opening such connections, and the long reads running at once ([`crate::engine::bound`]).
//!
//! A permit is taken by a compare-and-swap from a count below the cap ([`increment_below`]), so the count is never
//! past the cap, even for a moment: a database that opens has its permit before it opens.
//! Its atomic comes from [`crate::sync`], so the models below (`RUSTFLAGS="--cfg quicklite_loom" cargo test -p
//! quicklite --lib model_`) explore every interleaving of takers and givers.

use std::sync::Arc;

use crate::sync::atomic::{AtomicUsize, Ordering};
use crate::sync::increment_below;

/// Permits under a cap.
pub(crate) struct Permits {
    taken: AtomicUsize,
    max: usize,
}

impl Permits {
    /// `max` permits, none taken.
    pub(crate) fn new(max: usize) -> Permits {
        Permits {
            taken: AtomicUsize::new(0),
            max,
        }
    }

    /// Takes a permit if one is free; whether it did.
    pub(crate) fn try_take(&self) -> bool {
        increment_below(&self.taken, self.max)
    }

    /// Gives back `n` permits taken before.
    pub(crate) fn give_back(&self, n: usize) {
        if n > 0 {
            let before = self.taken.fetch_sub(n, Ordering::SeqCst);
            debug_assert!(before >= n, "{n} permits given back, {before} taken");
        }
    }

    /// Permits taken now.
    pub(crate) fn taken(&self) -> usize {
        self.taken.load(Ordering::SeqCst)
    }

    /// The cap.
    pub(crate) fn max(&self) -> usize {
        self.max
    }

    /// Takes a permit, given back when it is dropped, if one is free.
    pub(crate) fn take_owned(self: &Arc<Permits>) -> Option<Permit> {
        self.try_take().then(|| Permit(self.clone()))
    }
}

/// A permit of shared [`Permits`], given back when dropped.
pub(crate) struct Permit(Arc<Permits>);

impl Drop for Permit {
    fn drop(&mut self) {
        self.0.give_back(1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn permits_are_taken_up_to_the_cap_and_again_once_given_back() {
        let permits = Permits::new(2);
        assert!(permits.try_take() && permits.try_take());
        assert!(!permits.try_take());
        assert_eq!(permits.taken(), 2);
        permits.give_back(1);
        assert!(permits.try_take());
        permits.give_back(2);
        assert_eq!(permits.taken(), 0);
        permits.give_back(0);
        assert!(!Permits::new(0).try_take());
    }

    #[test]
    fn an_owned_permit_is_given_back_when_dropped() {
        let permits = Arc::new(Permits::new(1));
        let permit = permits.take_owned().expect("one is free");
        assert!(permits.take_owned().is_none());
        drop(permit);
        assert_eq!(permits.taken(), 0);
        assert!(permits.take_owned().is_some());
    }
}

#[cfg(all(test, quicklite_loom))]
mod models {
    use super::*;
    use loom::sync::Arc;

    /// Two takers race for one permit, each giving it back after looking at the count: the count never passes the
    /// cap, and the permit is back at the end.
    #[test]
    fn model_permits_are_never_taken_past_the_cap() {
        loom::model(|| {
            let permits = Arc::new(Permits::new(1));
            let takers: Vec<_> = (0..2)
                .map(|_| {
                    let permits = permits.clone();
                    loom::thread::spawn(move || {
                        let took = permits.try_take();
                        assert!(permits.taken() <= permits.max());
                        if took {
                            permits.give_back(1);
                        }
                        took
                    })
                })
                .collect();
            let took = takers
                .into_iter()
                .map(|t| t.join().unwrap())
                .filter(|&took| took)
                .count();
            // At least one: a taker fails only while the other holds the permit.
            assert!(took >= 1, "{took}");
            assert_eq!(permits.taken(), 0);
        });
    }

    /// A taker waiting for the one permit, held by another that gives it back (as a database closed to make room):
    /// the waiter gets it, and no one holds it twice.
    #[test]
    fn model_a_permit_given_back_goes_to_the_one_waiting() {
        loom::model(|| {
            let permits = Arc::new(Permits::new(1));
            assert!(permits.try_take());
            let holding = Arc::new(loom::sync::atomic::AtomicUsize::new(1));
            let waiter = {
                let (permits, holding) = (permits.clone(), holding.clone());
                loom::thread::spawn(move || {
                    while !permits.try_take() {
                        loom::thread::yield_now();
                    }
                    assert_eq!(holding.fetch_add(1, Ordering::SeqCst), 0, "held twice");
                })
            };
            assert_eq!(holding.fetch_sub(1, Ordering::SeqCst), 1);
            permits.give_back(1);
            waiter.join().unwrap();
            assert_eq!(permits.taken(), 1);
        });
    }
}
