//! Change notifications for the application: a stream of what each commit changed ([`crate::changes`]).

use std::pin::Pin;
use std::task::{Context, Poll};

use tokio_stream::Stream;
use tokio_stream::wrappers::BroadcastStream;
use tokio_stream::wrappers::errors::BroadcastStreamRecvError;

use crate::changes::Notice;
use crate::database::Database;

/// The change notices of one subscriber ([`Database::subscribe`]): an async stream (`futures::Stream`) of
/// [`Notice`]s, in commit order; [`Subscription::next`] takes them without any extension trait. It ends once the
/// database is closed and the notices sent before are taken.
pub struct Subscription {
    notices: BroadcastStream<Notice>,
}

impl std::fmt::Debug for Subscription {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Subscription").finish_non_exhaustive()
    }
}

impl Subscription {
    /// The next notice; `None` once the database is closed.
    pub async fn next(&mut self) -> Option<Notice> {
        std::future::poll_fn(|cx| Pin::new(&mut *self).poll_next(cx)).await
    }
}

impl Stream for Subscription {
    type Item = Notice;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Notice>> {
        Pin::new(&mut self.notices).poll_next(cx).map(|notice| {
            notice.map(|notice| match notice {
                Ok(notice) => notice,
                Err(BroadcastStreamRecvError::Lagged(missed)) => Notice::Lagged { missed },
            })
        })
    }
}

impl Database {
    /// Subscribes to what this database's commits change: one [`Notice::Committed`] per committed write group —
    /// its commit sequence (each one more than the last) and the tables and rowids it changed — sent after its
    /// `COMMIT` returned, never for a write that failed or a transaction rolled back. Commits made to the file by
    /// other processes are told as [`Notice::External`] when the database looks for them
    /// ([`Builder::notice_external_commits`](crate::Builder::notice_external_commits)).
    ///
    /// A subscriber holds up to [`Builder::subscription_capacity`](crate::Builder::subscription_capacity) notices;
    /// one that falls further behind gets [`Notice::Lagged`] instead of those it missed. While nobody subscribes,
    /// nothing is recorded; a group already under way when the first subscriber comes may be told with part of its
    /// changes only.
    ///
    /// ```no_run
    /// # async fn f(db: quicklite::Database) {
    /// use quicklite::Notice;
    ///
    /// let mut changes = db.subscribe();
    /// while let Some(notice) = changes.next().await {
    ///     match notice {
    ///         Notice::Committed(commit) => {
    ///             for change in &commit.tables {
    ///                 println!("commit {}: {} {:?}", commit.seq, change.table, change.rowids);
    ///             }
    ///         }
    ///         _ => println!("something changed: read afresh"),
    ///     }
    /// }
    /// # }
    /// ```
    pub fn subscribe(&self) -> Subscription {
        Subscription {
            notices: BroadcastStream::new(self.inner.shared.changes.subscribe()),
        }
    }

    /// The sequence of this database's last commit ([`Commit::seq`](crate::Commit::seq) of its notice). A commit's
    /// notice is in every subscription made before it before any of its writes is answered: once a write has
    /// returned, `commit_seq()` is at least its commit's, and the notices up to it can be taken without waiting. A
    /// cache kept by notices serves a caller its own writes if the caller, after its write returned, waits until
    /// the cache has applied the notice of the `commit_seq()` it read then.
    pub fn commit_seq(&self) -> u64 {
        self.inner.shared.commit_seq()
    }
}
