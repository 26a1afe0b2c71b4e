//! Opening connections: flags, PRAGMAs, hooks, the guard on transaction control, and files that must not be
//! followed.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use rusqlite::config::DbConfig;
use rusqlite::{Connection, OpenFlags};

use crate::config::{Checkpointing, Config, ConnectionRole};
use crate::engine::Shared;
use crate::engine::busy::BusyLimit;
use crate::engine::guard::GuardedConnection;
use crate::engine::hooks;
use crate::profile::{self, is_database_wide};
use crate::util::companion;
use crate::{Error, Result};

/// Opens the read-write connection and applies every PRAGMA of the profile and the overrides.
pub(crate) fn open_read_write(
    path: &Path,
    config: &Config,
    role: ConnectionRole,
) -> Result<GuardedConnection> {
    if config.replica.is_some() {
        // A replica's writer runs no write (the handle refuses them): it serves the reads lent to it and looks for
        // new transactions, read-only like the readers.
        return open_read_only_as(path, config, role);
    }
    let mut conn = Connection::open_with_flags(path, config.open_flags)?;
    if let Some(key) = &config.key {
        key.apply(&conn)?;
    }
    conn.set_prepared_statement_cache_capacity(config.statement_cache_capacity);
    // busy_timeout first, so that switching the journal mode waits for other processes instead of failing.
    for (name, value) in config.pragmas.iter().filter(|(n, _)| n == "busy_timeout") {
        apply_pragma(&conn, name, value)?;
    }
    for (name, value) in config.pragmas.iter().filter(|(n, _)| n != "busy_timeout") {
        apply_pragma(&conn, name, value)?;
    }
    // Touch the schema so that a file that is not a database fails here, at open, with SQLITE_NOTADB.
    conn.query_row("SELECT count(*) FROM sqlite_schema", [], |_| Ok(()))?;
    config.hooks.set_up(&mut conn, role)?;
    Ok(GuardedConnection::new(conn)?)
}

/// Opens a read-only connection for a reader thread.
///
/// It is opened `SQLITE_OPEN_READ_ONLY` *and* with `query_only=ON`: a write attempted through
/// [`Database::read`](crate::Database::read) fails with `SQLITE_READONLY` instead of racing the writer.
pub(crate) fn open_read_only(path: &Path, config: &Config) -> Result<GuardedConnection> {
    open_read_only_as(path, config, ConnectionRole::Reader)
}

/// [`open_read_only`] for the connection of `role`.
fn open_read_only_as(
    path: &Path,
    config: &Config,
    role: ConnectionRole,
) -> Result<GuardedConnection> {
    let mutex = config.open_flags
        & (OpenFlags::SQLITE_OPEN_NO_MUTEX
            | OpenFlags::SQLITE_OPEN_FULL_MUTEX
            | OpenFlags::SQLITE_OPEN_NOFOLLOW);
    let flags = OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_URI | mutex;
    let mut conn = Connection::open_with_flags(path, flags)?;
    if let Some(key) = &config.key {
        key.apply(&conn)?;
    }
    conn.set_prepared_statement_cache_capacity(config.statement_cache_capacity);
    for (name, value) in config.pragmas.iter() {
        if !is_database_wide(name) && !replica_lacks(config, name) {
            apply_pragma(&conn, name, value)?;
        }
    }
    apply_pragma(&conn, "query_only", "ON")?;
    config.hooks.set_up(&mut conn, role)?;
    Ok(GuardedConnection::new(conn)?)
}

/// Whether `pragma` is one a replica's connection cannot run: Litestream's VFS has no file to map into memory, and
/// fails `mmap_size`.
fn replica_lacks(config: &Config, pragma: &str) -> bool {
    config.replica.is_some() && pragma.eq_ignore_ascii_case("mmap_size")
}

/// Runs `PRAGMA name = value`, draining any rows it returns (`journal_mode` answers with the new mode).
fn apply_pragma(conn: &Connection, name: &str, value: &str) -> Result<()> {
    let sql = format!("PRAGMA {name} = {value}");
    let mut stmt = conn.prepare(&sql)?;
    let mut rows = stmt.query([])?;
    let mut answer = None;
    while let Some(row) = rows.next()? {
        answer = row.get::<_, rusqlite::types::Value>(0).ok();
    }
    // `PRAGMA journal_mode = WAL` does not fail when WAL is impossible; it answers with the mode it kept.
    if name.eq_ignore_ascii_case("journal_mode")
        && let Some(rusqlite::types::Value::Text(mode)) = answer
        && !mode.eq_ignore_ascii_case(value)
    {
        return Err(Error::InvalidConfig(format!(
            "journal_mode={value} was refused by SQLite, which kept journal_mode={mode}"
        )));
    }
    Ok(())
}

