//! The change feed: each committed change of the tables asked for ([`Builder::change_feed`]), recorded in the same
//! transaction as the change, read from a cursor ([`Database::changes_since`]).
//!
//! Triggers record the changes (`AFTER INSERT`, `AFTER UPDATE`, `AFTER DELETE` on each table, inserting into
//! [`CHANGES`]): a change and its record commit together or not at all, whoever makes the change — a grouped write
//! rolled back to its savepoint takes its record with it, and a commit by another process, or by a connection the
//! handle does not own, is recorded as well as the writer's. The row images are JSON objects built by SQLite's
//! `json_object` over the table's columns as they were when the triggers were made: the triggers are (re)made when
//! the writer first opens the database, after the migration, whenever a table's columns differ from the triggers'.
//! The feed table's `seq` (`AUTOINCREMENT`: never reused, even once every change is pruned) is the cursor, and the
//! commit order, since commits take the write lock one at a time.
//!
//! Retention deletes the oldest changes and remembers the last one deleted ([`STATE`]), so that a cursor older than
//! what is kept is told apart from one that is only behind, even when nothing is kept at all.
//!
//! [`Builder::change_feed`]: crate::Builder::change_feed
//! [`Database::changes_since`]: crate::Database::changes_since

use std::fmt;
use std::str::FromStr;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use rusqlite::{Connection, OptionalExtension, params};

use crate::{Error, Result};

/// The table the triggers record the changes into.
pub(crate) const CHANGES: &str = "_quicklite_changes";

/// The table that remembers the last change retention deleted.
pub(crate) const STATE: &str = "_quicklite_feed";

/// The start of the feed's tables' and triggers' names: their own changes are no application's, and subscribers'
/// notices leave them out.
pub(crate) const PREFIX: &str = "_quicklite_";

/// The start of the names of the feed's triggers.
const TRIGGER_PREFIX: &str = "_quicklite_feed_";

/// Columns one `json_object` call takes (SQLite's older builds allow 127 arguments to a function); a table with
/// more has its image built in several steps.
const COLUMNS_PER_CALL: usize = 50;

/// Most changes one pruning deletes: the rest are left for the next, so that a pruning never holds the writer long.
pub(crate) const PRUNE_BATCH: u64 = 10_000;

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

/// How many changes, and how old, the feed keeps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Retention {
    /// Changes older than this are pruned; `None`: whatever their age.
    pub(crate) max_age: Option<Duration>,
    /// Changes beyond this many (the oldest first) are pruned; `None`: however many.
    pub(crate) max_changes: Option<u64>,
}

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
    fn as_str(self) -> &'static str {
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

