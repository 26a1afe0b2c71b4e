//! Options for opening a [`Database`].

use std::path::Path;
use std::time::Duration;

use std::sync::Arc;

use rusqlite::{Connection, OpenFlags};

use crate::config::{
    AppHooks, BoxError, Checkpointing, Config, ConnectionRole, DEFAULT_HELD_TRANSACTION_LIMIT,
    Migration, QueueFull, Settings,
};
use crate::replica::Replica;
use crate::{Acknowledge, Database, Profile, Result};

/// The default of [`Builder::wal_size_warning`].
const DEFAULT_WAL_SIZE_WARNING: u64 = 1 << 30;

/// The default of [`Builder::inline_read_max`].
const DEFAULT_INLINE_READ_MAX: Duration = Duration::from_micros(50);
const DEFAULT_INLINE_WRITE_MAX: Duration = Duration::from_micros(100);

/// Builds a [`Database`] with non-default options. Made by [`Database::builder`].
///
/// ```no_run
/// # async fn f() -> quicklite::Result<()> {
/// use quicklite::{Database, Profile, QueueFull};
/// let db = Database::builder("app.db")
///     .profile(Profile::Durable)
///     .readers(4)
///     .pragma("cache_size", "-64000")
///     .on_full(QueueFull::Fail)
///     .open()
///     .await?;
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
#[must_use = "a builder does nothing until `open` is awaited"]
pub struct Builder {
    /// What the setters were told; checked, and what depends on other settings filled in, when the database
    /// opens ([`Config::from_settings`]).
    settings: Settings,
}

impl Database {
    /// Opens (creating if needed) the database at `path` with the [`Profile::Server`] PRAGMAs and default options.
    pub async fn open(path: impl AsRef<Path>) -> Result<Database> {
        Builder::new(path.as_ref()).open().await
    }

    /// Opens a database in a new temporary directory, removed once the last handle is dropped
    /// ([`Builder::temporary`]): for tests.
    pub async fn temporary() -> Result<Database> {
        Builder::temporary().open().await
    }

    /// Starts a [`Builder`] for the database at `path`.
    pub fn builder(path: impl AsRef<Path>) -> Builder {
        Builder::new(path.as_ref())
    }
}

impl Builder {
    pub(crate) fn new(path: &Path) -> Self {
        Builder {
            settings: Settings {
                path: path.to_path_buf(),
                profile: Profile::Server,
                readers: None,
                read_thread_nice: 0,
                overrides: Vec::new(),
                busy_timeout: None,
                write_lock_wait: None,
                held_transaction_limit: DEFAULT_HELD_TRANSACTION_LIMIT,
                open_flags: OpenFlags::SQLITE_OPEN_READ_WRITE
                    | OpenFlags::SQLITE_OPEN_CREATE
                    | OpenFlags::SQLITE_OPEN_URI
                    | OpenFlags::SQLITE_OPEN_NO_MUTEX,
                write_queue_capacity: 1024,
                read_queue_capacity: 4096,
                on_full: QueueFull::Wait,
                write_batch_max: 256,
                write_linger: Duration::ZERO,
                read_batch_max: 256,
                read_snapshot_max_age: Duration::from_millis(20),
                inline_reads: true,
                inline_read_closures: false,
                inline_read_max: DEFAULT_INLINE_READ_MAX,
                inline_writes: true,
                inline_write_closures: false,
                inline_write_max: DEFAULT_INLINE_WRITE_MAX,
                subscription_capacity: crate::changes::DEFAULT_CAPACITY,
                change_rowids: crate::changes::DEFAULT_ROWIDS,
                external_commits: None,
                feed_tables: None,
                feed_retention: crate::feed::Retention {
                    max_age: Some(crate::feed::DEFAULT_MAX_AGE),
                    max_changes: Some(crate::feed::DEFAULT_MAX_CHANGES),
                },
                inline_connections: None,
                statement_cache_capacity: 128,
                checkpointing: None,
                slow_statement: None,
                log_statement_parameters: false,
                stable_query_plans: None,
                hooks: AppHooks::default(),
                temporary: false,
                key: None,
                read_timeout: None,
                write_timeout: None,
                wal_size_warning: Some(DEFAULT_WAL_SIZE_WARNING),
                replica: None,
                replicated_acks: None,
                wal_reset_bug_allowed: false,
            },
        }
    }

    /// The PRAGMA profile. By default, [`Profile::Server`].
    pub fn profile(mut self, profile: Profile) -> Self {
        self.settings.profile = profile;
        self
    }