/// Installs the hooks every connection of a database gets: a busy handler that waits as `busy_timeout` would and
/// counts the retries ([`BusyLimit::install`]), the slow-statement log, (under [`Checkpointing::External`]) no
/// checkpoint at close, and (unless turned off) the query planner stability guarantee.
pub(crate) fn instrument(
    guarded: &mut GuardedConnection,
    config: &Config,
    shared: &Arc<Shared>,
    role: &'static str,
    busy: &BusyLimit,
) -> Result<()> {
    let armed = busy.install(guarded.conn_mut(), shared)?;
    guarded.keep_armed(armed);
    guarded.set_busy(busy.clone());
    let conn = guarded.conn_mut();
    if let Some(threshold) = config.slow_statement {
        let counters = shared.clone();
        let expanded = config.log_statement_parameters;
        let database = conn.path().unwrap_or_default().to_string();
        let armed = hooks::profile(conn, move |stmt, took| {
            if took < threshold {
                return;
            }
            counters
                .metrics
                .slow_statements
                .fetch_add(1, Ordering::Relaxed);
            let sql = if expanded {
                stmt.expanded_sql().unwrap_or_else(|| stmt.sql())
            } else {
                stmt.sql()
            };
            tracing::warn!(
                target: "quicklite::slow_statement",
                database = %database,
                connection = role,
                duration_ms = took.as_secs_f64() * 1e3,
                sql = %sql,
                "slow statement"
            );
        })?;
        guarded.keep_armed(armed);
    }
    let conn = guarded.conn_mut();
    if config.checkpointing == Checkpointing::External {
        conn.set_db_config(DbConfig::SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, true)?;
    }
    if config.stable_query_plans {
        conn.set_db_config(DbConfig::SQLITE_DBCONFIG_ENABLE_QPSG, true)?;
    }
    Ok(())
}

/// Installs the writer's WAL hook, which records the WAL's size after each commit. Installing it also turns
/// SQLite's automatic checkpoint off (both use the one hook SQLite has), which is what the managed and external
/// policies want; under [`Checkpointing::Sqlite`] it is left alone.
pub(crate) fn watch_wal(
    conn: &mut GuardedConnection,
    config: &Config,
    shared: &Arc<Shared>,
) -> Result<()> {
    if config.checkpointing == Checkpointing::Sqlite {
        return Ok(());
    }
    let shared = shared.clone();
    let armed = hooks::wal_hook(conn.conn(), move |frames| {
        shared
            .metrics
            .wal_frames
            .store(u64::try_from(frames).unwrap_or(0), Ordering::Relaxed);
    })?;
    conn.keep_armed(armed);
    Ok(())
}

/// Reads back the reported PRAGMAs plus every PRAGMA the configuration set.
pub(crate) fn read_back_pragmas(
    conn: &Connection,
    config: &Config,
) -> Result<BTreeMap<String, String>> {
    let mut names: Vec<&str> = profile::REPORTED.to_vec();
    for (name, _) in &config.pragmas {
        if !names.iter().any(|n| n.eq_ignore_ascii_case(name)) {
            names.push(name);
        }
    }
    let mut out = BTreeMap::new();
    for name in names
        .into_iter()
        .filter(|name| !replica_lacks(config, name))
    {
        let value: Option<rusqlite::types::Value> = conn
            .query_row(&format!("PRAGMA {name}"), [], |row| row.get(0))
            .map(Some)
            .or_else(|e| match e {
                rusqlite::Error::QueryReturnedNoRows => Ok(None),
                e => Err(e),
            })?;
        if let Some(value) = value {
            out.insert(name.to_ascii_lowercase(), render(value));
        }
    }
    Ok(out)
}

fn render(value: rusqlite::types::Value) -> String {
    use rusqlite::types::Value;
    match value {
        Value::Null => "NULL".into(),
        Value::Integer(i) => i.to_string(),
        Value::Real(r) => r.to_string(),
        Value::Text(t) => t.to_ascii_lowercase(),
        Value::Blob(b) => format!("<{} bytes>", b.len()),
    }
}

/// Refuses a database file, or a companion file SQLite would open next to it, that is a symbolic link (or not a
/// regular file): writing through it could reach outside the registry's directory.
pub(crate) fn refuse_links(path: &Path) -> Result<()> {
    for suffix in ["", "-wal", "-journal", "-shm"] {
        let candidate = companion(path, suffix);
        let meta = match std::fs::symlink_metadata(&candidate) {
            Ok(meta) => meta,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => return Err(Error::Io(e)),
        };
        let reason = if meta.file_type().is_symlink() {
            "the file is a symbolic link"
        } else if !meta.is_file() {
            "the file is not a regular file"
        } else {
            continue;
        };
        return Err(Error::InvalidName {
            name: candidate
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default(),
            reason,
        });
    }
    Ok(())
}
