//! The one-liners: a statement, a script, a row, all rows — each with a statement cached per connection. The SQL
//! is any text (`&str`, `String`, `&String`, …): a read on its caller's thread borrows it; one sent to a thread
//! takes a copy.

use rusqlite::{Connection, Params, Row};

use crate::cost::Site;
use crate::database::Database;
use crate::request::WriteKind;
use crate::{Error, Result};

impl Database {
    /// Executes one statement with `params` as a grouped write (prepared once and cached); returns the number of
    /// rows changed. `params` must own its values, e.g. a tuple `(1, "x".to_string())`.
    ///
    /// Unlike a [`Database::write`] closure, the statement runs without a savepoint of its own: one statement is
    /// atomic by itself (if it fails, SQLite undoes its changes — except what `INSERT OR FAIL` / `UPDATE OR FAIL`
    /// keep by definition), and the savepoint would cost a copy of every page it touches. A statement that returns
    /// rows is refused before it runs ([`Error::ReturnsRows`]): use [`Database::execute_returning`] for `RETURNING`.
    /// `VACUUM`, which SQLite runs only outside a transaction, runs alone, as [`Database::with_write_connection`]
    /// runs its closure.
    ///
    /// Parameters cross to the writer's thread, so they must be `Send + 'static`: tuples and arrays of owned
    /// values are; `rusqlite::params![…]`, a slice of borrowed `&dyn ToSql`, is not (E0277, "`dyn ToSql` cannot
    /// be shared between threads safely"). Use it inside a [`Database::write`] closure.
    pub async fn execute<P>(&self, sql: impl AsRef<str>, params: P) -> Result<usize>
    where
        P: Params + Send + 'static,
    {
        let sql = owned(sql);
        let site = Site::of::<P>(Some(&sql));
        // `VACUUM` cannot run inside a transaction: it runs alone, in autocommit mode, whether or not other writes
        // are queued to share a group's.
        let kind = if first_keyword(&sql).eq_ignore_ascii_case("VACUUM") {
            WriteKind::Unmanaged
        } else {
            WriteKind::GroupedStatement
        };
        let outcome = self
            .submit_write_at(kind, site, false, move |c| execute_one(c, &sql, params))
            .await;
        refused_if_rows(outcome)
    }

