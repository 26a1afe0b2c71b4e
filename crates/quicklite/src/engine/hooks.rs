//! The three hooks whose rusqlite API differs between the versions quicklite accepts: the busy handler, the
//! statement profile and the WAL hook. rusqlite 0.40 takes plain function pointers for them, 0.41 closures; the
//! handle's hooks carry state (a connection's wait limit, its database's counters), so they are registered here
//! through SQLite's C API with closures of any version. Their state belongs to the connection: SQLite keeps it as
//! the connection's client data and drops it when the connection closes. Each installer returns the hook
//! [`Armed`], to register it again with the same state should something replace it (a read lent the writer's
//! connection calling `busy_timeout`, say).

use std::ffi::{CStr, c_char, c_int, c_uint, c_void};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::time::Duration;

use rusqlite::{Connection, ffi};

/// A hook registered through SQLite's C API, with the state it was registered with.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Armed {
    register: unsafe fn(*mut ffi::sqlite3, *mut c_void),
    state: *mut c_void,
}

// SAFETY: the state is the connection's (its client data), used only through the connection by the one thread
// that holds it at a time.
unsafe impl Send for Armed {}

impl Armed {
    /// Registers the hook again on `conn`, the connection it was first registered on, in place of whatever
    /// replaced it.
    pub(crate) fn rearm(&self, conn: &Connection) {
        // SAFETY: `register` is the installer's registration for the state's type, and the state lives as long as
        // `conn`, whose client data it is.
        unsafe { (self.register)(conn.handle(), self.state) }
    }
}

/// Installs `f` as `conn`'s busy handler: called with the number of tries so far when a lock is held elsewhere;
/// `true` tries again, `false` gives up with `SQLITE_BUSY`. A panic in `f` gives up.
pub(crate) fn busy_handler<F>(conn: &Connection, f: F) -> rusqlite::Result<Armed>
where
    F: FnMut(i32) -> bool + Send + 'static,
{
    unsafe extern "C" fn call<F: FnMut(i32) -> bool>(state: *mut c_void, count: c_int) -> c_int {
        // SAFETY: `state` is the `F` that `owned_by` keeps until the connection closes, and SQLite calls the handler
        // on the thread using the connection, one call at a time.
        let f = unsafe { &mut *state.cast::<F>() };
        c_int::from(catch_unwind(AssertUnwindSafe(|| f(count))).unwrap_or(false))
    }
    /// # Safety
    /// `state` is an `F` that lives as long as the connection `db`.
    unsafe fn register<F: FnMut(i32) -> bool>(db: *mut ffi::sqlite3, state: *mut c_void) {
        // SAFETY: the caller's.
        unsafe { ffi::sqlite3_busy_handler(db, Some(call::<F>), state) };
    }
    let state = owned_by(conn, c"quicklite.busy_handler", f)?;
    let armed = Armed {
        register: register::<F>,
        state: state.cast(),
    };
    armed.rearm(conn);
    Ok(armed)
}

/// A statement that has just run, as [`profile`] shows it.
pub(crate) struct Profiled {
    stmt: *mut ffi::sqlite3_stmt,
}

impl Profiled {
    /// Its SQL as written.
    pub(crate) fn sql(&self) -> String {
        // SAFETY: the statement is alive for the profile callback, and `sqlite3_sql` returns its own text or null.
        unsafe { text(ffi::sqlite3_sql(self.stmt)) }.unwrap_or_default()
    }

    /// Its SQL with the values bound to its parameters written in, if SQLite could make it.
    pub(crate) fn expanded_sql(&self) -> Option<String> {
        // SAFETY: as above; the expanded text is ours to free.
        unsafe {
            let expanded = ffi::sqlite3_expanded_sql(self.stmt);
            let sql = text(expanded);
            ffi::sqlite3_free(expanded.cast());
            sql
        }
    }
}

