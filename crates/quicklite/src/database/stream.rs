//! Rows streamed a chunk at a time: each chunk is one read of its own, resumed after the last row's key (keyset
//! pagination), so a stream holds a snapshot only while a chunk is read, never while its consumer is busy.
//!
//! A stream that kept one statement open for its whole life would keep its snapshot as long: every commit after
//! it would stay in the WAL, which no checkpoint could fold back or restart while the stream lasts, however slowly
//! its consumer reads. Reading by key, a chunk at a time, bounds the snapshot by one chunk's work, lets each chunk
//! share a read batch with the other reads, and serves a registry's database like any other.

use std::collections::VecDeque;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use rusqlite::ToSql;
use rusqlite::types::{ToSqlOutput, Value};
use rusqlite::{Connection, Row};

use crate::Result;
use crate::database::Database;

/// Rows a chunk holds unless [`Keyset::chunk_rows`] says otherwise.
const CHUNK_ROWS: usize = 1000;

/// A query read in chunks by key, for [`Database::stream`]: its first columns are the key (unique, and the
/// `ORDER BY` of the query, ascending), and its first parameters stand for the last key read, which each chunk
/// resumes after.
///
/// ```
/// # use quicklite::Keyset;
/// // One key column: `?1` is the last `id` read (0 for the first chunk, below every id).
/// let events = Keyset::new("SELECT id, body FROM event WHERE id > ?1 ORDER BY id", 0);
///
/// // Two key columns (a key that is unique only with the rowid), and a parameter of the query's own after them.
/// let by_day = Keyset::new(
///     "SELECT day, rowid, total FROM sale WHERE shop = ?3 AND (day, rowid) > (?1, ?2) ORDER BY day, rowid",
///     "",
/// )
/// .and_key(0)
/// .param(7)
/// .chunk_rows(500);
/// ```
#[derive(Clone)]
pub struct Keyset {
    sql: String,
    /// The key to resume after, one value per key column: the start, then the last row read.
    after: Vec<Value>,
    /// The query's own parameters, bound after the key's.
    params: Vec<Value>,
    chunk_rows: usize,
    /// Why a key or parameter given could not be kept as a value, if one could not: the first chunk fails with it.
    invalid: Option<String>,
}

impl fmt::Debug for Keyset {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Keyset")
            .field("sql", &self.sql)
            .field("after", &self.after)
            .field("params", &self.params)
            .field("chunk_rows", &self.chunk_rows)
            .finish_non_exhaustive()
    }
}

impl Keyset {
    /// `sql` read in key order, starting after `after`: the query's first column is the key and `?1` the key
    /// of the last row read. `after` must sort before every key the stream should return (for an integer key,
    /// a value below the smallest; for a text key, `""` misses only an empty key).
    pub fn new(sql: impl Into<String>, after: impl ToSql) -> Keyset {
        Keyset {
            sql: sql.into(),
            after: Vec::new(),
            params: Vec::new(),
            chunk_rows: CHUNK_ROWS,
            invalid: None,
        }
        .and_key(after)
    }

    /// One more key column: the query's next column, and its next parameter (`?2` for the second key column…),
    /// starting after `after`. Compare keys of several columns as a row value: `(a, b) > (?1, ?2)`.
    pub fn and_key(mut self, after: impl ToSql) -> Keyset {
        let value = self.owned(after);
        self.after.push(value);
        self
    }

    /// A parameter of the query's own, bound after the key's (the first is `?2` with one key column).
    pub fn param(mut self, value: impl ToSql) -> Keyset {
        let value = self.owned(value);
        self.params.push(value);
        self
    }

    /// `value` as an owned value (NULL, and the reason kept, if it is not one).
    fn owned(&mut self, value: impl ToSql) -> Value {
        match value.to_sql() {
            Ok(ToSqlOutput::Owned(v)) => v,
            Ok(ToSqlOutput::Borrowed(v)) => match Value::try_from(v) {
                Ok(v) => v,
                Err(e) => {
                    self.invalid.get_or_insert_with(|| e.to_string());
                    Value::Null
                }
            },
            Ok(_) => {
                self.invalid
                    .get_or_insert_with(|| "a key or parameter is not a plain value".into());
                Value::Null
            }
            Err(e) => {
                self.invalid.get_or_insert_with(|| e.to_string());
                Value::Null
            }
        }
    }

    /// Most rows read in one chunk, at least one; 1,000 unless set. A stream holds at most two chunks: the one
    /// its consumer is taking rows from and the next, read ahead.
    pub fn chunk_rows(mut self, rows: usize) -> Keyset {
        self.chunk_rows = rows.max(1);
        self
    }

