//! The validated settings of one database, and the public choices they are made of ([`QueueFull`],
//! [`Checkpointing`]). A leaf: a [`Builder`](crate::Builder) gathers [`Settings`], [`Config::from_settings`] checks
//! them into a [`Config`]; every other layer reads it.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use rusqlite::{Connection, OpenFlags};

use crate::feed::{FeedConfig, Retention};
use crate::replica::Replica;
use crate::wal_reset_bug::{has_wal_reset_bug, version_text};
use crate::{Error, Profile, Result};

/// The default of [`Builder::write_lock_wait`](crate::Builder::write_lock_wait) (unless the busy timeout is
/// longer): well past the longest the write lock was seen held by Litestream (3–5 s, 3,000 databases on two busy
/// cores), short enough that a writer stuck behind a program that never lets go tells its callers.
const DEFAULT_WRITE_LOCK_WAIT: Duration = Duration::from_secs(30);

/// The default of [`Builder::held_transaction_limit`](crate::Builder::held_transaction_limit): the busy timeout
/// SQLite's and rusqlite's users know, so the writes queued behind a transaction held across `.await` wait no
/// longer than they would wait for another connection's write lock.
pub(crate) const DEFAULT_HELD_TRANSACTION_LIMIT: Duration = Duration::from_secs(5);

/// How often the writer of a database with a change feed looks for commits from outside unless told
/// ([`Builder::notice_external_commits`](crate::Builder::notice_external_commits)): how soon a feed's readers in
/// this process see the changes another process recorded.
const FEED_LOOK_EVERY: Duration = Duration::from_millis(500);

/// An error returned by an application's function: a set-up function, a migration.
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// Which of a database's connections a set-up function ([`Builder::on_connection`](crate::Builder::on_connection))
/// is preparing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ConnectionRole {
    /// The read-write connection that runs every write, and reads while no write runs: short reads on their
    /// callers' threads ([`Builder::inline_reads`](crate::Builder::inline_reads)), and in a registry read batches.
    Writer,
    /// A read-only connection serving reads.
    Reader,
    /// The connection that runs `PASSIVE` checkpoints beside the writer (a standalone database, managed
    /// checkpoints).
    Checkpointer,
    /// The read-only source of [`Database::backup`](crate::Database::backup) and
    /// [`Database::vacuum_into`](crate::Database::vacuum_into).
    Backup,
}

impl ConnectionRole {
    /// The role's name, as errors and logs give it.
    pub fn name(self) -> &'static str {
        match self {
            ConnectionRole::Writer => "writer",
            ConnectionRole::Reader => "reader",
            ConnectionRole::Checkpointer => "checkpointer",
            ConnectionRole::Backup => "backup",
        }
    }
}

/// A SQLCipher key ([`Builder::key`](crate::Builder)), kept out of `Debug` output.
#[derive(Clone)]
pub(crate) struct Key(String);

impl std::fmt::Debug for Key {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Key(..)")
    }
}

impl Key {
    #[cfg(feature = "sqlcipher")]
    pub(crate) fn new(key: String) -> Key {
        Key(key)
    }

    /// Gives the key to `conn`: its first statement, before any page is read.
    pub(crate) fn apply(&self, conn: &Connection) -> Result<()> {
        conn.pragma_update(None, "key", &self.0)?;
        // Plain SQLite ignores `PRAGMA key`: make sure this one encrypts.
        let cipher: Option<String> = conn
            .query_row("PRAGMA cipher_version", [], |r| r.get(0))
            .map(Some)
            .or_else(|e| match e {
                rusqlite::Error::QueryReturnedNoRows => Ok(None),
                e => Err(e),
            })?;
        match cipher {
            Some(_) => Ok(()),
            None => Err(Error::InvalidConfig(
                "a key was given, but this SQLite cannot encrypt (build quicklite with its `sqlcipher` feature)".into(),
            )),
        }
    }
}

/// A set-up function, run on every connection the database opens.
pub(crate) type ConnectionSetup =
    Arc<dyn Fn(&mut Connection, ConnectionRole) -> std::result::Result<(), BoxError> + Send + Sync>;

/// A migration, run on the writer's connection when the database is first opened.
#[derive(Clone)]
pub(crate) struct Migration {
    /// The function the application gave, by its type's name (a closure's names where it was written).
    pub(crate) name: &'static str,
    pub(crate) run: Arc<MigrationFn>,
}

