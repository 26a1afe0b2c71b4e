//! What each read's call site has cost lately: the evidence on which a read may run on its caller's thread
//! ([`sched::inline`](crate::sched::inline)) instead of being handed to a reader.
//!
//! A call site is the closure's type (each closure literal has one of its own), and for the statement helpers
//! also the SQL text, since one helper's closure serves every query. The table is small, fixed and lock-free: a
//! site hashes to one entry, a site that finds its entry taken by another replaces it (and is unknown again), and
//! racing updates may lose one another's sample — the table is a hint, never a guarantee, so neither costs more
//! than a read sent to the threads that need not have been.

use std::any::TypeId;
use std::hash::{Hash, Hasher};
use std::num::NonZeroU64;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::{Duration, Instant};

/// Number of entries: more call sites than a service has hot reads, few enough to stay in a few cache lines' reach.
const ENTRIES: usize = 256;

/// How long a site whose read ran far past the bound on its caller's thread is kept off callers' threads: a read
/// that once ran long there is not tried there again for a while.
pub(crate) const DEMOTED_FOR: Duration = Duration::from_secs(10);

/// A run on a caller's thread this many times over the bound, and longer than [`PREEMPTED`], demotes its site for
/// [`DEMOTED_FOR`]. A run merely over the bound (or one on a reader thread) raises the site's average, which keeps
/// the site on the reader threads only until runs there bring it down again.
const LONG_FACTOR: u64 = 4;

/// Longer than a thread that the system preempted in the middle of a short read waits for its core again (a time
/// slice or two): such a run says nothing of the read, and happens to a few point reads in ten thousand on a busy
/// machine. Below it, a long run only raises the average.
const PREEMPTED: Duration = Duration::from_millis(20);

/// A read's call site.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Site(NonZeroU64);

impl Site {
    /// The site of closures of type `F`, running `sql` if a statement helper made them.
    pub(crate) fn of<F: 'static>(sql: Option<&str>) -> Site {
        let mut hasher = rustc_hash::FxHasher::default();
        TypeId::of::<F>().hash(&mut hasher);
        sql.hash(&mut hasher);
        Site(NonZeroU64::new(hasher.finish()).unwrap_or(NonZeroU64::MIN))
    }

    fn index(self) -> usize {
        // The high bits: FxHash mixes them best.
        (self.0.get() >> 56) as usize % ENTRIES
    }
}

/// What the table knows of a site.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Known {
    /// Never seen (or its entry was taken by another site since).
    Unknown,
    /// Its recent runs took this long on average.
    Costs(Duration),
    /// It ran far past the bound lately.
    Demoted,
}

/// One site's entry: its hash, and its cost packed with the end of its demotion.
#[derive(Default)]
struct Entry {
    site: AtomicU64,
    /// Low 32 bits: the average cost in nanoseconds (saturating); high 32: the demotion's end in milliseconds of
    /// [`clock_ms`], 0 for none.
    packed: AtomicU64,
}

/// The recent cost of each call site of a database's reads.
pub(crate) struct Costs {
    entries: Box<[Entry]>,
}

impl Default for Costs {
    fn default() -> Self {
        Costs {
            entries: (0..ENTRIES).map(|_| Entry::default()).collect(),
        }
    }
}

impl std::fmt::Debug for Costs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Costs").finish_non_exhaustive()
    }
}

impl Costs {
    /// What is known of `site`.
    pub(crate) fn known(&self, site: Site) -> Known {
        let entry = &self.entries[site.index()];
        if entry.site.load(Relaxed) != site.0.get() {
            return Known::Unknown;
        }
        let packed = entry.packed.load(Relaxed);
        let until = (packed >> 32) as u32;
        if until != 0 && clock_ms() < until {
            return Known::Demoted;
        }
        Known::Costs(Duration::from_nanos(packed & u64::from(u32::MAX)))
    }