    /// Reads the chunk after the current key on `conn`.
    fn read_chunk<T>(&self, conn: &Connection, map: &RowMap<T>) -> Result<Chunk<T>> {
        if let Some(invalid) = &self.invalid {
            return Err(rusqlite::Error::ToSqlConversionFailure(invalid.clone().into()).into());
        }
        let mut stmt = conn.prepare_cached(&self.sql)?;
        let columns = map.column_names(&stmt);
        let params = self.after.iter().chain(&self.params);
        let mut rows = stmt.query(rusqlite::params_from_iter(params))?;
        let mut out = Vec::with_capacity(self.chunk_rows.min(CHUNK_ROWS));
        while let Some(row) = rows.next()? {
            out.push(map.call(row, &columns)?);
            if out.len() == self.chunk_rows {
                let last = (0..self.after.len())
                    .map(|i| row.get::<_, Value>(i))
                    .collect::<rusqlite::Result<_>>()?;
                return Ok(Chunk {
                    rows: out,
                    next: Some(last),
                });
            }
        }
        Ok(Chunk {
            rows: out,
            next: None,
        })
    }
}

/// The caller's closure from a row to its value.
type MapRow<T> = Box<dyn Fn(&Row<'_>) -> rusqlite::Result<T> + Send + Sync>;

/// How a row becomes the caller's value.
enum RowMap<T> {
    /// The caller's closure.
    Closure(MapRow<T>),
    /// Deserialized by column name.
    #[cfg(feature = "serde")]
    Deserialized(fn(&Row<'_>, &[String]) -> Result<T>),
}

impl<T> RowMap<T> {
    /// The names of `stmt`'s columns, if the rows are deserialized by them (else none).
    #[cfg_attr(not(feature = "serde"), allow(unused_variables))]
    fn column_names(&self, stmt: &rusqlite::Statement<'_>) -> Vec<String> {
        match self {
            RowMap::Closure(_) => Vec::new(),
            #[cfg(feature = "serde")]
            RowMap::Deserialized(_) => crate::de::column_names(stmt),
        }
    }

    #[cfg_attr(not(feature = "serde"), allow(unused_variables))]
    fn call(&self, row: &Row<'_>, columns: &[String]) -> Result<T> {
        match self {
            RowMap::Closure(f) => Ok(f(row)?),
            #[cfg(feature = "serde")]
            RowMap::Deserialized(f) => f(row, columns),
        }
    }
}

/// One chunk's rows, and the key to resume after if the chunk was full.
struct Chunk<T> {
    rows: Vec<T>,
    next: Option<Vec<Value>>,
}

type ChunkRead<T> = Pin<Box<dyn Future<Output = Result<Chunk<T>>> + Send>>;

/// The rows of a [`Keyset`] query, read a chunk at a time as they are taken ([`Database::stream`]).
///
/// An async stream (`futures::Stream`, with `StreamExt` for combinators) of `Result<T>`; [`RowStream::next`]
/// takes rows without any extension trait. After an error the stream ends.
pub struct RowStream<T> {
    db: Database,
    map: Arc<RowMap<T>>,
    /// The query and the key to resume after; `None` once the last chunk has been read or a chunk failed.
    keyset: Option<Keyset>,
    /// Rows of the current chunk not taken yet.
    rows: VecDeque<T>,
    /// The next chunk's read, under way.
    reading: Option<ChunkRead<T>>,
    /// The next chunk's read, finished before its rows were wanted.
    read: Option<Result<Chunk<T>>>,
}

// Nothing of the stream is pinned: the chunk's read is boxed.
impl<T> Unpin for RowStream<T> {}

impl<T> fmt::Debug for RowStream<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RowStream")
            .field("keyset", &self.keyset)
            .field("rows_held", &self.rows.len())
            .finish_non_exhaustive()
    }
}

impl<T: Send + 'static> RowStream<T> {
    fn new(db: &Database, keyset: Keyset, map: RowMap<T>) -> RowStream<T> {
        RowStream {
            db: db.clone(),
            map: Arc::new(map),
            keyset: Some(keyset),
            rows: VecDeque::new(),
            reading: None,
            read: None,
        }
    }

    /// The next row, `None` after the last (or after an error).
    pub async fn next(&mut self) -> Option<Result<T>> {
        std::future::poll_fn(|cx| self.poll_row(cx)).await
    }

    /// Queues the read of the chunk after the current key, unless one is under way or done or none is left.
    fn read_ahead(&mut self) {
        if self.reading.is_some() || self.read.is_some() {
            return;
        }
        let Some(keyset) = self.keyset.clone() else {
            return;
        };
        let (db, map) = (self.db.clone(), self.map.clone());
        self.reading = Some(Box::pin(async move {
            db.read_and_then(move |conn| keyset.read_chunk(conn, &map))
                .await
        }));
    }

    /// Drives the chunk's read under way; returns its result once it has one.
    fn poll_read(&mut self, cx: &mut Context<'_>) -> Poll<Result<Chunk<T>>> {
        if let Some(done) = self.read.take() {
            return Poll::Ready(done);
        }
        let Some(reading) = self.reading.as_mut() else {
            return Poll::Pending;
        };
        let done = std::task::ready!(reading.as_mut().poll(cx));
        self.reading = None;
        Poll::Ready(done)
    }

    fn poll_row(&mut self, cx: &mut Context<'_>) -> Poll<Option<Result<T>>> {
        loop {
            if let Some(row) = self.rows.pop_front() {
                // Keep the next chunk's read moving (queued, then kept for when this chunk runs out).
                if let Poll::Ready(done) = self.poll_read(cx) {
                    self.read = Some(done);
                }
                return Poll::Ready(Some(Ok(row)));
            }
            if self.keyset.is_none() && self.reading.is_none() && self.read.is_none() {
                return Poll::Ready(None);
            }
            self.read_ahead();
            match std::task::ready!(self.poll_read(cx)) {
                Ok(chunk) => {
                    match (chunk.next, self.keyset.as_mut()) {
                        (Some(last), Some(keyset)) => keyset.after = last,
                        _ => self.keyset = None,
                    }
                    self.rows = chunk.rows.into();
                    // Read the next chunk while the consumer takes this one's rows.
                    self.read_ahead();
                }
                Err(e) => {
                    self.keyset = None;
                    return Poll::Ready(Some(Err(e)));
                }
            }
        }
    }
}

