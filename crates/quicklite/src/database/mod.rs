//! The database handle: queues in front of a writer and readers, served by threads of its own or by a
//! registry's pool.

pub(crate) mod and_then;
pub(crate) mod feed;
pub(crate) mod held;
mod open;
mod replica;
mod statements;
pub(crate) mod stream;
pub(crate) mod subscribe;
#[cfg(feature = "serde")]
mod typed;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use rusqlite::Connection;
use tokio::sync::oneshot;

use crate::config::{Config, QueueFull};
use crate::cost::Site;
use crate::engine::Shared;
use crate::gate::Gate;
use crate::metrics::MetricsSnapshot;
use crate::queue::{Sender, TrySendError};
use crate::reply::{Answer, Asked, CallerThread, answered, receive};
use crate::request::{Deadline, Job, ReadRequest, WriteJob, WriteKind, WriteRequest};
use crate::sched::Backend;
use crate::sched::inline::{self, Attempt, Inline};
use crate::{Error, Profile, Result};

/// A handle to one SQLite database: a writer thread that commits concurrent writes together, and reader threads
/// that serve queued reads in shared snapshots.
///
/// Cheap to clone (an `Arc`); all clones share the threads. Dropping the last clone closes the queues; the threads
/// finish what is queued, checkpoint and exit in the background. [`Database::close`] does the same and waits.
///
/// Answers served together travel together: of the requests of one batch made on the same thread, the last one's
/// caller receives all their answers and wakes the others from inside its runtime (cheaper than the database
/// thread waking each task from outside it). If that caller is not polled soon (its future was polled by hand and
/// then left aside, say), the database thread sends the others' answers itself.
#[derive(Clone)]
pub struct Database {
    inner: Arc<Inner>,
    /// The timeout of every request made through this handle ([`Database::with_timeout`]).
    timeout: Option<Duration>,
}

struct Inner {
    /// Queue of the writer.
    write_tx: Sender<WriteRequest>,
    /// Queue shared by the readers (a slow read occupies one reader, not the queue).
    read_tx: Sender<ReadRequest>,
    shared: Arc<Shared>,
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
    /// The connections for short reads on their callers' threads, unless turned off.
    inline: Option<Arc<Inline>>,
    /// The directory of a temporary database, removed (after the queues close) when the last handle goes.
    _temporary: Option<tempfile::TempDir>,
    /// The thread that has Litestream upload this database's commits, if its writes wait for object storage and
    /// the database is served by threads of its own (a registry's databases share the registry's).
    _gate: Option<Gate>,
}

