//! Many databases — one SQLite file per tenant — on a bounded thread pool.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::sync::{Arc, Mutex, PoisonError, RwLock, Weak};
use std::thread::JoinHandle;
use std::time::Duration;

use rusqlite::OpenFlags;

use crate::pool::{PoolShared, run_pool_thread};
use crate::{Builder, Database, Error, MetricsSnapshot, Result};

/// Longest name [`Registry::get`] accepts, in bytes; with the `.db` suffix and SQLite's `-journal` / `-wal` /
/// `-shm` files it stays far below the 255-byte file-name limit of common file systems.
pub const MAX_NAME_LEN: usize = 128;

/// A set of databases in one directory, served by a bounded pool of threads.
///
/// [`Registry::get`] returns the same [`Database`] type as [`Database::open`], with the same API, group commit and
/// batched reads; the database `name` lives in `<dir>/<name>.db` and is created on first use. Instead of threads
/// of its own, each database is an actor on the registry's pool: its writes stay serialized, different databases
/// run in parallel, and a busy database yields the thread after each group or batch so that none starves the
/// others. Connections open on first use and close after `idle_timeout`, or, past `max_open` open databases, least
/// recently used first; a closed database reopens transparently on its next request.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> quicklite::Result<()> {
/// # let dir = tempfile::tempdir().unwrap();
/// use quicklite::Registry;
///
/// let tenants = Registry::open(dir.path()).await?;
/// let acme = tenants.get("acme").await?;
/// acme.execute_batch("CREATE TABLE IF NOT EXISTS invoice (id INTEGER PRIMARY KEY, cents INTEGER)").await?;
/// acme.execute("INSERT INTO invoice (cents) VALUES (?1)", (1999,)).await?;
/// assert!(tenants.get("../etc/passwd").await.is_err());
/// tenants.close().await?;
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct Registry {
    inner: Arc<RegistryInner>,
}

struct RegistryInner {
    /// The directory, canonical.
    dir: PathBuf,
    known: RwLock<HashMap<String, Database>>,
    pool: Arc<PoolShared>,
    threads: usize,
    idle_timeout: Duration,
    configure: Configure,
    closed: AtomicBool,
    handles: Mutex<Vec<JoinHandle<()>>>,
}

/// Per-database options, applied to each database's [`Builder`].
type Configure = Arc<dyn Fn(Builder) -> Builder + Send + Sync>;

impl std::fmt::Debug for Registry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Registry")
            .field("dir", &self.inner.dir)
            .field("threads", &self.inner.threads)
            .field("max_open", &self.inner.pool.max_open)
            .finish_non_exhaustive()
    }
}

/// Options of a [`Registry`]. Made by [`Registry::builder`].
#[must_use = "a builder does nothing until `open` is awaited"]
pub struct RegistryBuilder {
    dir: PathBuf,
    threads: Option<usize>,
    max_open: usize,
    max_reader_connections: Option<usize>,
    idle_timeout: Duration,
    configure: Option<Configure>,
}

impl std::fmt::Debug for RegistryBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RegistryBuilder")
            .field("dir", &self.dir)
            .field("threads", &self.threads)
            .field("max_open", &self.max_open)
            .field("max_reader_connections", &self.max_reader_connections)
            .field("idle_timeout", &self.idle_timeout)
            .finish_non_exhaustive()
    }
}

impl RegistryBuilder {
    /// Threads serving every database of the registry: half serve writes, half reads (at least one each), so slow
    /// writes cannot starve reads. By default, twice the available cores. The pool never grows: a thread is busy
    /// for as long as one group of writes or one batch of reads takes.
    pub fn threads(mut self, n: usize) -> Self {
        self.threads = Some(n);
        self
    }