/// Installs `f` as `conn`'s statement profiler: called after each statement ends with how long it ran (SQLite's
/// `SQLITE_TRACE_PROFILE`). A panic in `f` is dropped.
pub(crate) fn profile<F>(conn: &Connection, f: F) -> rusqlite::Result<Armed>
where
    F: FnMut(&Profiled, Duration) + Send + 'static,
{
    unsafe extern "C" fn call<F: FnMut(&Profiled, Duration)>(
        event: c_uint,
        state: *mut c_void,
        stmt: *mut c_void,
        nanos: *mut c_void,
    ) -> c_int {
        if event == ffi::SQLITE_TRACE_PROFILE as c_uint {
            // SAFETY: as for the busy handler; for a profile event, SQLite passes the statement and a pointer to
            // the nanoseconds it ran.
            let (f, took) = unsafe { (&mut *state.cast::<F>(), *nanos.cast::<i64>()) };
            let ran = Profiled { stmt: stmt.cast() };
            let took = Duration::from_nanos(u64::try_from(took).unwrap_or(0));
            let _ = catch_unwind(AssertUnwindSafe(|| f(&ran, took)));
        }
        0
    }
    /// # Safety
    /// As for the busy handler's.
    unsafe fn register<F: FnMut(&Profiled, Duration)>(db: *mut ffi::sqlite3, state: *mut c_void) {
        // SAFETY: the caller's.
        unsafe {
            ffi::sqlite3_trace_v2(
                db,
                ffi::SQLITE_TRACE_PROFILE as c_uint,
                Some(call::<F>),
                state,
            )
        };
    }
    let state = owned_by(conn, c"quicklite.profile", f)?;
    let armed = Armed {
        register: register::<F>,
        state: state.cast(),
    };
    armed.rearm(conn);
    Ok(armed)
}

/// Runs `f` with the text of each statement `conn` begins meanwhile kept in `last` (SQLite's `SQLITE_TRACE_STMT`;
/// the statements of triggers, which SQLite reports as comments, are left out). The trace replaces the statement
/// profile for that time: the caller registers its hooks again afterwards
/// ([`GuardedConnection::rearm`](crate::engine::guard::GuardedConnection::rearm)).
pub(crate) fn tracing_statements<T>(
    conn: *mut ffi::sqlite3,
    last: &mut Option<String>,
    f: impl FnOnce() -> T,
) -> T {
    unsafe extern "C" fn call(
        event: c_uint,
        state: *mut c_void,
        _stmt: *mut c_void,
        sql: *mut c_void,
    ) -> c_int {
        if event == ffi::SQLITE_TRACE_STMT as c_uint {
            // SAFETY: `state` is the `last` borrowed for the trace's time; for a statement event SQLite passes its
            // text.
            let last = unsafe { &mut *state.cast::<Option<String>>() };
            if let Some(sql) = unsafe { text(sql.cast()) }
                && !sql.starts_with("--")
            {
                *last = Some(sql);
            }
        }
        0
    }
    let state: *mut Option<String> = last;
    // SAFETY: `conn` is an open connection used by this thread only; the trace is removed below, before `last`'s
    // borrow ends.
    unsafe {
        ffi::sqlite3_trace_v2(
            conn,
            ffi::SQLITE_TRACE_STMT as c_uint,
            Some(call),
            state.cast(),
        );
    }
    let out = catch_unwind(AssertUnwindSafe(f));
    // SAFETY: as above.
    unsafe { ffi::sqlite3_trace_v2(conn, 0, None, std::ptr::null_mut()) };
    out.unwrap_or_else(|panic| std::panic::resume_unwind(panic))
}

/// Installs `f` as `conn`'s WAL hook: called after each commit with the number of frames in the WAL. It replaces
/// SQLite's automatic checkpoint, which uses the same hook. A panic in `f` is dropped.
pub(crate) fn wal_hook<F>(conn: &Connection, f: F) -> rusqlite::Result<Armed>
where
    F: FnMut(i32) + Send + 'static,
{
    unsafe extern "C" fn call<F: FnMut(i32)>(
        state: *mut c_void,
        _db: *mut ffi::sqlite3,
        _schema: *const c_char,
        frames: c_int,
    ) -> c_int {
        // SAFETY: as for the busy handler.
        let f = unsafe { &mut *state.cast::<F>() };
        let _ = catch_unwind(AssertUnwindSafe(|| f(frames)));
        ffi::SQLITE_OK
    }
    /// # Safety
    /// As for the busy handler's.
    unsafe fn register<F: FnMut(i32)>(db: *mut ffi::sqlite3, state: *mut c_void) {
        // SAFETY: the caller's. It returns the hook's previous state, which is not ours to free.
        unsafe { ffi::sqlite3_wal_hook(db, Some(call::<F>), state) };
    }
    let state = owned_by(conn, c"quicklite.wal_hook", f)?;
    let armed = Armed {
        register: register::<F>,
        state: state.cast(),
    };
    armed.rearm(conn);
    Ok(armed)
}