impl Drop for Inner {
    fn drop(&mut self) {
        // First the snapshots kept for reads on callers' threads, which would hold the writer's last checkpoint back.
        if let Some(inline) = &self.inline {
            inline.close();
        }
        // Closing the queues lets the threads drain what is queued and exit; they are not joined here, so that
        // dropping a handle never blocks an async runtime.
        self.write_tx.close();
        self.read_tx.close();
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

impl Database {
    /// The application's set-up functions and migration.
    pub(crate) fn hooks(&self) -> &crate::config::AppHooks {
        &self.inner.config.hooks
    }

    /// The database's SQLCipher key, if it has one.
    pub(crate) fn key(&self) -> Option<&crate::config::Key> {
        self.inner.config.key.as_ref()
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

    /// A handle to the same database whose requests, of every kind, fail with [`Error::Timeout`] if they have not
    /// finished `timeout` after they were made: reads (closures, statement helpers, typed rows, each chunk of a
    /// stream) are interrupted if still running then, as are writes that run alone ([`Database::transaction`],
    /// [`Database::with_write_connection`]), rolled back; a grouped write ([`Database::write`],
    /// [`Database::execute`], …) must have started by then, and once started runs to its end with its group,
    /// since interrupting it would roll the whole group back.
    ///
    /// The builder's timeouts ([`Builder::read_timeout`](crate::Builder::read_timeout),
    /// [`Builder::write_timeout`](crate::Builder::write_timeout)) are ceilings: the shortest timeout that applies to
    /// a request wins. Cheap: the handle shares everything with this one.
    ///
    /// ```no_run
    /// # async fn f(db: quicklite::Database) -> quicklite::Result<()> {
    /// use std::time::Duration;
    ///
    /// let db = db.with_timeout(Duration::from_millis(50));
    /// let name: String = db.query_row("SELECT name FROM item WHERE id = ?1", [7], |r| r.get(0)).await?;
    /// # Ok(()) }
    /// ```
    pub fn with_timeout(&self, timeout: Duration) -> Database {
        Database {
            inner: self.inner.clone(),
            timeout: Some(self.timeout.map_or(timeout, |t| t.min(timeout))),
        }
    }

    /// Runs `f` with a read-only connection, inside a snapshot that contains every write this process had
    /// acknowledged when `read` was called (read-your-writes).
    ///
    /// `f` runs on a reader thread — so it may block, as on any thread of its own — and other reads may share the
    /// snapshot. With [`Builder::inline_read_closures`](crate::Builder::inline_read_closures), a closure whose
    /// reads have been short lately runs on the thread that polls this future instead, without a hand-off. A write
    /// attempted here fails with `SQLITE_READONLY`; transaction control (`BEGIN`, `COMMIT`, …) is refused with
    /// `SQLITE_AUTH`, because the reader manages the transaction.
    /// With a timeout ([`Database::with_timeout`], [`Builder::read_timeout`](crate::Builder::read_timeout)), a read
    /// still queued or running past it fails with [`Error::Timeout`].
    pub async fn read<T, F>(&self, f: F) -> Result<T>
    where
        F: FnOnce(&Connection) -> rusqlite::Result<T> + Send + 'static,
        T: Send + 'static,
    {
        let site = Site::of::<F>(None);
        self.read_within(self.read_deadline(None), false, site, f)
            .await
    }

    /// [`Database::read`] that fails with [`Error::Timeout`] if it has not finished `timeout` after this call:
    /// still queued then, it does not run; still running, its statement is interrupted (SQLite's progress
    /// handler, called every so many virtual-machine instructions). Only this read fails; the others served in
    /// the same snapshot are not affected. A shorter timeout of the handle's or the builder's still applies.
    pub async fn read_with_timeout<T, F>(&self, timeout: Duration, f: F) -> Result<T>
    where
        F: FnOnce(&Connection) -> rusqlite::Result<T> + Send + 'static,
        T: Send + 'static,
    {
        let site = Site::of::<F>(None);
        self.read_within(self.read_deadline(Some(timeout)), false, site, f)
            .await
    }

    /// The deadline of a read made now: the shortest of `timeout` (the call's), the handle's and the builder's.
    fn read_deadline(&self, timeout: Option<Duration>) -> Option<Deadline> {
        Deadline::shortest([timeout, self.timeout, self.inner.config.read_timeout])
    }

    /// The deadline of a write of `kind` made now. A grouped write has the shortest of the handle's and the
    /// builder's; one that runs alone has a deadline only if the call or the handle gives one (the builder's,
    /// shorter, then caps it), because its deadline bounds its run as well as its wait.
    fn write_deadline(&self, kind: WriteKind, timeout: Option<Duration>) -> Option<Deadline> {
        let asked = [timeout, self.timeout];
        (kind.is_grouped() || asked.iter().any(Option::is_some))
            .then(|| Deadline::shortest(asked.into_iter().chain([self.inner.config.write_timeout])))
            .flatten()
    }

    /// [`Database::read`] of one statement, `sql`, run by `f` ([`ReadRequest::one_statement`]), made at call site
    /// `site`. On the caller's thread `f` borrows `sql`; for the reader threads, `sql` is copied.
    pub(crate) async fn read_statement<T, F>(&self, site: Site, sql: &str, f: F) -> Result<T>
    where
        F: FnOnce(&Connection, &str) -> rusqlite::Result<T> + Send + 'static,
        T: Send + 'static,
    {
        let deadline = self.read_deadline(None);
        let mut f = Some(f);
        if let Some((inline, attempt)) = self.inline_for(site, false) {
            self.take_turn(inline).await;
            let run_here = |conn: &Connection| (f.take().expect("runs once"))(conn, sql);
            if let Ok(result) = inline.run(attempt, deadline, true, run_here) {
                return result;
            }
        }
        let f = f.expect("not run on the caller's thread");
        let sql: Box<str> = sql.into();
        // Boxed: the reader threads' path would make every read's future as large as its own, and a future is
        // read from memory at every poll — a cost per read on the caller's thread, where most reads run.
        Box::pin(self.queue_read(deadline, true, false, site, move |conn| f(conn, &sql))).await
    }

    /// Takes this task's turn on the runtime before a request runs on its thread, behind whom `inline` says while
    /// this database's writes are queued or not ([`Inline::turn`]): behind its worker's tasks if it owes one
    /// ([`inline::owes_turn`]), behind the runtime's always (the tasks the writer's answers wake wait there).
    async fn take_turn(&self, inline: &Inline) {
        let turn = inline.turn(self.inner.write_tx.len() > 0);
        if turn == inline::Turn::Runtime || inline::owes_turn() {
            inline::take_turn(turn).await;
        }
        inline::runs_here();
    }

    /// The connections for reads on the caller's thread, if a read of `site` (a read `closure`, or a statement
    /// helper's) may run there now, and on what grounds.
    fn inline_for(&self, site: Site, closure: bool) -> Option<(&Arc<Inline>, Attempt)> {
        let inline = self.inner.inline.as_ref()?;
        Some((inline, inline.suits(site, closure)?))
    }

    /// Runs a read on the caller's thread if its call site has been short lately ([`inline`]), else on the
    /// reader threads.
    async fn read_within<T, F>(
        &self,
        deadline: Option<Deadline>,
        one_statement: bool,
        site: Site,
        f: F,
    ) -> Result<T>
    where
        F: FnOnce(&Connection) -> rusqlite::Result<T> + Send + 'static,
        T: Send + 'static,
    {
        let f = match self.inline_for(site, true) {
            Some((inline, attempt)) => {
                self.take_turn(inline).await;
                match inline.run(attempt, deadline, false, f) {
                    Ok(result) => return result,
                    Err(f) => f,
                }
            }
            None => f,
        };
        // Boxed, as `read_statement`'s.
        Box::pin(self.queue_read(deadline, one_statement, false, site, f)).await
    }

    /// Queues a read for the reader threads and waits for its answer. A `fresh` read runs in a read transaction
    /// that begins for it, not in one already serving other reads.
    async fn queue_read<T, F>(
        &self,
        deadline: Option<Deadline>,
        one_statement: bool,
        fresh: bool,
        site: Site,
        f: F,
    ) -> Result<T>
    where
        F: FnOnce(&Connection) -> rusqlite::Result<T> + Send + 'static,
        T: Send + 'static,
    {
        let (job, rx) = Job::new(f);
        let req = ReadRequest {
            deadline,
            one_statement,
            site: self.inner.inline.is_some().then_some(site),
            // A snapshot that predates the request's commit number ends before it: no snapshot predates `MAX`.
            min_seq: if fresh {
                u64::MAX
            } else {
                self.inner.shared.visible_seq()
            },
            caller: CallerThread::current(),
            enqueued: Instant::now(),
            span: tracing::Span::current(),
            job,
        };
        if let Some(req) = self.enqueue_now(&self.inner.read_tx, req, "read")? {
            Box::pin(self.enqueue(&self.inner.read_tx, req, "read")).await?;
        }
        self.inner.backend.notify_read();
        receive(rx, Asked::Read).await
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

    /// [`Database::transaction`] that fails with [`Error::Timeout`] if it has not finished `timeout` after this
    /// call: still queued then, it does not run; still running, its statement is interrupted and its transaction
    /// rolled back. It runs alone, never grouped with other writes: SQLite rolls back the whole transaction when a
    /// writing statement is interrupted, which would take its neighbours' work with it. A write that finished in
    /// time commits, even if the commit itself ends after the deadline. A shorter timeout of the handle's or the
    /// builder's still applies.
    pub async fn write_with_timeout<T, F>(&self, timeout: Duration, f: F) -> Result<T>
    where
        F: FnOnce(&Connection) -> rusqlite::Result<T> + Send + 'static,
        T: Send + 'static,
    {
        let (job, rx) = Job::new(f);
        let kind = WriteKind::Transaction;
        self.submit_job(
            kind,
            self.write_deadline(kind, Some(timeout)),
            None,
            job,
            rx,
        )
        .await
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

    /// [`Database::with_write_connection`] with the connection itself (`&mut Connection`): for code that needs it,
    /// such as rusqlite's `Connection::transaction` with a behaviour of its own, or a migration crate's runner.
    pub async fn with_write_connection_mut<T, F>(&self, f: F) -> Result<T>
    where
        F: FnOnce(&mut Connection) -> rusqlite::Result<T> + Send + 'static,
        T: Send + 'static,
    {
        let (job, rx) = Job::exclusive(f);
        let kind = WriteKind::Unmanaged;
        self.submit_job(kind, self.write_deadline(kind, None), None, job, rx)
            .await
    }

    /// A write of the application's closure `f`, of `kind`.
    pub(crate) async fn submit_write<T, F>(&self, kind: WriteKind, f: F) -> Result<T>
    where
        F: FnOnce(&Connection) -> rusqlite::Result<T> + Send + 'static,
        T: Send + 'static,
    {
        self.submit_write_at(kind, Site::of::<F>(None), true, f)
            .await
    }

    /// A write of `kind` made at call site `site`, by a closure of the application's (`closure`) or of a
    /// statement helper's.
    pub(crate) async fn submit_write_at<T, F>(
        &self,
        kind: WriteKind,
        site: Site,
        closure: bool,
        f: F,
    ) -> Result<T>
    where
        F: FnOnce(&Connection) -> rusqlite::Result<T> + Send + 'static,
        T: Send + 'static,
    {
        let (job, rx) = Job::new(f);
        let made_at = Some((site, closure));
        self.submit_job(kind, self.write_deadline(kind, None), made_at, job, rx)
            .await
    }

    /// Runs a write job on the caller's thread if it may ([`Inline::write`]), else queues it for the writer; waits
    /// for its answer. `made_at` is its call site, and whether a closure of the application's made it.
    async fn submit_job<T: Send + 'static>(
        &self,
        kind: WriteKind,
        deadline: Option<Deadline>,
        made_at: Option<(Site, bool)>,
        job: Box<dyn WriteJob>,
        rx: oneshot::Receiver<Answer<T>>,
    ) -> Result<T> {
        let mut req = self.write_request(kind, deadline, made_at, job)?;
        let closure = made_at.is_some_and(|(_, c)| c);
        // Writes queued already go to the writer together with this one: group commit serves them best.
        let here = |inline: &Inline, site| {
            (self.inner.write_tx.len() == 0)
                .then(|| inline.suits_write(site, closure))
                .flatten()
        };
        if let Some((site, _)) = req.site
            && let Some(inline) = &self.inner.inline
            && let Some(mut attempt) = here(inline, site)
        {
            // While writes here keep the connection busy, each task takes its turn after its write, counted among
            // those whose writes run here ([`Inline::wrote`]): many tasks writing on few workers, whose writes group
            // commit serves best, show so. Otherwise a task takes it before, if it owes one.
            let busy = inline.writes_busy();
            if !busy && inline::owes_turn() {
                // A caller that gives up meanwhile leaves its write unrun, counted as the writer counts a queued one.
                let skipped = Skipped(&self.inner.shared.metrics.abandoned_writes);
                self.take_turn(inline).await;
                std::mem::forget(skipped);
                // What it found may have changed meanwhile.
                attempt = match here(inline, site) {
                    Some(attempt) => attempt,
                    None => return self.queue_and_receive(req, rx).await,
                };
            }
            inline::runs_here();
            match inline.write(attempt, req) {
                None => {
                    if busy {
                        let _awaiting = inline.wrote();
                        self.take_turn(inline).await;
                    }
                    return answered(rx);
                }
                Some(not_run) => req = not_run,
            }
        }
        self.queue_and_receive(req, rx).await
    }

    /// Queues `req` for the writer and waits for its answer on `rx`.
    async fn queue_and_receive<T: Send + 'static>(
        &self,
        req: WriteRequest,
        rx: oneshot::Receiver<Answer<T>>,
    ) -> Result<T> {
        if let Some(req) = self.queue_now(req)? {
            Box::pin(self.queue_request(req)).await?;
        }
        receive(rx, Asked::Write).await
    }

    /// Queues a write job and wakes its writer; its answer comes on the job's own channel.
    async fn queue_write(
        &self,
        kind: WriteKind,
        deadline: Option<Deadline>,
        job: Box<dyn WriteJob>,
    ) -> Result<()> {
        let req = self.write_request(kind, deadline, None, job)?;
        if let Some(req) = self.queue_now(req)? {
            Box::pin(self.queue_request(req)).await?;
        }
        Ok(())
    }

    /// The request of a write job (made at call site `made_at`, if known); refused on a read replica.
    fn write_request(
        &self,
        kind: WriteKind,
        deadline: Option<Deadline>,
        made_at: Option<(Site, bool)>,
        job: Box<dyn WriteJob>,
    ) -> Result<WriteRequest> {
        let config = &self.inner.config;
        if let Some(replica) = &config.replica {
            return Err(Error::ReadOnlyReplica {
                url: replica.url().to_owned(),
            });
        }
        // A grouped write whose site's writes may run on their callers' threads: its cost is learnt wherever it runs.
        let site = made_at
            .filter(|&(_, closure)| {
                kind.is_grouped()
                    && self.inner.inline.is_some()
                    && config.inline_writes
                    && (!closure || config.inline_write_closures)
            })
            .map(|(site, _)| (site, config.inline_write_max));
        Ok(WriteRequest {
            kind,
            caller: CallerThread::current(),
            enqueued: Instant::now(),
            span: tracing::Span::current(),
            deadline,
            site,
            job,
            permit: None,
        })
    }

    /// Puts a write request on the writer's queue and wakes the writer if it can go there now
    /// ([`Database::enqueue_now`]); gives it back to [`Database::queue_request`] if it must wait for room, or for its
    /// room among the writes in flight under [`Acknowledge::Replicated`](crate::Acknowledge::Replicated).
    fn queue_now(&self, req: WriteRequest) -> Result<Option<WriteRequest>> {
        if self.inner.shared.gate.is_some() {
            return Ok(Some(req));
        }
        let waits = self.enqueue_now(&self.inner.write_tx, req, "write")?;
        if waits.is_none() {
            self.inner.backend.notify_write();
        }
        Ok(waits)
    }

    /// Puts a write request on the writer's queue and wakes the writer. Under
    /// [`Acknowledge::Replicated`](crate::Acknowledge::Replicated) it first takes its room among the writes in
    /// flight, queued or waiting for object storage: it waits for room, or fails fast, as for the queue's.
    async fn queue_request(&self, mut req: WriteRequest) -> Result<()> {
        if let Some(gate) = &self.inner.shared.gate {
            let room = gate.room().clone();
            req.permit = Some(match self.inner.config.on_full {
                QueueFull::Wait => room.acquire_owned().await.map_err(|_| Error::Closed)?,
                QueueFull::Fail => room.try_acquire_owned().map_err(|_| {
                    self.overloaded("write", self.inner.config.write_queue_capacity)
                })?,
            });
        }
        self.enqueue(&self.inner.write_tx, req, "write").await?;
        self.inner.backend.notify_write();
        Ok(())
    }

    /// Puts a request on a queue if it has room now. Without room, gives the request back to wait for it
    /// ([`Database::enqueue`]), or fails fast with [`Error::Overloaded`], as configured.
    ///
    /// A request that waits for room does so in a future of its own, allocated then: a future that awaits one
    /// holds the request it sends, so the common case's future would carry the request twice more, and every
    /// caller's future is moved as a whole where it is made.
    fn enqueue_now<R>(&self, tx: &Sender<R>, req: R, queue: &'static str) -> Result<Option<R>> {
        match tx.try_send(req) {
            Ok(()) => Ok(None),
            Err(TrySendError::Closed(_)) => Err(Error::Closed),
            Err(TrySendError::Full(req)) => match self.inner.config.on_full {
                QueueFull::Wait => Ok(Some(req)),
                QueueFull::Fail => Err(self.overloaded(queue, tx.capacity())),
            },
        }
    }

    /// Puts a request on a queue: waits for room, or fails fast with [`Error::Overloaded`], as configured.
    async fn enqueue<R>(&self, tx: &Sender<R>, req: R, queue: &'static str) -> Result<()> {
        match self.inner.config.on_full {
            QueueFull::Wait => tx.send(req).await.map_err(|_| Error::Closed),
            QueueFull::Fail => tx.try_send(req).map_err(|e| match e {
                TrySendError::Full(_) => self.overloaded(queue, tx.capacity()),
                TrySendError::Closed(_) => Error::Closed,
            }),
        }
    }

    /// A request refused because `queue` (of `capacity`) has no room, counted.
    fn overloaded(&self, queue: &'static str, capacity: usize) -> Error {
        self.inner
            .shared
            .metrics
            .overloaded
            .fetch_add(1, Ordering::Relaxed);
        Error::Overloaded { queue, capacity }
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

    /// Number of reader threads (a read replica: 1, the thread of its one connection).
    pub fn readers(&self) -> usize {
        self.inner.config.readers
    }

    /// A snapshot of the database's metrics.
    pub fn metrics(&self) -> MetricsSnapshot {
        if let Some(inline) = &self.inner.inline {
            inline.flush_counts();
        }
        let wal_bytes = std::fs::metadata(&self.inner.wal_file).map_or(0, |m| m.len());
        let mut snapshot = self.inner.shared.metrics.snapshot(
            self.inner.write_tx.len(),
            self.inner.read_tx.len(),
            wal_bytes,
        );
        if let Some(gate) = &self.inner.shared.gate {
            let m = &gate.metrics;
            snapshot.replication_syncs = m.syncs.load(Ordering::Relaxed);
            snapshot.replication_sync_failures = m.sync_failures.load(Ordering::Relaxed);
            snapshot.writes_not_replicated = m.not_replicated.load(Ordering::Relaxed);
            snapshot.replication_wait_us = m.wait_us.snapshot();
        }
        snapshot
    }

    /// Closes the database for every clone of this handle: new requests fail with [`Error::Closed`], queued ones
    /// are served, the writer checkpoints the WAL into the database file (a `TRUNCATE` checkpoint, so the file is
    /// whole by itself), and the threads are joined.
    ///
    /// Under [`Checkpointing::External`](crate::Checkpointing::External) the WAL is left as it is, to the tool that
    /// owns checkpoints (a replicator must copy its frames first): the database file alone may lack the latest
    /// writes until that tool checkpoints, so copy a database with [`Database::backup`], not by copying its file.
    /// Beside Litestream under the managed policy ([`MetricsSnapshot::another_checkpointer`]), the checkpoint at
    /// close is a `PASSIVE` one, which copies back what Litestream's read allows.
    pub async fn close(&self) -> Result<()> {
        if let Some(inline) = &self.inner.inline {
            inline.close();
        }
        self.close_queues();
        let closed = self.inner.backend.close().await;
        // Every commit has been told: the subscribers' streams end.
        self.inner.shared.changes.close();
        closed
    }
}

/// Says that the code running on this thread is about to block — a function of the application's, registered in
/// [`Builder::on_connection`](crate::Builder::on_connection), that waits for the network, a lock or a timer, or a
/// closure that does. Where it runs inside a read or write that quicklite runs on its caller's thread, the async
/// runtime's worker goes to another thread first, as it does for a statement that runs past the bound, and the
/// runtime's other tasks and timers go on while it blocks; the call site is then known to run long, and its next
/// reads or writes go to the database's own threads. Anywhere else (the database's threads, code outside quicklite)
/// it does nothing.
///
/// SQLite lets quicklite look at a statement's time only between its own instructions: a function that blocks
/// inside a statement is not seen until it returns, and without this call it would hold the runtime's worker as
/// long as it blocks.
pub fn about_to_block() {
    crate::engine::bound::before_waiting();
}

/// Counts a write not run because its caller stopped waiting, if dropped.
struct Skipped<'a>(&'a std::sync::atomic::AtomicU64);

impl Drop for Skipped<'_> {
    fn drop(&mut self) {
        self.0.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }
}