/// `name` as an SQL identifier.
fn ident(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

/// `text` as an SQL string literal.
fn literal(text: &str) -> String {
    format!("'{}'", text.replace('\'', "''"))
}

/// The SQL of the current time in milliseconds since the Unix epoch, as any SQLite computes it (`unixepoch`'s
/// fractions came with 3.42; the triggers run in other processes' SQLite too).
const NOW_MS: &str = "CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER)";

/// The SQL of a JSON object of the row `row` (`NEW` or `OLD`) with `columns`.
fn image(row: &str, columns: &[String]) -> String {
    let value = |column: &str| {
        let v = format!("{row}.{}", ident(column));
        format!("CASE WHEN typeof({v}) = 'blob' THEN json_object('$blob', hex({v})) ELSE {v} END")
    };
    let mut chunks = columns.chunks(COLUMNS_PER_CALL);
    let first = chunks.next().unwrap_or_default();
    let pairs: Vec<String> = first
        .iter()
        .map(|c| format!("{}, {}", literal(c), value(c)))
        .collect();
    let mut sql = format!("json_object({})", pairs.join(", "));
    for chunk in chunks {
        let pairs: Vec<String> = chunk
            .iter()
            .map(|c| {
                let path = format!("$.\"{}\"", c.replace('"', "\\\""));
                format!("{}, {}", literal(&path), value(c))
            })
            .collect();
        sql = format!("json_insert({sql}, {})", pairs.join(", "));
    }
    sql
}

/// The name of `table`'s trigger for `op`.
fn trigger_name(table: &str, op: Op) -> String {
    format!("{TRIGGER_PREFIX}{}_{table}", op.as_str())
}

/// The SQL of `table`'s trigger for `op`, over `columns`.
fn trigger_sql(table: &str, op: Op, columns: &[String]) -> String {
    let (event, rowid, before, after) = match op {
        Op::Insert => ("INSERT", "NEW.rowid", "NULL".into(), image("NEW", columns)),
        Op::Update => (
            "UPDATE",
            "NEW.rowid",
            image("OLD", columns),
            image("NEW", columns),
        ),
        Op::Delete => ("DELETE", "OLD.rowid", image("OLD", columns), "NULL".into()),
    };
    format!(
        "CREATE TRIGGER {name} AFTER {event} ON {table_ident} BEGIN INSERT INTO {CHANGES} \
         (tbl, row_id, op, before, after, at) VALUES ({table_lit}, {rowid}, '{op}', {before}, {after}, {NOW_MS}); END",
        name = ident(&trigger_name(table, op)),
        table_ident = ident(table),
        table_lit = literal(table),
        op = op.as_str(),
    )
}

/// Creates the feed's tables if they are missing, and makes the triggers record `tables` (and no other): those
/// whose SQL differs from what the tables' columns ask for now are made again. On `conn` in autocommit mode, in a
/// transaction of its own. A table that does not exist, has no rowid or is no table fails it with
/// [`Error::FeedTable`], and nothing is changed.
pub(crate) fn install(conn: &Connection, tables: &[String]) -> Result<()> {
    // Checked before the transaction: a clear error rather than a trigger SQLite refuses.
    let mut wanted = Vec::with_capacity(tables.len() * 3);
    for table in tables {
        let columns = columns_of(conn, table)?;
        for op in [Op::Insert, Op::Update, Op::Delete] {
            wanted.push((trigger_name(table, op), trigger_sql(table, op, &columns)));
        }
    }
    conn.execute_batch("BEGIN IMMEDIATE")?;
    let done = (|| -> rusqlite::Result<()> {
        conn.execute_batch(&format!(
            "CREATE TABLE IF NOT EXISTS {CHANGES} (
                seq INTEGER PRIMARY KEY AUTOINCREMENT,
                tbl TEXT NOT NULL,
                row_id INTEGER NOT NULL,
                op TEXT NOT NULL,
                before TEXT,
                after TEXT,
                at INTEGER NOT NULL
            );
            CREATE TABLE IF NOT EXISTS {STATE} (
                id INTEGER PRIMARY KEY CHECK (id = 1),
                pruned_through INTEGER NOT NULL
            );
            INSERT OR IGNORE INTO {STATE} (id, pruned_through) VALUES (1, 0);"
        ))?;
        let existing: Vec<(String, String)> = conn
            .prepare(
                "SELECT name, sql FROM sqlite_schema WHERE type = 'trigger' AND substr(name, 1, ?1) = ?2",
            )?
            .query_map(
                params![TRIGGER_PREFIX.len() as i64, TRIGGER_PREFIX],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )?
            .collect::<rusqlite::Result<_>>()?;
        for (name, sql) in &existing {
            if !wanted.iter().any(|w| w == &(name.clone(), sql.clone())) {
                conn.execute_batch(&format!("DROP TRIGGER {}", ident(name)))?;
            }
        }
        for (name, sql) in &wanted {
            if !existing.iter().any(|(n, s)| n == name && s == sql) {
                conn.execute_batch(sql)?;
            }
        }
        Ok(())
    })();
    match done {
        Ok(()) => conn.execute_batch("COMMIT")?,
        Err(e) => {
            let _ = conn.execute_batch("ROLLBACK");
            return Err(e.into());
        }
    }
    Ok(())
}

