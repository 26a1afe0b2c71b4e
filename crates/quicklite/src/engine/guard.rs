//! A connection with the guard that keeps transaction control to the handle.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Instant;

use rusqlite::Connection;
use rusqlite::hooks::{AuthAction, AuthContext, Authorization};

/// Name of the savepoint each write of a group runs in, as a macro so that the statements that use it are
/// constants made from it (`engine/group`): the guard refuses closures exactly the savepoint the engine runs.
macro_rules! savepoint_name {
    () => {
        "quicklite_write"
    };
}
pub(crate) use savepoint_name;

/// Name of the savepoint each write of a group runs in.
pub(crate) const SAVEPOINT: &str = savepoint_name!();

/// Refuses transaction control (`BEGIN`, `COMMIT`, `ROLLBACK`, and our own savepoint) to user closures.
///
/// The handle owns transaction boundaries: a closure that ran `COMMIT` in the middle of a group would commit its
/// neighbours' work early, and one that ran `ROLLBACK` would silently undo writes the handle is about to report as
/// committed. SQLite asks the authorizer when a statement is prepared (and re-prepared after a schema change), so
/// the handle opens the gate only around its own statements.
///
/// While the writer's connection is lent to reads ([`GuardedConnection::lend_read_only`],
/// [`GuardedConnection::set_lent`]), a read closure's `PRAGMA query_only` is ignored: it can neither turn off the
/// `query_only` a lent connection may run under nor leave it on for the writes that follow.
#[derive(Clone, Default)]
pub(crate) struct TxGuard {
    /// True while the handle itself runs (or re-prepares) a transaction-control statement.
    open: Arc<AtomicBool>,
    /// True while the connection is lent to reads.
    lent: Arc<AtomicBool>,
}

impl TxGuard {
    /// Runs `f` with transaction control allowed.
    pub(crate) fn allow_tx_control<T>(&self, f: impl FnOnce() -> T) -> T {
        self.open.store(true, Ordering::Relaxed);
        let out = f();
        self.open.store(false, Ordering::Relaxed);
        out
    }

    fn install(&self, conn: &mut Connection) -> rusqlite::Result<()> {
        let (open, lent) = (self.open.clone(), self.lent.clone());
        conn.authorizer(Some(move |ctx: AuthContext<'_>| {
            if open.load(Ordering::Relaxed) {
                return Authorization::Allow;
            }
            match ctx.action {
                AuthAction::Transaction { .. } => Authorization::Deny,
                AuthAction::Savepoint { savepoint_name, .. }
                    if savepoint_name.eq_ignore_ascii_case(SAVEPOINT) =>
                {
                    Authorization::Deny
                }
                AuthAction::Pragma {
                    pragma_name,
                    pragma_value: Some(_),
                } if pragma_name.eq_ignore_ascii_case("query_only")
                    && lent.load(Ordering::Relaxed) =>
                {
                    Authorization::Ignore
                }
                _ => Authorization::Allow,
            }
        }))
    }
}

/// A connection whose transaction control belongs to the handle: user closures get the [`Connection`]; the
/// engine runs its `BEGIN`, `COMMIT` and savepoints through [`GuardedConnection::control`].
pub(crate) struct GuardedConnection {
    conn: Connection,
    guard: TxGuard,
    /// The running request's deadline, in microseconds since [`epoch`] (0: none), which SQLite's progress
    /// handler checks: a statement still running past it is interrupted, as is a read's whose caller has stopped
    /// waiting ([`crate::request::caller_gone`]).
    deadline: Arc<AtomicU64>,
}

/// How many virtual-machine instructions SQLite runs between two calls of the progress handler: often enough to
/// stop a runaway statement within a fraction of a millisecond, rarely enough to cost nothing measurable.
const PROGRESS_EVERY: std::ffi::c_int = 1000;

/// The clock of the connections' deadlines.
fn epoch() -> Instant {
    static EPOCH: OnceLock<Instant> = OnceLock::new();
    *EPOCH.get_or_init(Instant::now)
}

fn micros_since_epoch(at: Instant) -> u64 {
    u64::try_from(at.saturating_duration_since(epoch()).as_micros())
        .unwrap_or(u64::MAX)
        .max(1)
}

impl GuardedConnection {
    /// Installs the guard on `conn`.
    pub(crate) fn new(mut conn: Connection) -> rusqlite::Result<GuardedConnection> {
        let guard = TxGuard::default();
        guard.install(&mut conn)?;
        let deadline = Arc::new(AtomicU64::new(0));
        let watched = deadline.clone();
        conn.progress_handler(
            PROGRESS_EVERY,
            Some(move || {
                let at = watched.load(Ordering::Relaxed);
                (at != 0 && micros_since_epoch(Instant::now()) >= at)
                    || crate::request::caller_gone()
            }),
        )?;
        Ok(GuardedConnection {
            conn,
            guard,
            deadline,
        })
    }

