//! The one error type of the crate.

use rusqlite::ffi;

/// Everything that can go wrong when using a [`Database`](crate::Database).
///
/// An error never poisons the handle: after any of these (except [`Error::Closed`]) the same handle keeps
/// serving requests.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// SQLite (or rusqlite) reported an error; [`Error::sqlite_code`] and [`Error::extended_code`] give the
    /// SQLite result codes when there are any.
    #[error(transparent)]
    Sqlite(#[from] rusqlite::Error),

    /// The `COMMIT` of a group of writes failed, so none of them was committed. Every request of the group gets
    /// this error (each its own copy); no write in the group is reported as committed.
    #[error(
        "commit failed, nothing in this group of {batch} writes was committed: {message} (extended code {extended_code})"
    )]
    CommitFailed {
        /// SQLite's extended result code of the failed `COMMIT`.
        extended_code: i32,
        /// SQLite's message.
        message: String,
        /// Number of write requests in the failed group.
        batch: usize,
    },

    /// This write ran and succeeded, but a later statement in the same group made SQLite roll back the whole
    /// transaction (SQLite does so on some `SQLITE_FULL`, `SQLITE_IOERR`, `SQLITE_NOMEM` and `SQLITE_BUSY` errors),
    /// so this write was *not* committed. It is safe to retry.
    #[error("rolled back with its group: {reason}")]
    RolledBack {
        /// The error that made SQLite roll back the transaction.
        reason: String,
    },

    /// [`Database::execute`](crate::Database::execute) was given a statement that returns rows (`INSERT …
    /// RETURNING`, a `SELECT`); it was not run. Run a write that returns rows with
    /// [`Database::execute_returning`](crate::Database::execute_returning).
    #[error(
        "execute runs statements that return no rows, and this one returns rows; it was not run (for `… RETURNING`, use execute_returning)"
    )]
    ReturnsRows,

    /// A closure given to [`Database::with_write_connection`](crate::Database::with_write_connection) returned
    /// with a transaction still open, or a statement given to [`Database::execute`](crate::Database::execute) left
    /// one open; the handle rolled it back.
    #[error("the closure or statement left a transaction open; it was rolled back")]
    TransactionLeftOpen,

    /// A transaction held across `.await` ([`Database::begin`](crate::Database::begin)) stayed open past its limit
    /// ([`Builder::held_transaction_limit`](crate::Builder::held_transaction_limit),
    /// [`Database::begin_with_limit`](crate::Database::begin_with_limit)): the writer rolled it back and went on
    /// serving the database's other writes. Nothing of it was committed; its statements and its commit after that
    /// fail with this error. Begin a new transaction to retry.
    #[error(
        "the transaction was held open past its limit of {limit:?} and was rolled back: nothing of it was committed"
    )]
    TransactionExpired {
        /// The limit it ran past.
        limit: std::time::Duration,
    },

    /// A transaction held across `.await` ([`Database::begin`](crate::Database::begin)) was rolled back before its
    /// commit: a step panicked, a step's future was dropped before its answer (so whether it ran was unknown), or
    /// SQLite rolled the transaction back by itself. Nothing of it was committed; its statements and its commit
    /// after that fail with this error. Begin a new transaction to retry.
    #[error("the transaction was rolled back ({reason}): nothing of it was committed")]
    TransactionAborted {
        /// What ended it.
        reason: String,
    },

    /// The database handle was closed (by [`Database::close`](crate::Database::close)) or its worker thread
    /// stopped; the request was not run.
    #[error("database is closed")]
    Closed,

    /// The queue was full and the handle was configured to fail fast
    /// ([`QueueFull::Fail`](crate::QueueFull::Fail)); the request was not run.
    #[error("{queue} queue is full ({capacity} requests waiting); try again later")]
    Overloaded {
        /// Which queue: `"write"` or `"read"`.
        queue: &'static str,
        /// The queue's capacity.
        capacity: usize,
    },

    /// The closure panicked. Its work was rolled back (for writes: to its own savepoint); the worker thread and
    /// the handle survive.
    #[error("closure panicked: {message}")]
    Panic {
        /// The panic payload, when it was a string.
        message: String,
    },

    /// A registry's database name is not allowed (see [`Registry::get`](crate::Registry::get)); nothing was
    /// opened or created.
    #[error("invalid database name {name:?}: {reason}")]
    InvalidName {
        /// The name asked for (possibly shortened).
        name: String,
        /// Why it is refused.
        reason: &'static str,
    },

    /// The request ran past its timeout ([`Database::with_timeout`](crate::Database::with_timeout),
    /// [`Builder::read_timeout`](crate::Builder::read_timeout),
    /// [`Builder::write_timeout`](crate::Builder::write_timeout), …): it waited in the queue that long and did not
    /// run, or its statement was interrupted (a write's work then rolled back). Only this request failed; the others
    /// of its batch or group were served.
    #[error("{request} timed out after {timeout:?} {}", if *ran { "while running: interrupted, nothing of it kept" } else { "before it ran: it never ran" })]
    Timeout {
        /// The request's timeout: the shortest of those that applied to it.
        timeout: std::time::Duration,
        /// Whether it was a read or a write.
        request: RequestKind,
        /// Whether it had started: `false`, it never ran; `true`, it was interrupted and nothing it did was kept
        /// (a read's results were dropped, a write's changes rolled back).
        ran: bool,
    },

    /// A write waited for the database's write lock while another connection held it — another process
    /// (Litestream holds it while it checkpoints; another program writing the same file) or a connection of this
    /// process that the handle does not own — for as long as a write without a deadline may wait
    /// ([`Builder::write_lock_wait`](crate::Builder::write_lock_wait)), and gave up. It did not run: nothing of it
    /// was committed, and it is safe to retry. A write with a deadline waits up to it instead, and then fails with
    /// [`Error::Timeout`]. [`Error::sqlite_code`] says `SQLITE_BUSY`, as SQLite reported it.
    #[error(
        "the database's write lock was held by {} for {waited:?}: this write did not run, nothing of it was committed",
        lock_holder(*pid, program.as_deref())
    )]
    WriteLockHeld {
        /// How long the write waited for the lock.
        waited: std::time::Duration,
        /// The process that held the lock when the write gave up, as the system tells (`/proc/locks` on Linux);
        /// `None` when it cannot tell (another system, or the lock let go meanwhile).
        pid: Option<u32>,
        /// That process's program name (`/proc/<pid>/comm`), when known.
        program: Option<String>,
    },

    /// A builder setting or the path is not usable; nothing was opened.
    #[error("invalid configuration: {0}")]
    InvalidConfig(String),

    /// The SQLite linked into the program has the WAL-reset bug
    /// ([`has_wal_reset_bug`](crate::setup::has_wal_reset_bug)), a data race that can corrupt a database written and
    /// checkpointed by several connections in WAL mode — as every quicklite database is. Nothing was opened. Link a
    /// SQLite that fixes it (3.51.3 or later; 3.50.7 or 3.44.6 and later in those release lines), or open anyway with
    /// [`Builder::allow_wal_reset_bug`](crate::Builder::allow_wal_reset_bug).
    #[error(
        "SQLite {version} has the WAL-reset bug, which can corrupt a database that several connections write and \
         checkpoint in WAL mode, as quicklite's do (https://sqlite.org/wal.html#walresetbug): nothing was opened; \
         link SQLite 3.51.3 or later (3.50.7 or 3.44.6 and later in those release lines), or open anyway with \
         Builder::allow_wal_reset_bug(true)"
    )]
    WalResetBug {
        /// The linked SQLite's version, e.g. `3.49.2`.
        version: String,
    },

    /// A backup ([`Database::backup`](crate::Database::backup) or
    /// [`Database::vacuum_into`](crate::Database::vacuum_into)) could not be written to `dest`. The source
    /// database is untouched, and no partial file is left at `dest`.
    #[error("backup to {} failed: {reason}", dest.display())]
    Backup {
        /// The destination asked for.
        dest: std::path::PathBuf,
        /// What went wrong.
        reason: String,
    },

    /// An application's function failed while a connection was being prepared: a set-up function
    /// ([`Builder::on_connection`](crate::Builder::on_connection)) or the migration
    /// ([`Builder::migrate`](crate::Builder::migrate)). The connection was closed; a database whose writer could not
    /// be prepared was not opened (a registry's: its waiting requests get this error, and the next request tries
    /// again).
    #[error("{stage} failed on the {connection} connection: {message}")]
    Setup {
        /// `"connection set-up"` or `"migration"`.
        stage: &'static str,
        /// Which connection: `"writer"`, `"reader"`, `"checkpointer"` or `"backup"`.
        connection: &'static str,
        /// The function's error.
        message: String,
    },

    /// A row did not deserialize into the caller's type ([`Database::query_row_as`](crate::Database::query_row_as)):
    /// a column missing, or a value that does not fit its field.
    #[error("row does not fit the type{}: {message}", column.as_deref().map(|c| format!(" (column {c:?})")).unwrap_or_default())]
    Decode {
        /// The column, when it is known.
        column: Option<String>,
        /// What did not fit.
        message: String,
    },

    /// A write asked of a read replica ([`Builder::replica`](crate::Builder::replica)); nothing was run. Writes
    /// go to the primary, whose Litestream replicates them.
    #[error("this database is a read replica of {url}: writes go to its primary")]
    ReadOnlyReplica {
        /// The replica's URL.
        url: String,
    },

    /// A replica's read waited for a position ([`Database::read_at_least`](crate::Database::read_at_least)) and
    /// the replica had not reached it by the deadline; the read did not run.
    #[error("the replica had not reached transaction {wanted} after {waited:?} (it had {reached})")]
    ReplicaBehind {
        /// The position asked for.
        wanted: crate::replica::Position,
        /// The position the replica's connection had at its last look.
        reached: crate::replica::Position,
        /// How long the read waited.
        waited: std::time::Duration,
    },

    /// A registry that restores missing tenants
    /// ([`RegistryBuilder::restore_missing`](crate::RegistryBuilder::restore_missing)) found that this machine's copy
    /// of a tenant does not lead to its replica: another machine wrote the tenant since this one last did (the
    /// replica holds a transaction past this machine's last, or other content under the numbers of this machine's
    /// transactions). Nothing was opened; remove the local file (and Litestream's `.<name>.db-litestream` state beside
    /// it) to restore the tenant from its replica, or stop the other machine.
    #[error(
        "tenant {name:?} was written elsewhere: its replica, at transaction {replica}, does not continue this \
         machine's copy (last transaction recorded here: {local})"
    )]
    TenantMoved {
        /// The tenant.
        name: String,
        /// The last transaction Litestream recorded on this machine.
        local: crate::replica::Position,
        /// The last transaction its replica holds.
        replica: crate::replica::Position,
    },

    /// A registry that restores missing tenants
    /// ([`RegistryBuilder::restore_missing`](crate::RegistryBuilder::restore_missing)) waited for Litestream before the
    /// tenant's open — its restore, or the look at the replica of the copy here — for as long as
    /// [`Restore::timeout`](crate::litestream::Restore::timeout) allows, and gave up: the `litestream` under way was
    /// killed and the files it was writing removed. The tenant was not opened; a later `get` tries again. Object
    /// storage that stopped answering gives this, and so does a tenant too large to download in time (raise the
    /// timeout).
    #[error(
        "the restore of tenant {name:?} timed out after {timeout:?} ({}): the tenant was not opened",
        stopped(command)
    )]
    RestoreTimedOut {
        /// The tenant.
        name: String,
        /// The `litestream` command that was running: `restore`, or `ltx` (the replica's last transaction); `vfs`
        /// for a comparison through Litestream's VFS ([`Restore::vfs`](crate::litestream::Restore::vfs)).
        command: String,
        /// The bound it ran past ([`Restore::timeout`](crate::litestream::Restore::timeout)).
        timeout: std::time::Duration,
    },

    /// Litestream's control socket could not be reached, or refused a request
    /// ([`Litestream`](crate::litestream::Litestream)); or a registry's run of the `litestream` program to restore a
    /// tenant, or to look at its replica, failed (the message names the command and says what Litestream said).
    #[error("Litestream: {0}")]
    Litestream(String),

    /// The write committed on this machine, but object storage did not hold it by its deadline
    /// ([`Acknowledge::Replicated`](crate::Acknowledge::Replicated)): it is **not lost** — Litestream uploads it once
    /// object storage answers — and must not be written again as if it were. Reads here see it already. From
    /// [`Database::until_replicated`](crate::Database::until_replicated), the commits it waited for are in the same
    /// state.
    #[error(
        "committed on this machine but not yet in object storage after {waited:?} ({reason}): it is not lost, do \
         not write it again"
    )]
    NotReplicated {
        /// How long it waited for its upload.
        waited: std::time::Duration,
        /// Why the upload had not finished: Litestream's last error, or that it was still under way.
        reason: String,
    },

    /// The change feed cannot record `table` ([`Builder::change_feed`](crate::Builder::change_feed)): it does not
    /// exist, is not an ordinary table, or has no rowid (`WITHOUT ROWID`). The database did not open.
    #[error("the change feed cannot record table {table:?}: {reason}")]
    FeedTable {
        /// The table named.
        table: String,
        /// Why it cannot be recorded.
        reason: &'static str,
    },

    /// A change feed was read from a cursor older than what the feed keeps: retention has deleted changes after
    /// it ([`Database::changes_since`](crate::Database::changes_since)). What the consumer keeps in step with the
    /// database must be read afresh, then followed from a new cursor.
    #[error(
        "cursor {cursor} is older than the change feed keeps (changes up to {pruned_through} were pruned): read \
         afresh, then follow the feed from a new cursor"
    )]
    CursorPruned {
        /// The cursor asked for.
        cursor: u64,
        /// The last change retention deleted: a cursor at least this resumes without a gap.
        pruned_through: u64,
    },

    /// A change feed was read from a cursor past the last change this database ever recorded: not a cursor of this
    /// database's feed (another database's, or one this database was restored to before).
    #[error(
        "cursor {cursor} is past the change feed's last change ({last}): not a cursor of this database"
    )]
    CursorUnknown {
        /// The cursor asked for.
        cursor: u64,
        /// The last change recorded.
        last: u64,
    },

    /// The database has no change feed to read: no process opened it with
    /// [`Builder::change_feed`](crate::Builder::change_feed).
    #[error("this database has no change feed (open it with `Builder::change_feed`)")]
    NoChangeFeed,

    /// An I/O error outside SQLite (e.g. spawning a worker thread).
    #[error("i/o error: {0}")]
    Io(#[from] std::io::Error),
}

