//! Beyond one machine, on what [Litestream](https://litestream.io) keeps in object storage.
//!
//! - [`Replica`]: a read replica, a [`Database`](crate::Database) that reads a replica through Litestream's VFS
//!   ([`Builder::replica`](crate::Builder::replica)), and where it stands ([`ReplicaStatus`]);
//! - [`Litestream`]: Litestream's control socket on the primary, and the [`Position`] a write reached object
//!   storage as, which a replica's reads can wait for ([`Database::read_at_least`](crate::Database::read_at_least));
//! - [`Restore`]: a registry's tenants restored from their replicas with the `litestream` program
//!   ([`RegistryBuilder::restore_missing`](crate::RegistryBuilder::restore_missing)).

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::{Error, Result, control};

pub use crate::replica::{Position, Replica, ReplicaStatus, Restore};

/// When a write is answered ([`Builder::acknowledge`](crate::Builder::acknowledge)).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum Acknowledge {
    /// At its local commit (the default): what the profile's `synchronous` makes of it survives a crash of the
    /// process, not of the machine.
    #[default]
    Committed,
    /// Once object storage holds it: Litestream, reached at its control socket, has uploaded a transaction that
    /// holds the write. It survives the machine.
    Replicated(Litestream),
}

/// The `litestream replicate` process of a primary, reached through its control socket (`socket: {enabled: true,
/// path: …}` in its configuration).
///
/// ```no_run
/// # async fn f(db: quicklite::Database) -> quicklite::Result<()> {
/// use std::time::Duration;
/// let litestream = quicklite::litestream::Litestream::socket("/var/run/litestream.sock");
/// db.execute("INSERT INTO t(v) VALUES (1)", []).await?;
/// // Object storage has the insert: a replica reading at least this position sees it.
/// let position = litestream.sync(db.file(), Duration::from_secs(10)).await?;
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Litestream {
    socket: PathBuf,
}

impl Litestream {
    /// Litestream listening on the Unix socket at `path`.
    pub fn socket(path: impl Into<PathBuf>) -> Litestream {
        Litestream {
            socket: path.into(),
        }
    }

    /// The socket's path.
    pub(crate) fn socket_path(&self) -> &Path {
        &self.socket
    }

    /// Has Litestream replicate `database` (its file, as Litestream's configuration names it) now, and waits until
    /// object storage holds every transaction committed before this call, or fails after `timeout` (Litestream's
    /// own timeout: whole seconds, at least one). Returns the position object storage reached. The wait runs on a
    /// thread of its own, not on the caller's.
    pub async fn sync(&self, database: &Path, timeout: Duration) -> Result<Position> {
        let socket = self.socket.clone();
        let database = database.to_owned();
        let (tx, rx) = tokio::sync::oneshot::channel();
        std::thread::Builder::new()
            .name("quicklite-litestream".into())
            .spawn(move || {
                let _ = tx.send(control::sync(&socket, &database, timeout));
            })?;
        let txid = rx
            .await
            .map_err(|_| Error::Litestream("the request's thread ended".into()))??;
        Ok(Position::from_txid(txid))
    }
}