/// Gives `state` to `conn` as its client data under `name`, which SQLite drops (with the state it replaces under
/// that name, if any) when the connection closes; returns where it lives, for a hook's context.
fn owned_by<T: Send + 'static>(
    conn: &Connection,
    name: &'static CStr,
    state: T,
) -> rusqlite::Result<*mut T> {
    unsafe extern "C" fn drop_state<T>(state: *mut c_void) {
        // SAFETY: `state` came from `Box::into_raw` below, and SQLite calls this once.
        drop(unsafe { Box::from_raw(state.cast::<T>()) });
    }
    let state = Box::into_raw(Box::new(state));
    // SAFETY: the handle is `conn`'s open connection and `name` a C string for ever. On failure SQLite has dropped
    // `state` already (through the destructor).
    check(unsafe {
        ffi::sqlite3_set_clientdata(
            conn.handle(),
            name.as_ptr(),
            state.cast(),
            Some(drop_state::<T>),
        )
    })?;
    Ok(state)
}

/// `text`, a C string SQLite returned, as a `String`.
///
/// # Safety
/// `text` is null or a valid C string.
unsafe fn text(text: *const c_char) -> Option<String> {
    (!text.is_null()).then(|| {
        // SAFETY: the caller's.
        unsafe { CStr::from_ptr(text) }
            .to_string_lossy()
            .into_owned()
    })
}

/// SQLite's result code `rc` as a result.
fn check(rc: c_int) -> rusqlite::Result<()> {
    if rc == ffi::SQLITE_OK {
        Ok(())
    } else {
        Err(rusqlite::Error::SqliteFailure(ffi::Error::new(rc), None))
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;

    /// The state a hook holds is dropped when its connection closes, and a second hook of the same kind drops the
    /// first one's.
    #[test]
    fn a_hooks_state_lives_as_long_as_its_connection() {
        let alive = Arc::new(AtomicUsize::new(0));
        struct Counted(Arc<AtomicUsize>);
        impl Drop for Counted {
            fn drop(&mut self) {
                self.0.fetch_sub(1, Ordering::SeqCst);
            }
        }
        let counted = || {
            alive.fetch_add(1, Ordering::SeqCst);
            Counted(alive.clone())
        };
        let conn = Connection::open_in_memory().unwrap();
        let (first, second) = (counted(), counted());
        busy_handler(&conn, move |_| {
            let _ = &first;
            false
        })
        .unwrap();
        assert_eq!(alive.load(Ordering::SeqCst), 2);
        busy_handler(&conn, move |_| {
            let _ = &second;
            false
        })
        .unwrap();
        assert_eq!(
            alive.load(Ordering::SeqCst),
            1,
            "the replaced handler's state is dropped"
        );
        drop(conn);
        assert_eq!(
            alive.load(Ordering::SeqCst),
            0,
            "and the last one's with the connection"
        );
    }

    /// The profile sees each statement's SQL, with its parameters written in when asked; the WAL hook sees the
    /// frames each commit leaves.
    #[test]
    fn the_profile_and_the_wal_hook_see_what_runs() {
        let dir = tempfile::tempdir().unwrap();
        let conn = Connection::open(dir.path().join("db")).unwrap();
        conn.pragma_update(None, "journal_mode", "wal").unwrap();
        let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
        let frames = Arc::new(AtomicUsize::new(0));
        {
            let seen = seen.clone();
            profile(&conn, move |ran, _| {
                seen.lock().unwrap().push((ran.sql(), ran.expanded_sql()))
            })
            .unwrap();
            let frames = frames.clone();
            wal_hook(&conn, move |n| frames.store(n as usize, Ordering::SeqCst)).unwrap();
        }
        conn.execute("CREATE TABLE t (v)", []).unwrap();
        conn.execute("INSERT INTO t VALUES (?1)", [42]).unwrap();
        let seen = seen.lock().unwrap().clone();
        assert!(
            seen.contains(&(
                "INSERT INTO t VALUES (?1)".to_owned(),
                Some("INSERT INTO t VALUES (42)".to_owned())
            )),
            "{seen:?}"
        );
        assert!(frames.load(Ordering::SeqCst) > 0);
    }
}
