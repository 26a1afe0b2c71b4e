//! Opening the writer and reader connections: flags, PRAGMAs, and the guard on transaction control.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use rusqlite::config::DbConfig;
use rusqlite::hooks::{AuthAction, AuthContext, Authorization};
use rusqlite::trace::{TraceEvent, TraceEventCodes};
use rusqlite::{Connection, OpenFlags};

use crate::builder::Config;
use crate::checkpoint::Checkpointing;
use crate::database::State;
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

/// How long a connection's busy handler waits for a lock, in milliseconds, and how often it tries. The writer
/// shortens the wait while a checkpoint waits for readers, so that a long read cannot stall writes for the whole
/// busy timeout, and has it try every millisecond meanwhile: quicklite's readers leave the WAL within a batch, and
/// SQLite's growing schedule (up to 100 ms between tries) would sleep through the moment they do, holding up every
/// write queued behind the checkpoint.
#[derive(Debug, Clone)]
pub(crate) struct BusyLimit(Arc<(AtomicU64, AtomicBool)>);

impl BusyLimit {
    pub(crate) fn new(limit: Duration) -> BusyLimit {
        BusyLimit(Arc::new((
            AtomicU64::new(millis(limit)),
            AtomicBool::new(false),
        )))
    }

    /// Runs `f` with the limit set to `limit`, trying every millisecond.
    pub(crate) fn with<T>(&self, limit: Duration, f: impl FnOnce() -> T) -> T {
        let (ms, steady) = &*self.0;
        let before = ms.swap(millis(limit), Ordering::Relaxed);
        steady.store(true, Ordering::Relaxed);
        let out = f();
        steady.store(false, Ordering::Relaxed);
        ms.store(before, Ordering::Relaxed);
        out
    }

    fn get(&self) -> Duration {
        Duration::from_millis(self.0.0.load(Ordering::Relaxed))
    }

    /// The sleep before try `count + 1`.
    fn delay(&self, count: i32) -> Duration {
        let ms = if self.0.1.load(Ordering::Relaxed) {
            1
        } else {
            BUSY_DELAYS_MS[usize::try_from(count)
                .unwrap_or(0)
                .min(BUSY_DELAYS_MS.len() - 1)]
        };
        Duration::from_millis(ms)
    }
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// Sleeps between tries for a busy lock, the schedule of SQLite's own busy-timeout handler (`sqliteDefaultBusy
/// Callback` in main.c): short at first, for the common brief lock, then up to 100 ms.
const BUSY_DELAYS_MS: [u64; 12] = [1, 2, 5, 10, 15, 20, 25, 25, 25, 50, 50, 100];

/// Installs the hooks every connection of a database gets: a busy handler that waits as `busy_timeout` would and
/// counts the retries, the slow-statement log, (under [`Checkpointing::External`]) no checkpoint at close, and
/// (unless turned off) the query planner stability guarantee.
///
/// A busy handler replaces SQLite's busy timeout (`PRAGMA busy_timeout` then reads 0), so the handler enforces
/// the configured timeout itself.
pub(crate) fn instrument(
    conn: &mut Connection,
    config: &Config,
    state: &Arc<State>,
    role: &'static str,
    busy: BusyLimit,
) -> Result<()> {
    let counters = state.clone();
    let mut episode_start = Instant::now();
    conn.busy_handler(Some(move |count: i32| {
        let now = Instant::now();
        if count == 0 {
            episode_start = now;
        }
        let waited = now - episode_start;
        let limit = busy.get();
        let metrics = &counters.metrics;
        if waited >= limit {
            metrics.busy_timeouts.fetch_add(1, Ordering::Relaxed);
            return false;
        }
        metrics.busy_retries.fetch_add(1, Ordering::Relaxed);
        std::thread::sleep(busy.delay(count).min(limit - waited));
        true
    }))?;
    if let Some(threshold) = config.slow_statement {
        let counters = state.clone();
        let expanded = config.log_statement_parameters;
        let database = conn.path().unwrap_or_default().to_string();
        conn.trace_v2(
            TraceEventCodes::SQLITE_TRACE_PROFILE,
            Some(move |event: TraceEvent<'_>| {
                if let TraceEvent::Profile(stmt, took) = event
                    && took >= threshold
                {
                    counters
                        .metrics
                        .slow_statements
                        .fetch_add(1, Ordering::Relaxed);
                    let sql = if expanded {
                        stmt.expanded_sql()
                            .unwrap_or_else(|| stmt.sql().into_owned())
                    } else {
                        stmt.sql().into_owned()
                    };
                    tracing::warn!(
                        target: "quicklite::slow_statement",
                        database = %database,
                        connection = role,
                        duration_ms = took.as_secs_f64() * 1e3,
                        sql = %sql,
                        "slow statement"
                    );
                }
            }),
        )?;
    }
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
pub(crate) fn watch_wal(conn: &mut Connection, config: &Config, state: &Arc<State>) -> Result<()> {
    if config.checkpointing == Checkpointing::Sqlite {
        return Ok(());
    }
    let state = state.clone();
    conn.wal_hook(Some(move |_: &mut rusqlite::hooks::Wal, frames: i32| {
        state
            .metrics
            .wal_frames
            .store(u64::try_from(frames).unwrap_or(0), Ordering::Relaxed);
        Ok(())
    }))?;
    Ok(())
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
    let mutex = config.open_flags
        & (OpenFlags::SQLITE_OPEN_NO_MUTEX
            | OpenFlags::SQLITE_OPEN_FULL_MUTEX
            | OpenFlags::SQLITE_OPEN_NOFOLLOW);
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

    #[test]
    fn a_checkpoint_waiting_for_readers_tries_every_millisecond() {
        let busy = BusyLimit::new(Duration::from_secs(5));
        assert_eq!(busy.delay(0), Duration::from_millis(1));
        assert_eq!(busy.delay(6), Duration::from_millis(25));
        assert_eq!(busy.delay(50), Duration::from_millis(100));
        busy.with(Duration::from_millis(100), || {
            assert_eq!(busy.get(), Duration::from_millis(100));
            assert_eq!(busy.delay(6), Duration::from_millis(1));
            assert_eq!(busy.delay(50), Duration::from_millis(1));
        });
        assert_eq!(busy.get(), Duration::from_secs(5));
        assert_eq!(busy.delay(6), Duration::from_millis(25));
    }
}
