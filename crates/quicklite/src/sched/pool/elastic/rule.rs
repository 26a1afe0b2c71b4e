//! The write lane's rule, apart from its clock and threads so that it can be tested alone: when to add threads,
//! when to retire one ([`decide`]), and the average of busy threads retiring looks at ([`BusyAverage`]).

use std::collections::VecDeque;
use std::time::{Duration, Instant};

/// How often the supervisor looks while the lane is saturated or has extra threads.
pub(super) const TICK: Duration = Duration::from_millis(5);

/// Looks in a row that must find tasks queued before the lane grows: a queue that the threads empty between two
/// looks needs no more of them.
pub(super) const QUEUED_LOOKS: u32 = 3;

/// The span over which the lane's busy threads are averaged before extra threads retire.
pub(super) const RETIRE_AFTER: Duration = Duration::from_secs(1);

/// Looks (one per [`TICK`]) that make up [`RETIRE_AFTER`].
const LOOKS_PER_AVERAGE: usize = (RETIRE_AFTER.as_millis() / TICK.as_millis()) as usize;

/// What one look at the lane's threads found.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Look {
    /// Threads blocked now in an application's closure or a commit.
    pub(crate) blocked: usize,
    /// Whether one of them has been stuck for long ([`STUCK_AFTER`](super::STUCK_AFTER),
    /// [`BLOCKED_LOOKS`](super::BLOCKED_LOOKS)).
    pub(crate) stuck: bool,
}

/// What the supervisor saw on one tick.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct Seen {
    /// The lane's threads.
    pub(crate) threads: usize,
    /// Write tasks queued.
    pub(crate) queued: usize,
    /// Ticks in a row, this one included, that found tasks queued.
    pub(crate) queued_looks: u32,
    /// Whether some thread has no task.
    pub(crate) some_idle: bool,
    /// Its threads, when it looked at them (only with tasks queued).
    pub(crate) look: Look,
    /// Threads busy on average over the last [`RETIRE_AFTER`]; `None` until the supervisor has looked that long.
    pub(crate) mean_busy: Option<f64>,
}

/// What the supervisor decides on one look.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Decision {
    /// Start this many threads.
    Grow(usize),
    /// Retire one extra thread.
    Retire,
    /// Nothing to do.
    Stay,
}

/// The supervisor's rule, apart from its clock and threads so that it can be tested alone: grow when tasks have
/// waited for several looks behind threads most of which are blocked, one of them for long; retire an extra thread
/// while the threads busy on average over the last `RETIRE_AFTER`, doubled and one added, are fewer than the lane
/// has.
pub(crate) fn decide(seen: Seen, lane: (usize, usize)) -> Decision {
    let (base, max) = lane;
    let Seen {
        threads,
        queued,
        queued_looks,
        some_idle,
        look,
        mean_busy,
    } = seen;
    let waiting = queued > 0 && queued_looks >= QUEUED_LOOKS && !some_idle;
    if waiting && look.stuck && 2 * look.blocked > threads && threads < max {
        return Decision::Grow(queued.min(threads.max(1)).min(max - threads));
    }
    if threads > base && mean_busy.is_some_and(|busy| 2.0 * busy + 1.0 < threads as f64) {
        return Decision::Retire;
    }
    Decision::Stay
}

/// The lane's busy threads, one sample per [`TICK`], averaged over the last [`RETIRE_AFTER`].
#[derive(Debug, Default)]
pub(super) struct BusyAverage {
    samples: VecDeque<usize>,
    sum: usize,
    last: Option<Instant>,
}

impl BusyAverage {
    /// Takes `busy` as the sample of the tick that ends at `now`. Looks closer together than a tick (the supervisor
    /// is also woken when a task starts with every thread busy) are skipped, so that busy moments do not weigh
    /// more; after a gap of several ticks (the supervisor slept: the lane had its base and an idle thread) the
    /// samples start over.
    pub(super) fn record(&mut self, now: Instant, busy: usize) {
        if let Some(last) = self.last {
            let since = now.saturating_duration_since(last);
            if since < TICK {
                return;
            }
            if since > 4 * TICK {
                self.samples.clear();
                self.sum = 0;
            }
        }
        self.last = Some(now);
        self.samples.push_back(busy);
        self.sum += busy;
        if self.samples.len() > LOOKS_PER_AVERAGE {
            self.sum -= self.samples.pop_front().unwrap_or(0);
        }
    }

