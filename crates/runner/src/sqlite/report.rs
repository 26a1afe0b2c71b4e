//! What SQLite says about itself: version, compile options, PRAGMAs in effect, memory statistics;
//! and the crate versions this runner was built with.

use std::collections::BTreeMap;
use std::os::raw::c_int;

use anyhow::{Context, Result};
use quicklite_lab_core::{Environment, REPORTED_PRAGMAS};
use rusqlite::Connection;
use rusqlite::types::Value;

include!(concat!(env!("OUT_DIR"), "/crate_versions.rs"));

/// The outcome of asking SQLite to turn memory statistics on or off, before it initialised.
#[derive(Debug, Clone, Copy)]
pub struct MemstatusRequest {
    /// What the cell asked for.
    pub requested_on: bool,
    /// Return code of `sqlite3_config(SQLITE_CONFIG_MEMSTATUS, …)`: `SQLITE_OK`, or `SQLITE_MISUSE` when
    /// SQLite had already initialised.
    pub rc: c_int,
}

/// Sets `SQLITE_CONFIG_MEMSTATUS` for the whole process. Must run before the first connection opens
/// (seeding included); afterwards SQLite refuses with `SQLITE_MISUSE`, which is recorded rather than hidden.
pub fn configure_memstatus(on: bool) -> MemstatusRequest {
    // SAFETY: `sqlite3_config` is safe to call before `sqlite3_initialize` from a single thread; the runner calls
    // it once, first thing, before any other thread touches SQLite. Later calls only return SQLITE_MISUSE.
    // SQLITE_CONFIG_MEMSTATUS takes one `int` vararg.
    let rc = unsafe {
        rusqlite::ffi::sqlite3_config(rusqlite::ffi::SQLITE_CONFIG_MEMSTATUS, c_int::from(on))
    };
    MemstatusRequest {
        requested_on: on,
        rc,
    }
}

/// Whether memory statistics are actually on: with them off SQLite does not count allocations, so a live
/// `sqlite3_malloc` does not show in `sqlite3_memory_used()`. Returns the text for `Environment::memstatus`.
pub fn memstatus_outcome(request: MemstatusRequest) -> String {
    // SAFETY: the allocation is freed right after the counter is read; `sqlite3_memory_used` only reads a
    // process-wide counter. `sqlite3_malloc` initialises SQLite if needed, which is fine after configuration.
    let used = unsafe {
        let p = rusqlite::ffi::sqlite3_malloc(256);
        let used = rusqlite::ffi::sqlite3_memory_used();
        rusqlite::ffi::sqlite3_free(p);
        used
    };
    let state = if used > 0 { "on" } else { "off" };
    format!(
        "{state} (requested {}: sqlite3_config(SQLITE_CONFIG_MEMSTATUS, {}) returned {}; \
         sqlite3_memory_used() = {used} with 256 bytes allocated)",
        if request.requested_on { "on" } else { "off" },
        c_int::from(request.requested_on),
        rc_name(request.rc),
    )
}

fn rc_name(rc: c_int) -> String {
    match rc {
        rusqlite::ffi::SQLITE_OK => "SQLITE_OK".into(),
        rusqlite::ffi::SQLITE_MISUSE => "SQLITE_MISUSE (SQLite was already initialised)".into(),
        other => other.to_string(),
    }
}

/// What SQLite says about itself on one connection.
#[derive(Debug, Clone, Default)]
pub struct SqliteFacts {
    /// `sqlite_version()`.
    pub version: String,
    /// `PRAGMA compile_options`.
    pub compile_options: Vec<String>,
    /// The reported PRAGMAs as read back.
    pub pragmas: BTreeMap<String, String>,
}

impl SqliteFacts {
    /// Reads the facts from `conn`.
    pub fn read(conn: &Connection) -> Result<Self> {
        Ok(Self {
            version: conn
                .query_row("SELECT sqlite_version()", [], |r| r.get(0))
                .context("cannot read sqlite_version()")?,
            compile_options: compile_options(conn)?,
            pragmas: read_pragmas(conn)?,
        })
    }

    /// Copies the facts, and this runner's crate versions, into `env`.
    pub fn fill(self, env: &mut Environment) {
        env.sqlite_version = self.version;
        env.compile_options = self.compile_options;
        env.pragmas = self.pragmas;
        env.crate_versions = crate_versions();
    }
}

/// `PRAGMA compile_options`, one entry per option.
pub fn compile_options(conn: &Connection) -> Result<Vec<String>> {
    let mut stmt = conn
        .prepare("PRAGMA compile_options")
        .context("cannot read compile options")?;
    let options = stmt
        .query_map([], |r| r.get::<_, String>(0))?
        .collect::<rusqlite::Result<Vec<_>>>()?;
    Ok(options)
}

/// The PRAGMAs the lab reports, as SQLite answers them on `conn` (`journal_mode` → `wal`, `synchronous` → `1`).
pub fn read_pragmas(conn: &Connection) -> Result<BTreeMap<String, String>> {
    let mut out = BTreeMap::new();
    for name in REPORTED_PRAGMAS {
        let value = conn
            .query_row(&format!("PRAGMA {name}"), [], |r| r.get::<_, Value>(0))
            .with_context(|| format!("cannot read PRAGMA {name}"))?;
        let text = match value {
            Value::Null => "null".to_string(),
            Value::Integer(i) => i.to_string(),
            Value::Real(f) => f.to_string(),
            Value::Text(t) => t,
            Value::Blob(b) => format!("<{} bytes>", b.len()),
        };
        out.insert((*name).to_string(), text);
    }
    Ok(out)
}

/// Versions of the crates under test, as locked when this runner was built.
pub fn crate_versions() -> BTreeMap<String, String> {
    let mut out: BTreeMap<String, String> = BTreeMap::new();
    for (name, version) in CRATE_VERSIONS {
        out.entry((*name).to_string())
            .and_modify(|v| {
                v.push_str(", ");
                v.push_str(version);
            })
            .or_insert_with(|| (*version).to_string());
    }
    out
}
