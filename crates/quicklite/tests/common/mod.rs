//! Helpers shared by the integration tests.
#![allow(dead_code)]

pub mod litestream;

use std::sync::mpsc;
use std::time::Duration;

use quicklite::{Database, rusqlite};

/// This process's threads as the kernel lists them: each one's name (its first 15 bytes) and nice value. A thread
/// that ends while it is being read is left out.
pub fn threads() -> Vec<(String, i32)> {
    let mut threads = Vec::new();
    for task in std::fs::read_dir("/proc/self/task").unwrap() {
        let dir = task.unwrap().path();
        let (Ok(comm), Ok(stat)) = (
            std::fs::read_to_string(dir.join("comm")),
            std::fs::read_to_string(dir.join("stat")),
        ) else {
            continue;
        };
        // `tid (comm) state …`: the nice value is the 19th field, the 17th after the name.
        let (_, rest) = stat.rsplit_once(')').unwrap();
        let nice = rest.split_whitespace().nth(16).unwrap().parse().unwrap();
        threads.push((comm.trim_end().to_string(), nice));
    }
    threads
}

/// A temporary directory with a database path inside it.
pub struct TempDb {
    pub dir: tempfile::TempDir,
    pub path: std::path::PathBuf,
}

pub fn temp_db() -> TempDb {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("test.db");
    TempDb { dir, path }
}

/// Occupies the writer until the returned sender is dropped or sent to, so that writes queued meanwhile are
/// committed together as one group. Returns after the blocking write has started running.
pub async fn hold_writer(db: &Database) -> (mpsc::Sender<()>, tokio::task::JoinHandle<()>) {
    let (release_tx, release_rx) = mpsc::channel::<()>();
    let (started_tx, started_rx) = tokio::sync::oneshot::channel::<()>();
    let db = db.clone();
    let handle = tokio::spawn(async move {
        db.transaction(move |_c: &rusqlite::Connection| {
            let _ = started_tx.send(());
            let _ = release_rx.recv();
            Ok(())
        })
        .await
        .expect("blocking write");
    });
    started_rx.await.expect("writer started the blocking write");
    (release_tx, handle)
}

/// Holds a reader with a read that blocks until the returned sender is used (or dropped); returns once the
/// read is running. With `readers(1)`, later reads queue behind it.
pub async fn hold_reader(db: &Database) -> (mpsc::Sender<()>, tokio::task::JoinHandle<()>) {
    let (release_tx, release_rx) = mpsc::channel::<()>();
    let (started_tx, started_rx) = tokio::sync::oneshot::channel::<()>();
    let db = db.clone();
    let handle = tokio::spawn(async move {
        db.read(move |_c: &rusqlite::Connection| {
            let _ = started_tx.send(());
            let _ = release_rx.recv();
            Ok(())
        })
        .await
        .expect("blocking read");
    });
    started_rx
        .await
        .expect("a reader started the blocking read");
    (release_tx, handle)
}

/// Waits (without sleeping) until `n` write requests are queued behind the writer.
pub async fn until_write_queue_holds(db: &Database, n: usize) {
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while db.metrics().write_queue_depth < n {
        assert!(std::time::Instant::now() < deadline, "writes never queued");
        tokio::task::yield_now().await;
    }
}

/// Queues `n` writes made by `make(i)`, in order, behind a held writer, then lets the writer go, so that all of them
/// are committed as one group. Returns each write's own result, in order.
pub async fn one_group<T, F>(
    db: &Database,
    n: i64,
    make: impl Fn(i64) -> F,
) -> Vec<quicklite::Result<T>>
where
    F: FnOnce(&rusqlite::Connection) -> rusqlite::Result<T> + Send + 'static,
    T: Send + 'static,
{
    let (release, blocker) = hold_writer(db).await;
    let mut pending = Vec::new();
    for i in 0..n {
        let (db2, f) = (db.clone(), make(i));
        pending.push(tokio::spawn(async move { db2.write(f).await }));
        until_write_queue_holds(db, i as usize + 1).await;
    }
    release.send(()).expect("the held write is waiting");
    blocker.await.expect("blocking write task");
    let mut results = Vec::new();
    for p in pending {
        results.push(p.await.expect("write task"));
    }
    results
}