    /// Most databases with open connections at once. A database that must open when the cap is reached first
    /// closes the least recently used idle one of 16 sampled at random (an approximate LRU); if none is idle, one
    /// whose writes wait in the run queue (they reopen it when their turn comes, in order); only if every open
    /// database is running a task does it wait — the cap holds, so file descriptors stay bounded.
    /// By default, 128: an open database holds three file descriptors (its writer connection's database and WAL
    /// files, and the shared-memory file) and two more per reader connection, which keeps the default under the
    /// usual limit of 1024 per process.
    ///
    /// A larger cap is not free when more databases are in use than it holds: every open then costs time in
    /// proportion to the files the process has open (SQLite's unix VFS looks for the file in a list of every open
    /// one). Serving 10,000 databases in turn under a limit of 20,000 descriptors, a cap of 6,410 kept up with 0–6%
    /// of the writes, 1,500 with 96%, 128 with all of them (the `multi-db` workload of `quicklite bench`). Raise
    /// it to hold every database in use at once, or not at all.
    pub fn max_open(mut self, n: usize) -> Self {
        self.max_open = n;
        self
    }

    /// Most reader connections open at once, over all databases. A database is read on its writer's connection
    /// while no write is queued or running (made read-only for the batch), so a database that is not read and
    /// written at the same moment holds one connection: its database and WAL files and the shared-memory file,
    /// three file descriptors. A read that finds the writer busy opens a reader connection (two more) if this
    /// budget allows, and otherwise waits for the writer's turn to end. With a budget, the file descriptors of a
    /// registry stay under `3 × max_open + 2 × max_reader_connections`. By default, no budget: every open database
    /// may open its reader connections.
    pub fn max_reader_connections(mut self, n: usize) -> Self {
        self.max_reader_connections = Some(n);
        self
    }

    /// How long a database may go without requests before its connections are closed. By default, 30 s.
    pub fn idle_timeout(mut self, timeout: Duration) -> Self {
        self.idle_timeout = timeout;
        self
    }

    /// Options for every database, as a function of its [`Builder`] (profile, PRAGMAs, queue sizes, checkpoints,
    /// …). The registry's own defaults come first: one reader connection per database, queues of 64 writes and 256
    /// reads. Symbolic links are refused whatever the open flags say.
    pub fn configure(mut self, f: impl Fn(Builder) -> Builder + Send + Sync + 'static) -> Self {
        self.configure = Some(Arc::new(f));
        self
    }

    /// Opens the registry: creates the directory if needed and starts the pool. Opens no database yet.
    pub async fn open(self) -> Result<Registry> {
        crate::setup::sqlite_setup();
        if self.max_open == 0 || self.threads == Some(0) {
            return Err(Error::InvalidConfig(
                "a registry needs at least one thread and one open database".into(),
            ));
        }
        std::fs::create_dir_all(&self.dir)?;
        let dir = std::fs::canonicalize(&self.dir)?;
        if !dir.is_dir() {
            return Err(Error::InvalidConfig(format!(
                "{} is not a directory",
                dir.display()
            )));
        }
        let threads = self
            .threads
            .unwrap_or_else(|| 2 * std::thread::available_parallelism().map_or(1, |n| n.get()));
        // Half the threads serve writes and half reads (at least one each), so that slow writes cannot take
        // every thread from the reads.
        let write_threads = (threads / 2).max(1);
        let read_threads = threads.saturating_sub(write_threads).max(1);
        let threads = write_threads + read_threads;
        let (wake, wakes) = std::sync::mpsc::sync_channel(1);
        let (pool, write_tasks, read_tasks) = PoolShared::new(
            self.max_open,
            self.max_reader_connections.unwrap_or(usize::MAX),
            wake,
        );
        let inner = Arc::new(RegistryInner {
            dir,
            known: RwLock::new(HashMap::new()),
            pool,
            threads,
            idle_timeout: self.idle_timeout,
            configure: self.configure.unwrap_or_else(|| Arc::new(|b| b)),
            closed: AtomicBool::new(false),
            handles: Mutex::new(Vec::new()),
        });
        let mut handles = Vec::with_capacity(threads + 1);
        let lanes = [
            ("write", write_threads, write_tasks),
            ("read", read_threads, read_tasks),
        ];
        for (lane, count, tasks) in lanes {
            for i in 0..count {
                let tasks = tasks.clone();
                handles.push(
                    std::thread::Builder::new()
                        .name(format!("quicklite-{lane}-{i}"))
                        .spawn(move || run_pool_thread(tasks))?,
                );
            }
        }
        let tick = (self.idle_timeout / 4).clamp(Duration::from_millis(10), Duration::from_secs(1));
        let weak = Arc::downgrade(&inner);
        handles.push(
            std::thread::Builder::new()
                .name("quicklite-registry".into())
                .spawn(move || housekeeping(weak, wakes, tick))?,
        );
        *inner.handles.lock().unwrap_or_else(PoisonError::into_inner) = handles;
        Ok(Registry { inner })
    }
}

