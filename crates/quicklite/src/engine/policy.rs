//! When the writer checkpoints: a pure decision, tested step by step without SQLite or threads.

use std::time::{Duration, Instant};

use crate::config::Checkpointing;

/// The first wait after a checkpoint gave up waiting for readers, before another may wait for them; it doubles with
/// each give-up in a row, up to [`BACK_OFF_MAX`]. A reader that held the WAL that long (Litestream's, a backup
/// tool's) likely holds it still: waiting for it again at every threshold would stall the writer each time.
const BACK_OFF_FIRST: Duration = Duration::from_secs(1);

/// The longest wait between two checkpoints that wait for readers, while they keep giving up.
const BACK_OFF_MAX: Duration = Duration::from_secs(64);

/// An idle writer leaves a WAL shorter than the `PASSIVE` threshold divided by this as it is. Truncating it would
/// make the next write start the WAL over, and SQLite syncs a new WAL's header (and, the first time, its directory)
/// even under `synchronous=NORMAL`: a database written every few seconds would pay fsyncs on every write.
const SHORT_WAL_DIVISOR: u32 = 4;

/// The checkpoint modes the writer uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mode {
    Passive,
    Restart,
    Truncate,
}

impl Mode {
    /// Whether a checkpoint in this mode waits for readers to leave the WAL.
    pub(crate) fn waits_for_readers(self) -> bool {
        self != Mode::Passive
    }
}

/// What a checkpoint did (the row `PRAGMA wal_checkpoint` answers).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Checkpointed {
    /// The checkpoint could not finish: a reader still used frames it needed, or the wait for readers ran out.
    pub(crate) busy: bool,
    /// Frames in the WAL.
    pub(crate) log_frames: i64,
    /// Frames copied back into the database (in total, including earlier checkpoints of the same WAL).
    pub(crate) checkpointed_frames: i64,
    pub(crate) took: Duration,
}

/// The writer's checkpoint decisions under [`Checkpointing::Managed`].
#[derive(Debug)]
pub(crate) struct Policy {
    passive_at: u32,
    restart_at: u32,
    truncate_when_idle: Option<Duration>,
    /// The WAL size at which the next `PASSIVE` checkpoint runs.
    next_passive: u32,
    /// The WAL size at which the next `RESTART` checkpoint runs (later than `restart_at` after one that could
    /// not finish, so that a long-running reader does not make every commit wait for it).
    next_restart: u32,
    /// Frames in the WAL when last seen; a smaller number means the WAL started over.
    last_frames: u32,
    /// Whether anything was written since the WAL was last truncated.
    dirty: bool,
    /// Whether the last checkpoint copied every frame back and nothing was committed since: the next commit
    /// starts the WAL over whether it is truncated or not.
    copied_back: bool,
    /// Checkpoints in a row that gave up waiting for readers.
    reader_give_ups: u32,
    /// No checkpoint waits for readers before this (after give-ups).
    wait_again_at: Option<Instant>,
    /// Another program checkpoints this database: only `PASSIVE` checkpoints from now on, which never wait.
    deferring: bool,
}

impl Policy {
    /// The policy for `checkpointing`, or `None` when the writer does not checkpoint by itself.
    pub(crate) fn new(checkpointing: Checkpointing) -> Option<Policy> {
        match checkpointing {
            Checkpointing::Managed {
                passive_at_frames,
                restart_at_frames,
                truncate_when_idle,
                ..
            } => Some(Policy {
                passive_at: passive_at_frames,
                restart_at: restart_at_frames,
                truncate_when_idle,
                next_passive: passive_at_frames,
                next_restart: restart_at_frames,
                last_frames: 0,
                dirty: false,
                copied_back: false,
                reader_give_ups: 0,
                wait_again_at: None,
                deferring: false,
            }),
            Checkpointing::Sqlite | Checkpointing::External => None,
        }
    }