/// A read or a write, as an error names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RequestKind {
    /// A read: [`Database::read`](crate::Database::read), a statement helper that reads, a chunk of a stream.
    Read,
    /// A write: [`Database::write`](crate::Database::write), a statement helper that writes, a transaction.
    Write,
}

impl std::fmt::Display for RequestKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            RequestKind::Read => "read",
            RequestKind::Write => "write",
        })
    }
}

/// `optional()` on a quicklite [`Result`], as rusqlite's `OptionalExtension` on its own: a query that found no row
/// (`rusqlite::Error::QueryReturnedNoRows`) becomes `Ok(None)`, every other error stays.
///
/// ```no_run
/// # async fn f(db: quicklite::Database) -> quicklite::Result<()> {
/// use quicklite::OptionalExtension;
///
/// let name: Option<String> = db
///     .query_row("SELECT name FROM item WHERE id = ?1", (7,), |r| r.get(0))
///     .await
///     .optional()?;
/// # Ok(()) }
/// ```
pub trait OptionalExtension<T> {
    /// `Ok(None)` for no row, `Ok(Some(value))` for a value, the error otherwise.
    fn optional(self) -> Result<Option<T>>;
}

impl<T> OptionalExtension<T> for Result<T> {
    fn optional(self) -> Result<Option<T>> {
        match self {
            Ok(value) => Ok(Some(value)),
            Err(Error::Sqlite(rusqlite::Error::QueryReturnedNoRows)) => Ok(None),
            Err(e) => Err(e),
        }
    }
}

