//! Tenants restored from their replicas with the `litestream` program, and told apart from a copy written elsewhere.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, mpsc};
use std::time::{Duration, Instant};

use super::pages::Pages;
use super::program::{self, Failure, Stop};
use super::scratch::{self, Scratch};
use super::{Position, state};
use crate::util::{lock, spawn};

/// How long one look at a tenant's replica may take by default ([`Restore::timeout`]).
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(300);

/// How often a look waiting for a comparison through the VFS sees whether its callers gave up.
const STOP_LOOK_EVERY: Duration = Duration::from_millis(20);

/// A comparison reads pages through the VFS while they are no more than the tenant has of these bytes: each page
/// is a request to object storage (10–20 ms to S3, one after another), where a restore downloads the tenant at
/// 50–100 MB/s. So about a page per megabyte…
const BYTES_PER_PAGE_READ: u64 = 1 << 20;

/// …and at least this many pages, whatever the tenant's size (a few seconds of requests at most).
const PAGES_READ_AT_LEAST: u64 = 256;

/// Where a [`Registry`](crate::Registry) finds a tenant it does not have on local disk: restored from the replica
/// Litestream keeps of it, before its first open. Given to
/// [`RegistryBuilder::restore_missing`](crate::RegistryBuilder::restore_missing).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Restore {
    program: PathBuf,
    url: String,
    timeout: Duration,
    /// Litestream's VFS, to compare a tenant's pages through ([`Restore::vfs`]).
    vfs: Option<PathBuf>,
}

impl Restore {
    /// Restores with the `litestream` program at `program` from the replica at `url`, a Litestream replica URL in
    /// which `{name}` stands for the tenant's name (`s3://bucket/tenants/{name}`, with `?endpoint=…` for an
    /// S3-compatible server). The program finds credentials as Litestream does (`AWS_ACCESS_KEY_ID`, …).
    pub fn litestream(program: impl Into<PathBuf>, url: impl Into<String>) -> Restore {
        Restore {
            program: program.into(),
            url: url.into(),
            timeout: DEFAULT_TIMEOUT,
            vfs: None,
        }
    }

    /// Compares a tenant's copy here with its replica through Litestream's VFS, the shared library at `extension`
    /// (as [`Replica::litestream`](crate::litestream::Replica::litestream) loads it; every replica and restore of a
    /// process uses the same one), instead of restoring the replica beside it: the comparison reads only the pages
    /// this machine's transactions wrote (the VFS fetches the page index of the replica's files, then each page
    /// asked for), not the whole tenant.
    ///
    /// The VFS runs in this process, where nothing can kill it: a comparison past [`Restore::timeout`], or whose
    /// callers all gave up, is left to finish on its thread (Litestream's HTTP client gives up on its own, after a
    /// day at most) and the `get` fails or ends at once. While such a comparison of a tenant is still running,
    /// the next comparison of that tenant restores the replica with the `litestream` program, which can be killed.
    /// The VFS finds S3 credentials in the environment the process started with (not in variables set later).
    pub fn vfs(mut self, extension: impl Into<PathBuf>) -> Restore {
        self.vfs = Some(extension.into());
        self
    }

    /// How long a [`Registry::get`](crate::Registry::get) waits for Litestream before a tenant opens: the restore of
    /// a missing tenant, or the look at the replica of one that is here (`litestream ltx`, and the download that
    /// compares content), all its runs of `litestream` together. Past it, the `litestream` under way is killed, the
    /// files it was writing are removed, and the `get` fails with
    /// [`Error::RestoreTimedOut`](crate::Error::RestoreTimedOut): the tenant was not opened, and a later `get` tries
    /// again. By default, 5 minutes: long enough to download a tenant of about 15 GB at 50 MB/s, short enough that a
    /// `get` whose object storage stopped answering fails rather than waits — `litestream restore` itself gives no
    /// such bound (Litestream 0.5.18, against an S3 server stopped with SIGSTOP, was still waiting after two
    /// minutes). Raise it for larger tenants or slower links.
    pub fn timeout(mut self, timeout: Duration) -> Restore {
        self.timeout = timeout;
        self
    }

    /// The bound on one look at a tenant's replica ([`Restore::timeout`]).
    pub(crate) fn bound(&self) -> Duration {
        self.timeout
    }

    /// Checks the URL names the tenant somewhere, the timeout leaves Litestream some time, and the VFS to compare
    /// through, if any, is a file.
    pub(crate) fn validate(&self) -> Result<(), String> {
        if !self.url.contains("{name}") {
            return Err(format!(
                "the restore URL {} does not say where a tenant's name goes ({{name}})",
                self.url
            ));
        }
        if self.timeout.is_zero() {
            return Err("the restore timeout is zero: no restore could run".into());
        }
        if let Some(extension) = &self.vfs
            && !extension.is_file()
        {
            return Err(format!(
                "no Litestream VFS at {} to compare tenants through",
                extension.display()
            ));
        }
        Ok(())
    }

