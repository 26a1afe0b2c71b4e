//! Options of a registry, and opening it.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use crate::permits::Permits;
use crate::registry::housekeeping::housekeeping;
use crate::registry::restoring::{Restoring, remove_stale_scratch};
use crate::registry::{Configure, Registry, RegistryInner};
use crate::replica::Restore;
use crate::sched::pool::start::{PoolSize, StartedPool, start_pool};
use crate::util::{lock, spawn};
use crate::{Builder, Error, Result};

/// Options of a [`Registry`]. Made by [`Registry::builder`].
#[must_use = "a builder does nothing until `open` is awaited"]
pub struct RegistryBuilder {
    dir: PathBuf,
    threads: Option<usize>,
    max_write_threads: usize,
    read_thread_nice: u8,
    max_open: usize,
    max_reader_connections: Option<usize>,
    inline_connections: Option<usize>,
    idle_timeout: Duration,
    configure: Option<Configure>,
    restore: Option<Restore>,
    /// Whether the registry lives in a temporary directory of its own ([`Registry::temporary`]).
    temporary: bool,
}

impl std::fmt::Debug for RegistryBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RegistryBuilder")
            .field("dir", &self.dir)
            .field("threads", &self.threads)
            .field("max_write_threads", &self.max_write_threads)
            .field("read_thread_nice", &self.read_thread_nice)
            .field("max_open", &self.max_open)
            .field("max_reader_connections", &self.max_reader_connections)
            .field("inline_connections", &self.inline_connections)
            .field("idle_timeout", &self.idle_timeout)
            .finish_non_exhaustive()
    }
}

impl RegistryBuilder {
    /// A builder for a registry in a new temporary directory, removed with its databases once the registry is
    /// dropped (after [`Registry::close`], or in the background): for tests.
    pub fn temporary() -> RegistryBuilder {
        let mut builder = RegistryBuilder::new(Path::new(""));
        builder.temporary = true;
        builder
    }

    pub(super) fn new(dir: &Path) -> RegistryBuilder {
        RegistryBuilder {
            dir: dir.to_path_buf(),
            threads: None,
            max_write_threads: 256,
            read_thread_nice: 0,
            max_open: 128,
            max_reader_connections: None,
            inline_connections: None,
            idle_timeout: Duration::from_secs(30),
            configure: None,
            restore: None,
            temporary: false,
        }
    }

    /// Threads serving every database of the registry: half serve writes, half reads (at least one each), so slow
    /// writes cannot starve reads. By default, twice the available cores. A thread is busy for as long as one group
    /// of writes or one batch of reads takes; while other writes wait behind write threads most of which are blocked
    /// (asleep in a closure or waiting for the disk, one of them for far longer than a write group takes), the
    /// registry adds write threads (up to [`max_write_threads`]), and retires them one by one while fewer than half
    /// of them have been busy of late.
    ///
    /// [`max_write_threads`]: RegistryBuilder::max_write_threads
    pub fn threads(mut self, n: usize) -> Self {
        self.threads = Some(n);
        self
    }

    /// How many steps of CPU priority (nice values, on Linux; elsewhere ignored) the read threads run below the write
    /// threads, which keep the priority of the thread that opened the registry. By default 0: both lanes alike.
    /// When reads keep every core busy, a few steps (3, say) have the kernel give a write thread that wakes (at its
    /// commit, at the end of a sleep inside the transaction, for a database's next write) a core sooner, so that
    /// writes, which each database runs one after another, keep their pace; the reads give up some of their
    /// throughput for it, to the application's own threads as well as to the writes (docs/design.md has the
    /// lab's figures).
    pub fn read_thread_nice(mut self, nice: u8) -> Self {
        self.read_thread_nice = nice;
        self
    }

    /// Most write threads at once, counting the ones added while long writes (work inside the transaction, a slow
    /// disk) hold every write thread — the hand-off tokio's blocking pool makes for blocking calls, so that the
    /// other databases' writes go on. By default, 256; the write half of [`threads`] (or this, whichever is larger)
    /// keeps the lane from growing at all.
    ///
    /// [`threads`]: RegistryBuilder::threads
    pub fn max_write_threads(mut self, n: usize) -> Self {
        self.max_write_threads = n;
        self
    }

