//! Copies of a live database: SQLite's online backup API, and `VACUUM INTO`.
//!
//! Both read the source through a connection of their own, on a thread of their own, inside one read
//! transaction: in WAL mode the copy is the snapshot taken when it started, and writers carry on meanwhile (their
//! commits go to the WAL, which the copy's snapshot holds back from checkpointing until it ends). The copy is
//! written to a temporary file next to the destination, flushed to disk, then renamed into place, so a failed
//! or interrupted backup never leaves a partial file under the destination's name.
//!
//! A copy is a rollback-journal database, whatever the source's journal mode: one in WAL mode (its header says so)
//! needs a `-shm` file beside it even to be read, so a read-only open would create files next to it, or fail
//! where it cannot (another user's copy, a read-only directory). A copy in rollback-journal mode opens anywhere and
//! a read leaves nothing behind.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use rusqlite::backup::{Backup, StepResult};
use rusqlite::{Connection, OpenFlags};
use tokio::sync::oneshot;

use crate::config::{AppHooks, ConnectionRole, Key};
use crate::util::{companion, spawn};
use crate::{Database, Error, Result};

/// Pages copied per step of the backup API: each step is one short call, so a progress or cancellation check
/// would fit between steps, and the source's pages are read in cache-sized runs.
const PAGES_PER_STEP: i32 = 1024;

/// What a backup copied.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct BackupReport {
    /// Pages in the copy.
    pub pages: u64,
    /// Calls to `sqlite3_backup_step` (0 for `VACUUM INTO`).
    pub steps: u64,
    /// Time from start to the copy being in place.
    pub took: Duration,
}

impl Database {
    /// Copies the database to a new file at `dest` with SQLite's online backup API, a bounded number of pages per
    /// step, without stopping the writer. The copy contains every write acknowledged before `backup` was called, and is
    /// one consistent snapshot.
    ///
    /// `dest` must not exist yet. In WAL mode (the `Server` and `Durable` profiles) writes carry on during the
    /// backup; in rollback-journal mode SQLite's locks make them wait until it ends. The copy is in
    /// rollback-journal mode, a single file that opens anywhere, read-only included, without leaving a `-wal` or
    /// `-shm` file beside it; open it with quicklite (or `PRAGMA journal_mode = WAL`) to serve it in WAL mode again.
    pub async fn backup(&self, dest: impl AsRef<Path>) -> Result<BackupReport> {
        let source = self.source();
        let dest = dest.as_ref().to_path_buf();
        let busy = self.busy_timeout();
        off_thread("quicklite-backup", move || {
            copy(&source, &dest, busy, Snapshot::Held, |src, partial| {
                let mut out = source.open_copy(
                    partial,
                    OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_CREATE,
                )?;
                let steps = {
                    let backup = Backup::new(src, &mut out)?;
                    let mut steps = 0_u64;
                    loop {
                        steps += 1;
                        match backup.step(PAGES_PER_STEP)? {
                            StepResult::Done => break,
                            StepResult::More => {}
                            // The destination is ours alone and the source snapshot is held, so these are
                            // transient; SQLite's documentation says to retry the step.
                            StepResult::Busy | StepResult::Locked => {
                                std::thread::sleep(Duration::from_millis(1))
                            }
                            _ => {}
                        }
                    }
                    steps
                };
                let pages: i64 = out.query_row("PRAGMA page_count", [], |r| r.get(0))?;
                out.close().map_err(|(_, e)| e)?;
                Ok((u64::try_from(pages).unwrap_or(0), steps))
            })
        })
        .await
    }

    /// Writes a compacted copy of the database to a new file at `dest` with `VACUUM INTO`: no free pages,
    /// rebuilt indexes, often smaller than a page-for-page backup. Same guarantees as [`Database::backup`]
    /// (a snapshot containing every write acknowledged before the call; `dest` must not exist yet; a
    /// rollback-journal copy).
    pub async fn vacuum_into(&self, dest: impl AsRef<Path>) -> Result<BackupReport> {
        let source = self.source();
        let dest = dest.as_ref().to_path_buf();
        let busy = self.busy_timeout();
        off_thread("quicklite-vacuum-into", move || {
            copy(&source, &dest, busy, Snapshot::Own, |src, partial| {
                let target = partial
                    .to_str()
                    .ok_or_else(|| rusqlite::Error::InvalidPath(partial.to_path_buf()))?;
                src.execute("VACUUM INTO ?1", [target])?;
                let out = source.open_copy(partial, OpenFlags::SQLITE_OPEN_READ_ONLY)?;
                let pages: i64 = out.query_row("PRAGMA page_count", [], |r| r.get(0))?;
                Ok((u64::try_from(pages).unwrap_or(0), 0))
            })
        })
        .await
    }
}

/// What a copy reads from: the path or URI the database was opened with (so that a URI's `vfs=` holds), and the
/// application's set-up functions.
struct Source {
    path: PathBuf,
    hooks: AppHooks,
    /// The database's key: the source is read with it, and the copy encrypted with it.
    key: Option<Key>,
}