/// How late, at worst, a 1 ms timer of the runtime fires until `stop` is set.
pub fn ticker(
    stop: std::sync::Arc<std::sync::atomic::AtomicU64>,
) -> tokio::task::JoinHandle<Duration> {
    tokio::spawn(async move {
        let mut late = Duration::ZERO;
        while stop.load(std::sync::atomic::Ordering::SeqCst) == 0 {
            let at = std::time::Instant::now();
            tokio::time::sleep(Duration::from_millis(1)).await;
            late = late.max(at.elapsed().saturating_sub(Duration::from_millis(1)));
        }
        late
    })
}

/// Awaits `future`, counting the polls it took.
pub async fn polls<F: std::future::Future>(future: F) -> (u32, F::Output) {
    let mut future = std::pin::pin!(future);
    let mut polls = 0;
    let output = std::future::poll_fn(|cx| {
        polls += 1;
        future.as_mut().poll(cx)
    })
    .await;
    (polls, output)
}

/// Counts its own turns on the runtime until aborted: it wakes itself at each, and goes behind the tasks ready on
/// its worker. On a runtime of one worker it runs only while another task there returns to the runtime.
#[allow(dead_code)] // Not every test binary uses it.
pub async fn take_turns(turns: std::sync::Arc<std::sync::atomic::AtomicU64>) {
    loop {
        turns.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let mut woken = false;
        std::future::poll_fn(|cx| {
            if woken {
                return std::task::Poll::Ready(());
            }
            woken = true;
            cx.waker().wake_by_ref();
            std::task::Poll::Pending
        })
        .await;
    }
}

/// Number of rows in `table`, read through the handle (so through a reader's snapshot).
pub async fn count(db: &Database, table: &'static str) -> i64 {
    db.read(move |c| c.query_row(&format!("SELECT count(*) FROM {table}"), [], |r| r.get(0)))
        .await
        .expect("count rows")
}

/// Schema of the crash and power-cut tests: each write puts its id into both tables, so a half-applied write
/// shows as an id in one table only.
pub const PAIRED_TABLES: &str =
    "CREATE TABLE IF NOT EXISTS a (id INTEGER PRIMARY KEY, body BLOB NOT NULL);
     CREATE TABLE IF NOT EXISTS b (id INTEGER PRIMARY KEY, body BLOB NOT NULL);";

/// One write of `id` into both [`PAIRED_TABLES`].
pub async fn write_pair(db: &Database, id: i64) -> quicklite::Result<()> {
    db.write(move |c| {
        c.prepare_cached("INSERT INTO a VALUES (?1, randomblob(200))")?
            .execute([id])?;
        c.prepare_cached("INSERT INTO b VALUES (?1, randomblob(500))")?
            .execute([id])?;
        Ok(())
    })
    .await
}

/// The ids of `table`.
pub fn ids(conn: &rusqlite::Connection, table: &str) -> std::collections::BTreeSet<i64> {
    conn.prepare(&format!("SELECT id FROM {table}"))
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .collect::<rusqlite::Result<_>>()
        .unwrap()
}

/// After a crash or a power cut: the file opens with SQLite's own VFS, passes `integrity_check`, has both
/// [`PAIRED_TABLES`] or neither (their creation may itself be lost to a power cut), and every write is whole.
/// Returns the ids stored.
pub fn whole_writes(path: &std::path::Path) -> std::collections::BTreeSet<i64> {
    let conn = rusqlite::Connection::open(path).unwrap();
    let integrity: String = conn
        .query_row("PRAGMA integrity_check", [], |r| r.get(0))
        .unwrap();
    assert_eq!(integrity, "ok");
    let tables: i64 = conn
        .query_row(
            "SELECT count(*) FROM sqlite_schema WHERE type = 'table' AND name IN ('a', 'b')",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert!(tables == 0 || tables == 2, "{tables} of the 2 tables");
    if tables == 0 {
        return Default::default();
    }
    let (a, b) = (ids(&conn, "a"), ids(&conn, "b"));
    assert_eq!(a, b, "a write was half-applied");
    a
}

/// Names of the entries of `dir`, sorted.
pub fn entries(dir: &std::path::Path) -> std::collections::BTreeSet<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect()
}