    /// The checkpoint to run after a commit that left `frames` frames in the WAL at `now`, if any.
    pub(crate) fn after_commit(&mut self, frames: u32, now: Instant) -> Option<Mode> {
        self.dirty = true;
        self.copied_back = false;
        if frames < self.last_frames {
            // The WAL started over: count from its new beginning.
            self.next_passive = self.passive_at;
            self.next_restart = self.restart_at;
        }
        self.last_frames = frames;
        if frames >= self.next_restart && self.may_wait_for_readers(now) {
            Some(Mode::Restart)
        } else if frames >= self.next_passive {
            Some(Mode::Passive)
        } else {
            None
        }
    }

    /// How long the writer waits idle before truncating the WAL, if it does.
    pub(crate) fn truncate_when_idle(&self) -> Option<Duration> {
        self.truncate_when_idle
    }

    /// The WAL size at which a commit would next make a checkpoint due.
    pub(crate) fn next_due_at(&self) -> u32 {
        self.next_passive.min(self.next_restart)
    }

    /// Whether a checkpoint may wait for readers at `now`: not while backing off, nor once deferring.
    pub(crate) fn may_wait_for_readers(&self, now: Instant) -> bool {
        !self.deferring && self.wait_again_at.is_none_or(|at| now >= at)
    }

    /// Checkpoints in a row that gave up waiting for readers.
    pub(crate) fn reader_give_ups(&self) -> u32 {
        self.reader_give_ups
    }

    /// Another program checkpoints this database (Litestream): from now on only `PASSIVE` checkpoints, which
    /// never wait for readers, and no truncation when idle.
    pub(crate) fn defer_to_another(&mut self) {
        self.deferring = true;
    }

    /// Whether [`Policy::defer_to_another`] was called.
    pub(crate) fn deferring(&self) -> bool {
        self.deferring
    }

    /// Takes a checkpoint's outcome, at `now`, into account.
    pub(crate) fn checkpointed(&mut self, mode: Mode, outcome: &Checkpointed, now: Instant) {
        let frames = u32::try_from(outcome.log_frames.max(0)).unwrap_or(u32::MAX);
        self.copied_back = !outcome.busy;
        if mode.waits_for_readers() {
            if outcome.busy {
                self.reader_give_ups = self.reader_give_ups.saturating_add(1);
                let doublings = (self.reader_give_ups - 1).min(6);
                let back_off = (BACK_OFF_FIRST * 2_u32.pow(doublings)).min(BACK_OFF_MAX);
                self.wait_again_at = Some(now + back_off);
            } else {
                self.reader_give_ups = 0;
                self.wait_again_at = None;
            }
        }
        if !outcome.busy && mode.waits_for_readers() {
            // The WAL starts over at the next commit (RESTART) or is empty already (TRUNCATE).
            self.next_passive = self.passive_at;
            self.next_restart = self.restart_at;
            self.last_frames = 0;
            self.dirty = mode != Mode::Truncate;
        } else {
            // Try again once the WAL has grown by another half threshold, not after every commit.
            let retry_at = frames.saturating_add(self.passive_at.div_ceil(2));
            self.next_passive = retry_at;
            if mode == Mode::Restart {
                self.next_restart = retry_at;
            }
        }
    }

    /// Takes into account, at `now`, a checkpoint that gave up waiting for readers because a long read of the
    /// process ran: not a reader that holds the WAL for good, so no back-off, and a later commit asks again once
    /// the WAL has grown by another half threshold.
    pub(crate) fn gave_way_to_long_read(
        &mut self,
        mode: Mode,
        outcome: &Checkpointed,
        now: Instant,
    ) {
        let (give_ups, wait_again_at) = (self.reader_give_ups, self.wait_again_at);
        self.checkpointed(mode, outcome, now);
        (self.reader_give_ups, self.wait_again_at) = (give_ups, wait_again_at);
    }

    /// A `PASSIVE` checkpoint was asked of the background thread at `frames`: the next is due `passive_at` frames
    /// later (or when the WAL has started over).
    pub(crate) fn passive_requested(&mut self, frames: u32) {
        self.next_passive = frames.saturating_add(self.passive_at);
    }