impl Error {
    /// A copy of this error for another caller: a group of requests that failed together (e.g. their database
    /// could not be opened) each get one.
    pub(crate) fn duplicate(&self) -> Error {
        match self {
            Error::Sqlite(e) => Error::copy_sqlite(e),
            Error::Closed => Error::Closed,
            Error::InvalidName { name, reason } => Error::InvalidName {
                name: name.clone(),
                reason,
            },
            Error::InvalidConfig(m) => Error::InvalidConfig(m.clone()),
            Error::WalResetBug { version } => Error::WalResetBug {
                version: version.clone(),
            },
            Error::Timeout {
                timeout,
                request,
                ran,
            } => Error::Timeout {
                timeout: *timeout,
                request: *request,
                ran: *ran,
            },
            Error::Decode { column, message } => Error::Decode {
                column: column.clone(),
                message: message.clone(),
            },
            Error::Setup {
                stage,
                connection,
                message,
            } => Error::Setup {
                stage,
                connection,
                message: message.clone(),
            },
            Error::WriteLockHeld {
                waited,
                pid,
                program,
            } => Error::WriteLockHeld {
                waited: *waited,
                pid: *pid,
                program: program.clone(),
            },
            Error::TenantMoved {
                name,
                local,
                replica,
            } => Error::TenantMoved {
                name: name.clone(),
                local: *local,
                replica: *replica,
            },
            Error::RestoreTimedOut {
                name,
                command,
                timeout,
            } => Error::RestoreTimedOut {
                name: name.clone(),
                command: command.clone(),
                timeout: *timeout,
            },
            Error::TransactionExpired { limit } => Error::TransactionExpired { limit: *limit },
            Error::TransactionAborted { reason } => Error::TransactionAborted {
                reason: reason.clone(),
            },
            Error::FeedTable { table, reason } => Error::FeedTable {
                table: table.clone(),
                reason,
            },
            Error::CursorPruned {
                cursor,
                pruned_through,
            } => Error::CursorPruned {
                cursor: *cursor,
                pruned_through: *pruned_through,
            },
            Error::CursorUnknown { cursor, last } => Error::CursorUnknown {
                cursor: *cursor,
                last: *last,
            },
            Error::NoChangeFeed => Error::NoChangeFeed,
            Error::Litestream(m) => Error::Litestream(m.clone()),
            Error::NotReplicated { waited, reason } => Error::NotReplicated {
                waited: *waited,
                reason: reason.clone(),
            },
            Error::Io(e) => Error::Io(std::io::Error::new(e.kind(), e.to_string())),
            other => Error::Io(std::io::Error::other(other.to_string())),
        }
    }