/// Runs `test`, an ignored test of this test binary, as a child process with `envs`, passes each line it prints to
/// `on_line`, and kills it with SIGKILL `after` it printed `ready`. Returns once its output has ended, checking it
/// was killed rather than finished.
#[allow(dead_code)]
pub fn run_child_until_killed(
    test: &str,
    envs: &[(&str, String)],
    after: Duration,
    mut on_line: impl FnMut(&str),
) {
    let mut child = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            test,
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .envs(envs.iter().map(|(k, v)| (*k, v.as_str())))
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    // Kill from another thread at the chosen moment after the child is ready, while this one reads its output.
    // `Child::kill` sends SIGKILL on Unix.
    let (ready_tx, ready_rx) = mpsc::channel::<()>();
    let killer = std::thread::spawn(move || {
        ready_rx
            .recv_timeout(Duration::from_secs(60))
            .expect("the child got ready");
        std::thread::sleep(after);
        child.kill().expect("SIGKILL");
        child.wait().unwrap()
    });
    let mut ready = Some(ready_tx);
    for line in std::io::BufRead::lines(std::io::BufReader::new(stdout)) {
        let Ok(line) = line else { break };
        if line.contains("ready")
            && let Some(tx) = ready.take()
        {
            tx.send(()).unwrap();
        }
        on_line(&line);
    }
    let status = killer.join().unwrap();
    assert!(
        !status.success(),
        "the child was killed, not finished: {status:?}"
    );
}

// ---------------------------------------------------------------------------------------------------------------
// Backends: every contract test runs on a standalone database and on a database served by a registry.
// ---------------------------------------------------------------------------------------------------------------

use std::ops::Deref;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use quicklite::{Builder, Registry, RegistryMetrics};

/// What serves the database a test runs against.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Backend {
    /// `Database::builder(path)…open()`: a writer thread and reader threads of its own.
    Standalone,
    /// `Registry::get`: an actor on a registry's pool, whose connections close and reopen under the test.
    Registry,
}

impl Backend {
    /// The name passed to a child process (see [`Backend::from_name`]).
    pub fn name(self) -> &'static str {
        match self {
            Backend::Standalone => "standalone",
            Backend::Registry => "registry",
        }
    }

    pub fn from_name(name: &str) -> Backend {
        match name {
            "standalone" => Backend::Standalone,
            "registry" => Backend::Registry,
            other => panic!("unknown backend {other:?}"),
        }
    }
}