/// The columns of `table`, which the feed can record: a table of the main schema, with a rowid.
fn columns_of(conn: &Connection, table: &str) -> Result<Vec<String>> {
    let refuse = |reason: &'static str| Error::FeedTable {
        table: table.to_owned(),
        reason,
    };
    if table.starts_with(PREFIX) {
        return Err(refuse("the feed's own tables are not recorded"));
    }
    let kind: Option<(String, bool)> = conn
        .query_row(
            "SELECT type, wr FROM pragma_table_list WHERE schema = 'main' AND name = ?1 COLLATE NOCASE",
            [table],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .optional()?;
    match kind {
        None => return Err(refuse("no such table (create it in the migration)")),
        Some((kind, _)) if kind != "table" => {
            return Err(refuse(
                "not an ordinary table (a view, a virtual or shadow table)",
            ));
        }
        Some((_, true)) => {
            return Err(refuse(
                "a table WITHOUT ROWID has no rowid for its changes to name their row",
            ));
        }
        Some(_) => {}
    }
    let columns = conn
        .prepare("SELECT name FROM pragma_table_info(?1) ORDER BY cid")?
        .query_map([table], |r| r.get(0))?
        .collect::<rusqlite::Result<Vec<String>>>()?;
    Ok(columns)
}

/// Milliseconds since the Unix epoch at `at`.
pub(crate) fn millis(at: SystemTime) -> i64 {
    at.duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

/// How far retention would prune now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct PrunePoint {
    /// The last change to delete.
    pub(crate) through: u64,
    /// Whether more will be left to delete after these ([`PRUNE_BATCH`] bounds one pruning).
    pub(crate) more: bool,
}

/// Where retention would prune through now, if it would delete anything: at most [`PRUNE_BATCH`] changes. Reads
/// only.
pub(crate) fn prune_point(
    conn: &Connection,
    retention: Retention,
    now: SystemTime,
) -> rusqlite::Result<Option<PrunePoint>> {
    let first: Option<i64> = conn
        .prepare_cached(&format!("SELECT min(seq) FROM {CHANGES}"))?
        .query_row([], |r| r.get(0))?;
    let Some(first) = first else {
        return Ok(None);
    };
    let mut through: Option<i64> = None;
    if let Some(max) = retention.max_changes {
        let past: Option<i64> = conn
            .prepare_cached(&format!(
                "SELECT seq FROM {CHANGES} ORDER BY seq DESC LIMIT 1 OFFSET ?1"
            ))?
            .query_row([i64::try_from(max).unwrap_or(i64::MAX)], |r| r.get(0))
            .optional()?;
        through = through.max(past);
    }
    if let Some(age) = retention.max_age {
        let cutoff = millis(now).saturating_sub(i64::try_from(age.as_millis()).unwrap_or(i64::MAX));
        // Changes are in commit order, and nearly in time order: the first one recent enough ends the old ones.
        let first_recent: Option<i64> = conn
            .prepare_cached(&format!(
                "SELECT seq FROM {CHANGES} WHERE at >= ?1 ORDER BY seq LIMIT 1"
            ))?
            .query_row([cutoff], |r| r.get(0))
            .optional()?;
        let old = match first_recent {
            Some(seq) => Some(seq - 1),
            None => conn
                .prepare_cached(&format!("SELECT max(seq) FROM {CHANGES}"))?
                .query_row([], |r| r.get(0))?,
        };
        through = through.max(old);
    }
    let bound = first.saturating_add(PRUNE_BATCH as i64 - 1);
    Ok(through.filter(|&t| t >= first).map(|t| PrunePoint {
        through: t.min(bound) as u64,
        more: t > bound,
    }))
}

