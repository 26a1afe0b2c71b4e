//! What each read's call site has cost lately: the evidence on which a read may run on its caller's thread
//! ([`sched::inline`](crate::sched::inline)) instead of being handed to a reader.
//!
//! A call site is the closure's type (each closure literal has one of its own), and for the statement helpers
//! also the SQL text, since one helper's closure serves every query. The table is small, fixed and lock-free: a
//! site hashes to one entry, a site that finds its entry taken by another replaces it (and is unknown again), and
//! racing updates may lose one another's sample — the table is a hint, never a guarantee, so neither costs more
//! than a read sent to the threads that need not have been.
//!
//! A run on a reader thread costs more than the same read on a caller's thread: a lone read begins a snapshot of
//! its own, on a thread that was asleep a moment before at low load, where a read on a caller's thread runs in a
//! snapshot its connection keeps. So a site that the threads' runs put over the bound, though not far, is tried on
//! its caller's thread once in a while ([`Costs::decide`]): such a probe's run stands for the site's cost.

use std::any::TypeId;
use std::cell::Cell;
use std::hash::{Hash, Hasher};
use std::num::NonZeroU64;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::Duration;

use crate::util::clock_ms;

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

/// A site's average is kept to the bound's this-many-th part ([`Costs::record`]): finer than any decision made on
/// it needs.
const GRAINS: u64 = 64;

/// A site whose average is over the bound but within this many times it is probed on its caller's thread.
const PROBED_WITHIN: u32 = 4;

/// One read in this many of a site over the bound (but within [`PROBED_WITHIN`] times it) on a thread is a probe.
const PROBE_EVERY: u32 = 64;

thread_local! {
    /// Reads on this thread of sites that may be probed, counted for picking the probes.
    static PROBE_COUNT: Cell<u32> = const { Cell::new(0) };
}