    /// Most databases with open connections at once. A database that must open when the cap is reached first
    /// closes the least recently used idle one of a few sampled at random (an approximate LRU); if none is idle, one
    /// whose writes wait in the run queue (they reopen it when their turn comes, in order); one whose checkpoint
    /// runs only if no other can be closed; only if every open database is running a task does it wait — the cap
    /// holds, so file descriptors stay bounded.
    /// By default, 128: an open database holds three file descriptors (its writer connection's database and WAL
    /// files, and the shared-memory file) and two more per reader connection, which keeps the default under the
    /// usual limit of 1024 per process.
    ///
    /// A larger cap is not free when more databases are in use than it holds: every open then costs time in
    /// proportion to the files the process has open (SQLite's unix VFS looks for the file in a list of every open
    /// one; docs/design.md has the lab's figures). Raise it to hold every database in use at once, or not at all.
    pub fn max_open(mut self, n: usize) -> Self {
        self.max_open = n;
        self
    }

    /// Most reader connections open at once, over all databases. A database is read on its writer's connection
    /// while no write is queued or running (made read-only for the batch), so a database that is not read and
    /// written at the same moment holds one connection: its database and WAL files and the shared-memory file,
    /// three file descriptors. A read that finds the writer busy opens a reader connection (two more) if this
    /// budget allows, and otherwise waits for the writer's turn to end. With a budget, the file descriptors of a
    /// registry stay under `3 × max_open + 2 × max_reader_connections`, plus two for each `PASSIVE` checkpoint
    /// running (each on a connection of its own, at most two per CPU at once in the process). By default, no
    /// budget: every open database may open its reader connections.
    pub fn max_reader_connections(mut self, n: usize) -> Self {
        self.max_reader_connections = Some(n);
        self
    }