    /// Number of reader threads, each with its own read-only connection. By default, the number of available cores.
    ///
    /// A registry's database has no threads of its own: there this is how many of its read tasks run at once on
    /// the registry's read threads, each on a reader connection of its own (opened while its writer's connection is
    /// busy, within [`RegistryBuilder::max_reader_connections`](crate::RegistryBuilder::max_reader_connections));
    /// 1 unless [`RegistryBuilder::configure`](crate::RegistryBuilder::configure) sets it.
    pub fn readers(mut self, n: usize) -> Self {
        self.settings.readers = Some(n);
        self
    }

    /// How many steps of CPU priority (nice values, on Linux; elsewhere ignored) the reader threads run below the
    /// writer thread, which keeps the priority of the thread that opened the database. By default 0: alike. With a
    /// few steps, a writer that wakes while reads keep every core busy gets a core sooner, and the reads give up some
    /// of their throughput for it. A registry's read threads serve all its databases and take
    /// [`RegistryBuilder::read_thread_nice`](crate::RegistryBuilder::read_thread_nice) instead.
    pub fn read_thread_nice(mut self, nice: u8) -> Self {
        self.settings.read_thread_nice = nice;
        self
    }

    /// Sets any PRAGMA on every connection (database-wide ones such as `journal_mode` once, on the writer),
    /// replacing the profile's value if it has one. Applied in the order given, after the profile's.
    /// By default, only the profile's PRAGMAs.
    pub fn pragma(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.settings.overrides.push((name.into(), value.into()));
        self
    }

    /// How long a connection waits for a lock held by another process before `SQLITE_BUSY`. A write's wait for
    /// the write lock itself is [`Builder::write_lock_wait`].
    /// By default, the profile's (5 s for `Server` and `Durable`; rusqlite's 5 s for `SqliteDefault`).
    pub fn busy_timeout(mut self, timeout: Duration) -> Self {
        self.settings.busy_timeout = Some(timeout);
        self
    }

    /// How long a write without a deadline waits for the database's write lock while another connection holds it —
    /// another process, such as Litestream, which holds it around each of its checkpoints (for 5 s and more while it
    /// watched 3,000 databases on a busy machine), or another program writing the file. A write still waiting then
    /// fails with [`Error::WriteLockHeld`](crate::Error::WriteLockHeld), which names the process that held the lock
    /// when the system tells; it did not run. A write with a deadline ([`Builder::write_timeout`],
    /// [`Database::with_timeout`], [`Database::write_with_timeout`]) waits up to its deadline instead, and then fails
    /// with [`Error::Timeout`](crate::Error::Timeout). The writer waits on its own thread (a registry's: on a thread of
    /// its pool), and the database's other writes wait behind it. By default 30 s, or the busy timeout if that is
    /// longer.
    pub fn write_lock_wait(mut self, wait: Duration) -> Self {
        self.settings.write_lock_wait = Some(wait);
        self
    }

    /// How long a transaction held across `.await` ([`Database::begin`]) may keep the writer, from its `BEGIN`:
    /// past it, the writer rolls it back and serves the database's other writes again, and the transaction's next
    /// statement (or its commit) fails with [`Error::TransactionExpired`](crate::Error::TransactionExpired).
    /// [`Database::begin_with_limit`] gives one transaction a limit of its own instead. Every write of the
    /// database waits while such a transaction is open, so the limit is how long a caller that forgot its
    /// transaction (or awaits something that never answers) can stop the database's writes.
    ///
    /// By default 5 s: the busy timeout SQLite's users already budget for, as writes wait for another
    /// connection's write lock. A registry's databases take it from
    /// [`RegistryBuilder::configure`](crate::RegistryBuilder::configure). Zero is refused.
    pub fn held_transaction_limit(mut self, limit: Duration) -> Self {
        self.settings.held_transaction_limit = limit;
        self
    }

    /// Open flags of the writer's connection; readers use `READ_ONLY | URI` and the same mutex flag.
    /// By default, `READ_WRITE | CREATE | URI | NO_MUTEX`: every connection belongs to one thread, so SQLite's
    /// per-connection mutex (serialized mode) would only cost time.
    pub fn open_flags(mut self, flags: OpenFlags) -> Self {
        self.settings.open_flags = flags;
        self
    }

    /// Maximum number of write requests waiting for the writer. By default, 1024.
    pub fn write_queue_capacity(mut self, n: usize) -> Self {
        self.settings.write_queue_capacity = n;
        self
    }

