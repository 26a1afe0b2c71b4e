//! When each request of an open-loop cell is due: request `k` at `origin + k / rate`.

use std::time::{Duration, Instant};

/// The fixed schedule of an open-loop cell's requests, decided before the first one is sent.
///
/// Each due instant is computed from the origin, not from the previous one, so rounding never accumulates and
/// the number of requests due in any span is exact whatever happened to the requests before.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Arrivals {
    /// The instant request `0` is due: the start of the warm-up.
    origin: Instant,
    /// Requests per second; at least one.
    rate: u64,
}

impl Arrivals {
    /// The schedule of `rate` requests per second from `origin` (a rate of zero is taken as one).
    pub(super) fn new(origin: Instant, rate: u64) -> Self {
        Self {
            origin,
            rate: rate.max(1),
        }
    }

    /// The instant request `k` is due.
    pub(super) fn due(&self, k: u64) -> Instant {
        self.origin + self.offset(k)
    }

    /// How long after the origin request `k` is due.
    fn offset(&self, k: u64) -> Duration {
        let nanos = u128::from(k) * 1_000_000_000 / u128::from(self.rate);
        Duration::from_nanos(u64::try_from(nanos).unwrap_or(u64::MAX))
    }

    /// The first request due at or after `instant`.
    pub(super) fn first_due_from(&self, instant: Instant) -> u64 {
        let since = instant.saturating_duration_since(self.origin).as_nanos();
        let k = (since * u128::from(self.rate)).div_ceil(1_000_000_000);
        u64::try_from(k).unwrap_or(u64::MAX)
    }

    /// Requests due in `[from, to)`.
    pub(super) fn due_between(&self, from: Instant, to: Instant) -> u64 {
        self.first_due_from(to)
            .saturating_sub(self.first_due_from(from))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    #[test]
    fn request_k_is_due_k_over_rate_after_the_origin() {
        let origin = Instant::now();
        let arrivals = Arrivals::new(origin, 1_000);
        assert_eq!(arrivals.due(0), origin);
        assert_eq!(arrivals.due(1), origin + MS);
        assert_eq!(arrivals.due(1_500), origin + 1_500 * MS);
        // A rate that does not divide a second: no drift, request 3 is due at exactly one second.
        let thirds = Arrivals::new(origin, 3);
        assert_eq!(thirds.due(3), origin + 1_000 * MS);
        assert_eq!(thirds.due(1), origin + Duration::from_nanos(333_333_333));
    }

    #[test]
    fn a_span_holds_rate_times_its_length_requests() {
        let origin = Instant::now();
        for rate in [1, 3, 1_000, 20_000, 100_000, 1_000_000] {
            let arrivals = Arrivals::new(origin, rate);
            for (warmup_ms, duration_ms) in [(0, 1_000), (10, 2_000), (333, 1_000)] {
                let from = origin + warmup_ms * MS;
                let to = from + duration_ms * MS;
                let expected = rate * u64::from(duration_ms) / 1_000;
                let due = arrivals.due_between(from, to);
                assert!(
                    due.abs_diff(expected) <= 1,
                    "rate {rate}: {due} vs {expected}"
                );
                // Exactly the requests whose due instants fall inside.
                let first = arrivals.first_due_from(from);
                assert!(arrivals.due(first) >= from);
                assert!(first == 0 || arrivals.due(first - 1) < from);
                assert!(arrivals.due(first + due - 1) < to && arrivals.due(first + due) >= to);
            }
        }
    }

    #[test]
    fn a_zero_rate_is_one_request_a_second() {
        let origin = Instant::now();
        assert_eq!(Arrivals::new(origin, 0).due(2), origin + 2_000 * MS);
    }
}