/// Deletes the changes up to `through` and remembers it, inside the transaction open on `conn`.
pub(crate) fn prune_through(conn: &Connection, through: u64) -> rusqlite::Result<()> {
    let through = i64::try_from(through).unwrap_or(i64::MAX);
    conn.prepare_cached(&format!("DELETE FROM {CHANGES} WHERE seq <= ?1"))?
        .execute([through])?;
    conn.prepare_cached(&format!(
        "UPDATE {STATE} SET pruned_through = max(pruned_through, ?1) WHERE id = 1"
    ))?
    .execute([through])?;
    Ok(())
}

/// Prunes what retention says, inside the transaction open on `conn`, until nothing is left to prune; returns how
/// many changes were deleted.
pub(crate) fn prune(conn: &Connection, retention: Retention, now: SystemTime) -> Result<u64> {
    let mut deleted = 0;
    while let Some(point) = prune_point(conn, retention, now)? {
        let before = conn.total_changes();
        prune_through(conn, point.through)?;
        // The state's row counts one change.
        deleted += (conn.total_changes() - before).saturating_sub(1);
    }
    Ok(deleted)
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

    fn fed(tables: &str) -> Connection {
        let conn = Connection::open_in_memory().unwrap();
        conn.execute_batch(tables).unwrap();
        conn
    }

    #[test]
    fn triggers_are_made_again_only_when_the_columns_change() {
        let conn = fed("CREATE TABLE t (id INTEGER PRIMARY KEY, v)");
        install(&conn, &["t".into()]).unwrap();
        let sql_of = |conn: &Connection| -> String {
            conn.query_row(
                "SELECT group_concat(sql, ';') FROM sqlite_schema WHERE type = 'trigger'",
                [],
                |r| r.get(0),
            )
            .unwrap()
        };
        let first = sql_of(&conn);
        install(&conn, &["t".into()]).unwrap();
        assert_eq!(sql_of(&conn), first);
        conn.execute_batch("ALTER TABLE t ADD COLUMN w").unwrap();
        install(&conn, &["t".into()]).unwrap();
        assert!(sql_of(&conn).contains("'w'"), "{}", sql_of(&conn));
        install(&conn, &[]).unwrap();
        let triggers: i64 = conn
            .query_row(
                "SELECT count(*) FROM sqlite_schema WHERE type = 'trigger'",
                [],
                |r| r.get(0),
            )
            .unwrap();
        assert_eq!(triggers, 0, "a table no longer fed has no triggers");
    }

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

    #[test]
    fn retention_prunes_by_count_and_age_and_remembers_where() {
        let conn = fed("CREATE TABLE t (id INTEGER PRIMARY KEY)");
        install(&conn, &["t".into()]).unwrap();
        for id in 1..=10 {
            conn.execute("INSERT INTO t VALUES (?1)", [id]).unwrap();
        }
        let by_count = Retention {
            max_age: None,
            max_changes: Some(4),
        };
        assert_eq!(prune(&conn, by_count, SystemTime::now()).unwrap(), 6);
        assert!(matches!(
            read_after(&conn, Cursor(5), 10),
            Err(Error::CursorPruned {
                cursor: 5,
                pruned_through: 6
            })
        ));
        assert_eq!(read_after(&conn, Cursor(6), 10).unwrap().len(), 4);
        let by_age = Retention {
            max_age: Some(Duration::from_secs(60)),
            max_changes: None,
        };
        let later = SystemTime::now() + Duration::from_secs(3600);
        assert_eq!(prune(&conn, by_age, later).unwrap(), 4);
        assert!(read_after(&conn, Cursor(10), 10).unwrap().is_empty());
        assert!(matches!(
            read_after(&conn, Cursor(9), 10),
            Err(Error::CursorPruned { .. })
        ));
        conn.execute("INSERT INTO t VALUES (11)", []).unwrap();
        let next = read_after(&conn, Cursor(10), 10).unwrap();
        assert_eq!(next[0].cursor, Cursor(11), "positions are never reused");
    }
}