    /// Maximum number of read requests waiting for a reader. By default, 4096.
    pub fn read_queue_capacity(mut self, n: usize) -> Self {
        self.settings.read_queue_capacity = n;
        self
    }

    /// What a request does when its queue is full. By default, [`QueueFull::Wait`].
    pub fn on_full(mut self, on_full: QueueFull) -> Self {
        self.settings.on_full = on_full;
        self
    }

    /// Maximum number of writes committed together in one transaction. By default, 256.
    /// `1` turns group commit off (one transaction per write).
    pub fn write_batch_max(mut self, n: usize) -> Self {
        self.settings.write_batch_max = n;
        self
    }

    /// How long the writer waits for more writes to join a group before committing it.
    /// By default, zero: the writer commits what is queued at once and never waits for stragglers; a group forms
    /// by itself while the previous one commits.
    pub fn write_linger(mut self, linger: Duration) -> Self {
        self.settings.write_linger = linger;
        self
    }

    /// Maximum number of reads served inside one read transaction. By default, 256. `1` turns read batching off.
    pub fn read_batch_max(mut self, n: usize) -> Self {
        self.settings.read_batch_max = n;
        self
    }

    /// Maximum age of a reader's snapshot: a reader that has been serving queued reads in one read transaction for
    /// this long ends it and starts another, so that a long stream of reads neither sees stale data nor holds the
    /// WAL back from checkpointing. By default, 20 ms.
    pub fn read_snapshot_max_age(mut self, age: Duration) -> Self {
        self.settings.read_snapshot_max_age = age;
        self
    }

    /// Whether short reads run on their callers' threads. By default, yes.
    ///
    /// Handing a read to a reader thread and its answer back costs more than a point read itself. So a read of the
    /// statement helpers ([`Database::query_row`], [`Database::query_all`], the typed rows) whose call site (the
    /// helper's row mapper's type and its SQL) has recently run within [`Builder::inline_read_max`] runs on the
    /// thread that polls it, without a hand-off, on one of a few read-only connections of the database's own
    /// ([`Builder::inline_connections`]), inside a snapshot kept from one read to the next while no write commits.
    /// Read closures ([`Database::read`]) run there only if [`Builder::inline_read_closures`] says they may.
    /// Right after a commit, which makes SQLite throw those connections' page caches away, a standalone
    /// database's statement reads run on its writer's connection instead while the writer waits for work (its
    /// cache stays warm across its own commits); it commits nothing there (a statement that writes fails the read
    /// with `SQLITE_READONLY`, rolled back), and keeps the writer's settings (a PRAGMA that would change them is
    /// refused with `SQLITE_AUTH`). The first reads of a call site, and reads of one that ran long, go to the
    /// reader threads as before; so do reads while every such connection is busy, and every read while another
    /// connection contends with the writer for the write lock (another process committing to the file): the
    /// runtime's threads then stay free for the callers of writes, whose next writes must reach the writer before
    /// that connection takes the lock again.
    ///
    /// Only where the async runtime can go on without the thread: a task on tokio's multi-threaded runtime. A read
    /// there that turns long — a call site whose cost depends on its parameters — hands the runtime's worker to
    /// another thread once it has run a millisecond (as `tokio::task::block_in_place` does) and goes on, and a
    /// write that needs the writer's connection back waits for such a read at most a millisecond (the writer
    /// writes on a second connection of its own meanwhile). On a single-threaded runtime, or another executor,
    /// reads go to the reader threads. The guarantees are the reader threads': a read sees every write
    /// acknowledged before it was made, and deadlines, `query_only`, panics, the set-up hook and the metrics
    /// behave the same. Such a read yields once to the runtime before it runs, so a task reading in a loop takes
    /// turns with the others as if it awaited a reader thread. A helper's row mapper runs where the read runs: it
    /// must not block on the runtime (tokio's `blocking_send`, `block_on`).
    ///
    /// Turn it off for a database whose reads must never run on the caller's thread (a runtime whose threads must
    /// not touch the disk at all, say).
    pub fn inline_reads(mut self, yes: bool) -> Self {
        self.settings.inline_reads = yes;
        self
    }

    /// Whether read closures ([`Database::read`], [`Database::read_with_timeout`]) may run on their callers'
    /// threads too, as the statement helpers' reads do ([`Builder::inline_reads`]). By default, no: a closure may
    /// do what is correct on a reader thread and not on an async runtime's — block on the runtime (tokio's
    /// `blocking_send`, `Handle::block_on`, a blocking HTTP client), or work long between two statements, where no
    /// bound can see it. Say yes for closures that only read through the connection they are given: they then run
    /// inline when short, on the database's own read-only connections (never on the writer's).
    pub fn inline_read_closures(mut self, yes: bool) -> Self {
        self.settings.inline_read_closures = yes;
        self
    }

