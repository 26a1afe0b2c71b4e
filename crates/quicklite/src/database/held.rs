//! A write transaction held across `.await` ([`Database::begin`]): its statements are awaited one by one, with
//! whatever else the caller awaits in between, and it ends with [`Transaction::commit`] or
//! [`Transaction::rollback`] — or rolls back when dropped, or at its limit.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::SyncSender;
use std::time::Duration;

use rusqlite::{Connection, Params, Row};
use tokio::sync::oneshot;

use crate::database::Database;
use crate::database::statements::{all_rows, execute_one, owned, refused_if_rows};
use crate::reply::{Answer, Asked, receive};
use crate::request::held::{HeldEnds, HeldJob, Message, STEP_DROPPED};
use crate::request::{Deadline, Job, WriteKind};
use crate::{Error, Result};

impl Database {
    /// Begins a write transaction whose statements are awaited one by one ([`Transaction`]), for code that awaits
    /// other things between two statements of one transaction, or that was written for sqlx's `pool.begin()`.
    ///
    /// The transaction is a `BEGIN IMMEDIATE` on the writer's connection: it has the database's write lock, and
    /// every other write of the database waits while it is open (the writes queued behind it are committed
    /// together right after it ends). So it may keep the writer for
    /// [`Builder::held_transaction_limit`](crate::Builder::held_transaction_limit) at most, from its `BEGIN`: past
    /// that, the writer rolls it back, serves the other writes again, and the transaction's next statement or its
    /// commit fails with [`Error::TransactionExpired`]. Dropped without [`Transaction::commit`], it rolls back.
    ///
    /// Prefer [`Database::write`] or [`Database::transaction`] when the work needs nothing awaited in between: a
    /// closure runs on the writer's thread without a round trip per statement, and a grouped write shares its
    /// commit with others.
    ///
    /// Waiting for the writer (behind the writes queued before it) is bounded as for a grouped write by the
    /// handle's timeout ([`Database::with_timeout`]) or [`Builder::write_timeout`](crate::Builder::write_timeout),
    /// and by [`Builder::write_lock_wait`](crate::Builder::write_lock_wait) while another connection holds the write
    /// lock; a full queue waits or fails with [`Error::Overloaded`] as for any write.
    ///
    /// [`Database::close`] waits for an open transaction to end (at its limit, at most).
    ///
    /// Do not await a write to the same database (or, on a registry whose write threads cannot grow, to another
    /// database of it) while the transaction is open: it waits for the writer this transaction keeps, until the
    /// limit rolls the transaction back.
    ///
    /// ```no_run
    /// # async fn f(db: quicklite::Database) -> quicklite::Result<()> {
    /// # async fn price_of(_: &str) -> i64 { 3 }
    /// let mut tx = db.begin().await?;
    /// let stock: i64 = tx
    ///     .query_row("SELECT stock FROM item WHERE name = ?1", ("pen",), |r| r.get(0))
    ///     .await?;
    /// let price = price_of("pen").await; // anything awaited, while the transaction stays open
    /// tx.execute("INSERT INTO sale (item, price) VALUES (?1, ?2)", ("pen", price)).await?;
    /// tx.execute("UPDATE item SET stock = ?1 WHERE name = ?2", (stock - 1, "pen")).await?;
    /// tx.commit().await?;
    /// # Ok(()) }
    /// ```
    pub async fn begin(&self) -> Result<Transaction> {
        self.begin_with_limit(self.inner.config.held_transaction_limit)
            .await
    }

    /// [`Database::begin`] with a limit of its own instead of
    /// [`Builder::held_transaction_limit`](crate::Builder::held_transaction_limit): how long the transaction may
    /// keep the writer, from its `BEGIN`. Zero is refused ([`Error::InvalidConfig`]).
    pub async fn begin_with_limit(&self, limit: Duration) -> Result<Transaction> {
        if limit.is_zero() {
            return Err(Error::InvalidConfig(
                "a held transaction's limit must be longer than zero".into(),
            ));
        }
        let (job, ends) = HeldJob::new(limit);
        let HeldEnds {
            begun,
            steps,
            ended,
            over,
        } = ends;
        // Its deadline bounds its wait, as a grouped write's; its limit bounds the rest.
        let deadline = Deadline::shortest([self.timeout, self.inner.config.write_timeout]);
        self.queue_write(WriteKind::Held, deadline, job).await?;
        let mut tx = Transaction {
            steps: Some(steps),
            ended: Some(ended),
            over,
            failure: None,
            in_flight: false,
            limit,
        };
        match begun.await {
            Ok(()) => Ok(tx),
            // It never began: its answer says why (its deadline, the write lock held elsewhere, a closed database).
            Err(_) => Err(tx.why_over().await),
        }
    }
}

