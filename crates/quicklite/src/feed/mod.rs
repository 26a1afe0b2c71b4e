//! The change feed: each committed change of the tables asked for ([`Builder::change_feed`]), recorded in the same
//! transaction as the change, read from a cursor ([`Database::changes_since`]).
//!
//! Triggers record the changes (`AFTER INSERT`, `AFTER UPDATE`, `AFTER DELETE` on each table, inserting into
//! [`CHANGES`](tables::CHANGES)): a change and its record commit together or not at all, whoever makes the change —
//! a grouped write rolled back to its savepoint takes its record with it, and a commit by another process, or by a
//! connection the handle does not own, is recorded as well as the writer's. The row images are JSON objects built by SQLite's
//! `json_object` over the table's columns as they were when the triggers were made: the triggers are (re)made when
//! the writer first opens the database, after the migration, whenever a table's columns differ from the triggers'.
//! The feed table's `seq` (`AUTOINCREMENT`: never reused, even once every change is pruned) is the cursor, and the
//! commit order, since commits take the write lock one at a time.
//!
//! Retention deletes the oldest changes and remembers the last one deleted ([`STATE`](tables::STATE)), so that a
//! cursor older than what is kept is told apart from one that is only behind, even when nothing is kept at all.
//!
//! [`Builder::change_feed`]: crate::Builder::change_feed
//! [`Database::changes_since`]: crate::Database::changes_since

use std::time::Duration;

mod change;
mod retention;
mod tables;
mod triggers;

pub(crate) use change::read_after;
pub use change::{Change, Cursor, Op};
pub(crate) use retention::{Retention, prune, prune_point, prune_through};
pub(crate) use tables::PREFIX;
pub(crate) use triggers::install;

/// The default of [`Builder::change_feed_max_age`](crate::Builder::change_feed_max_age).
pub(crate) const DEFAULT_MAX_AGE: Duration = Duration::from_secs(7 * 24 * 3600);

/// The default of [`Builder::change_feed_max_changes`](crate::Builder::change_feed_max_changes).
pub(crate) const DEFAULT_MAX_CHANGES: u64 = 1_000_000;

/// The tables whose changes are recorded, and how long they are kept.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct FeedConfig {
    /// The tables, as the application named them.
    pub(crate) tables: Vec<String>,
    /// What retention keeps.
    pub(crate) retention: Retention,
}

#[cfg(test)]
pub(crate) mod tests {
    use rusqlite::Connection;

    /// An in-memory database with `tables` made.
    pub(crate) fn fed(tables: &str) -> Connection {
        let conn = Connection::open_in_memory().unwrap();
        conn.execute_batch(tables).unwrap();
        conn
    }
}
