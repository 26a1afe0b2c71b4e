//! The triggers that record a table's changes into the feed, made from the table's columns.

use rusqlite::{Connection, OptionalExtension, params};

use crate::feed::change::Op;
use crate::feed::tables::{CHANGES, PREFIX, STATE};
use crate::{Error, Result};

/// The start of the names of the feed's triggers.
const TRIGGER_PREFIX: &str = "_quicklite_feed_";

/// Columns one `json_object` call takes (SQLite's older builds allow 127 arguments to a function); a table with
/// more has its image built in several steps.
const COLUMNS_PER_CALL: usize = 50;

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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::feed::tests::fed;

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
}
