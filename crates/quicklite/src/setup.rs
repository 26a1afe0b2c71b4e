//! Process-wide SQLite set-up, done once before the first connection ([`sqlite_setup`], [`configure`]), and what the
//! linked SQLite is ([`sqlite_info`], [`has_wal_reset_bug`]).
//!
//! SQLite keeps memory statistics by default (`SQLITE_DEFAULT_MEMSTATUS=1`). Every `malloc` and `free` inside
//! SQLite then takes one process-wide mutex to update the counters, which caps multi-core throughput no matter how
//! many connections there are (seed 000 measured 5.6k → 30.7k requests/s on 16 threads by turning it off). The
//! compile-time switch belongs to whoever builds SQLite; a library can still turn it off at run time with
//! `sqlite3_config(SQLITE_CONFIG_MEMSTATUS, 0)` — but only before SQLite initializes, which happens at the first
//! connection anyone in the process opens. Afterwards SQLite answers `SQLITE_MISUSE` and nothing changes.

use std::ffi::c_int;
use std::sync::OnceLock;

use rusqlite::ffi;

pub use crate::wal_reset_bug::has_wal_reset_bug;

/// What to configure process-wide before SQLite initializes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Setup {
    /// Keep SQLite's memory statistics (and the global mutex they need).
    ///
    /// By default, `false`: statistics off. Turn them on only to compare, or if something in the process
    /// reads `sqlite3_memory_used()`.
    pub memory_statistics: bool,
}

/// The outcome of the process-wide set-up.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SetupReport {
    /// The set-up that was asked for first (only the first call in a process takes effect).
    pub requested: Setup,
    /// Whether SQLite accepted `sqlite3_config(SQLITE_CONFIG_MEMSTATUS, …)`; `false` when SQLite had already been
    /// initialized by someone else in the process.
    pub applied: bool,
    /// Whether memory statistics are off now, as measured (SQLite's memory counter stays at zero while
    /// statistics are off).
    pub memory_statistics_off: bool,
    /// A sentence saying what happened and, if statistics are on, why.
    pub detail: String,
}

static SETUP: OnceLock<SetupReport> = OnceLock::new();

/// Applies the default process set-up (memory statistics off) if nothing has yet, and reports the outcome.
///
/// [`Database::open`](crate::Database::open) calls this before its first connection, so calling it yourself is
/// only needed to read the report, or to run it before other code in the process touches SQLite.
pub fn sqlite_setup() -> SetupReport {
    configure(Setup::default())
}

/// Applies `setup` once per process, before SQLite initializes, and reports the outcome.
///
/// Only the first call (from any thread) acts; later calls return the first call's report.
pub fn configure(setup: Setup) -> SetupReport {
    SETUP.get_or_init(|| apply(setup)).clone()
}

fn apply(setup: Setup) -> SetupReport {
    let want = c_int::from(setup.memory_statistics);
    // SAFETY: SQLITE_CONFIG_MEMSTATUS takes exactly one int argument. sqlite3_config is not thread-safe against a
    // concurrent sqlite3_initialize; OnceLock serializes our own calls, and the documentation asks callers to set up
    // before other threads use SQLite.
    let rc = unsafe { ffi::sqlite3_config(ffi::SQLITE_CONFIG_MEMSTATUS, want) };
    // SAFETY: sqlite3_initialize may be called any number of times from any thread.
    let init_rc = unsafe { ffi::sqlite3_initialize() };
    let off = memory_statistics_off();
    let applied = rc == ffi::SQLITE_OK;
    let detail = match (applied, off) {
        _ if init_rc != ffi::SQLITE_OK => format!("sqlite3_initialize failed with code {init_rc}"),
        (true, true) => "memory statistics turned off before SQLite initialized".to_string(),
        (true, false) => "memory statistics kept on, as requested".to_string(),
        (false, true) => format!(
            "SQLite was already initialized (sqlite3_config returned {rc}), but memory statistics are off \
             (SQLITE_DEFAULT_MEMSTATUS=0 build, or set by another library)"
        ),
        (false, false) => format!(
            "SQLite was already initialized in this process before quicklite's set-up (sqlite3_config returned \
             {rc}): memory statistics stay on and every allocation takes SQLite's global mutex; call \
             quicklite::setup::sqlite_setup() before anything else opens a connection, or build SQLite with \
             SQLITE_DEFAULT_MEMSTATUS=0"
        ),
    };
    if !off && !setup.memory_statistics {
        tracing::warn!(%detail, "sqlite memory statistics are on");
    }
    SetupReport {
        requested: setup,
        applied,
        memory_statistics_off: off,
        detail,
    }
}

/// Measures whether SQLite counts memory: with statistics on, a live allocation shows in `sqlite3_memory_used()`;
/// with them off the counter stays at zero.
fn memory_statistics_off() -> bool {
    // SAFETY: sqlite3_malloc/sqlite3_free are paired on the same pointer; sqlite3_memory_used only reads a counter.
    unsafe {
        let p = ffi::sqlite3_malloc(256);
        let used = ffi::sqlite3_memory_used();
        ffi::sqlite3_free(p);
        used == 0
    }
}

/// Facts about the SQLite linked into this process.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SqliteInfo {
    /// `sqlite_version()`, e.g. `3.50.4`.
    pub version: String,
    /// `sqlite3_libversion_number()`, e.g. `3050004`: the number [`has_wal_reset_bug`]
    /// takes.
    pub version_number: i32,
    /// `sqlite_source_id()`: the exact check-in.
    pub source_id: String,
    /// `PRAGMA compile_options`, e.g. `DEFAULT_MEMSTATUS=0`, `THREADSAFE=1`.
    pub compile_options: Vec<String>,
    /// `sqlite3_threadsafe()`: 0 single-thread, 1 serialized, 2 multi-thread (the build's default mode).
    pub threadsafe: i32,
    /// The process set-up's report.
    pub setup: SetupReport,
}

/// Reports the linked SQLite's version, compile options and threading mode (runs the process set-up first).
pub fn sqlite_info() -> crate::Result<SqliteInfo> {
    let setup = sqlite_setup();
    let conn = rusqlite::Connection::open_in_memory()?;
    let mut stmt = conn.prepare("PRAGMA compile_options")?;
    let compile_options = stmt
        .query_map([], |row| row.get::<_, String>(0))?
        .collect::<rusqlite::Result<Vec<_>>>()?;
    // SAFETY: sqlite3_sourceid returns a pointer to a static NUL-terminated string.
    let source_id = unsafe { std::ffi::CStr::from_ptr(ffi::sqlite3_sourceid()) }
        .to_string_lossy()
        .into_owned();
    Ok(SqliteInfo {
        version: rusqlite::version().to_string(),
        version_number: rusqlite::version_number(),
        source_id,
        compile_options,
        // SAFETY: sqlite3_threadsafe only returns a compile-time constant.
        threadsafe: unsafe { ffi::sqlite3_threadsafe() },
        setup,
    })
}