    /// A closure's error, as its caller gets it. SQLite reports a statement its authorizer refused as "not
    /// authorized"; the only one a closure meets is the handle's guard refusing transaction control, so the
    /// message says that, and what to use instead (the code stays `SQLITE_AUTH`).
    pub(crate) fn from_closure(e: rusqlite::Error) -> Error {
        match sqlite_failure(&e) {
            Some(failure) if failure.extended_code == ffi::SQLITE_AUTH => {
                Error::Sqlite(rusqlite::Error::SqliteFailure(
                    *failure,
                    Some(TRANSACTION_CONTROL_REFUSED.to_owned()),
                ))
            }
            _ => Error::Sqlite(e),
        }
    }

    /// The error of a read that ran a statement that writes on the writer's connection lent to it, rolled back:
    /// `SQLITE_READONLY`, as on a reader's connection.
    pub(crate) fn read_wrote() -> Error {
        Error::Sqlite(rusqlite::Error::SqliteFailure(
            ffi::Error::new(ffi::SQLITE_READONLY),
            Some(READ_WROTE.to_owned()),
        ))
    }

    /// A copy of a rusqlite error as an [`Error::Sqlite`] with the same extended code and message, so that every
    /// request of a group can get its own.
    pub(crate) fn copy_sqlite(e: &rusqlite::Error) -> Error {
        let (extended_code, message) = sqlite_parts(e);
        Error::Sqlite(rusqlite::Error::SqliteFailure(
            ffi::Error::new(extended_code),
            Some(message),
        ))
    }