    /// Whether short writes run on their callers' threads while the writer waits for work. By default, yes.
    ///
    /// Handing a write to the writer thread and its answer back costs more than a small write itself. Group commit
    /// repays the hand-off when writes come together; a write that finds the writer idle — nothing queued, the
    /// writer waiting for work — has no one to share its commit with. So a write of the statement helpers
    /// ([`Database::execute`], [`Database::execute_many`], [`Database::execute_batch`]) whose call site has lately
    /// run short runs on the thread that polls it, on the writer's own connection, in a transaction of its own
    /// (`BEGIN IMMEDIATE` … `COMMIT`), with every promise it has on the writer's thread: answered once its
    /// `COMMIT` returned, rolled back alone if it fails, read-your-writes, its commit told to subscribers, its
    /// deadline. Write closures ([`Database::write`]) run there only if [`Builder::inline_write_closures`] says
    /// they may. The writer takes over as soon as a second write comes (group commit as before): one that finds
    /// the writer's connection in use is queued.
    ///
    /// Only where the commit is short and bounded: WAL at `synchronous=NORMAL` or `OFF` (no fsync in it), the
    /// managed checkpoints or none (SQLite's automatic checkpoint runs inside the commit that crosses its
    /// threshold), no [`Builder::write_linger`], a standalone database (a registry's writers run on its pool), reads
    /// on callers' threads on ([`Builder::inline_reads`]: the writer lends its connection to both), a task on
    /// tokio's multi-threaded runtime, and never while another connection contends for the write lock. A write
    /// that would find a checkpoint due goes to the writer, which runs it after the write's answer, as always. The
    /// first writes of a call site, and writes of one that ran long, go to the writer too; a write that turns long
    /// on its caller's thread hands the runtime's worker to another thread after a millisecond, as a read does.
    pub fn inline_writes(mut self, yes: bool) -> Self {
        self.settings.inline_writes = yes;
        self
    }

    /// Whether write closures ([`Database::write`]) may run on their callers' threads too, as the statement
    /// helpers' writes do ([`Builder::inline_writes`]). By default, no, for the reasons read closures do not
    /// ([`Builder::inline_read_closures`]): a closure may block on the runtime or work long between two statements.
    pub fn inline_write_closures(mut self, yes: bool) -> Self {
        self.settings.inline_write_closures = yes;
        self
    }

    /// How long a call site's writes may have taken lately, on average, and still run on their callers' threads
    /// ([`Builder::inline_writes`]): on the writer's thread, what its closure or statement took; on its caller's
    /// thread, its whole transaction. By default, 100 µs: a small write and its commit several times over, within
    /// what an async task may run between two awaits. A write holds the write lock, and there the runtime's
    /// worker, for as long as it runs; a site that ran long goes to the writer until its runs there show it short
    /// again.
    pub fn inline_write_max(mut self, max: Duration) -> Self {
        self.settings.inline_write_max = max;
        self
    }

    /// How long a call site's reads may have taken lately, on average, and still run on their callers' threads
    /// ([`Builder::inline_reads`]). By default, 50 µs: within what an async task may run between two awaits, and
    /// what a point read takes on a thread that was idle a moment before (its caches cold) as well as a warm one's
    /// several times over. A read that ran long on its caller's thread raises its call site's average, so that the
    /// next reads go to the reader threads until runs there bring it down, or a read tried on its caller's thread now
    /// and then shows it short again (a run on a reader thread costs more than the same read on a caller's thread);
    /// one that ran there several times over this bound, and longer than a thread the system preempted waits for its
    /// core again, keeps the site on the reader threads for a while.
    pub fn inline_read_max(mut self, max: Duration) -> Self {
        self.settings.inline_read_max = max;
        self
    }

    /// Read-only connections for reads on callers' threads ([`Builder::inline_reads`]), opened as they are first
    /// needed. By default, the number of CPUs: reads run on as many threads at once as there are CPUs.
    pub fn inline_connections(mut self, n: usize) -> Self {
        self.settings.inline_connections = Some(n);
        self
    }

    /// Notices each subscriber ([`Database::subscribe`]) may hold before it falls behind: one that has not taken
    /// them by then is told [`Notice::Lagged`](crate::Notice::Lagged) with how many it missed, instead of holding
    /// memory without bound. By default, 1024.
    pub fn subscription_capacity(mut self, n: usize) -> Self {
        self.settings.subscription_capacity = n.max(1);
        self
    }

