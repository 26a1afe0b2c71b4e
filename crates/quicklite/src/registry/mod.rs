//! Many databases — one SQLite file per tenant — on a bounded thread pool.

pub(crate) mod builder;
mod housekeeping;
pub(crate) mod names;
mod restoring;

use std::collections::HashMap;
use std::collections::hash_map::Entry;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError, RwLock};
use std::thread::JoinHandle;
use std::time::Duration;

use rusqlite::OpenFlags;

use crate::config::Config;
use crate::engine::open::refuse_links;
use crate::gate::Gate;
use crate::permits::Permits;
use crate::sched::pool::Pool;
use crate::sched::pool::actor::Actor;
use crate::sched::pool::task::PooledDatabase;
use crate::util::{lock, read, spawn, write};
use crate::{Builder, Database, Error, MetricsSnapshot, Result};

use names::validate_name;
use restoring::Restoring;

/// Uploads a registry's gate asks Litestream for at once, over all its databases: Litestream runs each database's
/// upload on its own, so a tenant's wait need not include every other tenant's.
const GATE_SYNCS: usize = 4;

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

/// A database the registry knows: the handle it gives out, and the actor that serves it on the pool.
struct Known {
    db: Database,
    actor: Arc<Actor>,
}

struct RegistryInner {
    /// The directory, canonical.
    dir: PathBuf,
    known: RwLock<HashMap<String, Known>>,
    pool: Arc<Pool<Actor>>,
    threads: usize,
    idle_timeout: Duration,
    /// The bound on the databases' connections for reads on callers' threads, together.
    inline_budget: Arc<Permits>,
    configure: Configure,
    /// Where a tenant missing from the directory is restored from, and the restores under way, if tenants are
    /// restored.
    restoring: Option<Restoring>,
    closed: AtomicBool,
    handles: Mutex<Vec<JoinHandle<()>>>,
    /// The threads that have Litestream upload the databases' commits, one per control socket, when their writes
    /// wait for object storage ([`Acknowledge::Replicated`](crate::Acknowledge::Replicated)).
    gates: Mutex<HashMap<PathBuf, Gate>>,
    /// The directory of a temporary registry, removed when the registry is dropped.
    _temporary: Option<tempfile::TempDir>,
}

/// Per-database options, applied to each database's [`Builder`].
type Configure = Arc<dyn Fn(Builder) -> Builder + Send + Sync>;

impl std::fmt::Debug for Registry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Registry")
            .field("dir", &self.inner.dir)
            .field("threads", &self.inner.threads)
            .field("max_open", &self.inner.pool.max_open())
            .finish_non_exhaustive()
    }
}

/// Registry-wide figures ([`Registry::metrics`]).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct RegistryMetrics {
    /// Threads of the pool when it started: its base.
    pub threads: usize,
    /// Write threads now: the base write half, plus those added while writes waited behind blocked ones.
    pub write_threads: usize,
    /// Write threads added since the registry opened.
    pub write_threads_added: u64,
    /// Added write threads retired since.
    pub write_threads_retired: u64,
    /// The most write threads at once.
    pub write_threads_peak: usize,
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
    /// Connections open for reads on callers' threads, over all databases
    /// ([`RegistryBuilder::inline_connections`](crate::RegistryBuilder::inline_connections)).
    pub inline_connections: usize,
    /// Tasks waiting for a pool thread, or for room (under `max_open`) to open their database.
    pub queued_tasks: usize,
    /// Write requests queued, over all known databases.
    pub write_queue_depth: usize,
    /// Read requests queued, over all known databases.
    pub read_queue_depth: usize,
}

impl Registry {
    /// Longest name [`Registry::get`] accepts, in bytes; with the `.db` suffix and SQLite's `-journal` / `-wal` /
    /// `-shm` files it stays far below the 255-byte file-name limit of common file systems.
    pub const MAX_NAME_LEN: usize = names::MAX_NAME_LEN;