/// The function of a [`Migration`].
pub(crate) type MigrationFn =
    dyn Fn(&mut Connection) -> std::result::Result<(), BoxError> + Send + Sync;

/// The application's functions for a database's connections.
#[derive(Clone, Default)]
pub(crate) struct AppHooks {
    /// Run on every connection, in order, after the PRAGMAs.
    pub(crate) setup: Vec<ConnectionSetup>,
    /// Run once per open of the database, on the writer, before any reader opens.
    pub(crate) migration: Option<Migration>,
}

impl std::fmt::Debug for AppHooks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AppHooks")
            .field("setup", &self.setup.len())
            .field("migration", &self.migration.is_some())
            .finish()
    }
}

impl AppHooks {
    /// Runs the set-up functions on `conn`, a `role` connection.
    pub(crate) fn set_up(&self, conn: &mut Connection, role: ConnectionRole) -> Result<()> {
        for setup in &self.setup {
            setup(conn, role).map_err(|e| Error::Setup {
                stage: "connection set-up",
                connection: role.name(),
                message: e.to_string(),
            })?;
        }
        Ok(())
    }
}

/// What a request does when its queue is full.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum QueueFull {
    /// Wait (asynchronously) for room. Memory stays bounded; callers slow down to the database's pace. Waiting
    /// callers get room in the order they came.
    #[default]
    Wait,
    /// Fail at once with [`Error::Overloaded`], so a service can shed load (e.g. answer 503) instead of queueing.
    Fail,
}

/// Validated settings, shared by the threads of one database.
#[derive(Debug, Clone)]
pub(crate) struct Config {
    pub(crate) profile: Profile,
    pub(crate) readers: usize,
    /// CPU priority steps of the reader threads below the writer's.
    pub(crate) read_thread_nice: u8,
    /// The profile's PRAGMAs with the overrides applied, in application order.
    pub(crate) pragmas: Vec<(String, String)>,
    pub(crate) open_flags: OpenFlags,
    pub(crate) write_queue_capacity: usize,
    pub(crate) read_queue_capacity: usize,
    pub(crate) on_full: QueueFull,
    pub(crate) write_batch_max: usize,
    pub(crate) write_linger: Duration,
    pub(crate) read_batch_max: usize,
    pub(crate) read_snapshot_max_age: Duration,
    /// Whether short reads run on their callers' threads.
    pub(crate) inline_reads: bool,
    /// Whether read closures, not only the statement helpers' reads, may run on their callers' threads.
    pub(crate) inline_read_closures: bool,
    /// The longest recent average cost of a call site whose reads run on their callers' threads.
    pub(crate) inline_read_max: Duration,
    /// Whether short writes run on their callers' threads while the writer waits for work.
    pub(crate) inline_writes: bool,
    /// Whether write closures, not only the statement helpers' writes, may run on their callers' threads.
    pub(crate) inline_write_closures: bool,
    /// The longest recent average cost of a call site whose writes run on their callers' threads.
    pub(crate) inline_write_max: Duration,
    /// Connections for reads on callers' threads.
    pub(crate) inline_connections: usize,
    /// Notices each subscriber may hold before it lags.
    pub(crate) subscription_capacity: usize,
    /// Rowids a notice lists per table.
    pub(crate) change_rowids: usize,
    /// How often the writer looks for commits made from outside, if it does.
    pub(crate) external_commits: Option<Duration>,
    /// The tables whose changes the change feed records, and its retention; `None`: the feed is left as it is.
    pub(crate) feed: Option<FeedConfig>,
    pub(crate) statement_cache_capacity: usize,
    pub(crate) checkpointing: Checkpointing,
    /// Statements running at least this long are logged; `None` installs no profiling hook.
    pub(crate) slow_statement: Option<Duration>,
    pub(crate) log_statement_parameters: bool,
    /// The busy timeout the PRAGMAs ask for, which the busy handler enforces.
    pub(crate) busy_timeout: Duration,
    /// How long a write without a deadline waits for the write lock another connection holds.
    pub(crate) write_lock_wait: Duration,
    /// How long a transaction held across `.await` may keep the writer, unless it asks for another limit.
    pub(crate) held_transaction_limit: Duration,
    /// Whether connections turn on SQLite's query planner stability guarantee.
    pub(crate) stable_query_plans: bool,
    /// The application's set-up functions and migration.
    pub(crate) hooks: AppHooks,
    /// The SQLCipher key, given to every connection first.
    pub(crate) key: Option<Key>,
    /// How long a read may take, queued and running, before it fails with `Error::Timeout`.
    pub(crate) read_timeout: Option<Duration>,
    /// How long a grouped write may wait in the queue before it fails with `Error::Timeout` without running.
    pub(crate) write_timeout: Option<Duration>,
    /// WAL size past which the writer logs a warning.
    pub(crate) wal_size_warning: Option<u64>,
    /// The replica read instead of a local file, for a read replica.
    pub(crate) replica: Option<Replica>,
    /// Litestream's control socket, if writes are answered only once object storage holds them.
    pub(crate) replicated_acks: Option<PathBuf>,
}