    /// SQLite's primary result code, when the error came from SQLite.
    pub fn sqlite_code(&self) -> Option<rusqlite::ErrorCode> {
        match self {
            Error::Sqlite(e) => sqlite_failure(e).map(|f| f.code),
            Error::CommitFailed { extended_code, .. } => {
                Some(ffi::Error::new(*extended_code & 0xff).code)
            }
            Error::WriteLockHeld { .. } => Some(rusqlite::ErrorCode::DatabaseBusy),
            _ => None,
        }
    }

    /// SQLite's extended result code (e.g. `SQLITE_CONSTRAINT_PRIMARYKEY` = 1555), when the error came from SQLite.
    pub fn extended_code(&self) -> Option<i32> {
        match self {
            Error::Sqlite(e) => sqlite_failure(e).map(|f| f.extended_code),
            Error::CommitFailed { extended_code, .. } => Some(*extended_code),
            Error::WriteLockHeld { .. } => Some(ffi::SQLITE_BUSY),
            _ => None,
        }
    }
}

/// Who held the write lock, as [`Error::WriteLockHeld`] says it.
fn lock_holder(pid: Option<u32>, program: Option<&str>) -> String {
    match (pid, program) {
        (Some(pid), _) if pid == std::process::id() => {
            format!("a connection of this process (pid {pid}) that quicklite does not own")
        }
        (Some(pid), Some(program)) => format!("process {pid} ({program})"),
        (Some(pid), None) => format!("process {pid}"),
        (None, _) => "another connection (which process, the system did not tell)".to_owned(),
    }
}