/// Registry-wide figures ([`Registry::metrics`]).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct RegistryMetrics {
    /// Threads of the pool (fixed).
    pub threads: usize,
    /// Databases the registry holds a handle to (open or not).
    pub known_databases: usize,
    /// Databases with open connections.
    pub open_databases: usize,
    /// The cap on open databases.
    pub max_open: usize,
    /// Times a database's connections were opened (first use, or again after being closed).
    pub opens: u64,
    /// Databases closed because the open cap was passed.
    pub evictions: u64,
    /// Databases closed because they were idle.
    pub idle_closes: u64,
    /// Reader connections open (databases read while their writer was busy); the others read on their writer's.
    pub reader_connections: usize,
    /// Tasks waiting for a pool thread, or for room (under `max_open`) to open their database.
    pub queued_tasks: usize,
    /// Write requests queued, over all known databases.
    pub write_queue_depth: usize,
    /// Read requests queued, over all known databases.
    pub read_queue_depth: usize,
}

impl Registry {
    /// Opens a registry of databases in `dir` with the default options.
    pub async fn open(dir: impl AsRef<Path>) -> Result<Registry> {
        Registry::builder(dir).open().await
    }

    /// Starts a [`RegistryBuilder`] for `dir`.
    pub fn builder(dir: impl AsRef<Path>) -> RegistryBuilder {
        RegistryBuilder {
            dir: dir.as_ref().to_path_buf(),
            threads: None,
            max_open: 128,
            max_reader_connections: None,
            idle_timeout: Duration::from_secs(30),
            configure: None,
        }
    }

    /// The database `name`, stored in `<dir>/<name>.db`, created if it does not exist.
    ///
    /// Names are 1 to [`MAX_NAME_LEN`] bytes of ASCII letters, digits, `_`, `-` and `.`, starting with a letter or
    /// a digit, without `..`: nothing else (no `/`, `\`, NUL, space, absolute path or parent reference) can
    /// reach outside the directory. A file or its `-wal` / `-journal` / `-shm` companion that is a symbolic link
    /// is refused, and connections open with `SQLITE_OPEN_NOFOLLOW`. (On a case-insensitive file system, names
    /// differing only in case are one file: use lower case.) The directory should be writable only by the
    /// service.
    ///
    /// The first `get` of a name opens the database, so an unusable file is reported here; later calls return
    /// the same handle at once.
    pub async fn get(&self, name: &str) -> Result<Database> {
        validate_name(name)?;
        if let Some(db) = read(&self.inner.known).get(name) {
            return Ok(db.clone());
        }
        let db = {
            let mut known = write(&self.inner.known);
            if let Some(db) = known.get(name) {
                return Ok(db.clone());
            }
            if self.inner.closed.load(Ordering::Acquire) {
                return Err(Error::Closed);
            }
            let path = self.inner.dir.join(format!("{name}.db"));
            check_file(&path)?;
            let builder = Builder::new(&path)
                .readers(1)
                .write_queue_capacity(64)
                .read_queue_capacity(256);
            let mut config = (self.inner.configure)(builder).into_config()?;
            config.open_flags |= OpenFlags::SQLITE_OPEN_NOFOLLOW;
            let db =
                Database::start_pooled(name.to_string(), path, config, self.inner.pool.clone());
            known.insert(name.to_string(), db.clone());
            db
        };
        if let Err(e) = db.ensure_open().await {
            let mut known = write(&self.inner.known);
            if known.get(name).is_some_and(|d| d.same_as(&db)) {
                known.remove(name);
            }
            return Err(e);
        }
        Ok(db)
    }

