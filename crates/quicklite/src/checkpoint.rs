//! Checkpoints: who copies the WAL back into the database file, and when.
//!
//! In WAL mode every commit appends pages to the `-wal` file; a checkpoint copies them back into the database so
//! the WAL can start over. SQLite's own automatic checkpoint (`wal_autocheckpoint`, 1000 pages) runs inside the
//! `COMMIT` that crosses the threshold, so one caller in a thousand pays for it, and it is PASSIVE: it never waits
//! for readers, so under continuous reads the WAL can grow without bound (<https://www.sqlite.org/wal.html>,
//! "Avoiding Excessively Large WAL Files"). The managed policy moves checkpoints after the answers (and a
//! standalone database's `PASSIVE` ones to a thread of their own, where their fsyncs hold up no write), restarts the
//! WAL once it passes a bound (waiting briefly for readers, which quicklite's readers never hold long: a reader's
//! snapshot lives at most `read_snapshot_max_age`), and truncates it when the writer is idle.

use std::path::Path;
use std::sync::atomic::Ordering;
use std::sync::mpsc::{SyncSender, TrySendError};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use rusqlite::Connection;
use rusqlite::config::DbConfig;

use crate::builder::Config;
use crate::connection::{self, TxGuard};
use crate::database::State;
use crate::metrics::Metrics;
use crate::{Error, Result};

/// Who checkpoints the WAL. Set with [`Builder::checkpointing`](crate::Builder::checkpointing).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Checkpointing {
    /// Checkpoints after the group whose commit crossed a threshold has its answers:
    /// a `PASSIVE` checkpoint (never waits) once the WAL holds `passive_at_frames` frames — for a
    /// [`Database`](crate::Database) on a thread and connection of its own, so that the writer goes on committing
    /// meanwhile (a registry's databases run it on their pool thread); a `RESTART` checkpoint
    /// (waits up to `reader_wait` for readers to leave the WAL, then starts it over) once it holds
    /// `restart_at_frames`, which bounds the WAL; and a `TRUNCATE` checkpoint (the `-wal` file back to zero bytes)
    /// when no write has arrived for `truncate_when_idle`. SQLite's automatic checkpoint is turned off.
    Managed {
        /// WAL frames (pages) after which a `PASSIVE` checkpoint runs.
        passive_at_frames: u32,
        /// WAL frames after which a `RESTART` checkpoint runs: the WAL's bound under continuous reads.
        restart_at_frames: u32,
        /// How long `RESTART` and `TRUNCATE` checkpoints wait for readers before giving up (and trying later).
        reader_wait: Duration,
        /// Idle time after which the WAL is truncated; `None` never truncates.
        truncate_when_idle: Option<Duration>,
    },
    /// SQLite's automatic checkpoint, as `PRAGMA wal_autocheckpoint` sets it (1000 pages unless overridden),
    /// run inside the `COMMIT` that crosses it. The default of [`Profile::SqliteDefault`](crate::Profile).
    Sqlite,
    /// Never checkpoint: another tool owns checkpoints (Litestream, for example, asks applications to leave
    /// them to it). SQLite's automatic checkpoint is turned off, and so is the checkpoint SQLite runs when the
    /// last connection closes (`SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE`); the WAL grows until the tool checkpoints.
    External,
}

impl Checkpointing {
    /// The managed policy with its defaults: `PASSIVE` at 1000 frames (SQLite's own threshold), `RESTART` at
    /// 10,000 frames (about 40 MB with 4 KiB pages), readers waited for up to 100 ms, `TRUNCATE` after 1 s idle.
    pub const fn managed() -> Checkpointing {
        Checkpointing::Managed {
            passive_at_frames: 1000,
            restart_at_frames: 10_000,
            reader_wait: Duration::from_millis(100),
            truncate_when_idle: Some(Duration::from_secs(1)),
        }
    }

    pub(crate) fn validate(&self) -> Result<()> {
        if let Checkpointing::Managed {
            passive_at_frames,
            restart_at_frames,
            ..
        } = *self
            && (passive_at_frames == 0 || restart_at_frames < passive_at_frames)
        {
            return Err(Error::InvalidConfig(format!(
                "checkpointing: passive_at_frames ({passive_at_frames}) must be at least 1 and no more than \
                 restart_at_frames ({restart_at_frames})"
            )));
        }
        Ok(())
    }
}

/// The checkpoint modes the writer uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mode {
    Passive,
    Restart,
    Truncate,
}

impl Mode {
    fn sql(self) -> &'static str {
        match self {
            Mode::Passive => "PRAGMA wal_checkpoint(PASSIVE)",
            Mode::Restart => "PRAGMA wal_checkpoint(RESTART)",
            Mode::Truncate => "PRAGMA wal_checkpoint(TRUNCATE)",
        }
    }

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