/// What a closure that tried to control its transaction is told.
const TRANSACTION_CONTROL_REFUSED: &str = "not authorized: BEGIN, COMMIT, ROLLBACK and the handle's own savepoint are \
     refused inside a read or write closure, whose transaction quicklite manages (a write's is shared with other \
     writes), and so is any savepoint as an execute statement by itself; use Database::transaction for a transaction of its own, or Database::with_write_connection for code \
     that runs them itself. A read on the writer's connection (right after a commit) is also refused a PRAGMA that \
     sets something, a checkpoint, ATTACH and DETACH, which would change the writer's connection; and so is a write \
     (but for PRAGMA user_version, application_id, defer_foreign_keys, optimize and incremental_vacuum): the \
     writer's promises rest on its settings (journal_mode, synchronous, locking_mode, busy_timeout, \
     wal_autocheckpoint, query_only, foreign_keys, cache_size, ...), and its writes may go on on another connection \
     opened with the builder's, so set them when the database opens (Builder::profile, Builder::pragma); \
     checkpoints are the writer's; a database is attached by the set-up hook (Builder::on_connection), on every \
     connection";

/// The message of a read that ran a statement that writes, where SQLite did not refuse it by itself.
const READ_WROTE: &str =
    "attempt to write a readonly database: a read ran a statement that writes (rolled back)";