impl Source {
    /// Opens `path` (the copy) with the source's key.
    fn open_copy(&self, path: &Path, flags: OpenFlags) -> rusqlite::Result<Connection> {
        let conn = Connection::open_with_flags(path, flags)?;
        if let Some(key) = &self.key {
            key.apply(&conn)
                .map_err(|e| rusqlite::Error::ToSqlConversionFailure(Box::new(e)))?;
        }
        Ok(conn)
    }
}

impl Source {
    /// Puts the copy at `path` in rollback-journal mode (`DELETE`), which it keeps for every later open.
    fn rollback_journal(&self, path: &Path) -> rusqlite::Result<()> {
        let conn = self.open_copy(path, OpenFlags::SQLITE_OPEN_READ_WRITE)?;
        let mode: String = conn.query_row("PRAGMA journal_mode = DELETE", [], |r| r.get(0))?;
        if !mode.eq_ignore_ascii_case("delete") {
            return Err(rusqlite::Error::ToSqlConversionFailure(
                format!("the copy stayed in journal mode {mode}").into(),
            ));
        }
        conn.close().map_err(|(_, e)| e)
    }
}

impl Database {
    fn source(&self) -> Source {
        Source {
            path: self.path().to_path_buf(),
            hooks: self.hooks().clone(),
            key: self.key().cloned(),
        }
    }
}

/// Runs `f` on a new thread and awaits its result, so that a long copy blocks neither the async runtime nor the
/// database's own threads.
async fn off_thread<T: Send + 'static>(
    name: &str,
    f: impl FnOnce() -> Result<T> + Send + 'static,
) -> Result<T> {
    let (tx, rx) = oneshot::channel();
    spawn(name, move || {
        let _ = tx.send(f());
    })?;
    rx.await.map_err(|_| Error::Panic {
        message: "the backup thread panicked".into(),
    })?
}

/// Who holds the copy's snapshot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Snapshot {
    /// [`copy`] opens a read transaction around the whole copy (the backup API reads in many steps).
    Held,
    /// The copying statement reads in a transaction of its own (`VACUUM INTO` refuses to run inside one).
    Own,
}

/// The shared frame of both copies: checks `dest`, opens the source read-only (inside one read transaction if
/// `snapshot` says so), lets `write` fill a temporary file next to `dest`, then flushes and renames it into place
/// (removing it on failure).
fn copy(
    source: &Source,
    dest: &Path,
    busy_timeout: Duration,
    snapshot: Snapshot,
    write: impl FnOnce(&Connection, &Path) -> rusqlite::Result<(u64, u64)>,
) -> Result<BackupReport> {
    let started = Instant::now();
    let fail = |reason: String| Error::Backup {
        dest: dest.to_path_buf(),
        reason,
    };
    let partial = partial_path(dest).ok_or_else(|| fail("not a file path".into()))?;
    if dest.exists() {
        return Err(fail(
            "the file already exists; a backup never overwrites".into(),
        ));
    }
    let mut src = Connection::open_with_flags(
        &source.path,
        OpenFlags::SQLITE_OPEN_READ_ONLY
            | OpenFlags::SQLITE_OPEN_URI
            | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )?;
    if let Some(key) = &source.key {
        key.apply(&src)?;
    }
    source.hooks.set_up(&mut src, ConnectionRole::Backup)?;
    src.busy_timeout(busy_timeout)?;
    if snapshot == Snapshot::Held {
        // The snapshot: taken at the first read after BEGIN, and held until the copy is done.
        src.execute_batch("BEGIN")?;
        src.query_row("SELECT count(*) FROM sqlite_schema", [], |_| Ok(()))?;
    }

    let written = write(&src, &partial)
        .and_then(|counts| source.rollback_journal(&partial).map(|()| counts))
        .map_err(|e| fail(e.to_string()))
        .and_then(|counts| {
            // Durable before it takes the destination's name, and the name durable in its directory.
            std::fs::File::open(&partial)
                .and_then(|f| f.sync_all())
                .and_then(|()| std::fs::rename(&partial, dest))
                .and_then(|()| sync_dir(dest))
                .map_err(|e| fail(e.to_string()))?;
            Ok(counts)
        });
    if written.is_err() {
        for leftover in ["", "-journal", "-wal", "-shm"].map(|suffix| companion(&partial, suffix)) {
            let _ = std::fs::remove_file(leftover);
        }
    }
    if snapshot == Snapshot::Held {
        let _ = src.execute_batch("COMMIT");
    }
    let (pages, steps) = written?;
    Ok(BackupReport {
        pages,
        steps,
        took: started.elapsed(),
    })
}

/// A fresh temporary name next to `dest`: `.<name>.quicklite-partial-<pid>-<n>`.
fn partial_path(dest: &Path) -> Option<PathBuf> {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let name = dest.file_name()?.to_str()?;
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    Some(dest.with_file_name(format!(
        ".{name}.quicklite-partial-{}-{n}",
        std::process::id()
    )))
}

/// Flushes the directory entry of `path` (the rename), where the platform allows opening a directory.
fn sync_dir(path: &Path) -> std::io::Result<()> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    match std::fs::File::open(dir) {
        Ok(d) => d.sync_all(),
        // Not every platform opens directories; the file itself is already flushed.
        Err(_) => Ok(()),
    }
}