    /// Records that a run of `site` took `took`, against a bound of `bound` for reads on callers' threads;
    /// `inline` if it ran on its caller's thread.
    pub(crate) fn record(&self, site: Site, took: Duration, bound: Duration, inline: bool) {
        let entry = &self.entries[site.index()];
        let took_ns = u64::try_from(took.as_nanos()).unwrap_or(u64::MAX);
        let bound_ns = u64::try_from(bound.as_nanos()).unwrap_or(u64::MAX);
        let (average, until) = if entry.site.load(Relaxed) == site.0.get() {
            let packed = entry.packed.load(Relaxed);
            let average = packed & u64::from(u32::MAX);
            // An exponential average over about four runs: one cold run does not send a site away.
            ((average * 3 + took_ns) / 4, packed >> 32)
        } else {
            entry.site.store(site.0.get(), Relaxed);
            (took_ns, 0)
        };
        let long_ns = bound_ns
            .saturating_mul(LONG_FACTOR)
            .max(PREEMPTED.as_nanos() as u64);
        let until = if inline && took_ns > long_ns {
            u64::from(
                clock_ms()
                    .saturating_add(DEMOTED_FOR.as_millis() as u32)
                    .max(1),
            )
        } else {
            until
        };
        entry
            .packed
            .store((until << 32) | average.min(u64::from(u32::MAX)), Relaxed);
    }
}

/// Milliseconds since the table's clock started (the first call), wrapping after 49 days — a demotion that spans
/// the wrap ends early, which costs one read on a caller's thread.
fn clock_ms() -> u32 {
    static START: OnceLock<Instant> = OnceLock::new();
    START.get_or_init(Instant::now).elapsed().as_millis() as u32
}

#[cfg(test)]
mod tests {
    use super::*;

    const BOUND: Duration = Duration::from_micros(20);

    #[test]
    fn a_site_is_unknown_until_it_has_run() {
        let costs = Costs::default();
        let site = Site::of::<fn()>(None);
        assert_eq!(costs.known(site), Known::Unknown);
        costs.record(site, Duration::from_micros(2), BOUND, false);
        assert_eq!(costs.known(site), Known::Costs(Duration::from_micros(2)));
    }

    #[test]
    fn the_sql_text_tells_the_statement_helpers_apart() {
        assert_ne!(
            Site::of::<fn()>(Some("SELECT 1")),
            Site::of::<fn()>(Some("SELECT 2"))
        );
        assert_ne!(Site::of::<fn()>(None), Site::of::<fn(u8)>(None));
        assert_eq!(
            Site::of::<fn()>(Some("SELECT 1")),
            Site::of::<fn()>(Some("SELECT 1"))
        );
    }

    #[test]
    fn a_slow_run_raises_the_average_and_a_far_slower_one_on_a_callers_thread_demotes() {
        let costs = Costs::default();
        let site = Site::of::<u8>(None);
        costs.record(site, Duration::from_micros(4), BOUND, false);
        costs.record(site, Duration::from_micros(40), BOUND, true);
        assert_eq!(costs.known(site), Known::Costs(Duration::from_micros(13)));
        // Far slower on a reader thread: only the average rises.
        costs.record(site, PREEMPTED * 2, BOUND, false);
        assert!(matches!(costs.known(site), Known::Costs(_)));
        // Slower than a preempted thread's wait, on a caller's thread: demoted.
        costs.record(site, PREEMPTED * 2, BOUND, true);
        assert_eq!(costs.known(site), Known::Demoted);
        // Fast runs on the threads meanwhile do not lift the demotion.
        costs.record(site, Duration::from_micros(1), BOUND, false);
        assert_eq!(costs.known(site), Known::Demoted);
    }

    #[test]
    fn a_run_as_long_as_a_preempted_threads_only_raises_the_average() {
        let costs = Costs::default();
        let site = Site::of::<u16>(None);
        costs.record(site, Duration::from_micros(2), BOUND, false);
        costs.record(site, PREEMPTED / 2, BOUND, true);
        assert!(matches!(costs.known(site), Known::Costs(average) if average > BOUND));
    }

    #[test]
    fn a_site_that_takes_another_ones_entry_starts_afresh() {
        let costs = Costs::default();
        let (a, b) = (
            Site(NonZeroU64::new(7).unwrap()),
            Site(NonZeroU64::new(8).unwrap()),
        );
        assert_eq!(a.index(), b.index(), "the two share an entry");
        costs.record(a, Duration::from_micros(3), BOUND, false);
        costs.record(b, Duration::from_micros(9), BOUND, false);
        assert_eq!(costs.known(a), Known::Unknown);
        assert_eq!(costs.known(b), Known::Costs(Duration::from_micros(9)));
    }
}
