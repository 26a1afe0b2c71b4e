//! Tenants restored from their replicas with the `litestream` program, and told apart from a copy written elsewhere.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use super::program::{self, Failure, Stop};
use super::scratch::{self, Scratch};
use super::{Position, state};

/// How long one look at a tenant's replica may take by default ([`Restore::timeout`]).
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(300);

/// Where a [`Registry`](crate::Registry) finds a tenant it does not have on local disk: restored from the replica
/// Litestream keeps of it, before its first open. Given to
/// [`RegistryBuilder::restore_missing`](crate::RegistryBuilder::restore_missing).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Restore {
    program: PathBuf,
    url: String,
    timeout: Duration,
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
        }
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

    /// Checks the URL names the tenant somewhere, and the timeout leaves Litestream some time.
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
    /// Litestream recorded on this machine for the file `db`, up to `at`, wrote: another machine wrote transactions
    /// under the same numbers. `false` if Litestream keeps none of them here any more (the replica compacted them:
    /// they were this machine's). Restores the replica as of `at` beside `db` to compare, then removes it; blocks.
    pub(crate) fn diverged(
        &self,
        name: &str,
        db: &Path,
        at: Position,
        look: &Look,
    ) -> Result<bool, Failure> {
        let Some(written) = state::written(db, at, state::KEPT_PAGES_MAX_BYTES)? else {
            return Ok(false);
        };
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
