//! A connection with the guard that keeps transaction control to the handle.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use rusqlite::Connection;
use rusqlite::hooks::{AuthAction, AuthContext, Authorization};

/// Name of the savepoint each write of a group runs in.
pub(crate) const SAVEPOINT: &str = "quicklite_write";

/// Refuses transaction control (`BEGIN`, `COMMIT`, `ROLLBACK`, and our own savepoint) to user closures.
///
/// The handle owns transaction boundaries: a closure that ran `COMMIT` in the middle of a group would commit its
/// neighbours' work early, and one that ran `ROLLBACK` would silently undo writes the handle is about to report as
/// committed. SQLite asks the authorizer when a statement is prepared (and re-prepared after a schema change), so
/// the handle opens the gate only around its own statements.
#[derive(Clone, Default)]
pub(crate) struct TxGuard {
    /// True while the handle itself runs (or re-prepares) a transaction-control statement.
    open: Arc<AtomicBool>,
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
        let open = self.open.clone();
        conn.authorizer(Some(move |ctx: AuthContext<'_>| {
            let controls_tx = match ctx.action {
                AuthAction::Transaction { .. } => true,
                AuthAction::Savepoint { savepoint_name, .. } => {
                    savepoint_name.eq_ignore_ascii_case(SAVEPOINT)
                }
                _ => false,
            };
            if controls_tx && !open.load(Ordering::Relaxed) {
                Authorization::Deny
            } else {
                Authorization::Allow
            }
        }))
    }
}

/// A connection whose transaction control belongs to the handle: user closures get the [`Connection`]; the
/// engine runs its `BEGIN`, `COMMIT` and savepoints through [`GuardedConnection::control`].
pub(crate) struct GuardedConnection {
    conn: Connection,
    guard: TxGuard,
}

impl GuardedConnection {
    /// Installs the guard on `conn`.
    pub(crate) fn new(mut conn: Connection) -> rusqlite::Result<GuardedConnection> {
        let guard = TxGuard::default();
        guard.install(&mut conn)?;
        Ok(GuardedConnection { conn, guard })
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

    /// Runs `f` with transaction control allowed: for closures that manage their own transactions.
    pub(crate) fn allow_tx_control<T>(&self, f: impl FnOnce(&Connection) -> T) -> T {
        self.guard.allow_tx_control(|| f(&self.conn))
    }

    /// The connection without its guard (for a connection that runs no user closure).
    pub(crate) fn into_inner(self) -> Connection {
        self.conn
    }

    /// Closes the connection, reporting a failure.
    pub(crate) fn close(self) -> Result<(), rusqlite::Error> {
        self.conn.close().map_err(|(_, e)| e)
    }
}
