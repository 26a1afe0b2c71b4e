//! A connection with the guard that keeps transaction control to the handle, and what keeps the writer's
//! connection the writer's while it is lent to reads.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use rusqlite::Connection;
use rusqlite::hooks::{AuthAction, AuthContext, Authorization};

use crate::engine::busy::BusyLimit;
use crate::engine::hooks::Armed;
use crate::engine::witness::Witness;

/// Name of the savepoint each write of a group runs in, as a macro so that the statements that use it are
/// constants made from it ([`Control`]): the guard refuses closures exactly the savepoint the engine runs.
macro_rules! savepoint_name {
    () => {
        "quicklite_write"
    };
}

/// Name of the savepoint each write of a group runs in.
pub(crate) const SAVEPOINT: &str = savepoint_name!();

/// The handle's own transaction-control statements ([`GuardedConnection::control`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Control {
    /// `BEGIN`: a read's snapshot.
    Begin,
    /// `BEGIN IMMEDIATE`: a write transaction, the write lock taken at once.
    BeginImmediate,
    Commit,
    Rollback,
    /// The savepoint each write of a group runs in ([`SAVEPOINT`]), begun, released and rolled back to.
    Savepoint,
    Release,
    RollbackTo,
}

impl Control {
    fn sql(self) -> &'static str {
        match self {
            Control::Begin => "BEGIN",
            Control::BeginImmediate => "BEGIN IMMEDIATE",
            Control::Commit => "COMMIT",
            Control::Rollback => "ROLLBACK",
            Control::Savepoint => concat!("SAVEPOINT ", savepoint_name!()),
            Control::Release => concat!("RELEASE ", savepoint_name!()),
            Control::RollbackTo => concat!("ROLLBACK TO ", savepoint_name!()),
        }
    }

    /// The statement's key in rusqlite's statement cache: its SQL and a comment holding a number drawn once per
    /// process. SQLite's authorizer sees a statement only when it is prepared, and rusqlite does not prepare again
    /// a statement found in its cache: under its bare SQL the handle's own `COMMIT` (prepared while the guard was
    /// open) would be found and run, unrefused, by anyone's `prepare_cached("COMMIT")` — `Database::execute`
    /// prepares that way. No other SQL finds it under this key.
    fn key(self) -> &'static str {
        static KEYS: OnceLock<[String; 7]> = OnceLock::new();
        let keys = KEYS.get_or_init(|| {
            let drawn = std::hash::BuildHasher::hash_one(
                &std::collections::hash_map::RandomState::new(),
                std::process::id(),
            );
            [
                Control::Begin,
                Control::BeginImmediate,
                Control::Commit,
                Control::Rollback,
                Control::Savepoint,
                Control::Release,
                Control::RollbackTo,
            ]
            .map(|control| format!("{} -- quicklite {drawn:016x}", control.sql()))
        });
        &keys[self as usize]
    }
}

/// PRAGMAs that take an argument and only report: allowed to reads on the writer's connection, as any PRAGMA that
/// takes none but those in [`ACTIONS`].
const REPORTS: [&str; 12] = [
    "table_info",
    "table_xinfo",
    "table_list",
    "index_info",
    "index_xinfo",
    "index_list",
    "foreign_key_list",
    "foreign_key_check",
    "integrity_check",
    "quick_check",
    "function_list",
    "pragma_list",
];

/// PRAGMAs that act on the connection or the file without an argument.
const ACTIONS: [&str; 4] = [
    "wal_checkpoint",
    "optimize",
    "incremental_vacuum",
    "shrink_memory",
];

/// Whether `PRAGMA name` (with `value`, if any) would change the connection or the file, rather than report.
fn pragma_changes(name: &str, value: Option<&str>) -> bool {
    let is = |names: &[&str]| names.iter().any(|n| n.eq_ignore_ascii_case(name));
    match value {
        Some(_) => !is(&REPORTS),
        None => is(&ACTIONS),
    }
}