    /// The database `name`, stored in `<dir>/<name>.db`, created if it does not exist.
    ///
    /// Names are 1 to [`MAX_NAME_LEN`](Registry::MAX_NAME_LEN) bytes of ASCII letters, digits, `_`, `-` and `.`,
    /// starting with a letter or a digit, without `..`: nothing else (no `/`, `\`, NUL, space, absolute path or parent
    /// reference) can reach outside the directory. A file or its `-wal` / `-journal` / `-shm` companion that is a
    /// symbolic link is refused, and connections open with `SQLITE_OPEN_NOFOLLOW`. (On a case-insensitive file system,
    /// names differing only in case are one file: use lower case.) The directory should be writable only by the
    /// service.
    ///
    /// The first `get` of a name opens the database, so an unusable file is reported here; later calls return
    /// the same handle at once. After [`Database::close`] on a handle, the next `get` opens the database again
    /// and returns a new handle (the old ones stay closed).
    pub async fn get(&self, name: &str) -> Result<Database> {
        validate_name(name)?;
        if let Some(known) = read(&self.inner.known)
            .get(name)
            .filter(|k| !k.actor.is_closed())
        {
            return Ok(known.db.clone());
        }
        if let Some(restoring) = &self.inner.restoring {
            let path = self.inner.dir.join(format!("{name}.db"));
            refuse_links(&path)?;
            restoring.before_open(name, &path).await?;
        }
        let (db, actor) = {
            let mut known = write(&self.inner.known);
            // A database closed through a handle ([`Database::close`]) is replaced by a new one.
            if let Some(known) = known.get(name).filter(|k| !k.actor.is_closed()) {
                return Ok(known.db.clone());
            }
            if self.inner.closed.load(Ordering::Acquire) {
                return Err(Error::Closed);
            }
            let path = self.inner.dir.join(format!("{name}.db"));
            refuse_links(&path)?;
            let builder = Builder::new(&path)
                .readers(1)
                .write_queue_capacity(64)
                .read_queue_capacity(256);
            let mut config =
                Config::from_settings((self.inner.configure)(builder).into_settings())?;
            if config.replica.is_some() {
                return Err(Error::InvalidConfig(
                    "a registry's databases are read-write: a replica is opened on its own, with Database::builder"
                        .into(),
                ));
            }
            config.open_flags |= OpenFlags::SQLITE_OPEN_NOFOLLOW;
            let mut gates = lock(&self.inner.gates);
            let gate = match &config.replicated_acks {
                Some(socket) => Some(match gates.entry(socket.clone()) {
                    Entry::Occupied(gate) => gate.into_mut(),
                    Entry::Vacant(room) => room.insert(Gate::start(socket.clone(), GATE_SYNCS)?),
                }),
                None => None,
            };
            let (db, actor) = Database::start_pooled(
                name.to_string(),
                path,
                config,
                self.inner.pool.clone(),
                &self.inner.inline_budget,
                gate.map(|gate| &*gate),
            );
            drop(gates);
            known.insert(
                name.to_string(),
                Known {
                    db: db.clone(),
                    actor: actor.clone(),
                },
            );
            (db, actor)
        };
        // The connections open now (a registry's database opens lazily), so that an unusable file is reported here.
        if let Err(e) = actor.open_now().await.unwrap_or(Err(Error::Closed)) {
            let mut known = write(&self.inner.known);
            if known.get(name).is_some_and(|k| k.db.same_as(&db)) {
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
        for known in known.values() {
            let (w, r) = known.actor.queued();
            writes += w;
            reads += r;
        }
        let pool = &self.inner.pool;
        let lane = &pool.write_lane;
        RegistryMetrics {
            threads: self.inner.threads,
            write_threads: lane.threads.load(Ordering::Relaxed),
            write_threads_added: lane.added.load(Ordering::Relaxed),
            write_threads_retired: lane.retired.load(Ordering::Relaxed),
            write_threads_peak: lane.peak.load(Ordering::Relaxed),
            known_databases: known.len(),
            open_databases: pool.open_count(),
            max_open: pool.max_open(),
            opens: pool.opens.load(Ordering::Relaxed),
            evictions: pool.evictions.load(Ordering::Relaxed),
            idle_closes: pool.idle_closes.load(Ordering::Relaxed),
            reader_connections: pool.reader_connections(),
            inline_connections: self.inner.inline_budget.taken(),
            queued_tasks: pool.queued_tasks(),
            write_queue_depth: writes,
            read_queue_depth: reads,
        }
    }

    /// Each known database's metrics, by name.
    pub fn database_metrics(&self) -> Vec<(String, MetricsSnapshot)> {
        let mut out: Vec<(String, MetricsSnapshot)> = read(&self.inner.known)
            .iter()
            .map(|(name, known)| (name.clone(), known.db.metrics()))
            .collect();
        out.sort_by(|a, b| a.0.cmp(&b.0));
        out
    }

    /// Closes every database (serving what is queued, checkpointing) and stops the pool. Restores under way
    /// ([`RegistryBuilder::restore_missing`](crate::RegistryBuilder::restore_missing)) stop, their `litestream`
    /// killed. Later `get`s fail with [`Error::Closed`], and so do requests on handles obtained before.
    pub async fn close(&self) -> Result<()> {
        self.inner.closed.store(true, Ordering::Release);
        // Restores under way stop (their `litestream` is killed); their threads are joined with the pool's.
        let restores = self
            .inner
            .restoring
            .as_ref()
            .map(Restoring::stop_all)
            .unwrap_or_default();
        let dbs: Vec<Database> = write(&self.inner.known)
            .drain()
            .map(|(_, known)| known.db)
            .collect();
        for db in &dbs {
            db.close().await?;
        }
        self.inner.pool.stop();
        self.inner.pool.wake_housekeeping();
        // Once `close` returns, no thread of the registry is left: nothing of it outlives the last handle (a
        // temporary registry's directory goes with it).
        // They are joined on a thread of their own, not on the caller's runtime worker.
        let mut threads = std::mem::take(&mut *lock(&self.inner.handles));
        threads.extend(restores);
        let (joined_tx, joined) = tokio::sync::oneshot::channel();
        let joiner = spawn("quicklite-registry-join", move || {
            let panicked = threads
                .into_iter()
                .map(JoinHandle::join)
                .filter(Result::is_err)
                .count();
            let _ = joined_tx.send(panicked);
        });
        if joiner.is_ok() && !matches!(joined.await, Ok(0)) {
            tracing::error!("a registry thread panicked");
        }
        Ok(())
    }
}

impl Drop for RegistryInner {
    fn drop(&mut self) {
        // Without `close`: refuse new requests on every database (handles still held get `Closed`), stop the
        // pool once its run queue is empty, and close what is still open in the background.
        self.closed.store(true, Ordering::Release);
        if let Some(restoring) = &self.restoring {
            // Their threads end on their own once their `litestream` is killed.
            drop(restoring.stop_all());
        }
        for known in self
            .known
            .get_mut()
            .unwrap_or_else(PoisonError::into_inner)
            .values()
        {
            known.db.close_queues();
        }
        self.pool.stop();
        let pool = self.pool.clone();
        let _ = spawn("quicklite-registry-close", move || {
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
