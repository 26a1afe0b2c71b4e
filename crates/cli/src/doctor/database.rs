//! A database file: what a fresh read-only connection reads from it ([`Observed`]), and the section of the report
//! built from that.

use std::path::Path;

use quicklite::rusqlite::{self, Connection, ErrorCode, types::FromSql};
use quicklite::setup::SqliteInfo;
use serde::Serialize;

use super::finding::Finding;
use super::observed::{Observed, QUICK_CHECK_MAX, Reading};
use super::open::{self, OpenMode, Opened, cannot_read};
use super::rules;
use super::sqlite::compile_option;

/// The database section of the report.
#[derive(Debug, Serialize)]
pub struct DatabaseSection {
    /// The file, as given.
    pub path: String,
    /// Its size in bytes.
    pub size_bytes: u64,
    /// How doctor opened it, and why that way.
    pub opened_as: String,
    /// Files SQLite created next to the database while doctor read it: only ever `<db>-shm`, for a `-wal` that
    /// had none (see `open.rs`).
    pub created_files: Vec<String>,
    /// `journal_mode`.
    pub journal_mode: Option<String>,
    /// `synchronous` of a fresh connection: 0 OFF, 1 NORMAL, 2 FULL, 3 EXTRA.
    pub synchronous: Option<i64>,
    /// `page_size`, in bytes.
    pub page_size: Option<i64>,
    /// `page_count`.
    pub page_count: Option<i64>,
    /// `freelist_count`.
    pub freelist_count: Option<i64>,
    /// `freelist_count / page_count`.
    pub free_fraction: Option<f64>,
    /// `cache_size` of a fresh connection: pages if positive, KiB if negative.
    pub cache_size: Option<i64>,
    /// `mmap_size` of a fresh connection, in bytes.
    pub mmap_size: Option<i64>,
    /// `foreign_keys` of a fresh connection.
    pub foreign_keys: Option<bool>,
    /// `busy_timeout` of a fresh connection, in milliseconds: SQLite installs no busy handler by default.
    pub busy_timeout_ms: i64,
    /// `auto_vacuum`: `none`, `full` or `incremental`.
    pub auto_vacuum: Option<String>,
    /// The size of `<db>-wal` in bytes, if it exists.
    pub wal_size_bytes: Option<u64>,
    /// The frames (pages) the WAL holds, read with a no-op checkpoint; none when the database has no WAL open, or
    /// the SQLite cannot tell (older than 3.51, or the WAL index is read-only to it).
    pub wal_frames: Option<u64>,
    /// `journal_size_limit` of a fresh connection, in bytes; -1 means no limit.
    pub journal_size_limit: Option<i64>,
    /// `user_version`.
    pub user_version: Option<i64>,
    /// `quick_check`: `["ok"]`, or what is wrong.
    pub quick_check: Option<Vec<String>>,
    /// Findings about this database.
    pub findings: Vec<Finding>,
}

/// Opens `path` read-only, reads it, and judges what it read.
pub fn inspect(path: &Path, info: &SqliteInfo) -> anyhow::Result<DatabaseSection> {
    let opened = open::open(path)?;
    let observed = observe(&opened, info)?;
    let opened_as = opened.mode.describe();
    let size_bytes = opened.size;
    let created_files = opened.finish()?;
    let mut findings = rules::findings(&observed);
    if !created_files.is_empty() {
        findings.push(rules::created_files(&created_files));
    }
    let free_fraction = match (&observed.freelist_count, &observed.page_count) {
        (Ok(free), Ok(pages)) if *pages > 0 => Some(*free as f64 / *pages as f64),
        _ => None,
    };
    Ok(DatabaseSection {
        path: path.display().to_string(),
        size_bytes,
        opened_as,
        created_files,
        journal_mode: observed.journal_mode.clone().ok(),
        synchronous: observed.synchronous.clone().ok(),
        page_size: observed.page_size.clone().ok(),
        page_count: observed.page_count.clone().ok(),
        freelist_count: observed.freelist_count.clone().ok(),
        free_fraction,
        cache_size: observed.cache_size.clone().ok(),
        mmap_size: observed.mmap_size.clone().ok(),
        foreign_keys: observed.foreign_keys.clone().ok(),
        busy_timeout_ms: rules::FRESH_BUSY_TIMEOUT_MS,
        auto_vacuum: observed
            .auto_vacuum
            .as_ref()
            .ok()
            .map(|&v| rules::auto_vacuum_name(v).to_string()),
        wal_size_bytes: observed.wal_size,
        wal_frames: observed.wal_frames,
        journal_size_limit: observed.journal_size_limit.clone().ok(),
        user_version: observed.user_version.clone().ok(),
        quick_check: observed.quick_check.clone().ok(),
        findings,
    })
}

