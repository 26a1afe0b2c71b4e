//! The guard on the runtime: a ticker beside the workload, and how late its ticks fire ([`Lateness`]).
//!
//! A cell's figures say how fast an approach serves its own operations, not what it does to everything else on the
//! runtime. An approach that runs SQLite on the tokio workers (`direct-blocking`) can post fine throughput while
//! every timer, every other request and every heartbeat of the service waits behind its calls. So during the
//! measured window a ticker task, spawned on the cell's runtime beside the client tasks, asks to be woken every
//! [`TICK`] on a fixed schedule (`window start + k × 1 ms`) and records how late each wake-up came: the time from
//! a tick's scheduled instant to when the task ran again.
//!
//! **The baseline is not zero.** Tokio's timer counts whole milliseconds: a sleep ends at the first millisecond of
//! the runtime's clock at or after its deadline, and the thread that waits for the timer sleeps in whole
//! milliseconds too (epoll), so on an idle runtime the ticks are 0–2 ms late: p50 anywhere from about 0.5 to 1.5 ms
//! from one run to the next (by where the schedule falls between the clock's milliseconds), p99 under about 2 ms.
//! Read lateness within that band as on time. A worker that polls the timer between tasks (as one running
//! short blocking calls does) can fire ticks sooner than that. On a machine with few cores the runner's own threads
//! also compete for them, and a tick waits for a core as well: the `ceiling`, whose threads keep both cores of the
//! project's machine busy while its runtime does nothing but tick, shows 2–3 ms there. Tens of milliseconds mean the
//! approach kept the runtime's workers, or its timer, from running: `direct-blocking` with seed 004's writers,
//! which block a worker for 100 ms each, 180 ms at p99 on that machine.
//!
//! A late tick does not shift the schedule: the ticks that fell due meanwhile fire at once, each measured from its
//! own instant (tokio's `MissedTickBehavior::Burst`), so a stall of 50 ms counts 50 late ticks, from 50 ms down to
//! 1 ms late, and the percentiles weigh stalls by how long they lasted. Ticking costs the runtime one wake-up a
//! millisecond: about 2% of a core on the project's machine, in every row's CPU time alike.

use std::future::Future;
use std::time::{Duration, Instant};

use tokio::task::JoinHandle;

use crate::alloc;
use crate::result::Lateness;

/// The ticker's period.
pub const TICK: Duration = Duration::from_millis(1);

/// Summarizes how late each tick fired (in any order; the slice is sorted in place); `None` without ticks.
///
/// Percentiles are nearest-rank: the p-th is the smallest lateness that at least p% of the ticks do not exceed,
/// always one of the measured values.
fn summarize(delays: &mut [Duration]) -> Option<Lateness> {
    if delays.is_empty() {
        return None;
    }
    delays.sort_unstable();
    let us = |d: Duration| d.as_nanos() as f64 / 1_000.0;
    // In whole thousandths, so no rounding of a float moves a rank.
    let rank = |per_mille: usize| {
        let index = (delays.len() * per_mille).div_ceil(1_000);
        us(delays[index.clamp(1, delays.len()) - 1])
    };
    Some(Lateness {
        p50_us: rank(500),
        p99_us: rank(990),
        p999_us: Some(rank(999)),
        max_us: us(delays[delays.len() - 1]),
        ticks: delays.len() as u64,
    })
}

/// The ticker of one cell's window, running on the cell's runtime.
pub(crate) struct Ticker {
    /// The ticker task; it ends after the window's last tick with the summary.
    task: JoinHandle<Option<Lateness>>,
}

impl Ticker {
    /// Spawns the ticker on the current runtime: a tick at `start + k × TICK` for every such instant before `end`.
    ///
    /// Must be called before the window opens, and from inside the runtime the workload runs on.
    pub(crate) fn spawn(start: Instant, end: Instant) -> Self {
        let ticks = end
            .saturating_duration_since(start)
            .as_nanos()
            .div_ceil(TICK.as_nanos());
        let ticks = usize::try_from(ticks).unwrap_or(usize::MAX);
        // Every tick's slot is allocated here, before the window: the ticker allocates nothing while it is measured.
        let delays = Vec::with_capacity(ticks);
        let mut ticking = Box::pin(tick(tokio::time::Instant::from_std(start), ticks, delays));
        // Whatever the ticker or tokio's timer does while polling it is the lab's, not the approach's: not counted.
        let task = tokio::spawn(std::future::poll_fn(move |cx| {
            alloc::uncounted(|| ticking.as_mut().poll(cx))
        }));
        Self { task }
    }

