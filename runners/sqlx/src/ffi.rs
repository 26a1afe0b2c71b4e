//! The two SQLite C calls sqlx does not expose: memory statistics, and a SQL function that sleeps.

use std::ffi::{CStr, c_int};
use std::ptr::NonNull;
use std::time::Duration;

use libsqlite3_sys as ffi;

/// Name of the SQL function `lab_sleep(ms)`, which blocks the thread running the statement for `ms` ms.
const SLEEP_FUNCTION: &CStr = c"lab_sleep";

/// Sets `SQLITE_CONFIG_MEMSTATUS` before SQLite initialises; returns SQLite's code (`SQLITE_MISUSE` once it has).
pub fn configure_memstatus(on: bool) -> c_int {
    // SAFETY: called once, first thing in the runner, before any thread opens a connection;
    // SQLITE_CONFIG_MEMSTATUS takes one `int` vararg.
    unsafe { ffi::sqlite3_config(ffi::SQLITE_CONFIG_MEMSTATUS, c_int::from(on)) }
}

/// Whether memory statistics are actually on, with the evidence, for `Environment::memstatus`.
pub fn memstatus_outcome(requested_on: bool, rc: c_int) -> String {
    // SAFETY: the allocation is freed right after the counter is read; `sqlite3_memory_used` only reads a
    // process-wide counter.
    let used = unsafe {
        let p = ffi::sqlite3_malloc(256);
        let used = ffi::sqlite3_memory_used();
        ffi::sqlite3_free(p);
        used
    };
    let rc = match rc {
        ffi::SQLITE_OK => "SQLITE_OK".to_string(),
        ffi::SQLITE_MISUSE => "SQLITE_MISUSE (SQLite was already initialised)".to_string(),
        other => other.to_string(),
    };
    format!(
        "{} (requested {}: sqlite3_config(SQLITE_CONFIG_MEMSTATUS, {}) returned {rc}; \
         sqlite3_memory_used() = {used} with 256 bytes allocated)",
        if used > 0 { "on" } else { "off" },
        if requested_on { "on" } else { "off" },
        c_int::from(requested_on),
    )
}

/// Registers `lab_sleep(ms)` on a connection.
///
/// The `multi-db` writer must block *inside* the database operation (seed 004). The other approaches sleep
/// inside the closure they send to their SQLite thread; sqlx takes SQL, not closures, so the sleep is a SQL
/// function and runs on sqlx's worker thread, inside the write transaction, like theirs.
///
/// # Safety
///
/// `db` must be a valid, open connection handle that no other thread uses during the call (sqlx's
/// `LockedSqliteHandle` guarantees both).
pub unsafe fn register_sleep(db: NonNull<ffi::sqlite3>) -> Result<(), String> {
    // SAFETY: `db` is valid and exclusively ours (caller's contract); the name is NUL-terminated; the function
    // takes no user data, so no destructor is needed.
    let rc = unsafe {
        ffi::sqlite3_create_function_v2(
            db.as_ptr(),
            SLEEP_FUNCTION.as_ptr(),
            1,
            ffi::SQLITE_UTF8,
            std::ptr::null_mut(),
            Some(lab_sleep),
            None,
            None,
            None,
        )
    };
    if rc == ffi::SQLITE_OK {
        Ok(())
    } else {
        Err(format!("sqlite3_create_function_v2 returned {rc}"))
    }
}

/// `lab_sleep(ms)`: blocks the calling thread, returns NULL.
unsafe extern "C" fn lab_sleep(
    ctx: *mut ffi::sqlite3_context,
    argc: c_int,
    argv: *mut *mut ffi::sqlite3_value,
) {
    // SAFETY: SQLite passes `argc` valid values in `argv` (registered with exactly one argument) and a valid
    // context for the result.
    unsafe {
        let ms = if argc == 1 {
            ffi::sqlite3_value_int64(*argv)
        } else {
            0
        };
        std::thread::sleep(Duration::from_millis(ms.max(0) as u64));
        ffi::sqlite3_result_null(ctx);
    }
}