    /// How long the writer may wait for a request, at `now`, before truncating the WAL, if it should (not before
    /// the back-off after give-ups has passed; never while deferring to another checkpointer, nor while the next
    /// write would append to a short WAL: see [`SHORT_WAL_DIVISOR`]).
    pub(crate) fn idle_wait(&self, now: Instant) -> Option<Duration> {
        let short = !self.copied_back && self.last_frames < self.passive_at / SHORT_WAL_DIVISOR;
        if self.deferring || !self.dirty || short {
            return None;
        }
        let idle = self.truncate_when_idle?;
        let backing_off = self
            .wait_again_at
            .map_or(Duration::ZERO, |at| at.saturating_duration_since(now));
        Some(idle.max(backing_off))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy() -> Policy {
        Policy::new(Checkpointing::Managed {
            passive_at_frames: 100,
            restart_at_frames: 400,
            reader_wait: Duration::from_millis(10),
            truncate_when_idle: Some(Duration::from_secs(1)),
        })
        .unwrap()
    }

    impl Policy {
        /// `after_commit` at a time past any back-off.
        fn after_commit_now(&mut self, frames: u32) -> Option<Mode> {
            self.wait_again_at = None;
            self.after_commit(frames, Instant::now())
        }

        fn checkpointed_now(&mut self, mode: Mode, outcome: &Checkpointed) {
            self.checkpointed(mode, outcome, Instant::now())
        }
    }

    fn outcome(busy: bool, log: i64, done: i64) -> Checkpointed {
        Checkpointed {
            busy,
            log_frames: log,
            checkpointed_frames: done,
            took: Duration::ZERO,
        }
    }

    #[test]
    fn passive_then_restart_as_the_wal_grows() {
        let mut p = policy();
        assert_eq!(p.idle_wait(Instant::now()), None, "nothing written yet");
        assert_eq!(p.after_commit_now(50), None);
        assert_eq!(p.idle_wait(Instant::now()), Some(Duration::from_secs(1)));
        assert_eq!(p.after_commit_now(120), Some(Mode::Passive));
        // A reader held frames back: the next PASSIVE waits for 50 more frames, not the next commit.
        p.checkpointed_now(Mode::Passive, &outcome(true, 120, 80));
        assert_eq!(p.after_commit_now(130), None);
        assert_eq!(p.after_commit_now(170), Some(Mode::Passive));
        p.checkpointed_now(Mode::Passive, &outcome(true, 170, 170));
        assert_eq!(p.after_commit_now(400), Some(Mode::Restart));
        // A long read kept the WAL in use: the next RESTART waits for 50 more frames, not the next commit.
        p.checkpointed_now(Mode::Restart, &outcome(true, 400, 400));
        assert_eq!(p.after_commit_now(420), None);
        assert_eq!(p.after_commit_now(450), Some(Mode::Restart));
        p.checkpointed_now(Mode::Restart, &outcome(false, 450, 450));
        assert_eq!(p.after_commit_now(10), None);
        assert_eq!(p.after_commit_now(100), Some(Mode::Passive));
    }

    #[test]
    fn a_wal_that_started_over_counts_from_zero() {
        let mut p = policy();
        assert_eq!(p.after_commit_now(150), Some(Mode::Passive));
        p.checkpointed_now(Mode::Passive, &outcome(false, 150, 150));
        // The next commit restarted the WAL by itself (every frame was copied back, no reader in it).
        assert_eq!(p.after_commit_now(5), None);
        assert_eq!(p.after_commit_now(100), Some(Mode::Passive));
    }

    #[test]
    fn truncating_leaves_nothing_to_do_when_idle() {
        let mut p = policy();
        p.after_commit_now(30);
        p.checkpointed_now(Mode::Truncate, &outcome(false, 0, 0));
        assert_eq!(p.idle_wait(Instant::now()), None);
        p.after_commit_now(30);
        p.checkpointed_now(Mode::Truncate, &outcome(true, 30, 0));
        assert_eq!(
            p.idle_wait(Instant::now()),
            Some(Duration::from_secs(1)),
            "retried later"
        );
    }

    #[test]
    fn a_short_wal_is_left_as_it_is_when_idle() {
        let mut p = policy();
        // A quarter of the PASSIVE threshold (100 frames here) is short.
        assert_eq!(p.after_commit_now(3), None);
        assert_eq!(p.idle_wait(Instant::now()), None, "3 frames are kept");
        assert_eq!(p.after_commit_now(24), None);
        assert_eq!(p.idle_wait(Instant::now()), None, "24 frames are kept");
        assert_eq!(p.after_commit_now(25), None);
        assert_eq!(p.idle_wait(Instant::now()), Some(Duration::from_secs(1)));
        // The WAL started over (a checkpoint the next commit found complete): short again.
        assert_eq!(p.after_commit_now(2), None);
        assert_eq!(p.idle_wait(Instant::now()), None);
        // Copied back whole, it starts over at the next write anyway: truncating it then costs that write nothing.
        p.checkpointed_now(Mode::Passive, &outcome(false, 2, 2));
        assert_eq!(p.idle_wait(Instant::now()), Some(Duration::from_secs(1)));
        // One that a reader held back leaves the short WAL to be appended to.
        assert_eq!(p.after_commit_now(3), None);
        p.checkpointed_now(Mode::Passive, &outcome(true, 3, 2));
        assert_eq!(p.idle_wait(Instant::now()), None);
    }

    #[test]
    fn checkpoints_that_give_up_on_readers_back_off_doubling_then_reset() {
        let mut p = policy();
        let t0 = Instant::now();
        assert_eq!(p.after_commit(400, t0), Some(Mode::Restart));
        p.checkpointed(Mode::Restart, &outcome(true, 400, 400), t0);
        assert_eq!(p.reader_give_ups(), 1);
        // Within `BACK_OFF_FIRST` no checkpoint waits for readers; PASSIVE ones go on.
        let half = t0 + Duration::from_millis(500);
        assert_eq!(p.after_commit(450, half), Some(Mode::Passive));
        p.checkpointed(Mode::Passive, &outcome(true, 450, 400), half);
        assert_eq!(p.after_commit(460, t0 + Duration::from_millis(999)), None);
        let t1 = t0 + Duration::from_secs(1);
        assert_eq!(p.after_commit(470, t1), Some(Mode::Restart));
        p.checkpointed(Mode::Restart, &outcome(true, 470, 470), t1);
        // Then the pause doubles, up to `BACK_OFF_MAX`.
        assert!(!p.may_wait_for_readers(t1 + Duration::from_millis(1999)));
        assert!(p.may_wait_for_readers(t1 + Duration::from_secs(2)));
        let mut t = t1;
        for _ in 0..10 {
            t += Duration::from_secs(100);
            p.checkpointed(Mode::Restart, &outcome(true, 500, 500), t);
        }
        assert!(!p.may_wait_for_readers(t + Duration::from_secs(63)));
        assert!(p.may_wait_for_readers(t + Duration::from_secs(64)));
        // The idle truncation waits for the back-off too.
        assert_eq!(p.idle_wait(t), Some(Duration::from_secs(64)));
        // One that finishes ends the back-off.
        p.checkpointed(Mode::Restart, &outcome(false, 500, 500), t);
        assert_eq!(p.reader_give_ups(), 0);
        assert!(p.may_wait_for_readers(t));
        assert_eq!(p.idle_wait(t), Some(Duration::from_secs(1)));
    }

    #[test]
    fn a_checkpoint_that_gave_way_to_a_long_read_does_not_back_off() {
        let mut p = policy();
        let t0 = Instant::now();
        assert_eq!(p.after_commit(400, t0), Some(Mode::Restart));
        p.gave_way_to_long_read(Mode::Restart, &outcome(true, 400, 400), t0);
        assert_eq!(p.reader_give_ups(), 0);
        assert!(p.may_wait_for_readers(t0));
        // Not at the very next commit: once the WAL has grown by another half threshold.
        assert_eq!(p.after_commit(401, t0), None);
        assert_eq!(p.after_commit(460, t0), Some(Mode::Restart));
    }

    #[test]
    fn deferring_to_another_checkpointer_leaves_only_passive_checkpoints() {
        let mut p = policy();
        p.defer_to_another();
        let now = Instant::now();
        assert_eq!(p.after_commit(100, now), Some(Mode::Passive));
        assert_eq!(p.after_commit(10_000, now), Some(Mode::Passive));
        assert!(!p.may_wait_for_readers(now));
        assert_eq!(p.idle_wait(now), None, "no truncation when idle");
    }
}
