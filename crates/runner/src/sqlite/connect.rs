//! Opening connections with a cell's knobs: open flags (mutex mode) and per-connection PRAGMAs.

use std::path::Path;

use anyhow::{Context, Result};
use quicklite_lab_core::{Knobs, MutexMode, Pragma};
use rusqlite::{Connection, OpenFlags};

/// Open flags for a read-write connection in the cell's mutex mode.
pub fn open_flags(mutex: MutexMode) -> OpenFlags {
    let mode = match mutex {
        MutexMode::NoMutex => OpenFlags::SQLITE_OPEN_NO_MUTEX,
        MutexMode::FullMutex => OpenFlags::SQLITE_OPEN_FULL_MUTEX,
    };
    OpenFlags::SQLITE_OPEN_READ_WRITE
        | OpenFlags::SQLITE_OPEN_CREATE
        | OpenFlags::SQLITE_OPEN_URI
        | mode
}

/// The key every connection opens with in a SQLCipher build of the runner (its `sqlcipher` feature, which the
/// lab's `sqlcipher` build profile turns on): the lab measures what encryption costs, not how secret the key is.
pub const KEY: Option<&str> = if cfg!(feature = "sqlcipher") {
    Some("quicklite-lab")
} else {
    None
};

/// Gives `conn` the [`KEY`], if the runner has one: SQLCipher wants it as the first statement on a connection.
pub fn unlock(conn: &Connection) -> Result<()> {
    if let Some(key) = KEY {
        conn.pragma_update(None, "key", key)
            .context("cannot set the SQLCipher key")?;
    }
    Ok(())
}

/// Opens `path` with the cell's open flags, the [`KEY`] if any, and the per-connection PRAGMAs of its profile
/// (the file-level `journal_mode` was set once when seeding).
#[allow(
    dead_code,
    reason = "runner-rusqlite040 compiles this file too, and its crates open their own connections"
)]
pub fn open(path: &Path, knobs: &Knobs) -> Result<Connection> {
    let conn = Connection::open_with_flags(path, open_flags(knobs.mutex))
        .with_context(|| format!("cannot open {}", path.display()))?;
    unlock(&conn)?;
    apply(&conn, &knobs.connection_pragmas())?;
    Ok(conn)
}

/// Runs `PRAGMA name = value` for each of `pragmas`. Some PRAGMAs answer with a row (e.g. `journal_mode`),
/// so the statement is stepped to the end rather than `execute`d.
pub fn apply(conn: &Connection, pragmas: &[Pragma]) -> Result<()> {
    for pragma in pragmas {
        apply_one(conn, &pragma.sql()).with_context(|| format!("cannot set `{}`", pragma.sql()))?;
    }
    Ok(())
}

fn apply_one(conn: &Connection, sql: &str) -> rusqlite::Result<()> {
    let mut stmt = conn.prepare(sql)?;
    let mut rows = stmt.query([])?;
    while rows.next()?.is_some() {}
    Ok(())
}
