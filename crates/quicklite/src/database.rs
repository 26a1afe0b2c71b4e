//! The database handle: queues in front of one writer thread and a pool of reader threads.

use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::thread::JoinHandle;
use std::time::Instant;

use crate::queue::{self, Receiver, Sender, TrySendError};
use rusqlite::{Connection, Params, Row};
use tokio::sync::{oneshot, watch};

use crate::builder::{Builder, Config};
use crate::connection::{self, BusyLimit, TxGuard};
use crate::metrics::{Metrics, MetricsSnapshot};
use crate::pool::{Actor, PoolShared};
use crate::reader::Reader;
use crate::request::{self, Job, ReadRequest, WriteKind, WriteRequest, receive};
use crate::writer::Writer;
use crate::{Error, Profile, QueueFull, Result};

/// State shared by the handle and its threads.
#[derive(Debug, Default)]
pub(crate) struct State {
    /// Number of transactions the writer has committed; readers compare it with a request's `min_seq`
    /// (read-your-writes).
    pub(crate) commit_seq: AtomicU64,
    /// Live counters.
    pub(crate) metrics: Metrics,
}

/// A handle to one SQLite database: a writer thread that commits concurrent writes together, and reader threads
/// that serve queued reads in shared snapshots.
///
/// Cheap to clone (an `Arc`); all clones share the threads. Dropping the last clone closes the queues; the threads
/// finish what is queued, checkpoint and exit in the background. [`Database::close`] does the same and waits.
///
/// Answers served together travel together: of the requests of one batch made on the same thread, the last one's
/// caller receives all their answers and wakes the others from inside its runtime (cheaper than the database
/// thread waking each task from outside it). If that caller is not polled within a millisecond (its future was
/// polled by hand and then left aside, say), the database thread sends the others' answers itself.
#[derive(Clone)]
pub struct Database {
    inner: Arc<Inner>,
}

struct Inner {
    /// Queue of the writer thread.
    write_tx: Sender<WriteRequest>,
    /// Queue shared by the reader threads (a slow read occupies one reader, not the queue).
    read_tx: Sender<ReadRequest>,
    state: Arc<State>,
    config: Config,
    path: PathBuf,
    /// The database file SQLite opened (the path may have been a URI).
    file: PathBuf,
    /// The `-wal` file next to it.
    wal_file: PathBuf,
    /// PRAGMAs read back from the writer's connection after set-up (for a registry's database: once it opened).
    pragmas: Arc<OnceLock<BTreeMap<String, String>>>,
    /// What serves the queues.
    backend: Backend,
}

/// What serves a database's queues.
enum Backend {
    /// Threads of its own: one writer, `readers` readers ([`Database::open`]).
    Threads {
        /// Number of threads still running; `close` waits for zero.
        alive: watch::Receiver<usize>,
        threads: Mutex<Vec<JoinHandle<()>>>,
    },
    /// Turns on a registry's shared thread pool.
    Pooled(Arc<Actor>),
}

impl Drop for Inner {
    fn drop(&mut self) {
        // Closing the queues lets the threads drain what is queued and exit; they are not joined here, so that
        // dropping a handle never blocks an async runtime.
        self.write_tx.close();
        self.read_tx.close();
    }
}

/// Decrements the live-thread count when a worker thread ends, however it ends.
struct AliveGuard(Arc<watch::Sender<usize>>);

impl Drop for AliveGuard {
    fn drop(&mut self) {
        self.0.send_modify(|n| *n -= 1);
    }
}

impl std::fmt::Debug for Database {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Database")
            .field("path", &self.inner.path)
            .field("profile", &self.inner.config.profile)
            .field("readers", &self.inner.config.readers)
            .finish_non_exhaustive()
    }
}

/// An open writer connection, set up: hooks installed, PRAGMAs read back.
pub(crate) struct OpenedWriter {
    pub(crate) writer: Writer,
    pub(crate) pragmas: BTreeMap<String, String>,
    /// The file SQLite opened, when it reports one.
    pub(crate) file: Option<PathBuf>,
}