/// Expands one test body into two tests, `<name>::standalone` and `<name>::registry`, each running the body with
/// its [`Backend`]. The attributes (`#[tokio::test(…)]`, or `#[test]` for a plain `fn`, docs) go to both.
/// `#[ignore_on_registry = "reason"]` among them ignores the registry's variant only.
/// A `#[cfg(…)]` among them gates the pair and their shared body.
///
/// ```ignore
/// both_backends! {
///     #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
///     async fn a_write_is_read_back(backend) {
///         let db = common::open(backend, |b| b).await;
///         …
///     }
/// }
/// ```
#[allow(unused_macros)]
macro_rules! both_backends {
    (@collect [$($attrs:tt)*] [$($ignore:tt)*] [$($gate:tt)*] #[ignore_on_registry = $reason:literal] $($rest:tt)*) => {
        $crate::common::both_backends!(@collect [$($attrs)*] [#[ignore = $reason]] [$($gate)*] $($rest)*);
    };
    (@collect [$($attrs:tt)*] [$($ignore:tt)*] [$($gate:tt)*] #[cfg($cfg:meta)] $($rest:tt)*) => {
        $crate::common::both_backends!(@collect [$($attrs)*] [$($ignore)*] [$($gate)* #[cfg($cfg)]] $($rest)*);
    };
    (@collect [$($attrs:tt)*] [$($ignore:tt)*] [$($gate:tt)*] #[$attr:meta] $($rest:tt)*) => {
        $crate::common::both_backends!(@collect [$($attrs)* #[$attr]] [$($ignore)*] [$($gate)*] $($rest)*);
    };
    (@collect [$($attrs:tt)*] [$($ignore:tt)*] [$($gate:tt)*] async fn $name:ident($backend:ident) $body:block) => {
        $($gate)*
        mod $name {
            #[allow(unused_imports)]
            use super::*;

            async fn body($backend: $crate::common::Backend) $body

            $($attrs)*
            async fn standalone() {
                body($crate::common::Backend::Standalone).await
            }

            $($attrs)*
            $($ignore)*
            async fn registry() {
                body($crate::common::Backend::Registry).await
            }
        }
    };
    (@collect [$($attrs:tt)*] [$($ignore:tt)*] [$($gate:tt)*] fn $name:ident($backend:ident) $body:block) => {
        $($gate)*
        mod $name {
            #[allow(unused_imports)]
            use super::*;

            fn body($backend: $crate::common::Backend) $body

            $($attrs)*
            fn standalone() {
                body($crate::common::Backend::Standalone)
            }

            $($attrs)*
            $($ignore)*
            fn registry() {
                body($crate::common::Backend::Registry)
            }
        }
    };
    ($($test:tt)*) => {
        $crate::common::both_backends!(@collect [] [] [] $($test)*);
    };
}
#[allow(unused_imports)]
pub(crate) use both_backends;

/// Options of the test's database, applied to a [`Builder`] on either backend.
pub type Configure = Arc<dyn Fn(Builder) -> Builder + Send + Sync>;

/// The test's database in a registry: `<dir>/db.db`, the same file a standalone test opens.
pub const NAME: &str = "db";

/// The other database of the registry: at `max_open(1)` each request of one closes the other's connections.
pub const NEIGHBOUR: &str = "neighbour";

/// Pool threads of the test registry: two serve writes and two reads, so the neighbour can be served while a test
/// holds the test database's writer.
const REGISTRY_THREADS: usize = 4;

/// A database opened for a test, through one backend. Derefs to the [`Database`]; `env` reopens, evicts and
/// closes it.
pub struct TestDb {
    pub db: Database,
    pub env: Env,
}

impl Deref for TestDb {
    type Target = Database;
    fn deref(&self) -> &Database {
        &self.db
    }
}

/// Everything of a [`TestDb`] but the handle: the backend, the file, and (registry) the registry and the
/// neighbour.
pub struct Env {
    pub backend: Backend,
    /// The directory holding the database (a registry's directory).
    pub dir: PathBuf,
    /// The database file, `<dir>/db.db` on either backend.
    pub path: PathBuf,
    configure: Configure,
    registry: Option<Registry>,
    neighbour: Option<Database>,
    /// Kept alive while any handle opened in it is.
    _tmp: Option<Arc<tempfile::TempDir>>,
}

/// Opens a database for a test in a new temporary directory; `configure` sets its options on either backend.
pub async fn open(
    backend: Backend,
    configure: impl Fn(Builder) -> Builder + Send + Sync + 'static,
) -> TestDb {
    let tmp = Arc::new(tempfile::tempdir().expect("temp dir"));
    let dir = tmp.path().to_path_buf();
    try_open_with(backend, &dir, Arc::new(configure), Some(tmp))
        .await
        .expect("open the test database")
}

/// Opens a database for a test in `dir` (which the caller keeps): `<dir>/db.db`.
pub async fn open_in(
    backend: Backend,
    dir: &Path,
    configure: impl Fn(Builder) -> Builder + Send + Sync + 'static,
) -> TestDb {
    try_open_in(backend, dir, configure)
        .await
        .expect("open the test database")
}

/// [`open_in`], returning the error of an open that fails (on a registry, that of its `get`).
pub async fn try_open_in(
    backend: Backend,
    dir: &Path,
    configure: impl Fn(Builder) -> Builder + Send + Sync + 'static,
) -> quicklite::Result<TestDb> {
    try_open_with(backend, dir, Arc::new(configure), None).await
}

async fn try_open_with(
    backend: Backend,
    dir: &Path,
    configure: Configure,
    tmp: Option<Arc<tempfile::TempDir>>,
) -> quicklite::Result<TestDb> {
    let path = dir.join(format!("{NAME}.db"));
    let (db, registry, neighbour) = match backend {
        Backend::Standalone => {
            let db = configure(Database::builder(&path)).open().await?;
            (db, None, None)
        }
        Backend::Registry => {
            let f = configure.clone();
            let registry = Registry::builder(dir)
                .threads(REGISTRY_THREADS)
                // One open database: every request to the neighbour closes the test database's connections, and
                // its next request reopens them.
                .max_open(1)
                // A registry's own defaults (one reader, shorter queues) put back to a standalone database's, so
                // that a test's options mean the same on both backends.
                .configure(move |b| {
                    f(b.readers(standalone_readers())
                        .write_queue_capacity(1024)
                        .read_queue_capacity(4096))
                })
                .open()
                .await?;
            let db = match registry.get(NAME).await {
                Ok(db) => db,
                Err(e) => {
                    registry.close().await.expect("close the registry");
                    return Err(e);
                }
            };
            // Opening the neighbour closes the test database at once: the test's first request reopens it.
            let neighbour = registry.get(NEIGHBOUR).await?;
            let m = registry.metrics();
            assert_eq!((m.opens, m.evictions), (2, 1), "{m:?}");
            (db, Some(registry), Some(neighbour))
        }
    };
    Ok(TestDb {
        db,
        env: Env {
            backend,
            dir: dir.to_path_buf(),
            path,
            configure,
            registry,
            neighbour,
            _tmp: tmp,
        },
    })
}

/// Reader threads of a standalone database by default.
fn standalone_readers() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

impl TestDb {
    pub fn backend(&self) -> Backend {
        self.env.backend
    }

    /// The database file.
    pub fn path(&self) -> &Path {
        &self.env.path
    }

    /// See [`Env::evict`].
    pub async fn evict(&self) {
        self.env.evict().await
    }

    /// See [`Env::churn`].
    pub fn churn(&self) -> Churn {
        self.env.churn()
    }

    /// See [`Env::close`].
    pub async fn close(&self) {
        self.env.close(&self.db).await
    }

    /// See [`Env::reopen`].
    pub async fn reopen(&self) -> TestDb {
        self.env.reopen().await
    }
}

impl Env {
    /// Registry: closes the test database's connections (the neighbour opens, and at `max_open(1)` evicts it) so
    /// that its next request reopens them, and checks that it did. Call it after the test database served a
    /// request, with nothing else opening databases meanwhile. Standalone: nothing to do.
    pub async fn evict(&self) {
        let (Some(registry), Some(neighbour)) = (&self.registry, &self.neighbour) else {
            return;
        };
        let before = registry.metrics();
        // Opening databases reserve their place under the cap: it is never passed, even for a moment.
        assert!(before.open_databases <= 1, "over the cap: {before:?}");
        neighbour
            .write(|_| Ok(()))
            .await
            .expect("a write to the neighbour");
        let after = registry.metrics();
        assert_eq!(
            (after.opens, after.evictions),
            (before.opens + 1, before.evictions + 1),
            "the neighbour opened and evicted the test database: before {before:?}, after {after:?}"
        );
    }

    /// Registry: a task that writes to the neighbour again and again until [`Churn::stop`], each write closing the
    /// test database's connections if they are open (when it can: a busy database is closed between its tasks).
    /// Standalone: nothing.
    pub fn churn(&self) -> Churn {
        let stop = Arc::new(AtomicBool::new(false));
        let task = self.neighbour.clone().map(|neighbour| {
            let stop = stop.clone();
            tokio::spawn(async move {
                let mut writes = 0;
                while !stop.load(Ordering::SeqCst) {
                    // Its result does not matter (under an injected disk failure it fails too): the open does.
                    let _ = neighbour.write(|_| Ok(())).await;
                    writes += 1;
                    tokio::task::yield_now().await;
                }
                writes
            })
        });
        Churn {
            stop,
            task,
            registry: self.registry.clone(),
        }
    }

    /// The registry's figures (registry backend).
    pub fn registry_metrics(&self) -> Option<RegistryMetrics> {
        self.registry.as_ref().map(Registry::metrics)
    }

    /// A second handle to the database: another `get` of the registry, or another standalone open of the file.
    pub async fn handle(&self) -> Database {
        match &self.registry {
            Some(registry) => registry.get(NAME).await.expect("get the test database"),
            None => (self.configure)(Database::builder(&self.path))
                .open()
                .await
                .expect("open the test database again"),
        }
    }

    /// Closes the database for good (registry: the whole registry, which closes it), and checks, on a registry,
    /// that the test database was reopened at least once after the neighbour closed it.
    pub async fn close(&self, db: &Database) {
        match &self.registry {
            None => db.close().await.expect("close the database"),
            Some(registry) => {
                let m = registry.metrics();
                println!("registry: {m:?}");
                // The test database and the neighbour opened, then the test database again (its first request
                // after the neighbour evicted it).
                assert!(m.opens >= 3, "the test database never reopened: {m:?}");
                registry.close().await.expect("close the registry");
            }
        }
    }

    /// Opens the same database again, through the same backend with the same options (after [`Env::close`]).
    pub async fn reopen(&self) -> TestDb {
        try_open_with(
            self.backend,
            &self.dir,
            self.configure.clone(),
            self._tmp.clone(),
        )
        .await
        .expect("reopen the test database")
    }
}

/// The neighbour's writes of [`Env::churn`].
pub struct Churn {
    stop: Arc<AtomicBool>,
    task: Option<tokio::task::JoinHandle<u64>>,
    registry: Option<Registry>,
}

impl Churn {
    /// Stops the neighbour's writes; returns how many there were (0 on a standalone database).
    pub async fn stop(self) -> u64 {
        self.stop.store(true, Ordering::SeqCst);
        let writes = match self.task {
            Some(task) => task.await.expect("churn task"),
            None => 0,
        };
        if let Some(registry) = &self.registry {
            println!("churn: {writes} neighbour writes; {:?}", registry.metrics());
        }
        writes
    }
}
