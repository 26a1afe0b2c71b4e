//! Reading the change feed ([`crate::feed`]) from a cursor: a stream that catches up with what the feed keeps,
//! then follows new commits.
//!
//! The stream reads the feed a page at a time, each page a read of its own (as [`RowStream`](crate::RowStream)'s
//! chunks: no snapshot is held while the consumer is busy). Once a page comes back short, the stream has caught up
//! and waits for the database's next notice ([`Database::subscribe`], made before the first read, so no commit
//! can slip between a read and the wait): a commit of this process, or one from outside, which the writer looks for
//! ([`Builder::notice_external_commits`](crate::Builder::notice_external_commits), on with the feed). The read after
//! a commit from outside runs on the writer's connection ([`ChangeStream`]'s `outside`), which no reader's
//! snapshot begun before that commit can serve.

use std::collections::VecDeque;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::SystemTime;

use rusqlite::Connection;
use tokio_stream::Stream;

use crate::changes::Notice;
use crate::database::Database;
use crate::database::subscribe::Subscription;
use crate::feed::{self, Change, Cursor};
use crate::{Error, Result};

/// Changes one read of the feed returns at most.
const PAGE: usize = 256;

type PageRead = Pin<Box<dyn Future<Output = Result<Vec<Change>>> + Send>>;

/// The changes of the database's change feed after a cursor, in commit order, then as they are committed
/// ([`Database::changes_since`]).
///
/// An async stream (`futures::Stream`) of `Result<Change>`; [`ChangeStream::next`] takes them without any extension
/// trait. It ends once the database is closed and the changes committed before are taken, or after an error.
pub struct ChangeStream {
    db: Database,
    /// The last change taken.
    after: Cursor,
    /// The database's notices, which wake the stream once it has caught up.
    notices: Subscription,
    /// Changes read and not taken yet.
    changes: VecDeque<Change>,
    /// The read of the next page, under way.
    reading: Option<PageRead>,
    /// Whether the last page was short: the next read waits for a notice.
    caught_up: bool,
    /// Whether the notices that woke the stream told of commits from outside (or may have: it lagged). The next
    /// read then runs on the writer's connection, whose write lock orders it after every commit: a reader's
    /// snapshot follows this process's commits (read-your-writes), but one begun for a batch a moment before may
    /// predate a commit from outside, and the stream would wait with that commit's changes unread.
    outside: bool,
    /// Whether the stream has ended (the database closed, or an error was returned).
    ended: bool,
}

// Nothing of the stream is pinned: the page's read is boxed.
impl Unpin for ChangeStream {}

impl fmt::Debug for ChangeStream {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ChangeStream")
            .field("after", &self.after)
            .field("changes_held", &self.changes.len())
            .field("caught_up", &self.caught_up)
            .finish_non_exhaustive()
    }
}

impl ChangeStream {
    /// The next change; `None` once the database is closed (or after an error).
    pub async fn next(&mut self) -> Option<Result<Change>> {
        std::future::poll_fn(|cx| Pin::new(&mut *self).poll_next(cx)).await
    }

    /// The cursor of the last change taken (the one the stream started from, before any).
    pub fn cursor(&self) -> Cursor {
        self.after
    }

    /// Waits for a notice once caught up; returns `Ready(false)` if the database closed meanwhile.
    fn poll_wake(&mut self, cx: &mut Context<'_>) -> Poll<bool> {
        if !self.caught_up {
            return Poll::Ready(true);
        }
        match Pin::new(&mut self.notices).poll_next(cx) {
            Poll::Pending => Poll::Pending,
            Poll::Ready(None) => Poll::Ready(false),
            Poll::Ready(Some(notice)) => {
                // One read serves every notice already there.
                let mut outside = !matches!(notice, Notice::Committed(_));
                while let Poll::Ready(Some(notice)) = Pin::new(&mut self.notices).poll_next(cx) {
                    outside |= !matches!(notice, Notice::Committed(_));
                }
                self.outside = outside;
                self.caught_up = false;
                Poll::Ready(true)
            }
        }
    }
}

