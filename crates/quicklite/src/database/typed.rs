//! Rows deserialized into the caller's types with serde, field by column name (`crate::de`).

use rusqlite::{Connection, Params};
use serde::de::DeserializeOwned;

use crate::cost::Site;
use crate::database::Database;
use crate::database::and_then::{carry, unwrapped};
use crate::de;
use crate::{Error, Result};

/// Runs `sql` with a cached statement and deserializes its rows, at most `limit` of them.
fn deserialized<T: DeserializeOwned>(
    conn: &Connection,
    sql: &str,
    params: impl Params,
    limit: usize,
) -> Result<Vec<T>> {
    let mut stmt = conn.prepare_cached(sql)?;
    let columns = de::column_names(&stmt);
    let mut rows = stmt.query(params)?;
    let mut out = Vec::new();
    while out.len() < limit
        && let Some(row) = rows.next()?
    {
        out.push(de::from_row(row, &columns)?);
    }
    Ok(out)
}

impl Database {
    /// Reads one row with a cached statement into a `T`, whose fields are matched to the columns by name
    /// (`Option` for a column that may be NULL). A query that returns no row fails with
    /// `rusqlite::Error::QueryReturnedNoRows`; a column that does not fit its field, with [`Error::Decode`] naming
    /// the column.
    pub async fn query_row_as<T, P>(&self, sql: impl AsRef<str>, params: P) -> Result<T>
    where
        T: DeserializeOwned + Send + 'static,
        P: Params + Send + 'static,
    {
        self.read_deserialized(sql.as_ref(), move |c, sql| {
            deserialized(c, sql, params, 1)?
                .pop()
                .ok_or(Error::Sqlite(rusqlite::Error::QueryReturnedNoRows))
        })
        .await
    }

    /// Reads every row of a query with a cached statement into `T`s ([`Database::query_row_as`]).
    pub async fn query_all_as<T, P>(&self, sql: impl AsRef<str>, params: P) -> Result<Vec<T>>
    where
        T: DeserializeOwned + Send + 'static,
        P: Params + Send + 'static,
    {
        self.read_deserialized(sql.as_ref(), move |c, sql| {
            deserialized(c, sql, params, usize::MAX)
        })
        .await
    }

    /// Reads `sql` with `f`, which deserializes its rows into `R`: a call site per result type and SQL text.
    async fn read_deserialized<R, F>(&self, sql: &str, f: F) -> Result<R>
    where
        R: Send + 'static,
        F: FnOnce(&Connection, &str) -> Result<R> + Send + 'static,
    {
        let site = Site::of::<R>(Some(sql));
        unwrapped(
            self.read_statement(site, sql, move |c, sql| carry(f(c, sql)))
                .await,
        )
    }
}
