//! When the writer checkpoints: a pure decision, tested step by step without SQLite or threads.

use std::time::Duration;

use crate::config::Checkpointing;
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
pub(crate) struct Outcome {
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
            }),
            Checkpointing::Sqlite | Checkpointing::External => None,
        }
    }

    /// The checkpoint to run after a commit that left `frames` frames in the WAL, if any.
    pub(crate) fn after_commit(&mut self, frames: u32) -> Option<Mode> {
        self.dirty = true;
        if frames < self.last_frames {
            // The WAL started over: count from its new beginning.
            self.next_passive = self.passive_at;
            self.next_restart = self.restart_at;
        }
        self.last_frames = frames;
        if frames >= self.next_restart {
            Some(Mode::Restart)
        } else if frames >= self.next_passive {
            Some(Mode::Passive)
        } else {
            None
        }
    }

    /// Takes a checkpoint's outcome into account.
    pub(crate) fn checkpointed(&mut self, mode: Mode, outcome: &Outcome) {
        let frames = u32::try_from(outcome.log_frames.max(0)).unwrap_or(u32::MAX);
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

    /// A `PASSIVE` checkpoint was asked of the background thread at `frames`: the next is due `passive_at` frames
    /// later (or when the WAL has started over).
    pub(crate) fn passive_requested(&mut self, frames: u32) {
        self.next_passive = frames.saturating_add(self.passive_at);
    }

    /// How long the writer may wait for a request before truncating the WAL, if it should.
    pub(crate) fn idle_wait(&self) -> Option<Duration> {
        self.truncate_when_idle.filter(|_| self.dirty)
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

    fn outcome(busy: bool, log: i64, done: i64) -> Outcome {
        Outcome {
            busy,
            log_frames: log,
            checkpointed_frames: done,
            took: Duration::ZERO,
        }
    }

    #[test]
    fn passive_then_restart_as_the_wal_grows() {
        let mut p = policy();
        assert_eq!(p.idle_wait(), None, "nothing written yet");
        assert_eq!(p.after_commit(50), None);
        assert_eq!(p.idle_wait(), Some(Duration::from_secs(1)));
        assert_eq!(p.after_commit(120), Some(Mode::Passive));
        // A reader held frames back: the next PASSIVE waits for 50 more frames, not the next commit.
        p.checkpointed(Mode::Passive, &outcome(true, 120, 80));
        assert_eq!(p.after_commit(130), None);
        assert_eq!(p.after_commit(170), Some(Mode::Passive));
        p.checkpointed(Mode::Passive, &outcome(true, 170, 170));
        assert_eq!(p.after_commit(400), Some(Mode::Restart));
        // A long read kept the WAL in use: the next RESTART waits for 50 more frames, not the next commit.
        p.checkpointed(Mode::Restart, &outcome(true, 400, 400));
        assert_eq!(p.after_commit(420), None);
        assert_eq!(p.after_commit(450), Some(Mode::Restart));
        p.checkpointed(Mode::Restart, &outcome(false, 450, 450));
        assert_eq!(p.after_commit(10), None);
        assert_eq!(p.after_commit(100), Some(Mode::Passive));
    }

    #[test]
    fn a_wal_that_started_over_counts_from_zero() {
        let mut p = policy();
        assert_eq!(p.after_commit(150), Some(Mode::Passive));
        p.checkpointed(Mode::Passive, &outcome(false, 150, 150));
        // The next commit restarted the WAL by itself (every frame was copied back, no reader in it).
        assert_eq!(p.after_commit(5), None);
        assert_eq!(p.after_commit(100), Some(Mode::Passive));
    }

    #[test]
    fn truncating_leaves_nothing_to_do_when_idle() {
        let mut p = policy();
        p.after_commit(10);
        p.checkpointed(Mode::Truncate, &outcome(false, 0, 0));
        assert_eq!(p.idle_wait(), None);
        p.after_commit(1);
        p.checkpointed(Mode::Truncate, &outcome(true, 1, 0));
        assert_eq!(p.idle_wait(), Some(Duration::from_secs(1)), "retried later");
    }
}