    /// The registry's directory (canonical).
    pub fn dir(&self) -> &Path {
        &self.inner.dir
    }

    /// Registry-wide figures.
    pub fn metrics(&self) -> RegistryMetrics {
        let known = read(&self.inner.known);
        let (mut writes, mut reads) = (0, 0);
        for db in known.values() {
            if let Some(actor) = db.actor() {
                let (w, r) = actor.queued();
                writes += w;
                reads += r;
            }
        }
        let pool = &self.inner.pool;
        RegistryMetrics {
            threads: self.inner.threads,
            known_databases: known.len(),
            open_databases: pool.open_count(),
            max_open: pool.max_open,
            opens: pool.opens.load(Ordering::Relaxed),
            evictions: pool.evictions.load(Ordering::Relaxed),
            idle_closes: pool.idle_closes.load(Ordering::Relaxed),
            reader_connections: pool.reader_connections(),
            queued_tasks: pool.queued_tasks(),
            write_queue_depth: writes,
            read_queue_depth: reads,
        }
    }

    /// Each known database's metrics, by name.
    pub fn database_metrics(&self) -> Vec<(String, MetricsSnapshot)> {
        let mut out: Vec<(String, MetricsSnapshot)> = read(&self.inner.known)
            .iter()
            .map(|(name, db)| (name.clone(), db.metrics()))
            .collect();
        out.sort_by(|a, b| a.0.cmp(&b.0));
        out
    }

    /// Closes every database (serving what is queued, checkpointing) and stops the pool. Later `get`s fail with
    /// [`Error::Closed`], and so do requests on handles obtained before.
    pub async fn close(&self) -> Result<()> {
        self.inner.closed.store(true, Ordering::Release);
        let dbs: Vec<Database> = write(&self.inner.known).drain().map(|(_, db)| db).collect();
        for db in &dbs {
            db.close().await?;
        }
        self.inner.pool.stop();
        self.inner.pool.wake_housekeeping();
        Ok(())
    }
}

impl Drop for RegistryInner {
    fn drop(&mut self) {
        // Without `close`: refuse new requests on every database (handles still held get `Closed`), stop the
        // pool once its run queue is empty, and close what is still open in the background.
        self.closed.store(true, Ordering::Release);
        for db in self
            .known
            .get_mut()
            .unwrap_or_else(PoisonError::into_inner)
            .values()
        {
            db.close_queues();
        }
        self.pool.stop();
        let pool = self.pool.clone();
        let _ = std::thread::Builder::new()
            .name("quicklite-registry-close".into())
            .spawn(move || {
                for _ in 0..1000 {
                    let open = pool.open_actors();
                    if open.is_empty() {
                        return;
                    }
                    for actor in open {
                        actor.try_close();
                    }
                    std::thread::sleep(Duration::from_millis(10));
                }
            });
    }
}

/// The housekeeping thread: closes idle databases, enforces the open cap, forgets closed databases nobody holds.
/// Tasks waiting for room that each housekeeping tick puts back on the run queues.
const RESUMED_PER_TICK: usize = 16;

fn housekeeping(registry: Weak<RegistryInner>, wakes: Receiver<()>, tick: Duration) {
    loop {
        match wakes.recv_timeout(tick) {
            Ok(()) | Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => return,
        }
        let Some(registry) = registry.upgrade() else {
            return;
        };
        if registry.closed.load(Ordering::Acquire) {
            return;
        }
        // A failed sweep must not end housekeeping: the next tick tries again.
        if std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| registry.sweep())).is_err() {
            tracing::error!("registry housekeeping panicked; retrying at the next tick");
        }
    }
}