    /// Runs `f` with `deadline` (if any) enforced on the statements it runs: past it, the running statement is
    /// interrupted (`SQLITE_INTERRUPT`).
    pub(crate) fn run_until<T>(&self, deadline: Option<Instant>, f: impl FnOnce() -> T) -> T {
        let Some(deadline) = deadline else {
            return f();
        };
        self.deadline
            .store(micros_since_epoch(deadline), Ordering::Relaxed);
        let out = f();
        self.deadline.store(0, Ordering::Relaxed);
        out
    }

    /// [`GuardedConnection::run_until`] for `f` that needs the connection itself.
    pub(crate) fn run_until_mut<T>(
        &mut self,
        deadline: Option<Instant>,
        f: impl FnOnce(&mut GuardedConnection) -> T,
    ) -> T {
        let Some(deadline) = deadline else {
            return f(self);
        };
        self.deadline
            .store(micros_since_epoch(deadline), Ordering::Relaxed);
        let out = f(self);
        self.deadline.store(0, Ordering::Relaxed);
        out
    }

    /// The connection, as user closures see it.
    pub(crate) fn conn(&self) -> &Connection {
        &self.conn
    }

    /// The connection, to install hooks on.
    pub(crate) fn conn_mut(&mut self) -> &mut Connection {
        &mut self.conn
    }

    /// Runs one of the handle's own transaction-control statements (kept prepared in the statement cache).
    pub(crate) fn control(&self, sql: &str) -> rusqlite::Result<()> {
        self.guard.allow_tx_control(|| {
            self.conn.prepare_cached(sql)?.execute([])?;
            Ok(())
        })
    }

    /// Lends the connection to `f` made read-only (`query_only`, which read closures cannot turn off), so that a
    /// write attempted there fails with `SQLITE_READONLY` as on a reader's connection; `None` if it could not be
    /// made read-only. The two PRAGMAs are prepared each time rather than cached, so a closure cannot find the
    /// handle's own statement in the cache.
    pub(crate) fn lend_read_only<T>(&self, f: impl FnOnce(&GuardedConnection) -> T) -> Option<T> {
        let on = self
            .guard
            .allow_tx_control(|| self.conn.execute_batch("PRAGMA query_only = ON"));
        if let Err(e) = on {
            tracing::warn!(error = %e, "could not make the writer's connection read-only for reads");
            return None;
        }
        self.guard.lent.store(true, Ordering::Relaxed);
        let out = f(self);
        self.guard.lent.store(false, Ordering::Relaxed);
        let off = self
            .guard
            .allow_tx_control(|| self.conn.execute_batch("PRAGMA query_only = OFF"));
        if let Err(e) = off {
            // Writes on this connection would now fail with SQLITE_READONLY, each with that clear error.
            tracing::error!(error = %e, "could not make the writer's connection writable again");
        }
        Some(out)
    }

    /// Whether the connection is inside a write transaction, on any of its schemas (`temp` too).
    pub(crate) fn writing(&self) -> bool {
        // SAFETY: the handle is this open connection's, used on this thread only; a null schema asks about all.
        let state =
            unsafe { rusqlite::ffi::sqlite3_txn_state(self.conn.handle(), std::ptr::null()) };
        state == rusqlite::ffi::SQLITE_TXN_WRITE
    }

    /// Marks the connection lent to reads, or given back: while it is lent, a read closure's `PRAGMA query_only`
    /// is ignored.
    pub(crate) fn set_lent(&self, lent: bool) {
        self.guard.lent.store(lent, Ordering::Relaxed);
    }

    /// The connection without its guard (for a connection that runs no user closure).
    pub(crate) fn into_inner(self) -> Connection {
        self.conn
    }

    /// Runs `f` on the connection itself, with transaction control allowed: for closures that manage their own
    /// transactions, and for an application's migration.
    pub(crate) fn allow_tx_control_mut<T>(&mut self, f: impl FnOnce(&mut Connection) -> T) -> T {
        let guard = self.guard.clone();
        guard.allow_tx_control(|| f(&mut self.conn))
    }

    /// Closes the connection, reporting a failure.
    pub(crate) fn close(self) -> Result<(), rusqlite::Error> {
        self.conn.close().map_err(|(_, e)| e)
    }
}