/// PRAGMAs that set something of the database itself (its header, its free pages, its statistics) or of the write's
/// own transaction, not of the connection: a write's to use ([`changes_writer`]).
const WRITES: [&str; 6] = [
    "user_version",
    "application_id",
    "defer_foreign_keys",
    "optimize",
    "incremental_vacuum",
    "shrink_memory",
];

/// Whether `PRAGMA name` (with `value`, if any), run by a write, would change the writer's connection — its journal,
/// its syncing, its locks, its busy handler, its checkpoints, its cache, its foreign keys … — or checkpoint.
///
/// The writer's promises rest on its settings, and its writes may go on on another connection opened with the
/// builder's (a second one while a long read holds the first; a registry's database reopened), where a setting a
/// write made would be lost. SQLite applies some PRAGMAs as the statement is prepared (`busy_timeout`,
/// `wal_autocheckpoint`) and some only in autocommit mode (`synchronous`, `foreign_keys`), so only the authorizer
/// refuses them in time and alike, grouped or not. `journal_mode = WAL` changes nothing a write can change: SQLite
/// refuses to enter WAL inside a transaction, and a statement that returns its row is refused before it runs.
fn changes_writer(name: &str, value: Option<&str>) -> bool {
    let wal = name.eq_ignore_ascii_case("journal_mode")
        && value.is_some_and(|value| value.eq_ignore_ascii_case("wal"));
    pragma_changes(name, value) && !WRITES.iter().any(|n| n.eq_ignore_ascii_case(name)) && !wal
}

/// Refuses transaction control (`BEGIN`, `COMMIT`, `ROLLBACK`, and our own savepoint) to user closures.
///
/// The handle owns transaction boundaries: a closure that ran `COMMIT` in the middle of a group would commit its
/// neighbours' work early, and one that ran `ROLLBACK` would silently undo writes the handle is about to report as
/// committed. SQLite asks the authorizer when a statement is prepared (and re-prepared after a schema change), so
/// the handle opens the gate only around its own statements.
///
/// While the writer's connection is lent to reads ([`GuardedConnection::lend_read_only`],
/// [`GuardedConnection::set_lent`]), the writer's set-up is the writer's: a read's `PRAGMA query_only` is
/// ignored (it can neither turn off the `query_only` a lent connection runs under nor leave it on for the writes
/// that follow), and a PRAGMA that would change the connection (`busy_timeout`, `wal_autocheckpoint`, `cache_size`,
/// a checkpoint …), `ATTACH` and `DETACH` are refused (`SQLITE_AUTH`).
///
/// Once the writer's connection is set up ([`GuardedConnection::fix_writer_settings`]), a write is refused a PRAGMA
/// that would change the connection, and a checkpoint ([`changes_writer`]): settings are set when the database opens,
/// and the engine runs its checkpoints itself. So are `ATTACH` and `DETACH`: a database attached to the writer alone
/// would be missing from every read, and SQLite refuses both inside a transaction, so that a write's outcome would
/// depend on whether other writes shared its group; the set-up hook attaches on every connection.
#[derive(Clone, Default)]
pub(crate) struct TxGuard {
    /// True while the handle itself runs (or re-prepares) a transaction-control statement.
    open: Arc<AtomicBool>,
    /// True while the connection is lent to reads.
    lent: Arc<AtomicBool>,
    /// True once the writer's connection is set up: its settings are no write's to change.
    fixed: Arc<AtomicBool>,
}

impl TxGuard {
    /// Runs `f` with transaction control allowed.
    pub(crate) fn allow_tx_control<T>(&self, f: impl FnOnce() -> T) -> T {
        self.open.store(true, Ordering::Relaxed);
        let out = f();
        self.open.store(false, Ordering::Relaxed);
        out
    }

