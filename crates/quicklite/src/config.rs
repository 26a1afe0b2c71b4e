//! The validated settings of one database, and the public choices they are made of ([`QueueFull`],
//! [`Checkpointing`]). A leaf: [`Builder`](crate::Builder) fills a [`Config`]; every other layer reads it.

use std::sync::Arc;
use std::time::Duration;

use rusqlite::{Connection, OpenFlags};

use crate::replica::Replica;
use crate::{Error, Profile, Result};

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
pub(crate) type Migration =
    Arc<dyn Fn(&mut Connection) -> std::result::Result<(), BoxError> + Send + Sync>;

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
    /// Connections for reads on callers' threads.
    pub(crate) inline_connections: usize,
    /// Notices each subscriber may hold before it lags.
    pub(crate) subscription_capacity: usize,
    /// Rowids a notice lists per table.
    pub(crate) change_rowids: usize,
    /// How often the writer looks for commits made from outside, if it does.
    pub(crate) external_commits: Option<Duration>,
    pub(crate) statement_cache_capacity: usize,
    pub(crate) checkpointing: Checkpointing,
    /// Statements running at least this long are logged; `None` installs no profiling hook.
    pub(crate) slow_statement: Option<Duration>,
    pub(crate) log_statement_parameters: bool,
    /// The busy timeout the PRAGMAs ask for, which the busy handler enforces.
    pub(crate) busy_timeout: Duration,
    /// How long a write without a deadline waits for the write lock another connection holds.
    pub(crate) write_lock_wait: Duration,
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
    /// 10,000 frames (about 40 MB with 4 KiB pages), readers waited for up to 10 ms (the writes queued behind such
    /// a checkpoint wait with it), `TRUNCATE` after 1 s idle.
    pub const fn managed() -> Checkpointing {
        Checkpointing::Managed {
            passive_at_frames: 1000,
            restart_at_frames: 10_000,
            reader_wait: Duration::from_millis(10),
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
    use super::*;

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
}
