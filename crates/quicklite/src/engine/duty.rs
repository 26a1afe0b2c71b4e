//! How busy the writer has been lately: the share of its time spent in turns, over windows of [`WINDOW`].
//!
//! Group commit repays the hand-off to the writer thread while the writer is busy: the writes that queue behind a
//! turn share its commit. Turns of several writes also come by chance where the writer is idle most of the time — a
//! service whose requests come in bursts, a few thousand or tens of thousands of writes a second — and there the
//! writes gain more from running on their callers' threads, without the hand-off, than from the commits they
//! would share. So the writer keeps its connection for group commit only until it is idle: busy less than a
//! [`BUSY_SHARE`]th of its time over a few windows in a row ([`Duty::idle`],
//! [`Writer::grouping`](crate::engine::write::Writer::grouping)) — its writes that ran on its lent connection, on
//! their callers' threads, counted as its own time ([`Duty::also`]). The same measure, one window at a time,
//! tells how much of the time writes on callers' threads hold the writer's lent connection
//! ([`WriterSeat`](crate::engine::seat::WriterSeat)).

use std::time::{Duration, Instant};

/// The window over which the writer's share of time in turns is taken: many turns at the rates where writes come
/// in small bursts, a few turns where a checkpoint makes one long.
pub(crate) const WINDOW: Duration = Duration::from_millis(2);

/// The writer is busy while it spends at least one part in this many of its time in turns.
pub(crate) const BUSY_SHARE: u32 = 4;

/// How long whole windows in a row must find the writer not busy before it is idle ([`Duty::idle`]): one window
/// alone may have caught the writer, or the callers whose next writes it waits for, waiting for a CPU (many tasks
/// writing on few CPUs), and ending group commit's hold then sends a burst of writes to their callers' threads, to
/// commit one by one (docs/design.md).
pub(crate) const IDLE_AFTER: Duration = Duration::from_millis(4);

/// The writer's time in turns over the window under way, whether the last whole window was busy, and for how long
/// the last whole windows were not.
#[derive(Debug)]
pub(crate) struct Duty {
    window_began: Instant,
    in_turns: Duration,
    busy: bool,
    /// The length of the whole windows in a row, up to the last, that were not busy.
    not_busy_for: Duration,
    /// Busy while in turns at least one part in this many of the time.
    share: u32,
}

impl Duty {
    /// A writer that has not served a turn yet: not busy, and idle.
    pub(crate) fn new(now: Instant) -> Duty {
        Duty::busy_from(now, BUSY_SHARE)
    }

    /// Turns from `now` on, busy once they take at least one part in `share` of a window.
    pub(crate) fn busy_from(now: Instant, share: u32) -> Duty {
        Duty {
            window_began: now,
            in_turns: Duration::ZERO,
            busy: false,
            not_busy_for: IDLE_AFTER,
            share,
        }
    }

    /// Counts a turn from `began` to `ended`; once the window under way is whole, it says whether the writer is busy
    /// ([`Duty::busy`]) and the next window begins. A writer idle for long is found not busy at its next turn.
    pub(crate) fn turn(&mut self, began: Instant, ended: Instant) {
        self.in_turns += ended.saturating_duration_since(began);
        let window = ended.saturating_duration_since(self.window_began);
        if window >= WINDOW {
            self.busy = self.in_turns * self.share >= window;
            self.not_busy_for = match self.busy {
                true => Duration::ZERO,
                false => self.not_busy_for.saturating_add(window),
            };
            self.window_began = ended;
            self.in_turns = Duration::ZERO;
        }
    }

    /// Counts `held`, time the writer's work was done elsewhere — writes on its lent connection, on their callers'
    /// threads ([`WriterSeat::written`](crate::engine::seat::WriterSeat::written)) — as time in turns: a writer
    /// idle because its writes ran there was not idle.
    pub(crate) fn also(&mut self, held: Duration) {
        self.in_turns += held;
    }

    /// Whether the writer spent at least its share ([`BUSY_SHARE`] unless told) of the last whole window in turns.
    pub(crate) fn busy(&self) -> bool {
        self.busy
    }