/// A write transaction held across `.await`, from [`Database::begin`]: each statement is sent to the writer and
/// awaited, and the transaction stays open in between.
///
/// It ends with [`Transaction::commit`] or [`Transaction::rollback`]; dropped without either, it rolls back (the
/// writer sees the handle gone). Its statements run on the writer's connection, as a write closure's: transaction
/// control (`BEGIN`, `COMMIT`, `ROLLBACK`) inside them is refused with `SQLITE_AUTH`.
///
/// A statement that fails (a constraint, malformed SQL) fails alone and leaves the transaction usable, as sqlx's
/// does: SQLite undoes a failing statement, and a step of several statements ([`Transaction::with`],
/// [`Transaction::execute_batch`], [`Transaction::execute_many`]) runs in a savepoint of its own, rolled back when
/// it fails. The transaction is rolled back, and every later call fails with the same error, when:
/// - it ran past its limit ([`Error::TransactionExpired`]);
/// - a step panicked, SQLite rolled the transaction back by itself (`RAISE(ROLLBACK)`, an I/O error), or the future
///   of a step was dropped before its answer came, so that whether it ran cannot be known
///   ([`Error::TransactionAborted`]; the step that ended it gets its own error).
pub struct Transaction {
    /// Where the steps go; `None` once the transaction was let go (after a step's answer was lost).
    steps: Option<SyncSender<Message>>,
    /// How the transaction ended, as the writer answers its request; taken when read.
    ended: Option<oneshot::Receiver<Answer<()>>>,
    /// Raised by the writer once the transaction is over.
    over: Arc<AtomicBool>,
    /// Why the transaction cannot be used any more, once known.
    failure: Option<Error>,
    /// Whether a step was sent whose answer has not come back: set while a step's future waits, so still set
    /// if that future was dropped.
    in_flight: bool,
    /// How long the transaction may keep the writer.
    limit: Duration,
}

impl std::fmt::Debug for Transaction {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Transaction")
            .field("limit", &self.limit)
            .field("failure", &self.failure)
            .finish_non_exhaustive()
    }
}

impl Transaction {
    /// Executes one statement with `params` (prepared once and cached on the writer's connection); returns the
    /// number of rows changed. A statement that returns rows is refused before it runs ([`Error::ReturnsRows`]):
    /// use [`Transaction::query_row`] for `RETURNING`. As [`Database::execute`]'s, `params` must own its values.
    pub async fn execute<P>(&mut self, sql: impl AsRef<str>, params: P) -> Result<usize>
    where
        P: Params + Send + 'static,
    {
        let sql = owned(sql);
        let outcome = self
            .step(false, move |c| execute_one(c, &sql, params))
            .await;
        refused_if_rows(outcome)
    }

    /// Executes one statement once per parameter set, as one step (in a savepoint: all or nothing); returns the
    /// total number of rows changed.
    pub async fn execute_many<P, I>(&mut self, sql: impl AsRef<str>, params: I) -> Result<usize>
    where
        P: Params,
        I: IntoIterator<Item = P> + Send + 'static,
    {
        let sql = owned(sql);
        self.with(move |c| {
            let mut stmt = c.prepare_cached(&sql)?;
            let mut changed = 0;
            for p in params {
                changed += stmt.execute(p)?;
            }
            Ok(changed)
        })
        .await
    }

    /// Executes a script of several statements as one step (in a savepoint: all or nothing).
    pub async fn execute_batch(&mut self, sql: impl AsRef<str>) -> Result<()> {
        let sql = owned(sql);
        self.with(move |c| c.execute_batch(&sql)).await
    }

