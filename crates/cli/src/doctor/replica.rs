//! A read replica: where it stands in the replica Litestream keeps in object storage, read through Litestream's VFS
//! as a quicklite replica ([`quicklite::Builder::replica`]) reads it.

use std::path::Path;
use std::time::Duration;

use anyhow::Context;
use quicklite::Database;
use quicklite::litestream::Replica;
use serde::Serialize;

use super::finding::{Finding, Severity};

/// How long doctor waits for a replica's first poll to answer.
const FIRST_POLL_WAIT: Duration = Duration::from_secs(10);

/// How long without an answer from object storage before doctor warns.
const POLL_SILENCE_WARNING: Duration = Duration::from_secs(60);

/// The replica section of the report.
#[derive(Debug, Serialize)]
pub struct ReplicaSection {
    /// The replica's URL, as given.
    pub url: String,
    /// The VFS's shared library.
    pub vfs: String,
    /// The last transaction the replica's connection has (Litestream's TXID, in hexadecimal as Litestream prints
    /// it).
    pub position: String,
    /// Seconds since the connection last heard from object storage; `None` before its first poll answered.
    pub since_poll_secs: Option<u64>,
    /// The tables of its schema (Litestream's own left out).
    pub tables: Vec<String>,
    /// What doctor makes of it.
    pub findings: Vec<Finding>,
}

/// Opens the replica at `url` through the VFS at `vfs` and reads where it stands.
pub fn inspect(url: &str, vfs: &Path) -> anyhow::Result<ReplicaSection> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .context("cannot start a runtime")?;
    runtime.block_on(async {
        let replica = Database::builder("replica")
            .replica(Replica::litestream(vfs, url))
            .readers(1)
            .inline_reads(false)
            .open()
            .await
            .with_context(|| format!("cannot open the replica {url}"))?;
        // The connection read the replica when it opened; its first poll comes an interval later, and takes as
        // long as object storage takes to list the replica's files.
        let started = std::time::Instant::now();
        let mut status = replica.replica_status().await?;
        while status.since_poll.is_none() && started.elapsed() < FIRST_POLL_WAIT {
            std::thread::sleep(Duration::from_millis(200));
            status = replica.replica_status().await?;
        }
        let tables = replica
            .query_all(
                "SELECT name FROM sqlite_schema WHERE type = 'table' AND name NOT LIKE '\\_litestream\\_%' ESCAPE '\\' \
                 ORDER BY name",
                [],
                |r| r.get::<_, String>(0),
            )
            .await
            .context("cannot read the replica's schema")?;
        replica.close().await?;
        let since_poll = status.since_poll;
        let poll = match since_poll {
            None => Finding::new(
                "replica poll",
                Severity::Warning,
                format!("no answer in {} s", FIRST_POLL_WAIT.as_secs()),
            )
                .fix("check that object storage is reachable, and how long listing the replica's files takes")
                .why(
                    "Litestream's VFS polls object storage for new transactions at an interval (1 s by default) and \
                     reports no time before its first poll answered: a replica that cannot poll serves what it read \
                     when it opened",
                    &[],
                ),
            Some(silence) if silence >= POLL_SILENCE_WARNING => Finding::new(
                "replica poll",
                Severity::Warning,
                format!("last answer {} s ago", silence.as_secs()),
            )
            .fix("check that object storage is reachable and the credentials are valid")
            .why(
                "a replica that cannot poll serves what it last had: its reads fall behind the primary",
                &[],
            ),
            Some(silence) => Finding::new(
                "replica poll",
                Severity::Ok,
                format!("last answer {} s ago", silence.as_secs()),
            ),
        };
        Ok(ReplicaSection {
            url: url.to_owned(),
            vfs: vfs.display().to_string(),
            position: status.position.to_string(),
            since_poll_secs: since_poll.map(|d| d.as_secs()),
            tables,
            findings: vec![poll],
        })
    })
}