/// The SQLite error inside a rusqlite error, including the syntax errors rusqlite reports with their offset.
fn sqlite_failure(e: &rusqlite::Error) -> Option<&ffi::Error> {
    match e {
        rusqlite::Error::SqlInputError { error, .. } => Some(error),
        other => other.sqlite_error(),
    }
}

/// `Result` with this crate's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Turns a panic payload into a readable message.
pub(crate) fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "non-string panic payload".to_string()
    }
}

/// SQLite's extended code and message of `e` (`SQLITE_ERROR` and the text for errors rusqlite made itself).
pub(crate) fn sqlite_parts(e: &rusqlite::Error) -> (i32, String) {
    match e {
        rusqlite::Error::SqliteFailure(err, msg) => (
            err.extended_code,
            msg.clone().unwrap_or_else(|| err.to_string()),
        ),
        other => (ffi::SQLITE_ERROR, other.to_string()),
    }
}

/// What became of the run of Litestream that a restore gave up on: `command` as [`Error::RestoreTimedOut`] names it.
fn stopped(command: &str) -> String {
    if command == "vfs" {
        "its comparison through Litestream's VFS was left to finish on its own".into()
    } else {
        format!("`litestream {command}` was killed")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commit_failed_exposes_codes() {
        let e = Error::CommitFailed {
            extended_code: ffi::SQLITE_IOERR_FSYNC,
            message: "disk I/O error".into(),
            batch: 3,
        };
        assert_eq!(e.extended_code(), Some(ffi::SQLITE_IOERR_FSYNC));
        assert_eq!(e.sqlite_code(), Some(rusqlite::ErrorCode::SystemIoFailure));
        assert!(e.to_string().contains("nothing in this group of 3 writes"));
    }

    #[test]
    fn a_write_lock_held_elsewhere_says_busy_and_names_the_holder_each_copy_too() {
        let held = |pid, program: Option<&str>| Error::WriteLockHeld {
            waited: std::time::Duration::from_secs(30),
            pid,
            program: program.map(str::to_owned),
        };
        let e = held(Some(4242), Some("litestream"));
        assert_eq!(e.sqlite_code(), Some(rusqlite::ErrorCode::DatabaseBusy));
        assert_eq!(e.extended_code(), Some(ffi::SQLITE_BUSY));
        assert_eq!(
            e.duplicate().to_string(),
            "the database's write lock was held by process 4242 (litestream) for 30s: this write did not run, \
             nothing of it was committed"
        );
        let mine = held(Some(std::process::id()), Some("tests"));
        assert!(
            mine.to_string().contains("a connection of this process"),
            "{mine}"
        );
        let unknown = held(None, None);
        assert!(
            unknown
                .to_string()
                .contains("which process, the system did not tell"),
            "{unknown}"
        );
    }

    #[test]
    fn panic_message_reads_str_and_string() {
        let a: Box<dyn std::any::Any + Send> = Box::new("boom");
        let b: Box<dyn std::any::Any + Send> = Box::new(String::from("bang"));
        let c: Box<dyn std::any::Any + Send> = Box::new(7_u8);
        assert_eq!(panic_message(a.as_ref()), "boom");
        assert_eq!(panic_message(b.as_ref()), "bang");
        assert_eq!(panic_message(c.as_ref()), "non-string panic payload");
    }

    #[test]
    fn a_restore_that_timed_out_says_so_and_that_the_tenant_was_not_opened_each_copy_too() {
        let e = Error::RestoreTimedOut {
            name: "acme".into(),
            command: "restore".into(),
            timeout: std::time::Duration::from_secs(300),
        };
        let expected = "the restore of tenant \"acme\" timed out after 300s (`litestream restore` was killed): the \
                        tenant was not opened";
        assert_eq!(e.to_string(), expected);
        assert!(matches!(e.duplicate(), Error::RestoreTimedOut { .. }));
        assert_eq!(e.duplicate().to_string(), expected);
    }
}
