//! The one witness of commits on the writer's connection.
//!
//! SQLite calls a connection's commit hook before every commit, whatever asked for it — the engine's `COMMIT`, a
//! statement in autocommit mode, a closure that manages its own transactions, a statement that fails after
//! changing rows it keeps (`OR FAIL`, a trigger's `RAISE(FAIL)`) — and its rollback hook when a commit fails. The
//! witness is those hooks, and the one place that decides what counts as a commit:
//!
//! - a commit happens only where the engine allows one ([`Witness::allow`]): around its own `COMMIT`, a statement
//!   it runs in autocommit mode, a closure that manages its own transactions. Anywhere else — a read lent the
//!   connection, a write closure whose transaction SQLite ended (an `OR ROLLBACK` conflict, a trigger's
//!   `RAISE(ROLLBACK)`) and which goes on writing in autocommit mode — the hook vetoes it, and SQLite rolls it back;
//! - a commit allowed marks the commit under way when it starts ([`Shared::commit_starts`]: the write lock is held
//!   by then), and the engine settles it after the statement ([`Witness::settle`]): published to read-your-writes
//!   and told to subscribers if it reached the file, whatever the statement returned, abandoned if not;
//! - the update hook records each row changed into the change log, which the rollback hook empties.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};

use rusqlite::Connection;

use crate::engine::Shared;

/// The witness of one read-write connection's commits.
pub(crate) struct Witness {
    state: Arc<State>,
    /// Held by the three hooks: a holder fewer means one was replaced through rusqlite ([`Witness::rearm`]).
    sentinel: Arc<()>,
}

/// Commits allowed on a connection while it lives ([`Witness::allowing`]).
pub(crate) struct Allowed(Arc<State>);

impl Drop for Allowed {
    fn drop(&mut self) {
        self.0.allowed.store(false, Ordering::Relaxed);
    }
}

/// Holders of the sentinel while the hooks are the witness's: itself and the three.
const SENTINEL_HOLDERS: usize = 4;

/// What the hooks see, on the connection's thread (atomics only because the hooks must be `Send`).
struct State {
    shared: Arc<Shared>,
    /// Whether a commit is allowed now.
    allowed: AtomicBool,
    /// Commits allowed and started since the last settle.
    started: AtomicU32,
    /// Whether a rollback followed a commit started since the last settle: that commit failed.
    failed: AtomicBool,
    /// Commits vetoed, ever.
    vetoed: AtomicU64,
}

impl State {
    /// The commit hook: `true` vetoes the commit.
    fn commit_starts(&self) -> bool {
        if !self.allowed.load(Ordering::Relaxed) {
            self.vetoed.fetch_add(1, Ordering::Relaxed);
            return true;
        }
        if self.started.fetch_add(1, Ordering::Relaxed) == 0 {
            self.shared.commit_starts();
        }
        false
    }

    /// The rollback hook.
    fn rolled_back(&self) {
        self.shared.changes.discard();
        if self.started.load(Ordering::Relaxed) > 0 {
            self.failed.store(true, Ordering::Relaxed);
        }
    }
}

/// Makes `conn`, a read-write connection of the database `shared` belongs to, witnessed: its commits are published
/// and told only through the witness returned, and happen only where it allows them.
pub(crate) fn install(conn: &mut Connection, shared: &Arc<Shared>) -> rusqlite::Result<Witness> {
    let witness = Witness {
        state: Arc::new(State {
            shared: shared.clone(),
            allowed: AtomicBool::new(false),
            started: AtomicU32::new(0),
            failed: AtomicBool::new(false),
            vetoed: AtomicU64::new(0),
        }),
        sentinel: Arc::new(()),
    };
    witness.register(conn)?;
    Ok(witness)
}

impl Witness {
    fn register(&self, conn: &mut Connection) -> rusqlite::Result<()> {
        let (state, sentinel) = (self.state.clone(), self.sentinel.clone());
        conn.commit_hook(Some(move || {
            let _ = &sentinel;
            state.commit_starts()
        }))?;
        let (state, sentinel) = (self.state.clone(), self.sentinel.clone());
        conn.rollback_hook(Some(move || {
            let _ = &sentinel;
            state.rolled_back();
        }))?;
        let (state, sentinel) = (self.state.clone(), self.sentinel.clone());
        conn.update_hook(Some(
            move |_: rusqlite::hooks::Action, _: &str, table: &str, rowid: i64| {
                let _ = &sentinel;
                state.shared.changes.record(table, rowid);
            },
        ))
    }

    /// Runs `f`, which may commit: the engine's `COMMIT`, a statement in autocommit mode, a closure that manages
    /// its own transactions.
    pub(crate) fn allow<T>(&self, f: impl FnOnce() -> T) -> T {
        let _allowed = self.allowing();
        f()
    }