    /// Most connections open at once, over all databases, for reads on their callers' threads
    /// ([`Builder::inline_reads`]): the databases read most take them as they need them (each up to its
    /// [`Builder::inline_connections`]), and a connection unused for a while is closed, leaving room for another
    /// database. Two file descriptors each (the database and WAL files). By default, four per CPU; 0 sends every
    /// read to the pool.
    pub fn inline_connections(mut self, n: usize) -> Self {
        self.inline_connections = Some(n);
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

    /// Restores a tenant that has no file in the directory from its Litestream replica before its first open, so
    /// that another machine can take over the tenants of one that died: the first [`Registry::get`] of such a name
    /// runs `litestream restore` (a tenant with no replica is created empty, as without this). What the restore
    /// holds is what Litestream had synced before the other machine stopped: the writes of its last sync interval
    /// may be missing.
    ///
    /// Two machines must never write one tenant at once: Litestream would interleave their transactions in one
    /// replica. Stop the machine that held the tenants (or make sure it stopped) before another opens them; that
    /// is the operator's part, and nothing here can do it. What is detected is a machine coming back to a tenant
    /// taken over meanwhile. A `get` that opens a tenant that has a file here compares the last transaction
    /// Litestream recorded beside the file with the last one its replica holds (`litestream ltx`), and refuses with
    /// [`Error::TenantMoved`] a tenant whose replica went further. The first such `get` of each tenant since the
    /// registry opened also compares content: transactions this machine recorded but never uploaded share their
    /// numbers with the other machine's first ones, so the replica, restored as of its last transaction, must hold
    /// the pages this machine's transactions up to that one wrote (as Litestream still keeps them beside the file),
    /// or the tenant is refused too. That comparison downloads the tenant once, or with
    /// [`Restore::vfs`](crate::litestream::Restore::vfs) only those pages; a tenant whose transactions up to the
    /// replica's last Litestream no longer keeps here (the replica compacted them: they were this machine's) is
    /// not downloaded. (A file Litestream keeps no state for here is not checked.)
    ///
    /// The runs of `litestream` a `get` waits for are bounded ([`Restore::timeout`]; past it, the `get` fails with
    /// [`Error::RestoreTimedOut`] and nothing of the restore is left), and stop as soon as nobody waits: gets of one
    /// tenant that come while a restore or check of it runs wait for that one, and when the last of them gives up
    /// (its future dropped) its `litestream` is killed. By default, a missing tenant is created empty.
    pub fn restore_missing(mut self, restore: Restore) -> Self {
        self.restore = Some(restore);
        self
    }

    /// Opens the registry: creates the directory if needed, removes what restores a process did not finish left in
    /// it (`.restoring-*` and `.comparing-*` directories no process is using), and starts the pool. Opens no
    /// database yet.
    pub async fn open(mut self) -> Result<Registry> {
        let temporary = if self.temporary {
            let dir = tempfile::Builder::new().prefix("quicklite-").tempdir()?;
            self.dir = dir.path().to_path_buf();
            Some(dir)
        } else {
            None
        };
        crate::setup::sqlite_setup();
        if self.max_open == 0 || self.threads == Some(0) {
            return Err(Error::InvalidConfig(
                "a registry needs at least one thread and one open database".into(),
            ));
        }
        if let Some(restore) = &self.restore {
            restore.validate().map_err(Error::InvalidConfig)?;
        }
        std::fs::create_dir_all(&self.dir)?;
        let dir = std::fs::canonicalize(&self.dir)?;
        if !dir.is_dir() {
            return Err(Error::InvalidConfig(format!(
                "{} is not a directory",
                dir.display()
            )));
        }
        // A restore's download is a tenant's size: the ones a process that died left behind go now, those another
        // registry on this directory is using stay.
        remove_stale_scratch(dir.clone()).await;
        let threads = self.threads.unwrap_or_else(|| 2 * crate::util::cpus());
        // Half the threads serve writes and half reads (at least one each), so that slow writes cannot take
        // every thread from the reads.
        let write_threads = (threads / 2).max(1);
        let read_threads = threads.saturating_sub(write_threads).max(1);
        let threads = write_threads + read_threads;
        let (wake, wakes) = std::sync::mpsc::sync_channel(1);
        let StartedPool {
            pool,
            threads: mut handles,
        } = start_pool(
            PoolSize {
                write_threads,
                max_write_threads: self.max_write_threads,
                read_threads,
                read_thread_nice: self.read_thread_nice,
                max_open: self.max_open,
                max_readers: self.max_reader_connections.unwrap_or(usize::MAX),
            },
            wake,
        )?;
        let inner = Arc::new(RegistryInner {
            dir,
            known: RwLock::new(HashMap::new()),
            pool,
            threads,
            idle_timeout: self.idle_timeout,
            inline_budget: Arc::new(Permits::new(
                self.inline_connections
                    .unwrap_or_else(|| 4 * crate::util::cpus()),
            )),
            configure: self.configure.unwrap_or_else(|| Arc::new(|b| b)),
            restoring: self.restore.map(Restoring::new),
            closed: AtomicBool::new(false),
            handles: Mutex::new(Vec::new()),
            gates: Mutex::new(HashMap::new()),
            _temporary: temporary,
        });
        let tick = (self.idle_timeout / 4).clamp(Duration::from_millis(10), Duration::from_secs(1));
        let weak = Arc::downgrade(&inner);
        handles.push(spawn("quicklite-registry", move || {
            housekeeping(weak, wakes, tick)
        })?);
        *lock(&inner.handles) = handles;
        Ok(Registry { inner })
    }
}

impl Registry {
    /// Opens a registry of databases in `dir` with the default options.
    pub async fn open(dir: impl AsRef<Path>) -> Result<Registry> {
        Registry::builder(dir).open().await
    }

    /// Opens a registry in a new temporary directory with the default options ([`RegistryBuilder::temporary`]):
    /// for tests.
    pub async fn temporary() -> Result<Registry> {
        RegistryBuilder::temporary().open().await
    }

    /// Starts a [`RegistryBuilder`] for `dir`.
    pub fn builder(dir: impl AsRef<Path>) -> RegistryBuilder {
        RegistryBuilder::new(dir.as_ref())
    }
}