    /// Executes one statement that returns rows — `INSERT … RETURNING`, `UPDATE … RETURNING`, `DELETE … RETURNING`
    /// — as a grouped write (prepared once and cached), and maps each row it returns with `f`; a statement that
    /// changed no row returns none. `params` must own its values, as [`Database::execute`]'s.
    ///
    /// Unlike [`Database::execute`]'s statement, it runs in a savepoint of its own, as a [`Database::write`]
    /// closure does: `f` may fail after the statement changed its rows, and then its changes go with it. As a
    /// statement of [`Database::execute`]'s, one whose SQL has run short lately may run on the thread that polls this
    /// future while the writer is idle ([`Builder::inline_writes`](crate::Builder::inline_writes)), and `f` with it:
    /// `f` must not block on the async runtime (tokio's `blocking_send`, `block_on`).
    pub async fn execute_returning<T, P, F>(
        &self,
        sql: impl AsRef<str>,
        params: P,
        f: F,
    ) -> Result<Vec<T>>
    where
        P: Params + Send + 'static,
        F: FnMut(&Row<'_>) -> rusqlite::Result<T> + Send + 'static,
        T: Send + 'static,
    {
        let sql = owned(sql);
        let site = Site::of::<F>(Some(&sql));
        self.submit_write_at(WriteKind::Grouped, site, false, move |c| {
            all_rows(c, &sql, params, f)
        })
        .await
    }

    /// Executes one statement once per parameter set, all in one grouped write (one savepoint, one commit);
    /// returns the total number of rows changed.
    pub async fn execute_many<P, I>(&self, sql: impl AsRef<str>, params: I) -> Result<usize>
    where
        P: Params,
        I: IntoIterator<Item = P> + Send + 'static,
    {
        let sql = owned(sql);
        let site = Site::of::<I>(Some(&sql));
        self.submit_write_at(WriteKind::Grouped, site, false, move |c| {
            let mut stmt = c.prepare_cached(&sql)?;
            let mut changed = 0;
            for p in params {
                changed += stmt.execute(p)?;
            }
            Ok(changed)
        })
        .await
    }

    /// Executes a script of several statements as one grouped write (not cached: scripts are parsed each time).
    pub async fn execute_batch(&self, sql: impl AsRef<str>) -> Result<()> {
        let sql = owned(sql);
        let site = Site::of::<()>(Some(&sql));
        self.submit_write_at(WriteKind::Grouped, site, false, move |c| {
            c.execute_batch(&sql)
        })
        .await
    }

    /// Reads one row with a cached statement and maps it with `f`. A query that returns no row fails with
    /// `rusqlite::Error::QueryReturnedNoRows`.
    ///
    /// A read whose SQL has run short lately runs on the thread that polls this future
    /// ([`Builder::inline_reads`](crate::Builder::inline_reads)), and `f` with it: `f` must not block on the async
    /// runtime (tokio's `blocking_send`, `block_on`).
    pub async fn query_row<T, P, F>(&self, sql: impl AsRef<str>, params: P, f: F) -> Result<T>
    where
        P: Params + Send + 'static,
        F: FnOnce(&Row<'_>) -> rusqlite::Result<T> + Send + 'static,
        T: Send + 'static,
    {
        let sql = sql.as_ref();
        let site = Site::of::<F>(Some(sql));
        self.read_statement(site, sql, move |c, sql| {
            c.prepare_cached(sql)?.query_row(params, f)
        })
        .await
    }

    /// Reads every row of a query with a cached statement, mapping each with `f` (which, as [`Database::query_row`]'s,
    /// may run on the thread that polls this future).
    pub async fn query_all<T, P, F>(&self, sql: impl AsRef<str>, params: P, f: F) -> Result<Vec<T>>
    where
        P: Params + Send + 'static,
        F: FnMut(&Row<'_>) -> rusqlite::Result<T> + Send + 'static,
        T: Send + 'static,
    {
        let sql = sql.as_ref();
        let site = Site::of::<F>(Some(sql));
        self.read_statement(site, sql, move |c, sql| all_rows(c, sql, params, f))
            .await
    }
}

/// `sql` as text of its own, for a thread.
pub(super) fn owned(sql: impl AsRef<str>) -> Box<str> {
    sql.as_ref().into()
}

/// Executes one statement, `sql`, with `params` (prepared once and cached); a statement that returns rows is refused
/// before it runs ([`refused_if_rows`] names the error).
pub(super) fn execute_one<P: Params>(
    c: &Connection,
    sql: &str,
    params: P,
) -> rusqlite::Result<usize> {
    let mut stmt = c.prepare_cached(sql)?;
    if stmt.column_count() > 0 {
        return Err(rusqlite::Error::ExecuteReturnedResults);
    }
    // SQLite counts transaction control as read-only, and a write is rarely that: the SQL is looked at only then.
    if stmt.readonly() && controls_savepoints(sql) {
        return Err(rusqlite::Error::SqliteFailure(
            rusqlite::ffi::Error::new(rusqlite::ffi::SQLITE_AUTH),
            None,
        ));
    }
    stmt.execute(params)
}

/// Whether `sql` begins with `SAVEPOINT`, `RELEASE` or `ROLLBACK` (after whitespace and comments): refused as a
/// statement of [`Database::execute`]'s, which has no use for one. By itself, in autocommit mode, a `SAVEPOINT` would
/// begin a transaction and leave it open; in a group, where a statement runs without a savepoint of its own, one left
/// open would outlive it, and a later `ROLLBACK TO` would undo the writes between them. SQLite's authorizer refuses
/// them only when a statement is prepared, and one a closure put in the statement cache is not prepared again.
fn controls_savepoints(sql: &str) -> bool {
    let word = first_keyword(sql);
    ["SAVEPOINT", "RELEASE", "ROLLBACK"]
        .iter()
        .any(|keyword| word.eq_ignore_ascii_case(keyword))
}

/// The first word of `sql` after whitespace and comments (empty if it begins with no letter).
fn first_keyword(sql: &str) -> &str {
    let mut rest = sql;
    loop {
        rest = rest.trim_start();
        if let Some(comment) = rest.strip_prefix("--") {
            rest = comment.split_once('\n').map_or("", |(_, after)| after);
        } else if let Some(comment) = rest.strip_prefix("/*") {
            rest = comment.split_once("*/").map_or("", |(_, after)| after);
        } else {
            break;
        }
    }
    &rest[..rest
        .find(|c: char| !c.is_ascii_alphabetic())
        .unwrap_or(rest.len())]
}

/// Every row `sql` returns with `params` (prepared once and cached), each mapped with `f`.
pub(super) fn all_rows<T, P, F>(
    c: &Connection,
    sql: &str,
    params: P,
    f: F,
) -> rusqlite::Result<Vec<T>>
where
    P: Params,
    F: FnMut(&Row<'_>) -> rusqlite::Result<T>,
{
    c.prepare_cached(sql)?.query_map(params, f)?.collect()
}

/// `outcome` of [`execute_one`], with a statement that returns rows told as [`Error::ReturnsRows`].
pub(super) fn refused_if_rows(outcome: Result<usize>) -> Result<usize> {
    match outcome {
        Err(Error::Sqlite(rusqlite::Error::ExecuteReturnedResults)) => Err(Error::ReturnsRows),
        outcome => outcome,
    }
}

#[cfg(test)]
mod tests {
    use super::controls_savepoints;

    #[test]
    fn savepoint_statements_are_known_by_their_first_keyword_after_comments() {
        for sql in [
            "SAVEPOINT a",
            "  release a",
            "/* x */ ROLLBACK TO a",
            "-- c\nsavepoint a",
            "\n\tRollback",
        ] {
            assert!(controls_savepoints(sql), "{sql:?}");
        }
        for sql in [
            "INSERT INTO savepoint_log VALUES (1)",
            "PRAGMA foreign_keys = ON",
            "rollbacks",
            "",
            "-- only a comment",
            "/* unterminated savepoint",
        ] {
            assert!(!controls_savepoints(sql), "{sql:?}");
        }
    }
}
