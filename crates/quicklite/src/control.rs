//! Litestream's control socket: HTTP over a Unix socket, as `litestream replicate` serves it when its configuration
//! says `socket: {enabled: true, path: …}`.

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::Duration;

use crate::{Error, Result};

/// Has Litestream replicate `database` now and waits until object storage holds every transaction committed before
/// the call, or fails after `timeout` (Litestream's own: whole seconds, at least one). Returns the transaction
/// object storage reached (Litestream's TXID). Blocks the calling thread.
pub(crate) fn sync(socket: &Path, database: &Path, timeout: Duration) -> Result<u64> {
    let body = serde_json::json!({
        "path": database,
        "wait": true,
        "timeout": timeout.as_secs().max(1),
    })
    .to_string();
    let answer = post(socket, "/sync", &body, timeout)?;
    answer
        .get("replicated_txid")
        .and_then(serde_json::Value::as_u64)
        .ok_or_else(|| Error::Litestream(format!("no replicated_txid in its answer: {answer}")))
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