    /// Whether the last whole windows found the writer not busy for [`IDLE_AFTER`] or longer in a row.
    pub(crate) fn idle(&self) -> bool {
        self.not_busy_for >= IDLE_AFTER
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const US: Duration = Duration::from_micros(1);

    /// Turns of `turn` every `every`, from `start`, for `n` turns; returns when the last ended.
    fn turns(duty: &mut Duty, start: Instant, turn: Duration, every: Duration, n: u32) -> Instant {
        let mut at = start;
        for _ in 0..n {
            duty.turn(at, at + turn);
            at += every;
        }
        at - every + turn
    }

    #[test]
    fn a_writer_is_busy_only_once_a_whole_window_was_a_quarter_in_turns() {
        let t0 = Instant::now();
        let mut duty = Duty::new(t0);
        assert!(!duty.busy(), "a new writer is not busy");
        // Back to back, but the window not yet whole.
        turns(&mut duty, t0, 100 * US, 100 * US, 19);
        assert!(!duty.busy(), "1.9 ms of a 2 ms window");
        turns(&mut duty, t0 + 1_900 * US, 100 * US, 100 * US, 1);
        assert!(duty.busy(), "a whole window in turns");
        // Turns of 20 µs every 100 µs: a fifth of the time.
        let at = turns(&mut duty, t0 + 2_000 * US, 20 * US, 100 * US, 25);
        assert!(
            !duty.busy(),
            "a fifth of the window in turns, up to {:?}",
            at - t0
        );
        // A third of the time.
        turns(&mut duty, at, 50 * US, 150 * US, 20);
        assert!(duty.busy(), "a third of the window in turns");
    }

    #[test]
    fn a_writer_idle_for_long_is_not_busy_at_its_next_turn() {
        let t0 = Instant::now();
        let mut duty = Duty::new(t0);
        let at = turns(&mut duty, t0, 100 * US, 100 * US, 30);
        assert!(duty.busy());
        // A long turn after a second's rest: its window is the whole second.
        let later = at + Duration::from_secs(1);
        duty.turn(later, later + 300 * US);
        assert!(!duty.busy(), "300 µs in turns over a second");
        assert!(duty.idle(), "a second's window alone");
    }

    #[test]
    fn time_the_writers_work_ran_elsewhere_counts_as_in_turns() {
        let t0 = Instant::now();
        let (mut alone, mut helped) = (Duty::new(t0), Duty::new(t0));
        helped.also(Duration::from_millis(1));
        for duty in [&mut alone, &mut helped] {
            turns(duty, t0, 20 * US, 100 * US, 21);
        }
        assert!(!alone.busy(), "a fifth of the window in turns");
        assert!(helped.busy(), "and half of it elsewhere");
    }

    #[test]
    fn a_writer_is_idle_only_once_windows_in_a_row_found_it_not_busy_for_long_enough() {
        let t0 = Instant::now();
        let mut duty = Duty::new(t0);
        assert!(duty.idle(), "a new writer is idle");
        // Back to back for one whole window: busy, and the next window begins as the last turn ends.
        let at = turns(&mut duty, t0, 100 * US, 100 * US, 20);
        assert!(duty.busy() && !duty.idle());
        // The next turn 3 ms later (the writer, or the callers whose writes it waits for, waited for a CPU): a
        // window not busy, and not idle.
        let at = at + 3_000 * US;
        duty.turn(at - 100 * US, at);
        assert!(!duty.busy() && !duty.idle(), "{duty:?}");
        // Busy again for a whole window; then a turn a millisecond for 2 ms, and for 2 ms more: idle only after both.
        let at = turns(&mut duty, at, 100 * US, 100 * US, 20);
        assert!(duty.busy() && !duty.idle());
        let at = turns(&mut duty, at + 900 * US, 100 * US, 1_000 * US, 2);
        assert!(!duty.busy() && !duty.idle(), "one window of two: {duty:?}");
        turns(&mut duty, at + 900 * US, 100 * US, 1_000 * US, 2);
        assert!(!duty.busy() && duty.idle(), "two windows: {duty:?}");
    }

    #[test]
    fn a_long_turn_alone_makes_its_window_busy() {
        let t0 = Instant::now();
        let mut duty = Duty::new(t0);
        // A checkpoint of 10 ms in one turn: the window it closes is all turn.
        duty.turn(t0 + 100 * US, t0 + 10_100 * US);
        assert!(duty.busy());
    }
}