    /// Rowids a change notice lists per table ([`TableChange::rowids`](crate::TableChange::rowids)); a table with
    /// more changed rows in one commit is listed without them. 0 lists tables only. By default, 100.
    pub fn change_rowids(mut self, n: usize) -> Self {
        self.settings.change_rowids = n;
        self
    }

    /// Looks for commits made to the file from outside this database — by other processes, or by connections it
    /// does not own — every `interval`, and tells subscribers ([`Database::subscribe`]) of those it finds with one
    /// [`Notice::External`](crate::Notice::External) per look that found any. By default, it does not look.
    ///
    /// The writer looks, on its own connection (`PRAGMA data_version`, which changes with every commit but the
    /// connection's own): when idle, every `interval`; when busy, after a group once `interval` has passed. A
    /// registry's database looks at its registry's housekeeping, and while it has subscribers it is not closed
    /// when idle; one closed to make room for others cannot tell what happened while it was closed, so when it
    /// reopens its subscribers are told [`Notice::External`](crate::Notice::External) at once.
    pub fn notice_external_commits(mut self, interval: Duration) -> Self {
        self.settings.external_commits = Some(interval);
        self
    }

    /// Records every committed change of `tables` in the database's change feed, read with
    /// [`Database::changes_since`]: the row's values before and after, in commit order, in the same transaction as
    /// the change — whichever process or connection makes it. Triggers record them (`AFTER INSERT`, `UPDATE` and
    /// `DELETE` on each table, named `_quicklite_feed_<op>_<table>`) into the table `_quicklite_changes`. By
    /// default, no feed (and a feed another process set up is left as it is).
    ///
    /// The triggers are made when the writer first opens the database, after the migration
    /// ([`Builder::migrate`]), from the tables' columns as they are then, and made again at an open that finds the
    /// columns changed (a table left out of `tables` loses its triggers); the feed's tables are made if missing.
    /// While the migration runs, the triggers of the last open are in place, so the rows it changes are recorded;
    /// a migration that drops a column of a recorded table (which SQLite refuses while a trigger names it) drops
    /// the table's triggers first (`DROP TRIGGER IF EXISTS "_quicklite_feed_update_<table>"`, and the same for
    /// `insert` and `delete`). Columns added later outside a migration are recorded from the next open on.
    ///
    /// Each table must exist when the database opens (create it in the migration) and have a rowid: a view, a
    /// virtual table or a table `WITHOUT ROWID` fails the open with [`Error::FeedTable`](crate::Error::FeedTable).
    /// The feed turns on [`Builder::notice_external_commits`] (every 500 ms unless set), so that its readers wake
    /// for the changes other processes record.
    pub fn change_feed<I, S>(mut self, tables: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.settings.feed_tables = Some(tables.into_iter().map(Into::into).collect());
        self
    }

    /// Changes older than this are deleted from the change feed ([`Builder::change_feed`]); `None` keeps them
    /// whatever their age. The writer prunes now and then (at its first turn after it opens, then every few seconds), a
    /// bounded number at a time; [`Database::prune_change_feed`] prunes at once. A reader whose cursor was pruned
    /// gets [`Error::CursorPruned`](crate::Error::CursorPruned), never a gap. By default, 7 days.
    pub fn change_feed_max_age(mut self, age: Option<Duration>) -> Self {
        self.settings.feed_retention.max_age = age;
        self
    }

    /// Changes beyond this many, the oldest first, are deleted from the change feed, as
    /// [`Builder::change_feed_max_age`] says. `None` keeps them however many. By default, 1,000,000.
    pub fn change_feed_max_changes(mut self, changes: Option<u64>) -> Self {
        self.settings.feed_retention.max_changes = changes;
        self
    }

    /// Prepared statements kept per connection (`prepare_cached`). By default, 128.
    pub fn statement_cache_capacity(mut self, n: usize) -> Self {
        self.settings.statement_cache_capacity = n;
        self
    }

    /// Who checkpoints the WAL into the database file. By default, [`Checkpointing::managed`] for the `Server` and
    /// `Durable` profiles (the writer checkpoints after answering its callers, and truncates the WAL when idle),
    /// and [`Checkpointing::Sqlite`] for `SqliteDefault`. [`Checkpointing::External`] hands checkpoints to another
    /// tool, such as Litestream.
    pub fn checkpointing(mut self, checkpointing: Checkpointing) -> Self {
        self.settings.checkpointing = Some(checkpointing);
        self
    }

