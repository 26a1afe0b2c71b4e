//! A change as the feed recorded it, the cursor that orders changes, and one read of the feed after a cursor.

use std::fmt;
use std::str::FromStr;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use rusqlite::{Connection, OptionalExtension, params};

use crate::feed::tables::{CHANGES, STATE};
use crate::{Error, Result};

/// A position in the change feed: the change last taken, from which [`Database::changes_since`] resumes. A plain
/// number, to be stored (as text through `Display` and `FromStr`, or as [`Cursor::get`]) wherever the consumer
/// keeps its progress, best in the same transaction as what it did with the changes.
///
/// [`Database::changes_since`]: crate::Database::changes_since
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Cursor(u64);

impl Cursor {
    /// Before the first change ever recorded: a feed read from here returns every change still kept (and fails
    /// with [`Error::CursorPruned`] once retention has deleted any).
    pub const BEGINNING: Cursor = Cursor(0);

    /// The cursor stored as `position` ([`Cursor::get`]).
    pub const fn new(position: u64) -> Cursor {
        Cursor(position)
    }

    /// The number to store.
    pub const fn get(self) -> u64 {
        self.0
    }

    /// The cursor of the last change recorded as `conn`'s snapshot sees it ([`Cursor::BEGINNING`] if none ever
    /// was): read what a consumer keeps in step and this in one read, then follow the feed from it — after
    /// [`Error::CursorPruned`], or for rows a table held before its feed began — and no change is missed or applied
    /// twice.
    ///
    /// ```no_run
    /// # async fn f(db: quicklite::Database) -> quicklite::Result<()> {
    /// use quicklite::Cursor;
    ///
    /// let (orders, cursor) = db
    ///     .read(|conn| {
    ///         let mut stmt = conn.prepare("SELECT id, item FROM orders")?;
    ///         let orders = stmt
    ///             .query_map([], |r| Ok((r.get::<_, i64>(0)?, r.get::<_, String>(1)?)))?
    ///             .collect::<Result<Vec<_>, _>>()?;
    ///         Ok((orders, Cursor::latest(conn)?))
    ///     })
    ///     .await?;
    /// let changes = db.changes_since(cursor);
    /// # Ok(()) }
    /// ```
    pub fn latest(conn: &Connection) -> rusqlite::Result<Cursor> {
        // SQLite makes `sqlite_sequence` with the first table that has `AUTOINCREMENT`.
        let sequences: bool = conn
            .prepare_cached(
                "SELECT count(*) FROM sqlite_schema WHERE type = 'table' AND name = 'sqlite_sequence'",
            )?
            .query_row([], |r| r.get(0))?;
        if !sequences {
            return Ok(Cursor::BEGINNING);
        }
        let last: Option<i64> = conn
            .prepare_cached("SELECT seq FROM sqlite_sequence WHERE name = ?1")?
            .query_row([CHANGES], |r| r.get(0))
            .optional()?;
        Ok(Cursor(last.map_or(0, |seq| seq.max(0) as u64)))
    }
}

impl fmt::Display for Cursor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

impl FromStr for Cursor {
    type Err = std::num::ParseIntError;

    fn from_str(s: &str) -> std::result::Result<Cursor, Self::Err> {
        s.trim().parse().map(Cursor)
    }
}

/// What a change did to its row.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Op {
    /// The row was inserted: [`Change::after`] only.
    Insert,
    /// The row was updated: [`Change::before`] and [`Change::after`].
    Update,
    /// The row was deleted: [`Change::before`] only.
    Delete,
}

impl Op {
    /// As the feed table stores it.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Op::Insert => "insert",
            Op::Update => "update",
            Op::Delete => "delete",
        }
    }

    fn parse(text: &str) -> Option<Op> {
        [Op::Insert, Op::Update, Op::Delete]
            .into_iter()
            .find(|op| op.as_str() == text)
    }
}