    /// Commits are allowed until the value returned is dropped (also by a panic).
    pub(crate) fn allowing(&self) -> Allowed {
        self.state.allowed.store(true, Ordering::Relaxed);
        Allowed(self.state.clone())
    }

    /// After a statement that may have committed, on `conn`: publishes the commit and returns `true` if it reached
    /// the file (its commit hook ran, no rollback followed, and the connection is out of its transaction), else
    /// says the commit under way, if any, did not happen.
    pub(crate) fn settle(&self, conn: &Connection) -> bool {
        let started = self.state.started.swap(0, Ordering::Relaxed);
        let failed = self.state.failed.swap(false, Ordering::Relaxed);
        if started == 0 {
            return false;
        }
        if !failed && conn.is_autocommit() {
            self.state.shared.publish_commit();
            true
        } else {
            self.state.shared.commit_abandoned();
            false
        }
    }

    /// After a closure that manages its own transactions: it may have committed any number of times, so a commit is
    /// published whatever happened (one that did not happen costs the readers a new snapshot, nothing more).
    pub(crate) fn settle_all(&self) {
        self.state.started.store(0, Ordering::Relaxed);
        self.state.failed.store(false, Ordering::Relaxed);
        self.state.shared.publish_commit();
    }

    /// Commits vetoed so far.
    pub(crate) fn vetoed(&self) -> u64 {
        self.state.vetoed.load(Ordering::Relaxed)
    }

    /// Registers the hooks again if one was replaced through rusqlite's API (with rusqlite 0.40, whose hooks take
    /// `&self`, a closure can); returns whether one was.
    pub(crate) fn rearm(&mut self, conn: &mut Connection) -> bool {
        if Arc::strong_count(&self.sentinel) >= SENTINEL_HOLDERS {
            return false;
        }
        self.sentinel = Arc::new(());
        if let Err(e) = self.register(conn) {
            tracing::error!(error = %e, "could not put back the writer's commit hooks");
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn witnessed() -> (Connection, Witness, Arc<Shared>) {
        let shared = Arc::new(Shared::default());
        let mut conn = Connection::open_in_memory().unwrap();
        let witness = install(&mut conn, &shared).unwrap();
        (conn, witness, shared)
    }

    #[test]
    fn a_commit_happens_only_where_allowed_and_is_published_once_settled() {
        let (conn, witness, shared) = witnessed();
        witness
            .allow(|| conn.execute_batch("CREATE TABLE t (v)"))
            .unwrap();
        assert!(witness.settle(&conn));
        assert_eq!(shared.commit_seq(), 1);
        // Not allowed: vetoed, rolled back, nothing to settle.
        let vetoed = conn.execute("INSERT INTO t VALUES (1)", []).unwrap_err();
        assert_eq!(
            vetoed.sqlite_error_code(),
            Some(rusqlite::ErrorCode::ConstraintViolation)
        );
        assert_eq!(witness.vetoed(), 1);
        assert!(!witness.settle(&conn));
        let rows: i64 = conn
            .query_row("SELECT count(*) FROM t", [], |r| r.get(0))
            .unwrap();
        assert_eq!((rows, shared.commit_seq()), (0, 1));
    }

    #[test]
    fn a_statement_that_fails_after_changing_rows_it_keeps_is_a_commit() {
        let (conn, witness, shared) = witnessed();
        witness
            .allow(|| {
                conn.execute_batch(
                    "CREATE TABLE t (id INTEGER PRIMARY KEY, v UNIQUE); INSERT INTO t VALUES (1, 'a'), (2, 'b')",
                )
            })
            .unwrap();
        assert!(witness.settle(&conn));
        let failed =
            witness.allow(|| conn.execute("UPDATE OR FAIL t SET v = 'x' WHERE id IN (1, 2)", []));
        assert!(failed.is_err());
        assert!(witness.settle(&conn), "SQLite committed the first row");
        assert_eq!(shared.commit_seq(), 2);
        // One that fails and keeps nothing is no commit.
        let undone = witness.allow(|| conn.execute("UPDATE t SET v = 'y' WHERE id IN (1, 2)", []));
        assert!(undone.is_err());
        assert!(!witness.settle(&conn));
        assert_eq!(shared.commit_seq(), 2);
        assert_eq!(
            shared.visible_seq(),
            2,
            "the commit under way was abandoned"
        );
    }

    #[test]
    fn replaced_hooks_are_put_back() {
        let (mut conn, mut witness, _) = witnessed();
        assert!(!witness.rearm(&mut conn), "nothing to put back");
        // As a closure could with rusqlite 0.40.
        conn.commit_hook(None::<fn() -> bool>).unwrap();
        conn.execute_batch("CREATE TABLE t (x)").unwrap();
        assert!(witness.rearm(&mut conn));
        conn.execute_batch("CREATE TABLE u (x)").unwrap_err();
        assert_eq!(witness.vetoed(), 1, "the veto is back");
    }
}