    /// Statements that run at least this long are logged through `tracing` (a `WARN` event with target
    /// `quicklite::slow_statement`, the SQL text and the duration), using SQLite's profiling hook, which measures
    /// to the millisecond. `None` installs no hook. By default, `None`: with the hook SQLite reads the clock twice
    /// per statement, a measurable cost on point reads (docs/design.md). `Some(Duration::from_millis(100))` is a
    /// reasonable production value.
    pub fn slow_statement_threshold(mut self, threshold: Option<Duration>) -> Self {
        self.settings.slow_statement = threshold;
        self
    }

    /// Whether slow statements are logged with their bound parameters (SQLite's expanded SQL) instead of the SQL
    /// text with placeholders. By default, `false`: parameters often carry personal data.
    pub fn log_statement_parameters(mut self, yes: bool) -> Self {
        self.settings.log_statement_parameters = yes;
        self
    }

    /// Whether every connection turns on SQLite's query planner stability guarantee
    /// (`SQLITE_DBCONFIG_ENABLE_QPSG`): a statement keeps one plan whatever values are bound to it.
    ///
    /// Without it, a SQLite built with `SQLITE_ENABLE_STAT4` (rusqlite's bundled build is) may mark a cached statement
    /// to be re-prepared — parsed and planned again — every time a parameter in its `WHERE` clause gets a new value,
    /// which makes each read of such a statement several times slower (the lab's `multi-db` join, docs/design.md). A
    /// server that caches its statements wants the plan kept. By default, on for `Server` and `Durable`, untouched for
    /// `SqliteDefault`.
    pub fn stable_query_plans(mut self, yes: bool) -> Self {
        self.settings.stable_query_plans = Some(yes);
        self
    }

    /// Encrypts the database with SQLCipher: `key` is given to every connection the database opens (the writer,
    /// the readers, the checkpointer, a backup's source and its copy) as its first statement, before the
    /// PRAGMAs — a passphrase, or a raw key written `"x'…'"` as SQLCipher's `PRAGMA key` takes it. A wrong key
    /// fails the open (`SQLITE_NOTADB`: the file does not decrypt to a database). Backups and `vacuum_into` copies
    /// are encrypted with the same key. By default, none (only with the `sqlcipher` feature).
    #[cfg(feature = "sqlcipher")]
    pub fn key(mut self, key: impl Into<String>) -> Self {
        self.settings.key = Some(crate::config::Key::new(key.into()));
        self
    }

    /// How long every read may take, waiting in the queue and running, before it fails with
    /// [`Error::Timeout`](crate::Error::Timeout). A runaway statement is interrupted; only its read fails. A ceiling: a
    /// read given a longer timeout ([`Database::read_with_timeout`], [`Database::with_timeout`]) still fails after this
    /// one, a shorter one wins. By default, none.
    pub fn read_timeout(mut self, timeout: Option<Duration>) -> Self {
        self.settings.read_timeout = timeout;
        self
    }

    /// How long every grouped write ([`Database::write`], [`Database::execute`], [`Database::execute_many`],
    /// [`Database::execute_batch`], [`Database::write_and_then`]) may wait in the queue: one that has not started by
    /// then fails with [`Error::Timeout`](crate::Error::Timeout) and never runs, so a backlog sheds the writes nobody
    /// waits for any more. One that has started runs to its end and commits with its group: interrupting it would roll
    /// its whole group back (SQLite rolls back the transaction of an interrupted writing statement). To bound a running
    /// write too, use [`Database::write_with_timeout`], which runs alone. A ceiling on the timeouts given to writes
    /// ([`Database::write_with_timeout`], [`Database::with_timeout`]); a write that runs alone without one has no
    /// deadline from this setting. By default, none.
    pub fn write_timeout(mut self, timeout: Option<Duration>) -> Self {
        self.settings.write_timeout = timeout;
        self
    }

    /// The WAL size, in bytes, past which the writer logs a warning and counts it
    /// ([`MetricsSnapshot::wal_size_warnings`](crate::MetricsSnapshot::wal_size_warnings)); once more each time the
    /// WAL has shrunk below half of it and grows past it again. Under [`Checkpointing::External`] nothing in
    /// quicklite bounds the WAL: a WAL this large most likely means the tool that owns checkpoints (Litestream) is
    /// not running. By default 1 GiB (Litestream itself truncates the WAL at about 500 MB); `None` never warns.
    pub fn wal_size_warning(mut self, bytes: Option<u64>) -> Self {
        self.settings.wal_size_warning = bytes;
        self
    }