impl<T: Send + 'static> futures_core::Stream for RowStream<T> {
    type Item = Result<T>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<T>>> {
        self.get_mut().poll_row(cx)
    }
}

impl Database {
    /// Streams the rows of `keyset`, mapped by `f`, reading them a chunk at a time as they are taken.
    ///
    /// Each chunk is one read ([`Database::read`]): it takes a snapshot that contains every write acknowledged
    /// before it was queued, reads up to [`Keyset::chunk_rows`] rows after the last key, and ends its snapshot.
    /// So the stream holds a snapshot (and a reader) only while a chunk is read, never while the consumer is
    /// busy or slow: checkpoints go on beside it, and a slow consumer holds at most two chunks in memory (the one
    /// it is taking rows from, and the next, read ahead). The rows come in key order, each once, but not from one
    /// snapshot: a row committed between two chunks appears if its key is past the last one read; a row changed
    /// behind it does not. For one consistent snapshot of a large result, stream from a copy
    /// ([`Database::backup`]).
    ///
    /// Dropping the stream stops it: the next chunk's read, if queued, is skipped. A chunk that fails (a wrong
    /// query, a closure's error, [`Builder::read_timeout`](crate::Builder::read_timeout)) ends the stream with
    /// its error.
    ///
    /// ```no_run
    /// # async fn f(db: quicklite::Database) -> quicklite::Result<()> {
    /// use quicklite::Keyset;
    ///
    /// let mut events = db.stream(
    ///     Keyset::new("SELECT id, body FROM event WHERE id > ?1 ORDER BY id", 0),
    ///     |row| Ok((row.get::<_, i64>(0)?, row.get::<_, String>(1)?)),
    /// );
    /// while let Some(event) = events.next().await {
    ///     let (id, body) = event?;
    ///     println!("{id}: {body}");
    /// }
    /// # Ok(()) }
    /// ```
    pub fn stream<T, F>(&self, keyset: Keyset, f: F) -> RowStream<T>
    where
        F: Fn(&Row<'_>) -> rusqlite::Result<T> + Send + Sync + 'static,
        T: Send + 'static,
    {
        RowStream::new(self, keyset, RowMap::Closure(Box::new(f)))
    }

    /// [`Database::stream`] with rows deserialized into `T` by column name, as [`Database::query_row_as`].
    #[cfg(feature = "serde")]
    pub fn stream_as<T>(&self, keyset: Keyset) -> RowStream<T>
    where
        T: serde::de::DeserializeOwned + Send + 'static,
    {
        RowStream::new(self, keyset, RowMap::Deserialized(crate::de::from_row))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_chunk_holds_the_rows_chunk_rows_states_unless_set() {
        // `Keyset::chunk_rows` gives this default in words.
        assert_eq!(Keyset::new("SELECT 1", 0).chunk_rows, 1000);
    }
}
