//! What doctor read from a database file, each value as a fresh read-only connection sees it: what `database`
//! reads and the rules judge.

/// A value read from SQLite, or the corruption message that kept it from being read: a damaged database still
/// gets a report.
pub type Reading<T> = Result<T, String>;

/// The most problems `PRAGMA quick_check` reports before it stops.
pub const QUICK_CHECK_MAX: usize = 20;

/// What doctor read from the database, each value as a fresh connection sees it.
#[derive(Debug)]
pub struct Observed {
    /// `PRAGMA journal_mode`: `wal` persists in the file; any other mode is the connection's own.
    pub journal_mode: Reading<String>,
    /// `PRAGMA synchronous`: 0 OFF, 1 NORMAL, 2 FULL, 3 EXTRA.
    pub synchronous: Reading<i64>,
    /// `PRAGMA page_size`, in bytes.
    pub page_size: Reading<i64>,
    /// `PRAGMA page_count`.
    pub page_count: Reading<i64>,
    /// `PRAGMA freelist_count`: unused pages.
    pub freelist_count: Reading<i64>,
    /// `PRAGMA cache_size`: pages if positive, KiB if negative.
    pub cache_size: Reading<i64>,
    /// `PRAGMA mmap_size`, in bytes.
    pub mmap_size: Reading<i64>,
    /// `PRAGMA foreign_keys`.
    pub foreign_keys: Reading<bool>,
    /// `PRAGMA auto_vacuum`: 0 none, 1 full, 2 incremental.
    pub auto_vacuum: Reading<i64>,
    /// `PRAGMA journal_size_limit`, in bytes; negative means no limit.
    pub journal_size_limit: Reading<i64>,
    /// `PRAGMA user_version`.
    pub user_version: Reading<i64>,
    /// Whether Litestream replicates the database: its tables (`_litestream_seq`, `_litestream_lock`) are in it.
    pub litestream: Reading<bool>,
    /// Whether the database is in WAL mode (its header says so, or a `-wal` exists).
    pub wal: bool,
    /// The size of `<db>-wal`, if it exists.
    pub wal_size: Option<u64>,
    /// The frames in the WAL, read with a no-op checkpoint (`quicklite::wal_frames`): unlike the file's size,
    /// which only a `TRUNCATE` checkpoint shrinks, this is what the WAL holds. `None` when unknown.
    pub wal_frames: Option<u64>,
    /// `PRAGMA quick_check`: `["ok"]`, or what is wrong.
    pub quick_check: Reading<Vec<String>>,
}