    /// Whether the database opens on a SQLite that has the WAL-reset bug
    /// ([`has_wal_reset_bug`](crate::setup::has_wal_reset_bug): SQLite 3.7.0 to 3.51.2, but for 3.44.6 and later of
    /// 3.44 and 3.50.7 and later of 3.50). The bug is a data race between a checkpoint and another connection's commit
    /// that resets the WAL, which can corrupt the database or lose committed writes
    /// (<https://sqlite.org/wal.html#walresetbug>); it needs WAL mode, several connections to one database and
    /// checkpoints — how quicklite runs every database, whatever its profile (a file once in WAL mode stays in it).
    ///
    /// By default, `false`: opening fails with [`Error::WalResetBug`](crate::Error::WalResetBug) and nothing is opened,
    /// because the damage is silent until the data is read back and cannot be undone, while the remedy is to link a
    /// fixed SQLite (rusqlite's `bundled` feature, which quicklite turns on, brings one; a program that links the
    /// system's SQLite instead may get an older one). `true` opens anyway, for a program that cannot change its SQLite
    /// yet and accepts the risk. For a registry's databases, set it in
    /// [`RegistryBuilder::configure`](crate::RegistryBuilder::configure).
    pub fn allow_wal_reset_bug(mut self, allow: bool) -> Self {
        self.settings.wal_reset_bug_allowed = allow;
        self
    }

    /// Opens a read replica: the database is read from `replica` (the copy Litestream keeps of a primary in object
    /// storage) instead of a local file, and `path` only names it. A replica reads through one connection, which polls
    /// object storage for new transactions (each connection through Litestream's VFS polls on its own): one thread
    /// serves the queued reads on it, and lends it to reads on callers' threads while it waits; [`Builder::readers`]
    /// beyond one is refused, and [`Builder::inline_connections`] does not apply. Every write fails with
    /// [`Error::ReadOnlyReplica`](crate::Error::ReadOnlyReplica) without running. [`Database::replica_status`] tells
    /// how far a replica has read, and [`Database::read_at_least`] waits for a position the primary reached
    /// ([`Litestream::sync`](crate::litestream::Litestream::sync)). A replica has no migration, no key and no
    /// checkpoints (it has no WAL); a registry's databases cannot be replicas. By default, a database is its local
    /// file.
    pub fn replica(mut self, replica: Replica) -> Self {
        self.settings.replica = Some(replica);
        self
    }

    /// When a write is answered: at its local commit ([`Acknowledge::Committed`], the default), or once object
    /// storage holds it ([`Acknowledge::Replicated`]), so that what a caller was told is saved survives the machine.
    ///
    /// Under [`Acknowledge::Replicated`] the writer commits locally as usual and goes on committing; each committed
    /// write's answer waits until Litestream — which must replicate the file, and listen on the socket given — has
    /// uploaded a transaction that holds it, and one upload answers every write committed before it began. Reads on
    /// this machine see a write from its local commit on, before it is acknowledged, as do change notifications
    /// and the change feed; [`Database::until_replicated`] waits until object storage holds everything committed so
    /// far, for a service that gates its own outputs (a response built from what it read, a message it relays) on
    /// replication. While object storage is slow or out of reach, writes wait; one whose deadline
    /// ([`Builder::write_timeout`], [`Database::with_timeout`]) passes meanwhile fails with
    /// [`Error::NotReplicated`](crate::Error::NotReplicated): committed here, not lost, and not to be written again.
    /// The database's writes in flight — queued, or committed and waiting for their upload — are at most
    /// [`Builder::write_queue_capacity`]; past it, new writes wait or fail as [`Builder::on_full`] says. Writes
    /// never run on their callers' threads ([`Builder::inline_writes`]). For a registry's databases, set it in
    /// [`RegistryBuilder::configure`](crate::RegistryBuilder::configure): their uploads share one thread.
    pub fn acknowledge(mut self, acknowledge: Acknowledge) -> Self {
        self.settings.replicated_acks = match acknowledge {
            Acknowledge::Committed => None,
            Acknowledge::Replicated(litestream) => Some(litestream.socket_path().to_owned()),
        };
        self
    }