/// Opens the writer connection of `path` and builds its [`Writer`].
pub(crate) fn open_writer(
    path: &Path,
    config: &Config,
    state: &Arc<State>,
    rx: Receiver<WriteRequest>,
    read_back: bool,
) -> Result<OpenedWriter> {
    let tx_guard = TxGuard::default();
    let busy = BusyLimit::new(config.busy_timeout);
    let mut conn = connection::open_writer(path, config, &tx_guard)?;
    connection::instrument(&mut conn, config, state, "writer", busy.clone())?;
    connection::watch_wal(&mut conn, config, state)?;
    // Reading every PRAGMA back costs a dozen statements: a registry's database does it on its first open only.
    let mut pragmas = if read_back {
        connection::read_back_pragmas(&conn, config)?
    } else {
        BTreeMap::new()
    };
    // The busy handler that counts retries replaced SQLite's timeout (which now reads 0); it enforces the
    // configured timeout itself.
    pragmas.insert(
        "busy_timeout".into(),
        config.busy_timeout.as_millis().to_string(),
    );
    let file = conn.path().filter(|p| !p.is_empty()).map(PathBuf::from);
    Ok(OpenedWriter {
        writer: Writer::new(conn, tx_guard, rx, state.clone(), config.clone(), busy),
        pragmas,
        file,
    })
}

/// Opens a reader connection of `path` and builds its [`Reader`].
pub(crate) fn open_reader(
    path: &Path,
    config: &Config,
    state: &Arc<State>,
    rx: Receiver<ReadRequest>,
) -> Result<Reader> {
    let tx_guard = TxGuard::default();
    let mut conn = connection::open_reader(path, config, &tx_guard)?;
    let busy = BusyLimit::new(config.busy_timeout);
    connection::instrument(&mut conn, config, state, "reader", busy)?;
    Ok(Reader {
        conn,
        guard: tx_guard,
        rx,
        taken: RefCell::default(),
        state: state.clone(),
        config: config.clone(),
        began: Cell::new(None),
        held: RefCell::default(),
        relays: RefCell::default(),
    })
}

impl Database {
    /// Opens (creating if needed) the database at `path` with the [`Profile::Server`] PRAGMAs and default options.
    pub async fn open(path: impl AsRef<Path>) -> Result<Database> {
        Builder::new(path.as_ref()).open().await
    }

    /// Starts a [`Builder`] for the database at `path`.
    pub fn builder(path: impl AsRef<Path>) -> Builder {
        Builder::new(path.as_ref())
    }

    pub(crate) async fn start(path: PathBuf, config: Config) -> Result<Database> {
        crate::setup::sqlite_setup();
        let state = Arc::new(State::default());
        let (write_tx, write_rx) = queue::bounded(config.write_queue_capacity);
        let (read_tx, read_rx) = queue::bounded(config.read_queue_capacity);
        let (alive_tx, alive) = watch::channel(0_usize);
        let alive_tx = Arc::new(alive_tx);
        let mut threads = Vec::with_capacity(config.readers + 1);

        // The writer opens first: it creates the file, switches it to WAL and reads the PRAGMAs back; only then can
        // the read-only connections open it.
        let (ready, ready_rx) = oneshot::channel();
        let writer_parts = (path.clone(), config.clone(), state.clone(), write_rx);
        let guard = AliveGuard(alive_tx.clone());
        alive_tx.send_modify(|n| *n += 1);
        threads.push(spawn("quicklite-writer", move || {
            let _alive = guard;
            let (path, config, state, rx) = writer_parts;
            match open_writer(&path, &config, &state, rx, true) {
                Ok(opened) => {
                    let _ = ready.send(Ok((opened.pragmas, opened.file)));
                    opened.writer.run();
                }
                Err(e) => {
                    let _ = ready.send(Err(e));
                }
            }
        })?);
        let (pragmas, file) = ready_rx.await.map_err(|_| Error::Closed)??;

        let mut readies = Vec::with_capacity(config.readers);
        for i in 0..config.readers {
            let (ready, ready_rx) = oneshot::channel::<Result<()>>();
            readies.push(ready_rx);
            let parts = (path.clone(), config.clone(), state.clone(), read_rx.clone());
            let guard = AliveGuard(alive_tx.clone());
            alive_tx.send_modify(|n| *n += 1);
            threads.push(spawn(&format!("quicklite-reader-{i}"), move || {
                let _alive = guard;
                let (path, config, state, rx) = parts;
                match open_reader(&path, &config, &state, rx) {
                    Ok(reader) => {
                        let _ = ready.send(Ok(()));
                        reader.run();
                    }
                    Err(e) => {
                        let _ = ready.send(Err(e));
                    }
                }
            })?);
        }
        drop(read_rx);
        let db = Database {
            inner: Arc::new(Inner {
                write_tx,
                read_tx,
                state,
                config,
                wal_file: wal_file(file.as_deref().unwrap_or(&path)),
                file: file.unwrap_or_else(|| path.clone()),
                path,
                pragmas: Arc::new(OnceLock::from(pragmas)),
                backend: Backend::Threads {
                    alive,
                    threads: Mutex::new(threads),
                },
            }),
        };
        for ready in readies {
            // On failure `db` is dropped: the queues close and the threads already started exit.
            ready.await.map_err(|_| Error::Closed)??;
        }
        Ok(db)
    }