/// One committed change of a row, as the change feed recorded it ([`Database::changes_since`]).
///
/// The row images are JSON objects with one member per column, as the columns were when the feed's triggers were
/// made; a BLOB value appears as `{"$blob": "<its bytes in hexadecimal>"}` (JSON has no bytes).
///
/// [`Database::changes_since`]: crate::Database::changes_since
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct Change {
    /// Where the feed stands once this change is taken: store it to resume after it. Changes come in commit
    /// order, and in statement order within a commit.
    pub cursor: Cursor,
    /// The table, as named to [`Builder::change_feed`](crate::Builder::change_feed).
    pub table: String,
    /// The row's rowid (after the change, for an update that changed it).
    pub rowid: i64,
    /// What happened to the row.
    pub op: Op,
    /// The row before the change; `None` for an insert.
    pub before: Option<serde_json::Value>,
    /// The row after the change; `None` for a delete.
    pub after: Option<serde_json::Value>,
    /// When the change was made, by the clock of the process that made it.
    pub at: SystemTime,
}

/// One read of the feed: the changes after a cursor, at most `limit`.
pub(crate) fn read_after(conn: &Connection, after: Cursor, limit: usize) -> Result<Vec<Change>> {
    let exists: bool = conn
        .prepare_cached("SELECT count(*) FROM sqlite_schema WHERE type = 'table' AND name = ?1")?
        .query_row([CHANGES], |r| r.get(0))?;
    if !exists {
        return Err(Error::NoChangeFeed);
    }
    let (pruned, last): (i64, i64) = conn
        .prepare_cached(&format!(
            "SELECT (SELECT pruned_through FROM {STATE} WHERE id = 1),
                    (SELECT seq FROM sqlite_sequence WHERE name = '{CHANGES}')"
        ))?
        .query_row([], |r| {
            Ok((
                r.get::<_, Option<i64>>(0)?.unwrap_or(0),
                r.get::<_, Option<i64>>(1)?.unwrap_or(0),
            ))
        })?;
    let (pruned, last) = (pruned.max(0) as u64, last.max(0) as u64);
    if after.0 < pruned {
        return Err(Error::CursorPruned {
            cursor: after.0,
            pruned_through: pruned,
        });
    }
    if after.0 > last {
        return Err(Error::CursorUnknown {
            cursor: after.0,
            last,
        });
    }
    let mut stmt = conn.prepare_cached(&format!(
        "SELECT seq, tbl, row_id, op, before, after, at FROM {CHANGES} WHERE seq > ?1 ORDER BY seq LIMIT ?2"
    ))?;
    let mut rows = stmt.query(params![
        i64::try_from(after.0).unwrap_or(i64::MAX),
        i64::try_from(limit).unwrap_or(i64::MAX)
    ])?;
    let mut changes = Vec::new();
    while let Some(row) = rows.next()? {
        let seq: i64 = row.get(0)?;
        let op: String = row.get(3)?;
        let image = |i: usize| -> Result<Option<serde_json::Value>> {
            row.get::<_, Option<String>>(i)?
                .map(|text| serde_json::from_str(&text))
                .transpose()
                .map_err(|e| Error::Decode {
                    column: Some(["before", "after"][i - 4].into()),
                    message: e.to_string(),
                })
        };
        let at: i64 = row.get(6)?;
        changes.push(Change {
            cursor: Cursor(seq as u64),
            table: row.get(1)?,
            rowid: row.get(2)?,
            op: Op::parse(&op).ok_or_else(|| Error::Decode {
                column: Some("op".into()),
                message: format!("{op:?} is no operation of the change feed"),
            })?,
            before: image(4)?,
            after: image(5)?,
            at: UNIX_EPOCH + Duration::from_millis(at.max(0) as u64),
        });
    }
    Ok(changes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::feed::install;
    use crate::feed::tests::fed;

    #[test]
    fn a_wide_table_with_blobs_is_recorded_whole() {
        let columns: Vec<String> = (0..130).map(|i| format!("c{i}")).collect();
        let conn = fed(&format!(
            "CREATE TABLE w (id INTEGER PRIMARY KEY, {})",
            columns.join(", ")
        ));
        install(&conn, &["w".into()]).unwrap();
        conn.execute(
            "INSERT INTO w (id, c0, c129) VALUES (1, x'00ff', 'last')",
            [],
        )
        .unwrap();
        let changes = read_after(&conn, Cursor::BEGINNING, 10).unwrap();
        let after = changes[0].after.as_ref().unwrap();
        assert_eq!(after["c0"], serde_json::json!({"$blob": "00FF"}));
        assert_eq!(after["c129"], "last");
        assert_eq!(after.as_object().unwrap().len(), 131);
    }
}
