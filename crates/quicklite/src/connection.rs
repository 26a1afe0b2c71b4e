//! Opening the writer and reader connections: flags, PRAGMAs, and the guard on transaction control.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use rusqlite::hooks::{AuthAction, AuthContext, Authorization};
use rusqlite::{Connection, OpenFlags};

use crate::builder::Config;
use crate::profile::{self, is_database_wide};
use crate::{Error, Result};

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
    pub(crate) fn internal<T>(&self, f: impl FnOnce() -> T) -> T {
        self.open.store(true, Ordering::Relaxed);
        let out = f();
        self.open.store(false, Ordering::Relaxed);
        out
    }

    fn install(&self, conn: &mut Connection) -> Result<()> {
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
        }))?;
        Ok(())
    }
}

/// Opens the read-write connection and applies every PRAGMA of the profile and the overrides.
pub(crate) fn open_writer(path: &Path, config: &Config, guard: &TxGuard) -> Result<Connection> {
    let mut conn = Connection::open_with_flags(path, config.open_flags)?;
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
    guard.install(&mut conn)?;
    Ok(conn)
}

/// Opens a read-only connection for a reader thread.
///
/// It is opened `SQLITE_OPEN_READ_ONLY` *and* with `query_only=ON`: a write attempted through
/// [`Database::read`](crate::Database::read) fails with `SQLITE_READONLY` instead of racing the writer.
pub(crate) fn open_reader(path: &Path, config: &Config, guard: &TxGuard) -> Result<Connection> {
    let mutex =
        config.open_flags & (OpenFlags::SQLITE_OPEN_NO_MUTEX | OpenFlags::SQLITE_OPEN_FULL_MUTEX);
    let flags = OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_URI | mutex;
    let mut conn = Connection::open_with_flags(path, flags)?;
    conn.set_prepared_statement_cache_capacity(config.statement_cache_capacity);
    for (name, value) in config.pragmas.iter() {
        if !is_database_wide(name) {
            apply_pragma(&conn, name, value)?;
        }
    }
    apply_pragma(&conn, "query_only", "ON")?;
    guard.install(&mut conn)?;
    Ok(conn)
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

/// Checks that a PRAGMA name and value are plain tokens, so that they cannot smuggle another statement in.
pub(crate) fn validate_pragma(name: &str, value: &str) -> Result<()> {
    let ident = |s: &str| {
        !s.is_empty()
            && s.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
            && !s.starts_with(|c: char| c.is_ascii_digit())
    };
    let name_ok = match name.split_once('.') {
        Some((schema, pragma)) => ident(schema) && ident(pragma),
        None => ident(name),
    };
    if !name_ok {
        return Err(Error::InvalidConfig(format!(
            "PRAGMA name {name:?} is not a plain identifier"
        )));
    }
    let value_ok = !value.is_empty()
        && value
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '+' | '.'));
    if !value_ok {
        return Err(Error::InvalidConfig(format!(
            "PRAGMA {name} value {value:?} must be a number or a keyword (letters, digits, _ - + .)"
        )));
    }
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
    for name in names {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pragma_validation_rejects_injection() {
        assert!(validate_pragma("cache_size", "-64000").is_ok());
        assert!(validate_pragma("main.journal_mode", "WAL").is_ok());
        assert!(validate_pragma("cache_size; DROP TABLE t", "1").is_err());
        assert!(validate_pragma("cache_size", "1; DROP TABLE t").is_err());
        assert!(validate_pragma("", "1").is_err());
        assert!(validate_pragma("x", "").is_err());
        assert!(validate_pragma("1x", "1").is_err());
    }
}