    /// A database served by a registry's pool: queues and state only; its connections open on first use.
    pub(crate) fn start_pooled(
        name: String,
        path: PathBuf,
        config: Config,
        pool: Arc<PoolShared>,
    ) -> Database {
        let state = Arc::new(State::default());
        let (write_tx, write_rx) = queue::bounded(config.write_queue_capacity);
        let (read_tx, read_rx) = queue::bounded(config.read_queue_capacity);
        let pragmas = Arc::new(OnceLock::new());
        let actor = Actor::new(
            name,
            path.clone(),
            config.clone(),
            state.clone(),
            pool,
            write_rx,
            read_rx,
            pragmas.clone(),
        );
        Database {
            inner: Arc::new(Inner {
                write_tx,
                read_tx,
                state,
                config,
                wal_file: wal_file(&path),
                file: path.clone(),
                path,
                pragmas,
                backend: Backend::Pooled(actor),
            }),
        }
    }

    /// Opens the connection now if it is not open (a registry's database opens lazily), so that an unusable file
    /// is reported here.
    pub(crate) async fn ensure_open(&self) -> Result<()> {
        self.submit_write(WriteKind::Open, |_: &Connection| Ok(()))
            .await
    }

    /// The pool actor serving this database, if it belongs to a registry.
    pub(crate) fn actor(&self) -> Option<&Arc<Actor>> {
        match &self.inner.backend {
            Backend::Pooled(actor) => Some(actor),
            Backend::Threads { .. } => None,
        }
    }

    /// Closes the queues: queued requests are still served, new ones fail with [`Error::Closed`].
    pub(crate) fn close_queues(&self) {
        self.inner.write_tx.close();
        self.inner.read_tx.close();
    }

    /// Whether `other` is a handle to the same database.
    pub(crate) fn same_as(&self, other: &Database) -> bool {
        Arc::ptr_eq(&self.inner, &other.inner)
    }

    /// Number of live handles to this database (clones of it).
    pub(crate) fn handles(&self) -> usize {
        Arc::strong_count(&self.inner)
    }

    /// Runs `f` on a reader thread with a read-only connection, inside a snapshot that contains every write this
    /// process had acknowledged when `read` was called (read-your-writes).
    ///
    /// Other queued reads may share the snapshot. A write attempted here fails with `SQLITE_READONLY`; transaction
    /// control (`BEGIN`, `COMMIT`, …) is refused with `SQLITE_AUTH`, because the reader manages the transaction.
    pub async fn read<T, F>(&self, f: F) -> Result<T>
    where
        F: FnOnce(&Connection) -> rusqlite::Result<T> + Send + 'static,
        T: Send + 'static,
    {
        let (job, rx) = Job::new(f);
        let req = ReadRequest {
            min_seq: self.inner.state.commit_seq.load(Ordering::Acquire),
            origin: request::origin(),
            enqueued: Instant::now(),
            span: tracing::Span::current(),
            job,
        };
        self.enqueue(&self.inner.read_tx, req, "read").await?;
        if let Backend::Pooled(actor) = &self.inner.backend {
            actor.wake_reader();
        }
        receive(rx).await
    }

    /// Runs `f` on the writer thread inside a write transaction (begun `IMMEDIATE`), possibly together with other
    /// concurrent writes (group commit): `f` runs in a savepoint of its own, so if it fails (or panics) only its
    /// own changes are rolled back. Returns once the transaction has committed.
    ///
    /// `f` must not control the transaction itself: `BEGIN`, `COMMIT` and `ROLLBACK` are refused with
    /// `SQLITE_AUTH`; use [`Database::with_write_connection`] for that.
    pub async fn write<T, F>(&self, f: F) -> Result<T>
    where
        F: FnOnce(&Connection) -> rusqlite::Result<T> + Send + 'static,
        T: Send + 'static,
    {
        self.submit_write(WriteKind::Grouped, f).await
    }