impl Stream for ChangeStream {
    type Item = Result<Change>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Change>>> {
        let this = &mut *self;
        loop {
            if let Some(change) = this.changes.pop_front() {
                this.after = change.cursor;
                return Poll::Ready(Some(Ok(change)));
            }
            if this.ended {
                return Poll::Ready(None);
            }
            if this.reading.is_none() {
                if !std::task::ready!(this.poll_wake(cx)) {
                    this.ended = true;
                    return Poll::Ready(None);
                }
                let (db, after) = (this.db.clone(), this.after);
                let read = move |conn: &Connection| feed::read_after(conn, after, PAGE);
                // A replica's writer writes nothing, and a reader's snapshot follows its position.
                let on_writer =
                    std::mem::take(&mut this.outside) && db.inner.config.replica.is_none();
                this.reading = Some(if on_writer {
                    Box::pin(async move { db.write_and_then(read).await })
                } else {
                    Box::pin(async move { db.read_and_then(read).await })
                });
            }
            let Some(reading) = this.reading.as_mut() else {
                continue;
            };
            let page = std::task::ready!(reading.as_mut().poll(cx));
            this.reading = None;
            match page {
                Ok(changes) => {
                    this.caught_up = changes.len() < PAGE;
                    this.changes = changes.into();
                }
                // Closed while the stream waited or read: it ends, as the notices do.
                Err(Error::Closed) => {
                    this.ended = true;
                    return Poll::Ready(None);
                }
                Err(e) => {
                    this.ended = true;
                    return Poll::Ready(Some(Err(e)));
                }
            }
        }
    }
}

impl Database {
    /// The change feed's changes after `cursor` ([`Cursor::BEGINNING`] for every change kept), in commit order,
    /// then each change as it is committed: by this database's writes, and by other processes' and connections'
    /// (whose changes the feed's triggers record as well, and which the stream sees when the writer looks for
    /// commits from outside, [`Builder::notice_external_commits`](crate::Builder::notice_external_commits)). The
    /// feed records the tables given to [`Builder::change_feed`](crate::Builder::change_feed).
    ///
    /// Each change carries its [`Change::cursor`]: store the last one handled, and resume from it after a restart
    /// — each change is then seen at least once (exactly once if the cursor is stored in the same transaction as
    /// what was done with the change). A cursor older than what the feed keeps fails the stream with
    /// [`Error::CursorPruned`] (read afresh), one past the last change ever recorded with
    /// [`Error::CursorUnknown`], and a database without a feed with [`Error::NoChangeFeed`]; after an error the
    /// stream ends. A registry's database with a stream open is not closed when idle: its writer looks for
    /// commits from outside.
    ///
    /// ```no_run
    /// # async fn f(db: quicklite::Database) -> quicklite::Result<()> {
    /// use quicklite::{Cursor, Op};
    ///
    /// let stored: Cursor = "0".parse().unwrap(); // where the consumer left off
    /// let mut changes = db.changes_since(stored);
    /// while let Some(change) = changes.next().await {
    ///     let change = change?;
    ///     if change.op == Op::Delete {
    ///         println!("{} {} was {:?}", change.table, change.rowid, change.before);
    ///     }
    ///     // … then store change.cursor
    /// }
    /// # Ok(()) }
    /// ```
    pub fn changes_since(&self, cursor: Cursor) -> ChangeStream {
        ChangeStream {
            db: self.clone(),
            after: cursor,
            notices: self.subscribe(),
            changes: VecDeque::new(),
            reading: None,
            caught_up: false,
            outside: false,
            ended: false,
        }
    }

    /// Deletes now what the change feed's retention no longer keeps
    /// ([`Builder::change_feed_max_age`](crate::Builder::change_feed_max_age),
    /// [`Builder::change_feed_max_changes`](crate::Builder::change_feed_max_changes)), as a write; returns how many
    /// changes were deleted. The writer also prunes by itself, now and then. A database opened without
    /// [`Builder::change_feed`](crate::Builder::change_feed) has no retention to apply: [`Error::NoChangeFeed`].
    pub async fn prune_change_feed(&self) -> Result<u64> {
        let Some(config) = &self.inner.config.feed else {
            return Err(Error::NoChangeFeed);
        };
        let retention = config.retention;
        self.write_and_then(move |conn| feed::prune(conn, retention, SystemTime::now()))
            .await
    }
}