/// Where a recorded run of a site ran.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RanOn {
    /// A reader thread (or a pool's).
    Threads,
    /// Its caller's thread, where the site has run within the bound lately.
    Caller,
    /// Its caller's thread, as a probe of a site over the bound on the threads.
    Probe,
}

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
    /// [`clock_ms`], 0 for none (a demotion that spans the clock's wrap ends early, which costs one read on a
    /// caller's thread).
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

    /// Where a read of `site` should run, against a bound of `bound` for reads on callers' threads: on its caller's
    /// thread if the site has run within it lately, or as a probe once in [`PROBE_EVERY`] reads (on this thread) of
    /// a site over it but within [`PROBED_WITHIN`] times it; else (`None`) on the threads.
    pub(crate) fn decide(&self, site: Site, bound: Duration) -> Option<RanOn> {
        match self.known(site) {
            Known::Costs(average) if average <= bound => Some(RanOn::Caller),
            Known::Costs(average) if average <= bound.saturating_mul(PROBED_WITHIN) => {
                let count = PROBE_COUNT.with(|n| {
                    n.set(n.get().wrapping_add(1));
                    n.get()
                });
                count.is_multiple_of(PROBE_EVERY).then_some(RanOn::Probe)
            }
            Known::Unknown | Known::Costs(_) | Known::Demoted => None,
        }
    }

    /// Records that a run of `site` took `took`, against a bound of `bound` for reads on callers' threads. A
    /// probe's run replaces the average; other runs move it.
    ///
    /// The average is kept to a [`GRAINS`]th of the bound, and an entry is written only when what it says changes:
    /// a site that keeps costing about the same leaves its cache line unwritten, so the threads reading it each keep
    /// their copy (one written at every sampled run had to come back from another CPU at every read after it).
    pub(crate) fn record(&self, site: Site, took: Duration, bound: Duration, ran_on: RanOn) {
        let entry = &self.entries[site.index()];
        let took_ns = u64::try_from(took.as_nanos()).unwrap_or(u64::MAX);
        let bound_ns = u64::try_from(bound.as_nanos()).unwrap_or(u64::MAX);
        let known = (entry.site.load(Relaxed) == site.0.get()).then(|| entry.packed.load(Relaxed));
        let (average, until) = match known {
            Some(packed) => {
                let average = packed & u64::from(u32::MAX);
                let average = match ran_on {
                    RanOn::Probe => took_ns,
                    // An exponential average over about four runs: one cold run does not send a site away.
                    RanOn::Threads | RanOn::Caller => {
                        average.saturating_mul(3).saturating_add(took_ns) / 4
                    }
                };
                (average, packed >> 32)
            }
            None => {
                entry.site.store(site.0.get(), Relaxed);
                (took_ns, 0)
            }
        };
        let long_ns = bound_ns
            .saturating_mul(LONG_FACTOR)
            .max(PREEMPTED.as_nanos() as u64);
        let until = if ran_on != RanOn::Threads && took_ns > long_ns {
            u64::from(
                clock_ms()
                    .saturating_add(DEMOTED_FOR.as_millis() as u32)
                    .max(1),
            )
        } else {
            until
        };
        let grain = (bound_ns / GRAINS).max(1);
        let average = average.saturating_add(grain / 2) / grain * grain;
        let packed = (until << 32) | average.min(u64::from(u32::MAX));
        if known != Some(packed) {
            entry.packed.store(packed, Relaxed);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A bound whose grain is a microsecond.
    const BOUND: Duration = Duration::from_micros(GRAINS);

    #[test]
    fn a_site_is_unknown_until_it_has_run() {
        let costs = Costs::default();
        let site = Site::of::<fn()>(None);
        assert_eq!(costs.known(site), Known::Unknown);
        costs.record(site, Duration::from_micros(2), BOUND, RanOn::Threads);
        assert_eq!(costs.known(site), Known::Costs(Duration::from_micros(2)));
    }

    #[test]
    fn the_average_is_kept_to_a_grain_of_the_bound_and_a_run_that_costs_about_as_much_leaves_it() {
        let costs = Costs::default();
        let site = Site::of::<fn(u8)>(None);
        costs.record(site, Duration::from_nanos(2_400), BOUND, RanOn::Threads);
        assert_eq!(costs.known(site), Known::Costs(Duration::from_micros(2)));
        // (3 × 2 + 2.9) / 4 = 2.225 µs: the same grain.
        costs.record(site, Duration::from_nanos(2_900), BOUND, RanOn::Caller);
        assert_eq!(costs.known(site), Known::Costs(Duration::from_micros(2)));
        // (3 × 2 + 6) / 4 = 3 µs.
        costs.record(site, Duration::from_micros(6), BOUND, RanOn::Caller);
        assert_eq!(costs.known(site), Known::Costs(Duration::from_micros(3)));
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
        costs.record(site, Duration::from_micros(4), BOUND, RanOn::Threads);
        costs.record(site, Duration::from_micros(40), BOUND, RanOn::Caller);
        assert_eq!(costs.known(site), Known::Costs(Duration::from_micros(13)));
        // Far slower on a reader thread: only the average rises.
        costs.record(site, PREEMPTED * 2, BOUND, RanOn::Threads);
        assert!(matches!(costs.known(site), Known::Costs(_)));
        // Slower than a preempted thread's wait, on a caller's thread: demoted.
        costs.record(site, PREEMPTED * 2, BOUND, RanOn::Caller);
        assert_eq!(costs.known(site), Known::Demoted);
        // Fast runs on the threads meanwhile do not lift the demotion.
        costs.record(site, Duration::from_micros(1), BOUND, RanOn::Threads);
        assert_eq!(costs.known(site), Known::Demoted);
    }

    #[test]
    fn a_run_as_long_as_a_preempted_threads_only_raises_the_average() {
        let costs = Costs::default();
        let site = Site::of::<u16>(None);
        costs.record(site, Duration::from_micros(2), BOUND, RanOn::Threads);
        costs.record(site, PREEMPTED / 2, BOUND, RanOn::Caller);
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
        costs.record(a, Duration::from_micros(3), BOUND, RanOn::Threads);
        costs.record(b, Duration::from_micros(9), BOUND, RanOn::Threads);
        assert_eq!(costs.known(a), Known::Unknown);
        assert_eq!(costs.known(b), Known::Costs(Duration::from_micros(9)));
    }

    #[test]
    fn a_site_over_the_bound_on_the_threads_is_probed_and_a_short_probe_brings_it_to_callers_threads()
     {
        let costs = Costs::default();
        let site = Site::of::<u32>(None);
        costs.record(site, BOUND * 2, BOUND, RanOn::Threads);
        let decisions: Vec<_> = (0..PROBE_EVERY * 2)
            .map(|_| costs.decide(site, BOUND))
            .collect();
        let probes = decisions
            .iter()
            .filter(|d| **d == Some(RanOn::Probe))
            .count();
        assert_eq!(probes, 2, "one probe in {PROBE_EVERY} reads: {decisions:?}");
        assert!(
            decisions
                .iter()
                .all(|d| matches!(d, None | Some(RanOn::Probe)))
        );
        // The probe ran short: the site runs on its callers' threads from now on.
        costs.record(site, BOUND / 4, BOUND, RanOn::Probe);
        assert_eq!(costs.decide(site, BOUND), Some(RanOn::Caller));
    }

    #[test]
    fn a_site_far_over_the_bound_or_demoted_is_never_probed() {
        // A table each, so that no two of the sites share an entry.
        let (far, demoted, unknown) = (Costs::default(), Costs::default(), Costs::default());
        let site = Site::of::<u64>(None);
        far.record(site, BOUND * (PROBED_WITHIN + 1), BOUND, RanOn::Threads);
        demoted.record(site, BOUND, BOUND, RanOn::Threads);
        demoted.record(site, PREEMPTED * 2, BOUND, RanOn::Probe);
        assert_eq!(demoted.known(site), Known::Demoted);
        for _ in 0..PROBE_EVERY * 2 {
            assert_eq!(far.decide(site, BOUND), None);
            assert_eq!(demoted.decide(site, BOUND), None);
            assert_eq!(unknown.decide(site, BOUND), None);
        }
    }
}