    /// Runs `f` on the writer thread in a `BEGIN IMMEDIATE` … `COMMIT` transaction of its own, not grouped with other
    /// writes: for long migrations or bulk loads. Committed if `f` returns `Ok`, rolled back otherwise.
    pub async fn transaction<T, F>(&self, f: F) -> Result<T>
    where
        F: FnOnce(&Connection) -> rusqlite::Result<T> + Send + 'static,
        T: Send + 'static,
    {
        self.submit_write(WriteKind::Transaction, f).await
    }

    /// Runs `f` on the writer's connection in autocommit mode, alone, with transaction control allowed: for
    /// `VACUUM`, PRAGMAs that cannot run inside a transaction, or code that manages its own transactions. A
    /// transaction left open when `f` returns is rolled back and reported as [`Error::TransactionLeftOpen`].
    pub async fn with_write_connection<T, F>(&self, f: F) -> Result<T>
    where
        F: FnOnce(&Connection) -> rusqlite::Result<T> + Send + 'static,
        T: Send + 'static,
    {
        self.submit_write(WriteKind::Unmanaged, f).await
    }

    async fn submit_write<T, F>(&self, kind: WriteKind, f: F) -> Result<T>
    where
        F: FnOnce(&Connection) -> rusqlite::Result<T> + Send + 'static,
        T: Send + 'static,
    {
        let (job, rx) = Job::new(f);
        let req = WriteRequest {
            kind,
            origin: request::origin(),
            enqueued: Instant::now(),
            span: tracing::Span::current(),
            job,
        };
        self.enqueue(&self.inner.write_tx, req, "write").await?;
        if let Backend::Pooled(actor) = &self.inner.backend {
            actor.wake_writer();
        }
        receive(rx).await
    }

    /// Puts a request on a queue: waits for room, or fails fast with [`Error::Overloaded`], as configured.
    async fn enqueue<R>(&self, tx: &Sender<R>, req: R, queue: &'static str) -> Result<()> {
        match self.inner.config.on_full {
            QueueFull::Wait => tx.send(req).await.map_err(|_| Error::Closed),
            QueueFull::Fail => tx.try_send(req).map_err(|e| match e {
                TrySendError::Full(_) => {
                    self.inner
                        .state
                        .metrics
                        .overloaded
                        .fetch_add(1, Ordering::Relaxed);
                    Error::Overloaded {
                        queue,
                        capacity: tx.capacity(),
                    }
                }
                TrySendError::Closed(_) => Error::Closed,
            }),
        }
    }

    /// Executes one statement with `params` as a grouped write (prepared once and cached); returns the number of
    /// rows changed. `params` must own its values, e.g. a tuple `(1, "x".to_string())`.
    ///
    /// Unlike a [`Database::write`] closure, the statement runs without a savepoint of its own: one statement is
    /// atomic by itself (if it fails, SQLite undoes its changes — except what `INSERT OR FAIL` / `UPDATE OR FAIL`
    /// keep by definition), and the savepoint would cost a copy of every page it touches. A statement that returns
    /// rows is refused before it runs (`rusqlite::Error::ExecuteReturnedResults`): use [`Database::write`] for
    /// `RETURNING`.
    pub async fn execute<P>(
        &self,
        sql: impl AsRef<str> + Send + 'static,
        params: P,
    ) -> Result<usize>
    where
        P: Params + Send + 'static,
    {
        self.submit_write(WriteKind::GroupedStatement, move |c| {
            let mut stmt = c.prepare_cached(sql.as_ref())?;
            if stmt.column_count() > 0 {
                return Err(rusqlite::Error::ExecuteReturnedResults);
            }
            stmt.execute(params)
        })
        .await
    }

    /// Executes one statement once per parameter set, all in one grouped write (one savepoint, one commit);
    /// returns the total number of rows changed.
    pub async fn execute_many<P, I>(
        &self,
        sql: impl AsRef<str> + Send + 'static,
        params: I,
    ) -> Result<usize>
    where
        P: Params,
        I: IntoIterator<Item = P> + Send + 'static,
    {
        self.write(move |c| {
            let mut stmt = c.prepare_cached(sql.as_ref())?;
            let mut changed = 0;
            for p in params {
                changed += stmt.execute(p)?;
            }
            Ok(changed)
        })
        .await
    }