/// Runs one checkpoint on the writer's connection.
pub(crate) fn run(conn: &Connection, mode: Mode) -> rusqlite::Result<Outcome> {
    let started = Instant::now();
    let (busy, log_frames, checkpointed_frames) = conn
        .prepare_cached(mode.sql())?
        .query_row([], |r| Ok((r.get::<_, i64>(0)?, r.get(1)?, r.get(2)?)))?;
    Ok(Outcome {
        busy: busy != 0,
        log_frames,
        checkpointed_frames,
        took: started.elapsed(),
    })
}

/// Records a checkpoint's outcome in `metrics`; returns it for the caller's policy.
pub(crate) fn record(
    metrics: &Metrics,
    mode: Mode,
    outcome: rusqlite::Result<Outcome>,
) -> rusqlite::Result<Outcome> {
    match &outcome {
        Ok(outcome) => {
            metrics.checkpoints.fetch_add(1, Ordering::Relaxed);
            metrics.checkpoint_us.record_duration(outcome.took);
            metrics
                .checkpoint_frames
                .record(u64::try_from(outcome.log_frames).unwrap_or(0));
            if outcome.busy {
                metrics
                    .checkpoints_incomplete
                    .fetch_add(1, Ordering::Relaxed);
            }
            tracing::debug!(
                ?mode,
                busy = outcome.busy,
                wal_frames = outcome.log_frames,
                checkpointed = outcome.checkpointed_frames,
                took_us = outcome.took.as_micros() as u64,
                "checkpoint"
            );
        }
        Err(e) => {
            metrics.checkpoint_errors.fetch_add(1, Ordering::Relaxed);
            tracing::warn!(?mode, error = %e, "checkpoint failed");
        }
    }
    outcome
}

/// `PASSIVE` checkpoints on a connection and a thread of their own, so that a database's writer does not wait for
/// them: a checkpoint syncs the WAL and then the database file, two fsyncs that would otherwise hold up every
/// write queued behind the commit that crossed the threshold (a quarter of the writer's time with 64 tasks
/// inserting). A `PASSIVE` checkpoint takes no lock a writer needs, so commits go on meanwhile. The writer's own
/// checkpoints (`RESTART`, `TRUNCATE`) take [`Background::hold`] first, so the two never run at once.
pub(crate) struct Background {
    wake: Option<SyncSender<()>>,
    running: Arc<Mutex<()>>,
    thread: Option<JoinHandle<()>>,
}

impl Background {
    /// Opens the checkpointer's connection to `path` (with the writer's PRAGMAs: `synchronous` decides what a
    /// checkpoint syncs) and starts its thread.
    pub(crate) fn start(path: &Path, config: &Config, state: Arc<State>) -> Result<Self> {
        let conn = connection::open_writer(path, config, &TxGuard::default())?;
        // Never the last connection to close on purpose, but if it were, the writer's policy decides, not this.
        conn.set_db_config(DbConfig::SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, true)?;
        let (wake, wakes) = std::sync::mpsc::sync_channel::<()>(1);
        let running = Arc::new(Mutex::new(()));
        let held = running.clone();
        let thread = crate::database::spawn("quicklite-ckpt", move || {
            while wakes.recv().is_ok() {
                let _running = held.lock().unwrap_or_else(PoisonError::into_inner);
                let _ = record(&state.metrics, Mode::Passive, run(&conn, Mode::Passive));
            }
        })?;
        Ok(Background {
            wake: Some(wake),
            running,
            thread: Some(thread),
        })
    }

    /// Asks for a `PASSIVE` checkpoint; one already asked for and not started yet covers this one too.
    pub(crate) fn request(&self) {
        if let Some(wake) = &self.wake
            && let Err(TrySendError::Disconnected(())) = wake.try_send(())
        {
            tracing::warn!("the checkpoint thread has stopped");
        }
    }

    /// Waits for a running background checkpoint to end, and keeps the next from starting while held.
    pub(crate) fn hold(&self) -> MutexGuard<'_, ()> {
        self.running.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl Drop for Background {
    fn drop(&mut self) {
        drop(self.wake.take());
        if let Some(thread) = self.thread.take()
            && thread.join().is_err()
        {
            tracing::error!("the checkpoint thread panicked");
        }
    }
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

    #[test]
    fn thresholds_are_validated() {
        let bad = Checkpointing::Managed {
            passive_at_frames: 500,
            restart_at_frames: 100,
            reader_wait: Duration::ZERO,
            truncate_when_idle: None,
        };
        assert!(matches!(bad.validate(), Err(Error::InvalidConfig(_))));
        assert!(Checkpointing::managed().validate().is_ok());
        assert!(Checkpointing::External.validate().is_ok());
    }
}