    fn install(&self, conn: &mut Connection, sentinel: &Arc<()>) -> rusqlite::Result<()> {
        let (open, lent, fixed) = (self.open.clone(), self.lent.clone(), self.fixed.clone());
        let sentinel = sentinel.clone();
        conn.authorizer(Some(move |ctx: AuthContext<'_>| {
            let _ = &sentinel;
            if open.load(Ordering::Relaxed) {
                return Authorization::Allow;
            }
            let lent = lent.load(Ordering::Relaxed);
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
                } if lent && pragma_name.eq_ignore_ascii_case("query_only") => {
                    Authorization::Ignore
                }
                AuthAction::Pragma {
                    pragma_name,
                    pragma_value,
                } if lent && pragma_changes(pragma_name, pragma_value) => Authorization::Deny,
                AuthAction::Pragma {
                    pragma_name,
                    pragma_value,
                } if fixed.load(Ordering::Relaxed) && changes_writer(pragma_name, pragma_value) => {
                    Authorization::Deny
                }
                AuthAction::Attach { .. } | AuthAction::Detach { .. }
                    if lent || fixed.load(Ordering::Relaxed) =>
                {
                    Authorization::Deny
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
    /// Held by the authorizer and the progress handler: a holder fewer means a closure replaced one of them
    /// through rusqlite (whose 0.40 takes hooks with `&self`), and [`GuardedConnection::rearm`] puts them back.
    sentinel: Arc<()>,
    /// The hooks registered through SQLite's C API, registered again by [`GuardedConnection::rearm`].
    armed: Vec<Armed>,
    /// The witness of commits, on a read-write connection ([`crate::engine::witness`]).
    witness: Option<Witness>,
    /// How long its busy handler waits for a lock held elsewhere, once installed ([`BusyLimit::install`]).
    busy: Option<BusyLimit>,
}

/// Holders of a connection's sentinel while its authorizer and progress handler are its own: itself and the two.
const SENTINEL_HOLDERS: usize = 3;

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

/// Installs the progress handler: it interrupts a statement past the running request's deadline or whose
/// caller has stopped waiting, and enforces a read's bound ([`crate::engine::bound`]).
fn watch_progress(
    conn: &mut Connection,
    deadline: &Arc<AtomicU64>,
    sentinel: &Arc<()>,
) -> rusqlite::Result<()> {
    let (watched, sentinel) = (deadline.clone(), sentinel.clone());
    conn.progress_handler(
        PROGRESS_EVERY,
        Some(move || {
            let _ = &sentinel;
            let stop = || {
                let at = watched.load(Ordering::Relaxed);
                (at != 0 && micros_since_epoch(Instant::now()) >= at)
                    || crate::request::caller_gone()
            };
            crate::engine::bound::check(stop);
            stop()
        }),
    )
}

impl GuardedConnection {
    /// Installs the guard on `conn`.
    pub(crate) fn new(mut conn: Connection) -> rusqlite::Result<GuardedConnection> {
        let guard = TxGuard::default();
        let sentinel = Arc::new(());
        guard.install(&mut conn, &sentinel)?;
        let deadline = Arc::new(AtomicU64::new(0));
        watch_progress(&mut conn, &deadline, &sentinel)?;
        Ok(GuardedConnection {
            conn,
            guard,
            deadline,
            sentinel,
            armed: Vec::new(),
            witness: None,
            busy: None,
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

    /// Keeps `armed`, a hook registered through SQLite's C API, to register it again after a lending.
    pub(crate) fn keep_armed(&mut self, armed: Armed) {
        self.armed.push(armed);
    }

    /// Keeps `busy`, the limit of the busy handler installed on the connection.
    pub(crate) fn set_busy(&mut self, busy: BusyLimit) {
        self.busy = Some(busy);
    }

    /// Runs `f`, which may wait for a lock another connection holds, with the connection's busy handler waiting up
    /// to `limit` ([`BusyLimit::waiting_up_to`]; without a handler of quicklite's, as the connection waits).
    pub(crate) fn waiting_up_to<T>(&self, limit: Duration, f: impl FnOnce() -> T) -> T {
        match &self.busy {
            Some(busy) => busy.waiting_up_to(limit, f),
            None => f(),
        }
    }

    /// Refuses writes, from now on, a PRAGMA that would change the connection, a checkpoint, `ATTACH` and `DETACH`
    /// ([`TxGuard`]): the writer's connection is set up.
    pub(crate) fn fix_writer_settings(&self) {
        self.guard.fixed.store(true, Ordering::Relaxed);
    }

    /// Runs `f`, the handle's own statements on the connection (its transaction control, a checkpoint), with the
    /// guard open.
    pub(crate) fn run_own<T>(&self, f: impl FnOnce(&Connection) -> T) -> T {
        self.guard.allow_tx_control(|| f(&self.conn))
    }

    /// Makes this a writer's connection, whose commits a witness sees ([`crate::engine::witness`]).
    pub(crate) fn set_witness(&mut self, witness: Witness) {
        self.witness = Some(witness);
    }

    /// Commits vetoed on this connection so far (none without a witness).
    pub(crate) fn vetoed(&self) -> u64 {
        self.witness.as_ref().map_or(0, Witness::vetoed)
    }

    /// Runs `f` with commits allowed: the engine's `COMMIT`, a statement it runs in autocommit mode, a closure
    /// that manages its own transactions ([`Witness::allow`]; a connection without a witness commits as it will).
    pub(crate) fn committing<T>(&self, f: impl FnOnce() -> T) -> T {
        match &self.witness {
            Some(witness) => witness.allow(f),
            None => f(),
        }
    }

    /// [`GuardedConnection::committing`] for `f` that needs the connection itself.
    pub(crate) fn committing_mut<T>(&mut self, f: impl FnOnce(&mut GuardedConnection) -> T) -> T {
        let _allowed = self.witness.as_ref().map(Witness::allowing);
        f(self)
    }

    /// After a statement that may have committed: whether a commit reached the file, now published
    /// ([`Witness::settle`]).
    pub(crate) fn settle(&self) -> bool {
        self.witness
            .as_ref()
            .is_some_and(|witness| witness.settle(&self.conn))
    }

    /// After a closure that managed its own transactions ([`Witness::settle_all`]).
    pub(crate) fn settle_all(&self) {
        if let Some(witness) = &self.witness {
            witness.settle_all();
        }
    }

    /// Runs one of the handle's own transaction-control statements (kept prepared in the statement cache, under a
    /// key no other SQL has: [`Control::key`]).
    pub(crate) fn control(&self, control: Control) -> rusqlite::Result<()> {
        self.run_own(|conn| {
            conn.prepare_cached(control.key())?.execute([])?;
            Ok(())
        })
    }

    /// Rolls back the transaction open on the connection, if one is (a statement or a closure left it open, or a
    /// step failed before it ended); returns whether one was. A rollback that fails is logged.
    pub(crate) fn roll_back_open(&self) -> bool {
        if self.conn.is_autocommit() {
            return false;
        }
        if let Err(e) = self.control(Control::Rollback) {
            tracing::warn!(error = %e, "could not roll back a transaction left open");
        }
        true
    }

    /// Lends the connection to `f`, a batch of reads ([`GuardedConnection::set_lent`]); what `f` changed of the
    /// connection's hooks is put back afterwards.
    pub(crate) fn lend_read_only<T>(&mut self, f: impl FnOnce(&GuardedConnection) -> T) -> T {
        self.set_lent(true);
        let out = f(self);
        self.set_lent(false);
        self.rearm();
        out
    }

    /// Whether the connection is inside a write transaction, on any of its schemas (`temp` too).
    pub(crate) fn writing(&self) -> bool {
        // SAFETY: the handle is this open connection's, used on this thread only; a null schema asks about all.
        let state =
            unsafe { rusqlite::ffi::sqlite3_txn_state(self.conn.handle(), std::ptr::null()) };
        state == rusqlite::ffi::SQLITE_TXN_WRITE
    }

    /// Lends the connection to reads, or takes it back. While it is lent, a read is refused what would change the
    /// connection ([`TxGuard`]), and its witness vetoes every commit (as it does whenever the engine does not allow
    /// one): a write a read attempts takes effect only inside the read's transaction, which the read's runner rolls
    /// back before anyone can see it ([`GuardedConnection::writing`]). (`PRAGMA query_only` would refuse the write
    /// itself, but switching it expires every statement prepared on the connection, the writer's own.)
    pub(crate) fn set_lent(&self, lent: bool) {
        self.guard.lent.store(lent, Ordering::Relaxed);
    }

    /// Puts back what a read lent this connection may have changed of its hooks through rusqlite's API (the busy
    /// handler with `busy_timeout`; with rusqlite 0.40, whose hooks take `&self`, any hook); returns whether a
    /// hook had to be put back (which is logged). The hooks registered through SQLite's C API are registered
    /// again, which costs a few calls; the others only if they were replaced.
    pub(crate) fn rearm(&mut self) -> bool {
        for armed in &self.armed {
            armed.rearm(&self.conn);
        }
        let mut replaced = false;
        if Arc::strong_count(&self.sentinel) < SENTINEL_HOLDERS {
            replaced = true;
            let sentinel = Arc::new(());
            if let Err(e) = self
                .guard
                .install(&mut self.conn, &sentinel)
                .and_then(|()| watch_progress(&mut self.conn, &self.deadline, &sentinel))
            {
                tracing::error!(error = %e, "could not put back the connection's authorizer and progress handler");
            }
            self.sentinel = sentinel;
        }
        if let Some(witness) = &mut self.witness {
            replaced |= witness.rearm(&mut self.conn);
        }
        if replaced {
            tracing::warn!(
                "a closure replaced a hook of the writer's connection through rusqlite's API; it was put back"
            );
        }
        replaced
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
        self.into_inner().close().map_err(|(_, e)| e)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn guarded() -> GuardedConnection {
        let conn = Connection::open_in_memory().unwrap();
        conn.execute_batch("CREATE TABLE t (x)").unwrap();
        GuardedConnection::new(conn).unwrap()
    }

    #[test]
    fn a_lent_connection_commits_nothing_and_keeps_the_writers_settings() {
        let mut conn = guarded();
        let shared = Arc::new(crate::engine::Shared::default());
        let witness = crate::engine::witness::install(conn.conn_mut(), &shared).unwrap();
        conn.set_witness(witness);
        conn.set_lent(true);
        let refused = |sql: &str| conn.conn().execute_batch(sql).unwrap_err();
        let code = |e: rusqlite::Error| e.sqlite_error_code();
        assert_eq!(
            code(refused("INSERT INTO t VALUES (1)")),
            Some(rusqlite::ErrorCode::ConstraintViolation),
            "the commit was vetoed"
        );
        for sql in [
            "PRAGMA busy_timeout = 1",
            "PRAGMA wal_autocheckpoint = 1",
            "PRAGMA cache_size = 10",
            "PRAGMA wal_checkpoint",
            "ATTACH ':memory:' AS other",
        ] {
            assert_eq!(
                code(refused(sql)),
                Some(rusqlite::ErrorCode::AuthorizationForStatementDenied),
                "{sql}"
            );
        }
        // What only reports is allowed, and `query_only` is ignored.
        conn.conn()
            .execute_batch("PRAGMA table_info(t); PRAGMA cache_size; PRAGMA query_only = ON")
            .unwrap();
        conn.set_lent(false);
        let rows: i64 = conn
            .conn()
            .query_row("SELECT count(*) FROM t", [], |r| r.get(0))
            .unwrap();
        assert_eq!(rows, 0);
        conn.committing(|| {
            conn.conn()
                .execute_batch("INSERT INTO t VALUES (1); PRAGMA cache_size = 10")
        })
        .unwrap();
    }

    #[test]
    fn a_replaced_authorizer_is_put_back() {
        let mut conn = guarded();
        assert!(!conn.rearm(), "nothing to put back");
        assert!(conn.conn().execute_batch("BEGIN").is_err());
        // As a closure could with rusqlite 0.40.
        conn.conn_mut()
            .authorizer(None::<fn(AuthContext<'_>) -> Authorization>)
            .unwrap();
        conn.conn().execute_batch("BEGIN; ROLLBACK").unwrap();
        assert!(conn.rearm());
        assert!(
            conn.conn().execute_batch("BEGIN").is_err(),
            "the guard is back"
        );
    }
}