    /// Executes a script of several statements as one grouped write (not cached: scripts are parsed each time).
    pub async fn execute_batch(&self, sql: impl AsRef<str> + Send + 'static) -> Result<()> {
        self.write(move |c| c.execute_batch(sql.as_ref())).await
    }

    /// Reads one row with a cached statement and maps it with `f`. A query that returns no row fails with
    /// `rusqlite::Error::QueryReturnedNoRows`.
    pub async fn query_row<T, P, F>(
        &self,
        sql: impl AsRef<str> + Send + 'static,
        params: P,
        f: F,
    ) -> Result<T>
    where
        P: Params + Send + 'static,
        F: FnOnce(&Row<'_>) -> rusqlite::Result<T> + Send + 'static,
        T: Send + 'static,
    {
        self.read(move |c| c.prepare_cached(sql.as_ref())?.query_row(params, f))
            .await
    }

    /// Reads every row of a query with a cached statement, mapping each with `f`.
    pub async fn query_all<T, P, F>(
        &self,
        sql: impl AsRef<str> + Send + 'static,
        params: P,
        f: F,
    ) -> Result<Vec<T>>
    where
        P: Params + Send + 'static,
        F: FnMut(&Row<'_>) -> rusqlite::Result<T> + Send + 'static,
        T: Send + 'static,
    {
        self.read(move |c| {
            c.prepare_cached(sql.as_ref())?
                .query_map(params, f)?
                .collect()
        })
        .await
    }

    /// The PRAGMAs in effect, read back from SQLite after the profile and overrides were applied
    /// (names in lower case; text values in lower case, e.g. `journal_mode` → `wal`).
    pub fn pragmas(&self) -> BTreeMap<String, String> {
        self.inner.pragmas.get().cloned().unwrap_or_default()
    }

    /// The profile the database was opened with.
    pub fn profile(&self) -> Profile {
        self.inner.config.profile
    }

    /// The path the database was opened with.
    pub fn path(&self) -> &Path {
        &self.inner.path
    }

    /// The database file SQLite opened (the same as [`Database::path`] unless that was a `file:` URI).
    pub fn file(&self) -> &Path {
        &self.inner.file
    }

    /// How long connections wait for a lock held elsewhere.
    pub(crate) fn busy_timeout(&self) -> std::time::Duration {
        self.inner.config.busy_timeout
    }

    /// Number of reader threads.
    pub fn readers(&self) -> usize {
        self.inner.config.readers
    }

    /// A snapshot of the database's metrics.
    pub fn metrics(&self) -> MetricsSnapshot {
        let wal_bytes = std::fs::metadata(&self.inner.wal_file).map_or(0, |m| m.len());
        self.inner.state.metrics.snapshot(
            self.inner.write_tx.len(),
            self.inner.read_tx.len(),
            wal_bytes,
        )
    }

    /// Closes the database for every clone of this handle: new requests fail with [`Error::Closed`], queued ones
    /// are served, the writer checkpoints the WAL into the database file, and the threads are joined.
    pub async fn close(&self) -> Result<()> {
        self.inner.write_tx.close();
        self.inner.read_tx.close();
        let (alive, threads) = match &self.inner.backend {
            Backend::Pooled(actor) => {
                actor.close().await;
                return Ok(());
            }
            Backend::Threads { alive, threads } => (alive, threads),
        };
        let mut alive = alive.clone();
        // The sender lives as long as any thread; an error means every thread is gone, which is what we wait for.
        let _ = alive.wait_for(|n| *n == 0).await;
        let handles = match threads.lock() {
            Ok(mut threads) => std::mem::take(&mut *threads),
            Err(poisoned) => std::mem::take(&mut *poisoned.into_inner()),
        };
        for h in handles {
            // Each thread has already passed its last statement (the live count is zero), so this does not block.
            if h.join().is_err() {
                return Err(Error::Panic {
                    message: "a quicklite worker thread panicked".into(),
                });
            }
        }
        Ok(())
    }
}

/// The WAL file of the database file at `db`.
fn wal_file(db: &Path) -> PathBuf {
    let mut wal = db.as_os_str().to_owned();
    wal.push("-wal");
    PathBuf::from(wal)
}

/// Starts a thread named `name` (the kernel shows its first 15 bytes).
pub(crate) fn spawn(name: &str, f: impl FnOnce() + Send + 'static) -> Result<JoinHandle<()>> {
    Ok(std::thread::Builder::new()
        .name(name.to_string())
        .spawn(f)?)
}
