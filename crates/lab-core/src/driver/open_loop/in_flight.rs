//! The bound on requests in flight of an open-loop cell: a request due while it is reached is dropped.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

/// Counts the requests in flight against a bound.
///
/// An open-loop schedule does not wait for answers, so without a bound a slow approach would pile up requests
/// (and memory) without limit; with one, the excess is dropped and counted, as a service sheds load.
#[derive(Debug)]
pub(super) struct InFlight {
    /// Requests handed out and not yet finished.
    count: AtomicU32,
    /// The most allowed at once; at least one.
    bound: u32,
}

impl InFlight {
    /// A bound of `bound` requests in flight (zero is taken as one).
    pub(super) fn new(bound: u32) -> Arc<Self> {
        Arc::new(Self {
            count: AtomicU32::new(0),
            bound: bound.max(1),
        })
    }

    /// A permit for one more request in flight, or `None` when the bound is reached.
    pub(super) fn try_enter(self: &Arc<Self>) -> Option<Permit> {
        self.count
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < self.bound).then_some(n + 1)
            })
            .ok()
            .map(|_| Permit(self.clone()))
    }

    /// Requests in flight now.
    pub(super) fn current(&self) -> u32 {
        self.count.load(Ordering::Acquire)
    }
}

/// One request in flight; dropping it makes room for another.
#[derive(Debug)]
pub(super) struct Permit(Arc<InFlight>);

impl Drop for Permit {
    fn drop(&mut self) {
        self.0.count.fetch_sub(1, Ordering::AcqRel);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bound_refuses_the_request_past_it_until_one_finishes() {
        let in_flight = InFlight::new(2);
        let first = in_flight.try_enter().unwrap();
        let _second = in_flight.try_enter().unwrap();
        assert!(in_flight.try_enter().is_none());
        assert_eq!(in_flight.current(), 2);
        drop(first);
        assert_eq!(in_flight.current(), 1);
        assert!(in_flight.try_enter().is_some());
    }

    #[test]
    fn a_zero_bound_still_lets_one_request_through() {
        let in_flight = InFlight::new(0);
        let _only = in_flight.try_enter().unwrap();
        assert!(in_flight.try_enter().is_none());
    }
}