/// A database's settings as a [`Builder`](crate::Builder) was told them: unchecked, with what depends on other
/// settings (the busy timeout, the checkpointing policy, …) left for [`Config::from_settings`] to fill in.
#[derive(Debug, Clone)]
pub(crate) struct Settings {
    pub(crate) path: PathBuf,
    pub(crate) profile: Profile,
    pub(crate) readers: Option<usize>,
    pub(crate) read_thread_nice: u8,
    pub(crate) overrides: Vec<(String, String)>,
    pub(crate) busy_timeout: Option<Duration>,
    pub(crate) write_lock_wait: Option<Duration>,
    pub(crate) held_transaction_limit: Duration,
    pub(crate) open_flags: OpenFlags,
    pub(crate) write_queue_capacity: usize,
    pub(crate) read_queue_capacity: usize,
    pub(crate) on_full: QueueFull,
    pub(crate) write_batch_max: usize,
    pub(crate) write_linger: Duration,
    pub(crate) read_batch_max: usize,
    pub(crate) read_snapshot_max_age: Duration,
    pub(crate) inline_reads: bool,
    pub(crate) inline_read_closures: bool,
    pub(crate) inline_read_max: Duration,
    pub(crate) inline_writes: bool,
    pub(crate) inline_write_closures: bool,
    pub(crate) inline_write_max: Duration,
    pub(crate) subscription_capacity: usize,
    pub(crate) change_rowids: usize,
    pub(crate) external_commits: Option<Duration>,
    /// The tables given to `change_feed`, if it was called.
    pub(crate) feed_tables: Option<Vec<String>>,
    pub(crate) feed_retention: Retention,
    pub(crate) inline_connections: Option<usize>,
    pub(crate) statement_cache_capacity: usize,
    pub(crate) checkpointing: Option<Checkpointing>,
    pub(crate) slow_statement: Option<Duration>,
    pub(crate) log_statement_parameters: bool,
    pub(crate) stable_query_plans: Option<bool>,
    pub(crate) hooks: AppHooks,
    /// Whether the database lives in a temporary directory of its own
    /// ([`Builder::temporary`](crate::Builder::temporary)).
    pub(crate) temporary: bool,
    pub(crate) key: Option<Key>,
    pub(crate) read_timeout: Option<Duration>,
    pub(crate) write_timeout: Option<Duration>,
    pub(crate) wal_size_warning: Option<u64>,
    pub(crate) replica: Option<Replica>,
    pub(crate) replicated_acks: Option<PathBuf>,
    /// Whether to open on a SQLite that has the WAL-reset bug
    /// ([`Builder::allow_wal_reset_bug`](crate::Builder::allow_wal_reset_bug)).
    pub(crate) wal_reset_bug_allowed: bool,
}

impl Config {
    /// The validated settings, for the SQLite linked into this process.
    pub(crate) fn from_settings(settings: Settings) -> Result<Config> {
        Config::for_sqlite(settings, rusqlite::version_number())
    }