    /// The threads busy on average over the last [`RETIRE_AFTER`]; `None` until sampled that long.
    pub(super) fn mean(&self) -> Option<f64> {
        (self.samples.len() == LOOKS_PER_AVERAGE)
            .then(|| self.sum as f64 / LOOKS_PER_AVERAGE as f64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Tasks queued at enough looks in a row, no thread idle, `blocked` threads blocked, one of them stuck.
    fn waiting(threads: usize, queued: usize, blocked: usize) -> Seen {
        Seen {
            threads,
            queued,
            queued_looks: QUEUED_LOOKS,
            some_idle: false,
            look: Look {
                blocked,
                stuck: true,
            },
            mean_busy: None,
        }
    }

    #[test]
    fn the_lane_grows_while_work_waits_behind_threads_most_of_which_are_blocked() {
        let lane = (2, 8);
        // Two threads stuck in long writes, five writes waiting: double.
        assert_eq!(decide(waiting(2, 5, 2), lane), Decision::Grow(2));
        // One waiting: one more.
        assert_eq!(decide(waiting(4, 1, 3), lane), Decision::Grow(1));
        // Never past the cap.
        assert_eq!(decide(waiting(7, 50, 7), lane), Decision::Grow(1));
        assert_eq!(decide(waiting(8, 50, 8), lane), Decision::Stay);
    }

    #[test]
    fn threads_that_have_just_started_their_next_long_writes_do_not_stop_the_growth() {
        // A hundred databases, each writing one long write after another, on 80 threads: 70 are asleep in a
        // write, 10 have just started theirs (or are committing), 20 databases wait.
        assert_eq!(decide(waiting(80, 20, 70), (2, 256)), Decision::Grow(20));
    }

    #[test]
    fn a_lane_busy_with_short_or_running_work_does_not_grow() {
        let lane = (2, 8);
        // Half the threads running (a CPU-bound write beside a long one): no growth.
        assert_eq!(decide(waiting(2, 5, 1), lane), Decision::Stay);
        assert_eq!(decide(waiting(4, 5, 2), lane), Decision::Stay);
        // No thread blocked for long: short commits caught waiting for the disk.
        let short = Seen {
            look: Look {
                blocked: 2,
                stuck: false,
            },
            ..waiting(2, 5, 2)
        };
        assert_eq!(decide(short, lane), Decision::Stay);
        // A queue the threads empty between looks, or a thread idle: it serves the queue.
        let brief = Seen {
            queued_looks: QUEUED_LOOKS - 1,
            ..waiting(2, 5, 2)
        };
        assert_eq!(decide(brief, lane), Decision::Stay);
        let idle = Seen {
            some_idle: true,
            ..waiting(2, 5, 2)
        };
        assert_eq!(decide(idle, lane), Decision::Stay);
        assert_eq!(decide(waiting(2, 0, 2), lane), Decision::Stay);
    }

    #[test]
    fn extra_threads_retire_while_fewer_than_half_were_busy_over_the_span_and_the_base_stays() {
        let lane = (2, 8);
        let unqueued = |threads, busy| Seen {
            threads,
            some_idle: true,
            mean_busy: busy,
            ..Seen::default()
        };
        // Not looked at for `RETIRE_AFTER` yet.
        assert_eq!(decide(unqueued(6, None), lane), Decision::Stay);
        // Idle, or one short write at a time, whether or not a task was queued at some look.
        assert_eq!(decide(unqueued(6, Some(0.0)), lane), Decision::Retire);
        assert_eq!(decide(unqueued(6, Some(1.2)), lane), Decision::Retire);
        let queued_at_times = Seen {
            queued: 1,
            queued_looks: 1,
            ..unqueued(6, Some(1.2))
        };
        assert_eq!(decide(queued_at_times, lane), Decision::Retire);
        // Most of them busy: they are kept.
        assert_eq!(decide(unqueued(6, Some(2.5)), lane), Decision::Stay);
        assert_eq!(decide(unqueued(6, Some(5.9)), lane), Decision::Stay);
        // Never below the base.
        assert_eq!(decide(unqueued(3, Some(0.0)), lane), Decision::Retire);
        assert_eq!(decide(unqueued(2, Some(0.0)), lane), Decision::Stay);
    }

    #[test]
    fn the_busy_average_takes_a_sample_per_tick_over_a_second_and_starts_over_after_a_gap() {
        let mut busy = BusyAverage::default();
        let t0 = Instant::now();
        let at = |ticks: u32| t0 + TICK * ticks;
        for tick in 0..LOOKS_PER_AVERAGE as u32 - 1 {
            busy.record(at(tick), if tick % 2 == 0 { 4 } else { 0 });
        }
        assert_eq!(busy.mean(), None, "not a second yet");
        // A wake-up between two ticks, with every thread busy, is not a sample.
        busy.record(at(LOOKS_PER_AVERAGE as u32 - 2) + TICK / 2, 100);
        busy.record(at(LOOKS_PER_AVERAGE as u32 - 1), 0);
        assert_eq!(busy.mean(), Some(2.0));
        // The oldest sample leaves as a new one comes.
        busy.record(at(LOOKS_PER_AVERAGE as u32), 0);
        assert_eq!(busy.mean(), Some(2.0 - 4.0 / LOOKS_PER_AVERAGE as f64));
        // After a gap of many ticks it starts over.
        busy.record(at(LOOKS_PER_AVERAGE as u32 + 100), 1);
        assert_eq!(busy.mean(), None);
    }
}