    /// Waits for the window's last tick, which may itself be late, and summarizes them all; `None` if the ticker
    /// did not finish (its runtime shutting down).
    pub(crate) async fn finish(self) -> Option<Lateness> {
        self.task.await.ok().flatten()
    }
}

/// The ticker's task: `ticks` ticks from `start`, each one's lateness recorded into `delays` (which has room for
/// them all).
async fn tick(
    start: tokio::time::Instant,
    ticks: usize,
    mut delays: Vec<Duration>,
) -> Option<Lateness> {
    let mut due = start;
    for _ in 0..ticks {
        tokio::time::sleep_until(due).await;
        delays.push(tokio::time::Instant::now().saturating_duration_since(due));
        // The next tick is due one period after this one was, not after it fired: a stall is not forgiven.
        due += TICK;
    }
    summarize(&mut delays)
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    #[test]
    fn percentiles_are_nearest_rank_over_the_ticks() {
        // 1..=200 µs, shuffled: the median is the 100th smallest, p99 the 198th.
        let mut delays: Vec<Duration> = (1..=200u64)
            .map(|i| Duration::from_micros((i * 73) % 200 + 1))
            .collect();
        let lateness = summarize(&mut delays).unwrap();
        assert_eq!(
            lateness,
            Lateness {
                p50_us: 100.0,
                p99_us: 198.0,
                p999_us: Some(200.0),
                max_us: 200.0,
                ticks: 200,
            }
        );
    }

    #[test]
    fn one_long_stall_shows_at_p99_and_max_but_not_at_p50() {
        // 990 ticks on time but for a few hundred nanoseconds, then a 10 ms stall: 10 ticks late by 10, 9, … 1 ms.
        let mut delays = vec![Duration::from_nanos(400); 990];
        delays.extend((1..=10).rev().map(|ms| ms * MS));
        let lateness = summarize(&mut delays).unwrap();
        assert_eq!(lateness.ticks, 1_000);
        assert_eq!(lateness.p50_us, 0.4);
        assert_eq!(lateness.p99_us, 0.4, "the 990th of 1,000 is still on time");
        assert_eq!(lateness.p999_us, Some(9_000.0), "the 999th is the 9 ms one");
        assert_eq!(lateness.max_us, 10_000.0);
        delays.push(11 * MS);
        assert_eq!(
            summarize(&mut delays).unwrap().p99_us,
            1_000.0,
            "with 11 late ticks of 1,001, the 991st is the 1 ms one"
        );
    }

    #[test]
    fn a_single_tick_is_every_percentile_and_no_tick_is_no_figure() {
        let lateness = summarize(&mut [Duration::from_micros(1_500)]).unwrap();
        assert_eq!(
            (lateness.p50_us, lateness.p99_us, lateness.max_us),
            (1_500.0, 1_500.0, 1_500.0)
        );
        assert_eq!(summarize(&mut []), None);
    }

    /// On a paused clock the timer is exact: an idle runtime fires every tick on time.
    #[tokio::test(start_paused = true)]
    async fn an_idle_runtime_fires_every_tick_on_time() {
        let start = tokio::time::Instant::now().into_std();
        let ticker = Ticker::spawn(start, start + 10 * MS);
        let lateness = ticker.finish().await.unwrap();
        assert_eq!(
            lateness,
            Lateness {
                p50_us: 0.0,
                p99_us: 0.0,
                p999_us: Some(0.0),
                max_us: 0.0,
                ticks: 10,
            }
        );
    }

    /// A runtime held up for 5 ms fires the ticks due meanwhile at once, each measured from its own instant.
    #[tokio::test(start_paused = true)]
    async fn ticks_missed_in_a_stall_fire_late_each_from_its_own_instant() {
        let start = tokio::time::Instant::now().into_std();
        let ticker = Ticker::spawn(start, start + 10 * MS);
        // The clock moves 5 ms before the ticker first runs: as if this task had kept the only worker that long.
        tokio::time::advance(5 * MS).await;
        let lateness = ticker.finish().await.unwrap();
        // Ticks 0–5 fire at 5 ms (5, 4, 3, 2, 1, 0 ms late), ticks 6–9 on time.
        assert_eq!(lateness.ticks, 10);
        assert_eq!(lateness.p50_us, 0.0);
        assert_eq!(lateness.p99_us, 5_000.0);
        assert_eq!(lateness.max_us, 5_000.0);
    }
}