    /// The validated settings, for a SQLite whose `sqlite3_libversion_number()` is `sqlite_version`: the linked
    /// one, or in tests any other.
    fn for_sqlite(settings: Settings, sqlite_version: i32) -> Result<Config> {
        if has_wal_reset_bug(sqlite_version) && !settings.wal_reset_bug_allowed {
            return Err(Error::WalResetBug {
                version: version_text(sqlite_version),
            });
        }
        let path = settings.path.to_string_lossy();
        if path.is_empty() || path == ":memory:" || path.contains("mode=memory") {
            return Err(Error::InvalidConfig(format!(
                "{path:?}: an in-memory database is private to one connection, so the readers would not see the \
                 writer's data; use a file (`Database::temporary` for tests)"
            )));
        }
        let positive = [
            ("readers", settings.readers.unwrap_or(1)),
            ("write_queue_capacity", settings.write_queue_capacity),
            ("read_queue_capacity", settings.read_queue_capacity),
            ("write_batch_max", settings.write_batch_max),
            ("read_batch_max", settings.read_batch_max),
            (
                "statement_cache_capacity",
                settings.statement_cache_capacity,
            ),
        ];
        for (name, value) in positive {
            if value == 0 {
                return Err(Error::InvalidConfig(format!("{name} must be at least 1")));
            }
        }
        if settings.replica.is_some() {
            let refused = [
                (
                    settings.hooks.migration.is_some(),
                    "a migration (its schema is the primary's)",
                ),
                (settings.key.is_some(), "a key"),
                (settings.temporary, "a temporary directory"),
                (
                    settings.checkpointing.is_some(),
                    "a checkpointing policy (it has no WAL)",
                ),
                (
                    settings.readers.is_some_and(|n| n > 1),
                    "readers beyond one (it reads through one connection, so that object storage is polled once)",
                ),
                (
                    settings.replicated_acks.is_some(),
                    "replicated acknowledgements (it takes no writes)",
                ),
            ];
            if let Some((_, what)) = refused.iter().find(|(set, _)| *set) {
                return Err(Error::InvalidConfig(format!(
                    "a read replica takes no {what}"
                )));
            }
        }
        if settings.held_transaction_limit.is_zero() {
            return Err(Error::InvalidConfig(
                "held_transaction_limit must be longer than zero".into(),
            ));
        }
        if settings.replica.is_some() && settings.feed_tables.is_some() {
            return Err(Error::InvalidConfig(
                "a read replica takes no change feed (record it on the primary, and read it on the replica)".into(),
            ));
        }
        if settings.external_commits == Some(Duration::ZERO) {
            return Err(Error::InvalidConfig(
                "notice_external_commits needs an interval longer than zero".into(),
            ));
        }
        let mutexes = OpenFlags::SQLITE_OPEN_NO_MUTEX | OpenFlags::SQLITE_OPEN_FULL_MUTEX;
        if settings.open_flags.contains(mutexes) {
            return Err(Error::InvalidConfig(
                "open flags ask for both NO_MUTEX and FULL_MUTEX".into(),
            ));
        }
        let mut pragmas: Vec<(String, String)> = settings
            .profile
            .pragmas()
            .into_iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let mut overrides = settings.overrides;
        if let Some(t) = settings.busy_timeout {
            overrides.push(("busy_timeout".into(), t.as_millis().to_string()));
        }
        for (name, value) in overrides {
            validate_pragma(&name, &value)?;
            let name = name.to_ascii_lowercase();
            match pragmas.iter_mut().find(|(n, _)| *n == name) {
                Some(pragma) => pragma.1 = value,
                None => pragmas.push((name, value)),
            }
        }
        let busy_timeout = pragmas
            .iter()
            .find(|(n, _)| n == "busy_timeout")
            .map(|(_, v)| {
                v.parse::<u64>().map_err(|_| {
                    Error::InvalidConfig(format!(
                        "busy_timeout {v:?} is not a number of milliseconds"
                    ))
                })
            })
            .transpose()?
            // rusqlite's default for connections it opens, which `SqliteDefault` keeps.
            .map_or(Duration::from_secs(5), Duration::from_millis);
        // A replica has no WAL: SQLite's own policy does nothing there.
        let checkpointing = settings.checkpointing.unwrap_or(match settings.profile {
            _ if settings.replica.is_some() => Checkpointing::Sqlite,
            Profile::SqliteDefault => Checkpointing::Sqlite,
            Profile::Server | Profile::Durable => Checkpointing::managed(),
        });
        checkpointing.validate()?;
        // A replica reads through its one connection (see `sched::threads`): each connection through Litestream's
        // VFS polls object storage on its own.
        let one_connection = settings.replica.is_some();
        let readers = match one_connection {
            true => 1,
            false => settings.readers.unwrap_or_else(crate::util::cpus),
        };
        Ok(Config {
            profile: settings.profile,
            readers,
            read_thread_nice: settings.read_thread_nice,
            pragmas,
            open_flags: settings.open_flags,
            write_queue_capacity: settings.write_queue_capacity,
            read_queue_capacity: settings.read_queue_capacity,
            on_full: settings.on_full,
            write_batch_max: settings.write_batch_max,
            write_linger: settings.write_linger,
            read_batch_max: settings.read_batch_max,
            read_snapshot_max_age: settings.read_snapshot_max_age,
            inline_reads: settings.inline_reads && settings.inline_connections != Some(0),
            inline_read_closures: settings.inline_read_closures,
            inline_read_max: settings.inline_read_max,
            inline_writes: settings.inline_writes,
            inline_write_closures: settings.inline_write_closures,
            inline_write_max: settings.inline_write_max,
            subscription_capacity: settings.subscription_capacity,
            change_rowids: settings.change_rowids,
            // A replica's writer has nothing else to do: it follows the replica at its poll interval. A change feed
            // follows other processes' commits, which its triggers record too.
            external_commits: settings
                .external_commits
                .or_else(|| {
                    settings
                        .replica
                        .as_ref()
                        .map(|replica| replica.poll_interval_or(crate::replica::VFS_POLL_INTERVAL))
                })
                .or_else(|| settings.feed_tables.as_ref().map(|_| FEED_LOOK_EVERY)),
            feed: settings.feed_tables.map(|tables| FeedConfig {
                tables,
                retention: settings.feed_retention,
            }),
            // A replica's inline reads take its one connection, lent while it waits ([`WriterSeat`]).
            inline_connections: match one_connection {
                true => 0,
                false => settings
                    .inline_connections
                    .unwrap_or_else(crate::util::cpus),
            },
            statement_cache_capacity: settings.statement_cache_capacity,
            checkpointing,
            slow_statement: settings.slow_statement,
            log_statement_parameters: settings.log_statement_parameters,
            busy_timeout,
            write_lock_wait: settings
                .write_lock_wait
                .unwrap_or(busy_timeout.max(DEFAULT_WRITE_LOCK_WAIT)),
            held_transaction_limit: settings.held_transaction_limit,
            stable_query_plans: settings
                .stable_query_plans
                .unwrap_or(settings.profile != Profile::SqliteDefault),
            hooks: settings.hooks,
            key: settings.key,
            read_timeout: settings.read_timeout,
            write_timeout: settings.write_timeout,
            wal_size_warning: settings.wal_size_warning,
            replica: settings.replica,
            replicated_acks: settings.replicated_acks,
        })
    }
}