    /// The last transaction the replica of tenant `name` holds; `None` if it has none. Asks `litestream ltx`.
    pub(crate) fn replica_position(
        &self,
        name: &str,
        look: &Look,
    ) -> Result<Option<Position>, Failure> {
        let url = self.url.replace("{name}", name);
        let out = self.run("ltx", &["-json", "-level", "all"], &url, look)?;
        let files: Vec<serde_json::Value> = serde_json::from_slice(&out)
            .map_err(|e| format!("`litestream ltx` of {url} answered what is not its JSON: {e}"))?;
        files
            .iter()
            .map(|file| {
                file.get("max_txid")
                    .and_then(serde_json::Value::as_str)
                    .and_then(|txid| u64::from_str_radix(txid, 16).ok())
                    .map(Position)
                    .ok_or_else(|| {
                        format!("`litestream ltx` of {url}: a file without its max_txid: {file}")
                    })
            })
            .try_fold(None, |max, position| Ok(max.max(Some(position?))))
            .map_err(Failure::Failed)
    }

    /// Restores tenant `name` from its replica to `path`, unless the replica has none. It is restored into a
    /// directory of its own beside `path`, then linked into place unless a concurrent restore got there first: the
    /// tenant's file appears whole or not at all, and the directory goes however the restore ends. Blocks until
    /// `litestream restore` exits, or is killed.
    pub(crate) fn restore_in_place(
        &self,
        name: &str,
        path: &Path,
        look: &Look,
    ) -> Result<(), Failure> {
        let dir = path.parent().unwrap_or(Path::new("."));
        let scratch = Scratch::new(dir, scratch::RESTORING).map_err(|e| {
            format!(
                "a directory to restore {name} into, in {}: {e}",
                dir.display()
            )
        })?;
        let into = scratch.path().join("restored.db");
        let url = self.url.replace("{name}", name);
        self.run(
            "restore",
            &[
                "-if-replica-exists".as_ref(),
                "-o".as_ref(),
                into.as_os_str(),
            ],
            &url,
            look,
        )?;
        if into.exists() {
            match std::fs::hard_link(&into, path) {
                Err(e) if e.kind() != std::io::ErrorKind::AlreadyExists => {
                    return Err(Failure::Failed(format!(
                        "{name} restored, but not linked to {}: {e}",
                        path.display()
                    )));
                }
                _ => {}
            }
        }
        Ok(())
    }

    /// Whether the replica of tenant `name` as of transaction `at` holds other pages than the transactions
    /// Litestream recorded on this machine for the file `db` (the last of them `local`), up to `at`, wrote: another
    /// machine wrote transactions under the same numbers. `false` if Litestream keeps none of them here any more (the
    /// replica compacted them: they were this machine's). Reads the replica's pages through Litestream's VFS
    /// ([`Restore::vfs`]), or restores the replica as of `at` beside `db` to compare, then removes it; blocks.
    pub(crate) fn diverged(
        &self,
        name: &str,
        db: &Path,
        (local, at): (Position, Position),
        look: &Look,
    ) -> Result<bool, Failure> {
        let Some(written) = state::written(db, at, state::KEPT_PAGES_MAX_BYTES)? else {
            return Ok(false);
        };
        if let Some(extension) = &self.vfs
            && worth_reading_pages(&written, db)
            && let Some(comparing) = Comparing::begin(db)
        {
            let url = self.url.replace("{name}", name);
            return Self::diverged_through_vfs(
                extension,
                url,
                db,
                (local, at),
                written,
                comparing,
                look,
            );
        }
        let dir = db.parent().unwrap_or(Path::new("."));
        let scratch = Scratch::new(dir, scratch::COMPARING)
            .map_err(|e| format!("a directory to compare in, in {}: {e}", dir.display()))?;
        let replica = scratch.path().join("replica.db");
        let url = self.url.replace("{name}", name);
        self.run(
            "restore",
            &[
                "-txid".as_ref(),
                at.to_string().as_ref(),
                "-o".as_ref(),
                replica.as_os_str(),
            ],
            &url,
            look,
        )?;
        Ok(written
            .differs_from(&replica)
            .map_err(|e| format!("{name} restored as of {at}: {e}"))?)
    }

    /// [`Restore::diverged`] through Litestream's VFS at `extension` ([`compare_through_vfs`]), on a thread of its
    /// own that `look` waits for within its bounds (and leaves to finish past them, holding `comparing`).
    fn diverged_through_vfs(
        extension: &Path,
        url: String,
        db: &Path,
        (local, at): (Position, Position),
        written: state::Written,
        comparing: Comparing,
        look: &Look,
    ) -> Result<bool, Failure> {
        let (extension, file) = (extension.to_owned(), db.to_owned());
        let (tx, rx) = mpsc::channel();
        spawn("quicklite-compare", move || {
            let _comparing = comparing;
            let _ = tx.send(compare_through_vfs(
                &extension, &url, &file, local, at, written,
            ));
        })
        .map_err(|e| format!("a thread to compare {} with its replica: {e}", db.display()))?;
        loop {
            if look.stop.is_stopped() {
                return Err(Failure::Stopped);
            }
            let now = Instant::now();
            if now >= look.deadline {
                return Err(Failure::TimedOut("vfs".into()));
            }
            match rx.recv_timeout(STOP_LOOK_EVERY.min(look.deadline - now)) {
                Ok(outcome) => return outcome.map_err(Failure::Failed),
                Err(mpsc::RecvTimeoutError::Timeout) => {}
                Err(mpsc::RecvTimeoutError::Disconnected) => {
                    return Err(Failure::Failed(format!(
                        "the comparison of {} with its replica ended without an answer",
                        db.display()
                    )));
                }
            }
        }
    }