    /// Reads one row, inside the transaction (its own writes included), and maps it with `f`. A query that returns
    /// no row fails with `rusqlite::Error::QueryReturnedNoRows` ([`OptionalExtension`](crate::OptionalExtension)
    /// turns that into `None`).
    pub async fn query_row<T, P, F>(&mut self, sql: impl AsRef<str>, params: P, f: F) -> Result<T>
    where
        P: Params + Send + 'static,
        F: FnOnce(&Row<'_>) -> rusqlite::Result<T> + Send + 'static,
        T: Send + 'static,
    {
        let sql = owned(sql);
        self.step(false, move |c| c.prepare_cached(&sql)?.query_row(params, f))
            .await
    }

    /// Reads every row of a query, inside the transaction, mapping each with `f`.
    pub async fn query_all<T, P, F>(
        &mut self,
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
        self.step(false, move |c| all_rows(c, &sql, params, f))
            .await
    }

    /// Runs `f` with the writer's connection inside the transaction, as one step in a savepoint of its own: if `f`
    /// fails, what it did is rolled back and the transaction goes on; if it panics, the transaction is rolled back
    /// ([`Error::TransactionAborted`] afterwards). `f` runs on the writer's thread, which serves nothing else
    /// meanwhile: it may block, but the transaction's limit interrupts its statements.
    pub async fn with<T, F>(&mut self, f: F) -> Result<T>
    where
        F: FnOnce(&Connection) -> rusqlite::Result<T> + Send + 'static,
        T: Send + 'static,
    {
        self.step(true, f).await
    }

    /// Commits the transaction. The commit is witnessed as every other write's: once this returns, reads made
    /// afterwards see it (read-your-writes) and subscribers ([`Database::subscribe`]) are told of it. Fails with
    /// [`Error::TransactionExpired`] or [`Error::TransactionAborted`] if the transaction was already rolled back,
    /// or with [`Error::CommitFailed`] if SQLite could not commit it (then nothing of it was committed). A commit
    /// whose future is dropped after it was sent still commits.
    pub async fn commit(mut self) -> Result<()> {
        self.usable().await?;
        let sent = self
            .steps
            .take()
            .is_some_and(|steps| steps.try_send(Message::Commit).is_ok());
        if !sent {
            return Err(self.why_over().await);
        }
        match self.ended.take() {
            Some(ended) => receive(ended, Asked::Write).await,
            None => Err(Error::Closed),
        }
    }

    /// Rolls the transaction back, and returns once the writer has (so the database's next writes are served).
    /// A transaction already rolled back (past its limit, after a panic) rolls back without error.
    pub async fn rollback(mut self) -> Result<()> {
        if let Some(steps) = self.steps.take()
            && !self.in_flight
        {
            // A full channel (a step's answer lost) or a closed one: dropping `steps` ends it as well.
            let _ = steps.try_send(Message::Rollback);
        }
        let Some(ended) = self.ended.take() else {
            return Ok(());
        };
        match receive(ended, Asked::Write).await {
            Ok(())
            | Err(
                Error::TransactionExpired { .. } | Error::TransactionAborted { .. } | Error::Closed,
            ) => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// Sends one step and awaits its answer.
    async fn step<T, F>(&mut self, savepoint: bool, f: F) -> Result<T>
    where
        F: FnOnce(&Connection) -> rusqlite::Result<T> + Send + 'static,
        T: Send + 'static,
    {
        self.usable().await?;
        let (job, rx) = Job::new(f);
        let sent = self
            .steps
            .as_ref()
            .is_some_and(|steps| steps.try_send(Message::Step { job, savepoint }).is_ok());
        if !sent {
            return Err(self.why_over().await);
        }
        self.in_flight = true;
        let answer = receive(rx, Asked::Write).await;
        self.in_flight = false;
        match answer {
            // Never answered: the transaction ended before the step ran (its limit, a closed database).
            Err(Error::Closed) => Err(self.why_over().await),
            answer => answer,
        }
    }

    /// `Ok` if the transaction may take another step; otherwise why not.
    async fn usable(&mut self) -> Result<()> {
        if self.in_flight {
            // A step's future was dropped while it waited: whether it ran is unknown, so the transaction must not
            // commit. Letting go of the channel makes the writer roll back, if it has not already.
            self.in_flight = false;
            self.steps = None;
            self.failure.get_or_insert(Error::TransactionAborted {
                reason: STEP_DROPPED.into(),
            });
        }
        if self.failure.is_some() || self.steps.is_none() || self.over.load(Ordering::Acquire) {
            return Err(self.why_over().await);
        }
        Ok(())
    }

    /// Why the transaction is over, from the writer's answer to its request the first time.
    async fn why_over(&mut self) -> Error {
        if let Some(failure) = &self.failure {
            return failure.duplicate();
        }
        let failure = match self.ended.take() {
            Some(ended) => match receive(ended, Asked::Write).await {
                Err(e) => e,
                Ok(()) => Error::TransactionAborted {
                    reason: "it had ended".into(),
                },
            },
            None => Error::Closed,
        };
        self.failure = Some(failure.duplicate());
        failure
    }
}