impl RegistryInner {
    fn sweep(&self) {
        let pool = &self.pool;
        let now = pool.now_ms();
        let idle_ms = u64::try_from(self.idle_timeout.as_millis()).unwrap_or(u64::MAX);
        let open = pool.open_actors();
        for actor in &open {
            if now.saturating_sub(actor.last_used_ms()) >= idle_ms && actor.try_close() {
                pool.idle_closes.fetch_add(1, Ordering::Relaxed);
            }
        }
        // Back under the cap if opens overshot it while every database was busy (they wait, but a close may
        // have been refused meanwhile): least recently used first, as an opening database does.
        if pool.open_count() > pool.max_open {
            pool.evict_for("", pool.max_open);
        }
        // Tasks waiting for room are resumed as databases go idle; a few more each tick cover a missed chance.
        pool.resume_waiting(RESUMED_PER_TICK);
        // Forget closed databases that only the registry holds; `get` recreates them on demand.
        write(&self.known)
            .retain(|_, db| db.handles() > 1 || db.actor().is_none_or(|a| !a.is_quiet()));
    }
}

/// Checks a database name (see [`Registry::get`]).
pub(crate) fn validate_name(name: &str) -> Result<()> {
    let refuse = |reason: &'static str| {
        let shown: String = name.chars().take(MAX_NAME_LEN + 8).collect();
        Err(Error::InvalidName {
            name: shown,
            reason,
        })
    };
    if name.is_empty() {
        return refuse("empty");
    }
    if name.len() > MAX_NAME_LEN {
        return refuse("longer than 128 bytes");
    }
    if !name
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'))
    {
        return refuse("only ASCII letters, digits, '_', '-' and '.' are allowed");
    }
    if !name.as_bytes()[0].is_ascii_alphanumeric() {
        return refuse("must start with a letter or a digit");
    }
    if name.contains("..") {
        return refuse("must not contain '..'");
    }
    Ok(())
}

/// Refuses a database file, or a companion file SQLite would open next to it, that is a symbolic link (or not a
/// regular file): writing through it could reach outside the registry's directory.
pub(crate) fn check_file(path: &Path) -> Result<()> {
    for suffix in ["", "-wal", "-journal", "-shm"] {
        let mut candidate = path.as_os_str().to_owned();
        candidate.push(suffix);
        let candidate = PathBuf::from(candidate);
        let meta = match std::fs::symlink_metadata(&candidate) {
            Ok(meta) => meta,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => return Err(Error::Io(e)),
        };
        let reason = if meta.file_type().is_symlink() {
            "the file is a symbolic link"
        } else if !meta.is_file() {
            "the file is not a regular file"
        } else {
            continue;
        };
        return Err(Error::InvalidName {
            name: candidate
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default(),
            reason,
        });
    }
    Ok(())
}

fn read<T>(l: &RwLock<T>) -> std::sync::RwLockReadGuard<'_, T> {
    l.read().unwrap_or_else(PoisonError::into_inner)
}

fn write<T>(l: &RwLock<T>) -> std::sync::RwLockWriteGuard<'_, T> {
    l.write().unwrap_or_else(PoisonError::into_inner)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_checked() {
        for good in ["acme", "tenant-42", "a.b_c", "0", &"x".repeat(MAX_NAME_LEN)] {
            assert!(validate_name(good).is_ok(), "{good}");
        }
        let long = "x".repeat(MAX_NAME_LEN + 1);
        for bad in [
            "",
            ".",
            "..",
            "../x",
            "a/../../etc/passwd",
            "/etc/passwd",
            "a/b",
            "a\\b",
            "a\0b",
            ".hidden",
            "-rf",
            "a..b",
            "a b",
            "naïve",
            "C:x",
            long.as_str(),
        ] {
            assert!(
                matches!(validate_name(bad), Err(Error::InvalidName { .. })),
                "{bad:?}"
            );
        }
    }
}