    /// Runs `litestream <command> <args…> <url>` within `look`'s bounds and returns what it printed.
    fn run<A: AsRef<std::ffi::OsStr>>(
        &self,
        command: &str,
        args: &[A],
        url: &str,
        look: &Look,
    ) -> Result<Vec<u8>, Failure> {
        program::run(&self.program, command, args, url, look.deadline, &look.stop)
    }
}

/// One look at a tenant's replica before it opens — a restore, or a check of the copy here — and what bounds its
/// runs of `litestream`: a deadline ([`Restore::timeout`] after it began), and the callers waiting for it, who
/// may all give up first ([`Stop`]).
#[derive(Debug)]
pub(crate) struct Look {
    deadline: Instant,
    stop: Stop,
}

impl Look {
    /// A look that begins now, under `restore`'s bound, stopped by `stop`.
    pub(crate) fn new(restore: &Restore, stop: Stop) -> Look {
        let now = Instant::now();
        Look {
            // A timeout too long to add is as good as none: 136 years.
            deadline: now
                .checked_add(restore.timeout)
                .unwrap_or(now + Duration::from_secs(1 << 32)),
            stop,
        }
    }
}

/// Whether comparing `written` through the VFS costs less than restoring the tenant at `db`: few enough pages
/// for its size ([`BYTES_PER_PAGE_READ`], [`PAGES_READ_AT_LEAST`]). Past the cap on pages kept in memory, never.
fn worth_reading_pages(written: &state::Written, db: &Path) -> bool {
    let size = std::fs::metadata(db).map_or(0, |m| m.len());
    let most = (size / BYTES_PER_PAGE_READ).max(PAGES_READ_AT_LEAST);
    let pages = written.pages_written();
    tracing::debug!(db = %db.display(), ?pages, most, "pages this machine wrote, to compare with the replica");
    pages.is_some_and(|pages| pages as u64 <= most)
}

/// Whether the replica at `url`, read through Litestream's VFS at `extension` as of its last transaction when the
/// VFS opened it, diverged from the file `db`: past `local`, the last transaction recorded here, it went further;
/// otherwise the pages this machine's transactions up to that one wrote are compared (`written`, if the replica
/// stands at `at`, where they were read).
fn compare_through_vfs(
    extension: &Path,
    url: &str,
    db: &Path,
    local: Position,
    at: Position,
    written: state::Written,
) -> Result<bool, String> {
    let mut pages = Pages::open(extension, url, db)?;
    let position = pages.position();
    if position > local {
        return Ok(true);
    }
    let written = if position == at {
        Some(written)
    } else {
        state::written(db, position, state::KEPT_PAGES_MAX_BYTES)?
    };
    match written {
        Some(written) => written
            .differs(&mut pages)
            .map_err(|e| format!("the replica at {url} as of {position}: {e}")),
        None => Ok(false),
    }
}

/// A comparison of a tenant's copy through Litestream's VFS under way, perhaps left to finish by the look that
/// started it: while one is, another comparison of the same file goes through the `litestream` program (which can
/// be killed), so that a tenant whose object storage stopped answering leaves at most one thread behind.
struct Comparing(PathBuf);

/// The files being compared through the VFS in this process.
static COMPARING: Mutex<Option<HashSet<PathBuf>>> = Mutex::new(None);

impl Comparing {
    /// The comparison of the file at `db`, unless one is under way.
    fn begin(db: &Path) -> Option<Comparing> {
        lock(&COMPARING)
            .get_or_insert_with(HashSet::new)
            .insert(db.to_owned())
            .then(|| Comparing(db.to_owned()))
    }
}

impl Drop for Comparing {
    fn drop(&mut self) {
        if let Some(comparing) = lock(&COMPARING).as_mut() {
            comparing.remove(&self.0);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_restore_that_could_not_run_is_refused_with_what_is_wrong() {
        let restore = Restore::litestream("litestream", "s3://bucket/tenants/{name}");
        assert_eq!(restore.validate(), Ok(()));
        let err = Restore::litestream("litestream", "s3://bucket/tenants")
            .validate()
            .unwrap_err();
        assert!(err.contains("{name}"), "{err}");
        let err = restore
            .clone()
            .timeout(Duration::ZERO)
            .validate()
            .unwrap_err();
        assert!(err.contains("zero"), "{err}");
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("litestream-vfs.so");
        let err = restore.clone().vfs(&missing).validate().unwrap_err();
        assert!(err.contains(&missing.display().to_string()), "{err}");
        std::fs::write(&missing, b"").unwrap();
        assert_eq!(restore.vfs(&missing).validate(), Ok(()));
    }
}