    /// Runs `f` on every connection the database opens — the writer, each reader, the checkpointer, a backup's
    /// source, and every connection a registry opens again after closing it — to register functions, collations,
    /// virtual tables or hooks, load extensions, or `ATTACH` other databases: what must hold on every connection.
    /// `f` is told which connection it prepares ([`ConnectionRole`]).
    ///
    /// It runs after the profile's PRAGMAs and before the handle installs its own authorizer, busy handler and tracing
    /// hooks, which replace any `f` set. Functions given by several calls run in order. If `f` fails, the connection is
    /// closed and the error comes back as [`Error::Setup`](crate::Error::Setup): an unusable writer fails the open. By
    /// default, none.
    pub fn on_connection<F, E>(mut self, f: F) -> Self
    where
        F: Fn(&mut Connection, ConnectionRole) -> std::result::Result<(), E>
            + Send
            + Sync
            + 'static,
        E: Into<BoxError>,
    {
        self.settings.hooks.setup.push(Arc::new(move |conn, role| {
            f(conn, role).map_err(Into::into)
        }));
        self
    }

    /// Runs `f` on the writer's connection when the database opens, before any reader opens and before any
    /// request is served (a registry's database: each time the registry first opens it): for schema migrations.
    /// `f` gets the connection itself (`&mut`), in autocommit mode, and may manage transactions; run a migration in
    /// one (`conn.transaction()`, as `rusqlite_migration` does) so that a failure leaves nothing applied. If `f`
    /// fails, or returns with a transaction open (rolled back), the database is not opened and the error comes
    /// back as [`Error::Setup`](crate::Error::Setup). By default, none.
    pub fn migrate<F, E>(mut self, f: F) -> Self
    where
        F: Fn(&mut Connection) -> std::result::Result<(), E> + Send + Sync + 'static,
        E: Into<BoxError>,
    {
        self.settings.hooks.migration = Some(Migration {
            name: std::any::type_name::<F>(),
            run: Arc::new(move |conn| f(conn).map_err(Into::into)),
        });
        self
    }

    /// Opens the database: runs the process set-up, opens the writer and the readers, and applies the PRAGMAs.
    pub async fn open(mut self) -> Result<Database> {
        let temporary = if self.settings.temporary {
            let dir = tempfile::Builder::new().prefix("quicklite-").tempdir()?;
            self.settings.path = dir.path().join("temporary.db");
            Some(dir)
        } else {
            None
        };
        let path = self.settings.path.clone();
        let config = Config::from_settings(self.settings)?;
        Database::start(path, config, temporary).await
    }

    /// A builder for a database in a new temporary directory, removed with everything in it once the last handle
    /// is dropped (after [`Database::close`], or in the background): the test database. It is a real file, so
    /// it has what a database opened by path has — WAL, group commit, readers that see the writer's commits.
    /// (SQLite's in-memory databases are private to one connection, or without WAL when shared, so the readers
    /// could not serve them.)
    pub fn temporary() -> Builder {
        let mut builder = Builder::new(Path::new(""));
        builder.settings.temporary = true;
        builder
    }

    /// What the setters were told, for [`Config::from_settings`] to check.
    pub(crate) fn into_settings(self) -> Settings {
        self.settings
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(b: Builder) -> Result<Config> {
        Config::from_settings(b.into_settings())
    }

    #[test]
    fn the_defaults_are_those_the_setters_state() {
        // The setters' docs give these defaults in words ("By default, …"); some come from constants used
        // elsewhere too, which a change must not make the docs contradict.
        let b = Builder::new(Path::new("x.db"));
        assert_eq!(b.settings.write_queue_capacity, 1024);
        assert_eq!(b.settings.read_queue_capacity, 4096);
        assert_eq!(b.settings.write_batch_max, 256);
        assert_eq!(b.settings.read_batch_max, 256);
        assert_eq!(b.settings.read_snapshot_max_age, Duration::from_millis(20));
        assert_eq!(b.settings.inline_read_max, Duration::from_micros(50));
        assert_eq!(b.settings.subscription_capacity, 1024);
        assert_eq!(b.settings.change_rowids, 100);
        assert_eq!(b.settings.statement_cache_capacity, 128);
        assert_eq!(b.settings.wal_size_warning, Some(1 << 30));
        assert!(!b.settings.wal_reset_bug_allowed);
        let lock_wait = |b: Builder| config(b).unwrap().write_lock_wait;
        assert_eq!(lock_wait(b), Duration::from_secs(30));
        let longer = Duration::from_secs(60);
        let b = Builder::new(Path::new("x.db"));
        assert_eq!(lock_wait(b.clone().busy_timeout(longer)), longer);
        let shorter = Duration::from_millis(200);
        assert_eq!(
            lock_wait(b.busy_timeout(longer).write_lock_wait(shorter)),
            shorter
        );
    }
}