/// Who checkpoints the WAL. Set with [`Builder::checkpointing`](crate::Builder::checkpointing).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Checkpointing {
    /// Checkpoints after the group whose commit crossed a threshold has its answers:
    /// a `PASSIVE` checkpoint (never waits) once the WAL holds `passive_at_frames` frames — for a
    /// [`Database`](crate::Database) on a thread and connection of its own, so that the writer goes on committing
    /// meanwhile (a registry's databases on a short-lived thread and connection each, a few at a time in the
    /// process); a `RESTART` checkpoint
    /// (waits up to `reader_wait` for readers to leave the WAL, then starts it over) once it holds
    /// `restart_at_frames`, which bounds the WAL; and a `TRUNCATE` checkpoint (the `-wal` file back to zero bytes)
    /// when no write has arrived for `truncate_when_idle` — unless the WAL is short (a small fraction of
    /// `passive_at_frames`): the next write appends to it rather than start the WAL over, which SQLite does with an
    /// fsync of its header even under `synchronous=NORMAL`. SQLite's automatic checkpoint is turned off.
    ///
    /// Checkpoints that give up waiting for readers (another program holds a long read) back off: the next one to
    /// wait for readers comes only after a pause that doubles with each give-up in a row, up to a cap, `PASSIVE`
    /// ones going on meanwhile. When Litestream replicates the database (its tables are in it, found at open and
    /// after a give-up), the writer leaves the checkpoints that wait for readers to it and runs only `PASSIVE` ones.
    Managed {
        /// WAL frames (pages) after which a `PASSIVE` checkpoint runs.
        passive_at_frames: u32,
        /// WAL frames after which a `RESTART` checkpoint runs: the WAL's bound under continuous reads.
        restart_at_frames: u32,
        /// How long `RESTART` and `TRUNCATE` checkpoints wait for readers before giving up (and trying later).
        reader_wait: Duration,
        /// Idle time after which the WAL is truncated; `None` never truncates.
        truncate_when_idle: Option<Duration>,
    },
    /// SQLite's automatic checkpoint, as `PRAGMA wal_autocheckpoint` sets it (1000 pages unless overridden),
    /// run inside the `COMMIT` that crosses it. The default of [`Profile::SqliteDefault`](crate::Profile).
    Sqlite,
    /// Never checkpoint: another tool owns checkpoints (Litestream, for example, asks applications to leave
    /// them to it). SQLite's automatic checkpoint is turned off, and so is the checkpoint SQLite runs when the
    /// last connection closes (`SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE`), so `close` leaves the WAL to the tool too;
    /// the WAL grows until the tool checkpoints, and past
    /// [`Builder::wal_size_warning`](crate::Builder::wal_size_warning) the writer warns that it may not be
    /// running.
    External,
}

