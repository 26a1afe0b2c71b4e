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
use std::sync::{Arc, MutexGuard};
use std::time::{Duration, Instant};

use rusqlite::Connection;
use rusqlite::config::DbConfig;

use crate::Result;
use crate::config::{Checkpointing, Config, ConnectionRole};
use crate::engine::bound;
use crate::engine::busy::BusyLimit;
use crate::engine::guard::GuardedConnection;
use crate::engine::policy::{Checkpointed, Mode, Policy};
use crate::engine::{Shared, open};
use crate::metrics::Metrics;

/// The statement that runs a checkpoint in `mode`.
fn pragma(mode: Mode) -> &'static str {
    match mode {
        Mode::Passive => "PRAGMA wal_checkpoint(PASSIVE)",
        Mode::Restart => "PRAGMA wal_checkpoint(RESTART)",
        Mode::Truncate => "PRAGMA wal_checkpoint(TRUNCATE)",
    }
}

/// Runs one checkpoint on the writer's connection.
pub(crate) fn run(conn: &Connection, mode: Mode) -> rusqlite::Result<Checkpointed> {
    let started = Instant::now();
    let (busy, log_frames, checkpointed_frames) = conn
        .prepare_cached(pragma(mode))?
        .query_row([], |r| Ok((r.get::<_, i64>(0)?, r.get(1)?, r.get(2)?)))?;
    Ok(Checkpointed {
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
    outcome: rusqlite::Result<Checkpointed>,
) -> rusqlite::Result<Checkpointed> {
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

/// A connection of its own for `PASSIVE` checkpoints, so that a database's writer does not wait for them: a
/// checkpoint syncs the WAL and then the database file, two fsyncs that would otherwise hold up every write queued
/// behind the commit that crossed the threshold. A `PASSIVE` checkpoint takes no lock a writer needs, so commits go
/// on meanwhile. The scheduler runs it on a thread of its own ([`PassiveCheckpoints`]).
///
/// SQLite syncs the database file only at a checkpoint that copies the whole WAL back; beside a writer that commits
/// without pause, that is the writer's own `RESTART` checkpoint, which holds the writes back while it runs, and the
/// sync then flushed every page the `PASSIVE` checkpoints before it had copied. So, unless `synchronous` is `OFF`,
/// the checkpointer syncs the database file itself after each of its checkpoints, through SQLite's own handle on it
/// ([`sync_database_file`]): it only flushes sooner what SQLite flushes later, and leaves the `RESTART` checkpoint
/// the last few pages (docs/lab.md, 2026-11-28).
pub(crate) struct Checkpointer {
    conn: Connection,
    /// Whether to sync the database file after each checkpoint (not under `synchronous=OFF`).
    syncs: bool,
    shared: Arc<Shared>,
}

impl Checkpointer {
    /// Opens the checkpointer's connection to `path` with the writer's PRAGMAs (`synchronous` decides what a
    /// checkpoint syncs).
    pub(crate) fn open(path: &Path, config: &Config, shared: Arc<Shared>) -> Result<Checkpointer> {
        let conn = open::open_read_write(path, config, ConnectionRole::Checkpointer)?.into_inner();
        // Never the last connection to close on purpose, but if it were, the writer's policy decides, not this.
        conn.set_db_config(DbConfig::SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, true)?;
        let synchronous: i64 = conn.pragma_query_value(None, "synchronous", |r| r.get(0))?;
        Ok(Checkpointer {
            conn,
            syncs: synchronous > 0,
            shared,
        })
    }

    /// Runs one `PASSIVE` checkpoint and records it, then syncs the database file (see [`Checkpointer`]).
    pub(crate) fn passive(&self) {
        let outcome = record(
            &self.shared.metrics,
            Mode::Passive,
            run(&self.conn, Mode::Passive),
        );
        if outcome.is_ok()
            && self.syncs
            && let Err(e) = sync_database_file(&self.conn)
        {
            // The checkpoint that copies the WAL's last frames syncs it again, and the writer hears of a failure.
            tracing::warn!(error = %e, "could not sync the database file after a checkpoint");
        }
    }
}

/// Syncs the main database file of `conn` through SQLite's own handle on it (its VFS's `xSync`), not through a file
/// opened beside it: closing another descriptor of the database file would drop every POSIX lock the process holds
/// on it, SQLite's included.
fn sync_database_file(conn: &Connection) -> rusqlite::Result<()> {
    let failed = |rc| rusqlite::Error::SqliteFailure(rusqlite::ffi::Error::new(rc), None);
    let mut file: *mut rusqlite::ffi::sqlite3_file = std::ptr::null_mut();
    // SAFETY: the handle is this connection's, used on this thread; `SQLITE_FCNTL_FILE_POINTER` writes a pointer to
    // the main database's `sqlite3_file`, which the connection owns while it is open.
    let rc = unsafe {
        rusqlite::ffi::sqlite3_file_control(
            conn.handle(),
            c"main".as_ptr(),
            rusqlite::ffi::SQLITE_FCNTL_FILE_POINTER,
            (&raw mut file).cast(),
        )
    };
    if rc != rusqlite::ffi::SQLITE_OK {
        return Err(failed(rc));
    }
    // SAFETY: `file` is null or the open file above; its methods, if it has any (an open file), are its VFS's.
    let Some(sync) = (unsafe { file.as_ref() })
        .and_then(|file| unsafe { file.pMethods.as_ref() })
        .and_then(|methods| methods.xSync)
    else {
        return Ok(());
    };
    // SAFETY: `xSync` of the file's own VFS, on that file, while no statement of this connection runs.
    match unsafe { sync(file, rusqlite::ffi::SQLITE_SYNC_NORMAL) } {
        rusqlite::ffi::SQLITE_OK => Ok(()),
        rc => Err(failed(rc)),
    }
}

/// Where a writer hands its `PASSIVE` checkpoints when they run elsewhere ([`Checkpointer`] on a thread).
pub(crate) trait PassiveCheckpoints: Send {
    /// Asks for a `PASSIVE` checkpoint; one asked for and not started yet covers this one too.
    fn request(&self);
    /// Waits for a running `PASSIVE` checkpoint to end, and keeps the next from starting while held: the writer's
    /// own checkpoints (`RESTART`, `TRUNCATE`) would fail as busy beside it.
    fn hold(&self) -> MutexGuard<'_, ()>;
}

/// Checkpoints in a row that gave up waiting for readers before the writer says, once, that something else
/// holds long reads.
const GIVE_UPS_NOTICED: u32 = 3;

/// Whether Litestream replicates the database `conn` is open on: it creates these two tables in it when it starts
/// (holding a read transaction open from then on, and checkpointing by itself).
pub(crate) fn litestream_tables(conn: &Connection) -> rusqlite::Result<bool> {
    conn.prepare_cached(
        "SELECT count(*) FROM sqlite_master \
         WHERE type = 'table' AND name IN ('_litestream_seq', '_litestream_lock')",
    )?
    .query_row([], |r| r.get::<_, i64>(0))
    .map(|n| n > 0)
}

/// A writer's checkpoints under [`Checkpointing::Managed`]: the policy's decisions, carried out on the writer's
/// connection or handed to [`PassiveCheckpoints`]; and, under any policy, the warning when the WAL grows past a
/// size.
pub(crate) struct Checkpoints {
    /// `None` when the writer does not checkpoint by itself.
    policy: Option<Policy>,
    /// Where `PASSIVE` checkpoints go when they run on a thread of their own.
    passive: Option<Box<dyn PassiveCheckpoints>>,
    /// The writer connection's busy-wait limit, shortened while a checkpoint waits for readers.
    busy: BusyLimit,
    /// How long `RESTART` and `TRUNCATE` checkpoints wait for readers.
    reader_wait: Duration,
    /// WAL frames past which the writer warns, if it does.
    warn_at_frames: Option<u64>,
    /// Whether the WAL is past that size since the last warning (warned once until it shrinks below half).
    warned: bool,
    /// Whether the writer reads the WAL's frames after each commit with a no-op checkpoint, because SQLite keeps
    /// the WAL hook for its automatic checkpoint ([`Checkpointing::Sqlite`]) and none of quicklite's reports them.
    reads_frames: bool,
}

impl Checkpoints {
    /// The checkpoints of a writer whose connection `conn` is open with `config`; under the managed policy,
    /// deferring to Litestream if its tables are in the database already.
    pub(crate) fn new(
        config: &Config,
        conn: &Connection,
        shared: &Shared,
        busy: BusyLimit,
    ) -> Checkpoints {
        let reader_wait = match config.checkpointing {
            Checkpointing::Managed { reader_wait, .. } => reader_wait,
            Checkpointing::Sqlite | Checkpointing::External => Duration::ZERO,
        };
        let page_size = conn
            .pragma_query_value(None, "page_size", |r| r.get::<_, i64>(0))
            .map_or(4096, |size| u64::try_from(size).unwrap_or(4096))
            .max(512);
        let mut checkpoints = Checkpoints {
            policy: Policy::new(config.checkpointing),
            passive: None,
            busy,
            reader_wait,
            warn_at_frames: config.wal_size_warning.map(|bytes| bytes / page_size),
            warned: false,
            reads_frames: config.checkpointing == Checkpointing::Sqlite,
        };
        checkpoints.look_for_another_checkpointer(conn, shared);
        checkpoints
    }

    /// Defers to Litestream (only `PASSIVE` checkpoints, which never wait for readers) if its tables are in the
    /// database, saying so once per database.
    fn look_for_another_checkpointer(&mut self, conn: &Connection, shared: &Shared) {
        let Some(policy) = self.policy.as_mut().filter(|p| !p.deferring()) else {
            return;
        };
        match litestream_tables(conn) {
            Ok(true) => {
                policy.defer_to_another();
                // Said once per database, not at every reopen of a registry's.
                let known = shared
                    .metrics
                    .another_checkpointer
                    .swap(true, Ordering::Relaxed);
                if known {
                    return;
                }
                tracing::info!(
                    database = conn.path().unwrap_or_default(),
                    "Litestream replicates this database and checkpoints it: the writer now runs only PASSIVE \
                     checkpoints, which never wait for its reads; Checkpointing::External leaves them all to it"
                );
            }
            Ok(false) => {}
            Err(e) => tracing::debug!(error = %e, "could not look for Litestream's tables"),
        }
    }

    /// Warns (once, until the WAL shrinks below half the size) when the WAL holds more than the warning size.
    fn watch_wal_size(&mut self, frames: u64, shared: &Shared) {
        let Some(limit) = self.warn_at_frames else {
            return;
        };
        if frames < limit / 2 {
            self.warned = false;
        } else if frames > limit && !self.warned {
            self.warned = true;
            shared
                .metrics
                .wal_size_warnings
                .fetch_add(1, Ordering::Relaxed);
            tracing::warn!(
                wal_frames = frames,
                managed = self.policy.is_some(),
                "the WAL has grown past its warning size: under Checkpointing::External, is the tool that owns \
                 checkpoints (Litestream) running? Otherwise something holds a read that keeps the WAL from \
                 starting over"
            );
        }
    }

    /// How long the writer waits idle before truncating the WAL, if it does (whether or not the WAL is short now).
    pub(crate) fn truncate_when_idle(&self) -> Option<Duration> {
        self.policy.as_ref().and_then(Policy::truncate_when_idle)
    }

    /// Frames below which commits made outside the writer's turns leave nothing due: writes may run on callers'
    /// threads until the WAL holds this many ([`WriterSeat::writes_below`](crate::engine::seat::WriterSeat::writes_below)).
    /// None under SQLite's automatic checkpoint, which runs inside the `COMMIT` that crosses its threshold; no
    /// bound when another tool owns checkpoints.
    /// A WAL past its warning size is watched by the writer too: writes stop at that size, so the writer warns
    /// once it is crossed and sees the WAL shrink (after another tool's checkpoint) at its next commit.
    pub(crate) fn writes_below(&self) -> u64 {
        let checkpoints = match &self.policy {
            Some(policy) => u64::from(policy.next_due_at()),
            // SQLite's automatic checkpoint (the only policy under which the writer reads the frames itself).
            None if self.reads_frames => 0,
            None => u64::MAX,
        };
        match self.warn_at_frames {
            Some(limit) => checkpoints.min(limit.saturating_add(1)),
            None => checkpoints,
        }
    }

    /// Whether the writer checkpoints by itself.
    pub(crate) fn managed(&self) -> bool {
        self.policy.is_some()
    }

    /// Hands `PASSIVE` checkpoints to `passive` from now on.
    pub(crate) fn hand_passive_to(&mut self, passive: Box<dyn PassiveCheckpoints>) {
        self.passive = Some(passive);
    }

    /// Stops handing `PASSIVE` checkpoints elsewhere (the checkpoint thread ends, after its checkpoint if one
    /// runs).
    pub(crate) fn stop_handing_off(&mut self) {
        self.passive = None;
    }

    /// How long the writer may wait for a request before truncating the WAL, if it should.
    pub(crate) fn idle_wait(&self) -> Option<Duration> {
        let now = Instant::now();
        self.policy.as_ref().and_then(|p| p.idle_wait(now))
    }

    /// Records the WAL's frames after a turn of writes where no WAL hook of quicklite's reports them
    /// ([`Checkpointing::Sqlite`]), before the callers are answered: a caller that reads the metrics after its
    /// write sees the frames it wrote. A no-op checkpoint reads them from the WAL index's header, taking no lock.
    pub(crate) fn count_frames(&self, conn: &GuardedConnection, shared: &Shared) {
        if self.reads_frames
            && let Some(frames) = crate::wal_frames::wal_frames(conn.conn())
        {
            shared.metrics.wal_frames.store(frames, Ordering::Relaxed);
        }
    }

    /// Runs (or hands off) the checkpoint the policy asks for after the last commit, if any. Callers have their
    /// answers already.
    pub(crate) fn after_commit(&mut self, conn: &GuardedConnection, shared: &Shared) {
        let frames = shared.metrics.wal_frames.load(Ordering::Relaxed);
        self.watch_wal_size(frames, shared);
        let frames = u32::try_from(frames).unwrap_or(u32::MAX);
        let Some(policy) = self.policy.as_mut() else {
            return;
        };
        let mode = policy
            .after_commit(frames, Instant::now())
            // Writes queued now would wait while it waited for a long read to leave the WAL, as long as the read
            // runs: a `PASSIVE` one meanwhile, and the next commit asks again.
            .map(|mode| {
                if mode.waits_for_readers() && bound::long_reads_running() {
                    Mode::Passive
                } else {
                    mode
                }
            });
        match (mode, &self.passive) {
            (Some(Mode::Passive), Some(passive)) => {
                passive.request();
                policy.passive_requested(frames);
            }
            (Some(mode), _) => self.run(conn, shared, mode),
            (None, _) => {}
        }
    }

    /// Runs one checkpoint on the writer's connection and records it (nothing unless managed). One that would
    /// wait for readers runs as `PASSIVE` while deferring to another checkpointer.
    pub(crate) fn run(&mut self, conn: &GuardedConnection, shared: &Shared, mode: Mode) {
        let Some(policy) = self.policy.as_ref() else {
            return;
        };
        let mode = if mode.waits_for_readers() && policy.deferring() {
            Mode::Passive
        } else {
            mode
        };
        let _span = tracing::debug_span!("quicklite.checkpoint", ?mode).entered();
        let metrics = &shared.metrics;
        let outcome = {
            // A checkpoint running elsewhere now would make this one fail as busy: let it end first.
            let _passive = self.passive.as_ref().map(|p| p.hold());
            if mode.waits_for_readers() {
                shared.while_checkpoint_waits(|| {
                    self.busy
                        .for_checkpoint(self.reader_wait, || conn.run_own(|c| run(c, mode)))
                })
            } else {
                conn.run_own(|c| run(c, mode))
            }
        };
        let Some(policy) = self.policy.as_mut() else {
            return;
        };
        let now = Instant::now();
        match record(metrics, mode, outcome) {
            Ok(outcome) => {
                if !outcome.busy && mode.waits_for_readers() {
                    // The WAL starts over (or is empty): the hook reports again at the next commit.
                    metrics.wal_frames.store(0, Ordering::Relaxed);
                }
                if outcome.busy && mode.waits_for_readers() && self.busy.gave_way_to_long_read() {
                    policy.gave_way_to_long_read(mode, &outcome, now);
                    return;
                }
                policy.checkpointed(mode, &outcome, now);
                if outcome.busy && mode.waits_for_readers() {
                    let give_ups = policy.reader_give_ups();
                    self.look_for_another_checkpointer(conn.conn(), shared);
                    if give_ups == GIVE_UPS_NOTICED
                        && !self.policy.as_ref().is_some_and(Policy::deferring)
                    {
                        tracing::warn!(
                            database = conn.conn().path().unwrap_or_default(),
                            give_ups,
                            "checkpoints keep giving up waiting for readers: another connection holds long reads \
                             (a replicator, a backup tool); the writer now waits for them less and less often. If \
                             a replicator such as Litestream owns checkpoints, use Checkpointing::External"
                        );
                    }
                }
            }
            Err(_) => {
                let frames = metrics.wal_frames.load(Ordering::Relaxed);
                let failed = Checkpointed {
                    busy: true,
                    log_frames: i64::try_from(frames).unwrap_or(i64::MAX),
                    checkpointed_frames: 0,
                    took: Duration::ZERO,
                };
                policy.checkpointed(mode, &failed, now);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_database_file_is_synced_through_sqlites_own_handle() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.db");
        let conn = Connection::open(&path).unwrap();
        conn.execute_batch(
            "PRAGMA journal_mode = WAL; CREATE TABLE t (a); INSERT INTO t VALUES (1)",
        )
        .unwrap();
        let copied: i64 = conn
            .query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |r| r.get(2))
            .unwrap();
        assert!(copied > 0);
        sync_database_file(&conn).unwrap();
        // Synced beside a write transaction of another connection, which goes on.
        let other = Connection::open(&path).unwrap();
        other
            .execute_batch("BEGIN IMMEDIATE; INSERT INTO t VALUES (2)")
            .unwrap();
        sync_database_file(&conn).unwrap();
        other.execute_batch("COMMIT").unwrap();
        let rows: i64 = conn
            .query_row("SELECT count(*) FROM t", [], |r| r.get(0))
            .unwrap();
        assert_eq!(rows, 2);
        // A database without a file of its own has nothing to sync.
        sync_database_file(&Connection::open_in_memory().unwrap()).unwrap();
    }
}
