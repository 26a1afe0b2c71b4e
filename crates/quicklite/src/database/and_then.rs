//! Closures that return the application's own error type: `?` works on rusqlite's errors and the application's,
//! and quicklite's own failures (closed, overloaded, a panic, a failed commit) still reach the caller distinctly,
//! through `E: From<quicklite::Error>`.

use std::fmt;

use rusqlite::Connection;

use crate::database::Database;
use crate::{Error, Result};

/// An application's error on its way through a job, which only carries rusqlite's.
struct AppError<E>(E);

impl<E: fmt::Display> fmt::Display for AppError<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

impl<E: fmt::Display> fmt::Debug for AppError<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "AppError({})", self.0)
    }
}

impl<E: fmt::Display> std::error::Error for AppError<E> {}

/// Wraps `f` so that its error travels as a rusqlite error (a failing write still rolls back alone).
fn carried<T, E, F>(f: F) -> impl FnOnce(&Connection) -> rusqlite::Result<T>
where
    F: FnOnce(&Connection) -> std::result::Result<T, E>,
    E: fmt::Display + Send + Sync + 'static,
{
    move |conn| carry(f(conn))
}

/// `outcome` with its error, if any, carried as a rusqlite error.
pub(crate) fn carry<T, E>(outcome: std::result::Result<T, E>) -> rusqlite::Result<T>
where
    E: fmt::Display + Send + Sync + 'static,
{
    outcome.map_err(|e| rusqlite::Error::ToSqlConversionFailure(Box::new(AppError(e))))
}

/// The answer as the application's type: its own error unwrapped, quicklite's converted.
pub(crate) fn unwrapped<T, E>(answer: Result<T>) -> std::result::Result<T, E>
where
    E: From<Error> + fmt::Display + Send + Sync + 'static,
{
    match answer {
        Ok(v) => Ok(v),
        Err(Error::Sqlite(rusqlite::Error::ToSqlConversionFailure(carried))) => {
            match carried.downcast::<AppError<E>>() {
                Ok(app) => Err(app.0),
                Err(other) => Err(E::from(Error::Sqlite(
                    rusqlite::Error::ToSqlConversionFailure(other),
                ))),
            }
        }
        Err(e) => Err(E::from(e)),
    }
}

impl Database {
    /// [`Database::read`] with a closure that returns the application's own error type `E`: `E` converts from
    /// [`Error`] too, so a failure of quicklite's (closed, overloaded, a panic) comes back as `E::from(error)`.
    ///
    /// ```no_run
    /// # async fn f(db: quicklite::Database) -> anyhow::Result<()> {
    /// let name: String = db
    ///     .read_and_then(|c| {
    ///         let name: String = c.query_row("SELECT name FROM item WHERE id = 1", [], |r| r.get(0))?;
    ///         anyhow::ensure!(!name.is_empty(), "item 1 has no name");
    ///         Ok(name)
    ///     })
    ///     .await?;
    /// # Ok(()) }
    /// ```
    pub async fn read_and_then<T, E, F>(&self, f: F) -> std::result::Result<T, E>
    where
        F: FnOnce(&Connection) -> std::result::Result<T, E> + Send + 'static,
        T: Send + 'static,
        E: From<Error> + fmt::Display + Send + Sync + 'static,
    {
        unwrapped(self.read(carried(f)).await)
    }

    /// [`Database::write`] with a closure that returns the application's own error type `E`. If `f` fails, only
    /// its own work is rolled back and its error comes back as it was; quicklite's failures (a failed commit of
    /// the group, closed, overloaded, a panic) come back as `E::from(error)`.
    pub async fn write_and_then<T, E, F>(&self, f: F) -> std::result::Result<T, E>
    where
        F: FnOnce(&Connection) -> std::result::Result<T, E> + Send + 'static,
        T: Send + 'static,
        E: From<Error> + fmt::Display + Send + Sync + 'static,
    {
        unwrapped(self.write(carried(f)).await)
    }
}
