//! Beyond one machine, on what [Litestream](https://litestream.io) keeps in object storage.
//!
//! - [`Replica`]: a read replica, a [`Database`](crate::Database) that reads a replica through Litestream's VFS
//!   ([`Builder::replica`](crate::Builder::replica)), and where it stands ([`ReplicaStatus`]);
//! - [`Litestream`]: Litestream's control socket on the primary, and the [`Position`] a write reached object
//!   storage as, which a replica's reads can wait for ([`Database::read_at_least`](crate::Database::read_at_least));
//! - [`Restore`]: a registry's tenants restored from their replicas with the `litestream` program
//!   ([`RegistryBuilder::restore_missing`](crate::RegistryBuilder::restore_missing)).

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::{Error, Result};

pub use crate::replica::{Position, Replica, ReplicaStatus, Restore};

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

    /// Has Litestream replicate `database` (its file, as Litestream's configuration names it) now, and waits until
    /// object storage holds every transaction committed before this call, or fails after `timeout` (Litestream's
    /// own timeout: whole seconds, at least one). Returns the position object storage reached. The wait runs on a
    /// thread of its own, not on the caller's.
    pub async fn sync(&self, database: &Path, timeout: Duration) -> Result<Position> {
        let socket = self.socket.clone();
        let body = serde_json::json!({
            "path": database,
            "wait": true,
            "timeout": timeout.as_secs().max(1),
        })
        .to_string();
        let (tx, rx) = tokio::sync::oneshot::channel();
        std::thread::Builder::new()
            .name("quicklite-litestream".into())
            .spawn(move || {
                let _ = tx.send(post(&socket, "/sync", &body, timeout));
            })?;
        let answer = rx
            .await
            .map_err(|_| Error::Litestream("the request's thread ended".into()))??;
        answer
            .get("replicated_txid")
            .and_then(serde_json::Value::as_u64)
            .map(Position::from_txid)
            .ok_or_else(|| Error::Litestream(format!("no replicated_txid in its answer: {answer}")))
    }
}

/// Sends `POST path` with a JSON `body` over the socket and returns the JSON it answers with. HTTP/1.0, so that the
/// answer ends with the connection (Litestream's server is Go's).
fn post(socket: &Path, path: &str, body: &str, timeout: Duration) -> Result<serde_json::Value> {
    let failed = |what: &str, e: std::io::Error| {
        Error::Litestream(format!("{what} {}: {e}", socket.display()))
    };
    let mut stream = UnixStream::connect(socket).map_err(|e| failed("could not connect to", e))?;
    // Litestream answers within its own timeout; the margin covers its upload's last round trip.
    stream
        .set_read_timeout(Some(timeout + Duration::from_secs(5)))
        .map_err(|e| failed("could not set a timeout on", e))?;
    write!(
        stream,
        "POST {path} HTTP/1.0\r\nHost: litestream\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .map_err(|e| failed("could not write to", e))?;
    let mut answer = String::new();
    stream
        .read_to_string(&mut answer)
        .map_err(|e| failed("could not read from", e))?;
    let (head, content) = answer
        .split_once("\r\n\r\n")
        .ok_or_else(|| Error::Litestream(format!("an answer without a body: {answer:?}")))?;
    let status = head.split(' ').nth(1).unwrap_or_default();
    if status != "200" {
        return Err(Error::Litestream(format!(
            "{path} answered {status}: {}",
            content.trim()
        )));
    }
    serde_json::from_str(content).map_err(|e| {
        Error::Litestream(format!(
            "{path} answered what is not JSON ({e}): {content:?}"
        ))
    })
}