impl Checkpointing {
    /// The managed policy with its defaults: `PASSIVE` at 1000 frames (SQLite's own threshold), `RESTART` at
    /// 10,000 frames (about 40 MB with 4 KiB pages), readers waited for up to 100 ms (but not for a long read of
    /// the process: the writes queued behind such a checkpoint wait with it), `TRUNCATE` after 1 s idle.
    pub const fn managed() -> Checkpointing {
        Checkpointing::Managed {
            passive_at_frames: 1000,
            restart_at_frames: 10_000,
            reader_wait: Duration::from_millis(100),
            truncate_when_idle: Some(Duration::from_secs(1)),
        }
    }

    pub(crate) fn validate(&self) -> Result<()> {
        if let Checkpointing::Managed {
            passive_at_frames,
            restart_at_frames,
            ..
        } = *self
            && (passive_at_frames == 0 || restart_at_frames < passive_at_frames)
        {
            return Err(Error::InvalidConfig(format!(
                "checkpointing: passive_at_frames ({passive_at_frames}) must be at least 1 and no more than \
                 restart_at_frames ({restart_at_frames})"
            )));
        }
        Ok(())
    }
}

/// Checks that a PRAGMA name and value are plain tokens, so that they cannot smuggle another statement in.
pub(crate) fn validate_pragma(name: &str, value: &str) -> Result<()> {
    let ident = |s: &str| {
        !s.is_empty()
            && s.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
            && !s.starts_with(|c: char| c.is_ascii_digit())
    };
    let name_ok = match name.split_once('.') {
        Some((schema, pragma)) => ident(schema) && ident(pragma),
        None => ident(name),
    };
    if !name_ok {
        return Err(Error::InvalidConfig(format!(
            "PRAGMA name {name:?} is not a plain identifier"
        )));
    }
    let value_ok = !value.is_empty()
        && value
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '+' | '.'));
    if !value_ok {
        return Err(Error::InvalidConfig(format!(
            "PRAGMA {name} value {value:?} must be a number or a keyword (letters, digits, _ - + .)"
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;
    use crate::Builder;

    fn config(b: Builder) -> Result<Config> {
        Config::from_settings(b.into_settings())
    }

    fn config_for(b: Builder, sqlite_version: i32) -> Result<Config> {
        Config::for_sqlite(b.into_settings(), sqlite_version)
    }

    #[test]
    fn pragma_validation_rejects_injection() {
        assert!(validate_pragma("cache_size", "-64000").is_ok());
        assert!(validate_pragma("main.journal_mode", "WAL").is_ok());
        assert!(validate_pragma("cache_size; DROP TABLE t", "1").is_err());
        assert!(validate_pragma("cache_size", "1; DROP TABLE t").is_err());
        assert!(validate_pragma("", "1").is_err());
        assert!(validate_pragma("x", "").is_err());
        assert!(validate_pragma("1x", "1").is_err());
    }

    #[test]
    fn thresholds_are_validated() {
        let bad = Checkpointing::Managed {
            passive_at_frames: 500,
            restart_at_frames: 100,
            reader_wait: Duration::ZERO,
            truncate_when_idle: None,
        };
        assert!(matches!(bad.validate(), Err(Error::InvalidConfig(_))));
        assert!(Checkpointing::managed().validate().is_ok());
        assert!(Checkpointing::External.validate().is_ok());
    }

    #[test]
    fn overrides_replace_profile_values_in_place() {
        let c = config(
            Builder::new(Path::new("x.db"))
                .pragma("SYNCHRONOUS", "FULL")
                .pragma("user_version", "7")
                .busy_timeout(Duration::from_millis(250)),
        )
        .unwrap();
        let get = |n: &str| {
            c.pragmas
                .iter()
                .find(|(k, _)| k == n)
                .map(|(_, v)| v.as_str())
        };
        assert_eq!(get("synchronous"), Some("FULL"));
        assert_eq!(get("busy_timeout"), Some("250"));
        assert_eq!(get("user_version"), Some("7"));
        assert_eq!(c.pragmas[0].0, "journal_mode");
    }

    #[test]
    fn a_sqlite_with_the_wal_reset_bug_is_refused_unless_allowed() {
        let affected = 3_049_002;
        let refused = config_for(Builder::new(Path::new("x.db")), affected);
        match refused {
            Err(Error::WalResetBug { version }) => assert_eq!(version, "3.49.2"),
            other => panic!("expected WalResetBug, got {other:?}"),
        }
        let allowed = config_for(
            Builder::new(Path::new("x.db")).allow_wal_reset_bug(true),
            affected,
        );
        assert!(allowed.is_ok());
        for fixed in [3_044_006, 3_050_007, 3_051_003, 3_054_001] {
            assert!(
                config_for(Builder::new(Path::new("x.db")), fixed).is_ok(),
                "{fixed}"
            );
        }
    }

    #[test]
    fn the_refusal_says_which_sqlite_why_and_what_to_do() {
        let message = Error::WalResetBug {
            version: "3.49.2".into(),
        }
        .to_string();
        for words in [
            "SQLite 3.49.2 has the WAL-reset bug",
            "corrupt",
            "https://sqlite.org/wal.html#walresetbug",
            "3.51.3",
            "3.50.7",
            "3.44.6",
            "allow_wal_reset_bug(true)",
        ] {
            assert!(message.contains(words), "{words:?} in {message:?}");
        }
    }

    #[test]
    fn rejects_bad_settings() {
        let bad = [
            Builder::new(Path::new(":memory:")),
            Builder::new(Path::new("")),
            Builder::new(Path::new("x.db")).readers(0),
            Builder::new(Path::new("x.db")).write_batch_max(0),
            Builder::new(Path::new("x.db")).pragma("a;b", "1"),
            Builder::new(Path::new("x.db")).notice_external_commits(Duration::ZERO),
            Builder::new(Path::new("x.db"))
                .open_flags(OpenFlags::SQLITE_OPEN_NO_MUTEX | OpenFlags::SQLITE_OPEN_FULL_MUTEX),
        ];
        for b in bad {
            assert!(matches!(config(b), Err(Error::InvalidConfig(_))));
        }
    }

    /// Issue 47: each connection through Litestream's VFS polled object storage on its own, five per replica.
    #[test]
    fn a_replica_has_one_connection_whatever_its_builder_says() {
        let replica = || Replica::litestream("/x/vfs.so", "s3://bkt/app");
        let c = config(Builder::new(Path::new("app")).replica(replica())).unwrap();
        assert_eq!((c.readers, c.inline_connections), (1, 0));
        assert!(
            c.inline_reads,
            "reads on callers' threads take the one connection, lent"
        );
        let c = config(
            Builder::new(Path::new("app"))
                .replica(replica())
                .readers(1)
                .inline_connections(4),
        )
        .unwrap();
        assert_eq!((c.readers, c.inline_connections), (1, 0));
        match config(Builder::new(Path::new("app")).replica(replica()).readers(2)) {
            Err(Error::InvalidConfig(message)) => {
                assert!(message.contains("one connection"), "{message}")
            }
            other => panic!("two readers for a replica: {:?}", other.map(|_| ())),
        }
    }
}