/// Reads everything inside one read transaction, so every figure comes from the same snapshot.
fn observe(opened: &Opened, info: &SqliteInfo) -> anyhow::Result<Observed> {
    let conn = &opened.conn;
    conn.execute_batch("BEGIN").map_err(cannot_read)?;
    // The first read takes the lock: a database locked by another process stops here, after LOCK_WAIT.
    let _schema: Reading<i64> = read(conn, "SELECT count(*) FROM sqlite_schema")?;
    // An immutable connection never opens the WAL, so it reports a rollback journal and the rollback default of
    // synchronous; a connection that opens this WAL database gets WAL mode and the build's WAL default.
    let immutable_wal = opened.mode == OpenMode::Immutable;
    let mut observed = Observed {
        journal_mode: if immutable_wal {
            Ok("wal".to_string())
        } else {
            read(conn, "PRAGMA journal_mode")?
        },
        synchronous: if immutable_wal {
            Ok(wal_synchronous_default(info))
        } else {
            read(conn, "PRAGMA synchronous")?
        },
        page_size: read(conn, "PRAGMA page_size")?,
        page_count: read(conn, "PRAGMA page_count")?,
        freelist_count: read(conn, "PRAGMA freelist_count")?,
        cache_size: read(conn, "PRAGMA cache_size")?,
        mmap_size: read(conn, "PRAGMA mmap_size")?,
        foreign_keys: read(conn, "PRAGMA foreign_keys")?,
        auto_vacuum: read(conn, "PRAGMA auto_vacuum")?,
        journal_size_limit: read(conn, "PRAGMA journal_size_limit")?,
        user_version: read(conn, "PRAGMA user_version")?,
        litestream: read(
            conn,
            "SELECT count(*) > 0 FROM sqlite_schema \
             WHERE type = 'table' AND name IN ('_litestream_seq', '_litestream_lock')",
        )?,
        wal: opened.header.wal || opened.wal_size.is_some(),
        wal_size: opened.wal_size,
        wal_frames: None,
        quick_check: quick_check(conn)?,
    };
    if !conn.is_autocommit() {
        conn.execute_batch("ROLLBACK").map_err(cannot_read)?;
    }
    // Outside the transaction (SQLite runs no checkpoint inside one), after a read has opened the WAL.
    observed.wal_frames = quicklite::wal_frames(conn);
    Ok(observed)
}

fn read<T: FromSql>(conn: &Connection, sql: &str) -> anyhow::Result<Reading<T>> {
    damaged(conn.query_row(sql, [], |row| row.get(0)))
}

/// `PRAGMA quick_check`: `["ok"]`, or at most [`QUICK_CHECK_MAX`] messages, one per problem. (SQLite may return
/// several in one row, one per line, under a `*** in database main ***` heading.)
fn quick_check(conn: &Connection) -> anyhow::Result<Reading<Vec<String>>> {
    let rows = conn
        .prepare(&format!("PRAGMA quick_check({QUICK_CHECK_MAX})"))
        .and_then(|mut stmt| {
            stmt.query_map([], |row| row.get::<_, String>(0))?
                .collect::<rusqlite::Result<Vec<_>>>()
        });
    Ok(damaged(rows)?.map(|rows| {
        rows.iter()
            .flat_map(|row| row.lines())
            .filter(|line| !line.starts_with("*** in database"))
            .map(str::to_string)
            .collect()
    }))
}

/// Corruption becomes the reading's message; anything else (locked, unreadable) stops the inspection.
fn damaged<T>(result: rusqlite::Result<T>) -> anyhow::Result<Reading<T>> {
    match result {
        Ok(value) => Ok(Ok(value)),
        Err(err) if err.sqlite_error_code() == Some(ErrorCode::DatabaseCorrupt) => {
            Ok(Err(err.to_string()))
        }
        Err(err) => Err(cannot_read(err)),
    }
}

/// The `synchronous` a connection of this build gets on a WAL database: `SQLITE_DEFAULT_WAL_SYNCHRONOUS`, which
/// defaults to `SQLITE_DEFAULT_SYNCHRONOUS`, which defaults to 2 (FULL) (<https://www.sqlite.org/compile.html>).
fn wal_synchronous_default(info: &SqliteInfo) -> i64 {
    ["DEFAULT_WAL_SYNCHRONOUS", "DEFAULT_SYNCHRONOUS"]
        .iter()
        .find_map(|name| compile_option(info, name)?.parse().ok())
        .unwrap_or(2)
}
