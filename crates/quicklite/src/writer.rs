//! The writer thread: one read-write connection, group commit.
//!
//! The writer drains what is queued (up to `write_batch_max`), opens one `BEGIN IMMEDIATE`, runs each request in
//! its own `SAVEPOINT` (released on success, rolled back to on error, so a failing request takes only its own work
//! with it), `COMMIT`s once and then answers everyone. A commit (and, under `synchronous=FULL`, its fsync) is the
//! expensive part of a small write; a group shares one. Nobody is answered before the `COMMIT` returns, so no
//! write is ever reported as committed that is not.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use async_channel::Receiver;
use rusqlite::{Connection, ffi};

use crate::Error;
use crate::builder::Config;
#[cfg(test)]
use crate::connection::SAVEPOINT;
use crate::connection::TxGuard;
use crate::database::State;
use crate::request::{WriteKind, WriteRequest};

/// The writer thread's state.
pub(crate) struct Writer {
    pub(crate) conn: Connection,
    pub(crate) guard: TxGuard,
    pub(crate) rx: Receiver<WriteRequest>,
    pub(crate) state: Arc<State>,
    pub(crate) config: Config,
}

/// Transaction-control statements, kept prepared in the statement cache.
const BEGIN: &str = "BEGIN IMMEDIATE";
const COMMIT: &str = "COMMIT";
const ROLLBACK: &str = "ROLLBACK";
const SAVEPOINT_SQL: &str = "SAVEPOINT quicklite_write";
const RELEASE_SQL: &str = "RELEASE quicklite_write";
const ROLLBACK_TO_SQL: &str = "ROLLBACK TO quicklite_write";

impl Writer {
    /// Serves requests until the queue is closed and drained, then checkpoints.
    pub(crate) fn run(self) {
        let mut carry: Option<WriteRequest> = None;
        let mut group: Vec<WriteRequest> = Vec::with_capacity(self.config.write_batch_max);
        loop {
            let first = match carry.take() {
                Some(r) => r,
                None => match self.rx.recv_blocking() {
                    Ok(r) => r,
                    Err(_) => break,
                },
            };
            if first.kind != WriteKind::Grouped {
                self.run_alone(first);
                continue;
            }
            group.push(first);
            carry = self.fill(&mut group);
            self.run_group(&mut group);
        }
        self.shut_down();
    }

    /// Adds queued grouped writes to `group`, up to the batch limit; returns a request that must run alone, if one
    /// was met. With a linger time, waits up to that long for more writes to join.
    fn fill(&self, group: &mut Vec<WriteRequest>) -> Option<WriteRequest> {
        let deadline = (!self.config.write_linger.is_zero())
            .then(|| Instant::now() + self.config.write_linger);
        while group.len() < self.config.write_batch_max {
            match self.rx.try_recv() {
                Ok(r) if r.kind == WriteKind::Grouped => group.push(r),
                Ok(r) => return Some(r),
                Err(_) => match deadline {
                    Some(d) if Instant::now() < d => {
                        std::thread::sleep((d - Instant::now()).min(Duration::from_micros(50)))
                    }
                    _ => break,
                },
            }
        }
        None
    }

    fn exec(&self, sql: &str) -> rusqlite::Result<()> {
        self.guard.internal(|| {
            self.conn.prepare_cached(sql)?.execute([])?;
            Ok(())
        })
    }

    /// Runs a group of writes in one transaction.
    fn run_group(&self, group: &mut Vec<WriteRequest>) {
        let metrics = &self.state.metrics;
        let now = Instant::now();
        for r in group.iter() {
            metrics.write_wait_us.record_duration(now - r.enqueued);
        }
        if let Err(e) = self.exec(BEGIN) {
            for r in group.drain(..) {
                r.job.finish(Some(copy_error(&e)));
            }
            return;
        }
        let single = group.len() == 1;
        // Requests whose work is in the open transaction, and the ones SQLite rolled back under us.
        let mut fates: Vec<Option<Error>> = Vec::with_capacity(group.len());
        let mut open_from = 0;
        for i in 0..group.len() {
            if !single && let Err(e) = self.exec(SAVEPOINT_SQL) {
                fates.push(Some(copy_error(&e)));
                continue;
            }
            let outcome = group[i].job.run(&self.conn);
            if group[i].job.panicked() {
                metrics.panics.fetch_add(1, Ordering::Relaxed);
            }
            if self.conn.is_autocommit() {
                // SQLite rolled the whole transaction back by itself (I/O error, full disk, out of memory):
                // everything this group did so far is gone, including writes whose savepoints were released.
                let reason = match &outcome {
                    Err(msg) => msg.clone(),
                    Ok(()) => "the transaction was rolled back by SQLite".to_string(),
                };
                metrics.rolled_back_groups.fetch_add(1, Ordering::Relaxed);
                tracing::warn!(%reason, "sqlite rolled back a write group");
                for fate in fates[open_from..].iter_mut() {
                    if fate.is_none() {
                        *fate = Some(Error::RolledBack {
                            reason: reason.clone(),
                        });
                    }
                }
                fates.push(Some(Error::RolledBack { reason }));
                open_from = i + 1;
                if let Err(e) = self.exec(BEGIN) {
                    // Nothing more can run in this group; the rest get the error.
                    for _ in i + 1..group.len() {
                        fates.push(Some(copy_error(&e)));
                    }
                    open_from = group.len();
                    break;
                }
                continue;
            }
            let undo = if single {
                // No savepoint around a lone write: its failure rolls back the whole transaction.
                outcome.is_err().then(|| self.exec(ROLLBACK))
            } else if outcome.is_ok() {
                Some(self.exec(RELEASE_SQL))
            } else {
                Some(
                    self.exec(ROLLBACK_TO_SQL)
                        .and_then(|_| self.exec(RELEASE_SQL)),
                )
            };
            if let Some(Err(e)) = undo {
                tracing::error!(error = %e, "could not end a write's savepoint");
            }
            fates.push(None);
        }

        let mut committed = false;
        if !self.conn.is_autocommit() {
            let started = Instant::now();
            match self.exec(COMMIT) {
                Ok(()) => {
                    committed = true;
                    metrics.commit_us.record_duration(started.elapsed());
                }
                Err(e) => {
                    metrics.failed_commits.fetch_add(1, Ordering::Relaxed);
                    if !self.conn.is_autocommit() {
                        let _ = self.exec(ROLLBACK);
                    }
                    let (extended_code, message) = sqlite_parts(&e);
                    let batch = group.len() - open_from;
                    tracing::error!(%message, batch, "group commit failed");
                    for fate in fates[open_from..].iter_mut() {
                        if fate.is_none() {
                            *fate = Some(Error::CommitFailed {
                                extended_code,
                                message: message.clone(),
                                batch,
                            });
                        }
                    }
                }
            }
        }
        if committed {
            self.publish_commit();
            metrics.write_batch.record((group.len() - open_from) as u64);
        }
        metrics
            .writes
            .fetch_add(group.len() as u64, Ordering::Relaxed);
        for (r, fate) in group.drain(..).zip(fates) {
            let failed = fate.is_some();
            r.job.finish(fate);
            if failed {
                metrics.write_errors.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    /// Runs a request that asked for a transaction of its own, or for none.
    fn run_alone(&self, mut r: WriteRequest) {
        let metrics = &self.state.metrics;
        metrics.write_wait_us.record_duration(r.enqueued.elapsed());
        metrics.writes.fetch_add(1, Ordering::Relaxed);
        let fate = match r.kind {
            WriteKind::Unmanaged => {
                let outcome = self.guard.internal(|| r.job.run(&self.conn));
                let fate = if self.conn.is_autocommit() {
                    None
                } else {
                    let _ = self.exec(ROLLBACK);
                    Some(Error::TransactionLeftOpen)
                };
                let _ = outcome;
                // It may have committed anything; readers must not serve older snapshots to later reads.
                self.publish_commit();
                fate
            }
            _ => match self.exec(BEGIN) {
                Err(e) => Some(copy_error(&e)),
                Ok(()) => {
                    let outcome = r.job.run(&self.conn);
                    if self.conn.is_autocommit() {
                        Some(Error::RolledBack {
                            reason: outcome
                                .err()
                                .unwrap_or_else(|| "rolled back by SQLite".into()),
                        })
                    } else if outcome.is_err() {
                        let _ = self.exec(ROLLBACK);
                        None
                    } else {
                        match self.exec(COMMIT) {
                            Ok(()) => {
                                self.publish_commit();
                                metrics.write_batch.record(1);
                                None
                            }
                            Err(e) => {
                                metrics.failed_commits.fetch_add(1, Ordering::Relaxed);
                                let _ = self.exec(ROLLBACK);
                                let (extended_code, message) = sqlite_parts(&e);
                                Some(Error::CommitFailed {
                                    extended_code,
                                    message,
                                    batch: 1,
                                })
                            }
                        }
                    }
                }
            },
        };
        if r.job.panicked() {
            metrics.panics.fetch_add(1, Ordering::Relaxed);
        }
        if fate.is_some() {
            metrics.write_errors.fetch_add(1, Ordering::Relaxed);
        }
        r.job.finish(fate);
    }

    /// Makes a commit visible to read-your-writes: readers serving requests made after this point start a new
    /// snapshot if theirs is older.
    fn publish_commit(&self) {
        self.state.commit_seq.fetch_add(1, Ordering::Release);
        self.state.metrics.commits.fetch_add(1, Ordering::Relaxed);
    }

    fn shut_down(self) {
        if !self.conn.is_autocommit() {
            let _ = self.exec(ROLLBACK);
        }
        // `PRAGMA optimize` before closing is what SQLite recommends for long-lived connections.
        if let Err(e) = self.conn.execute_batch("PRAGMA optimize") {
            tracing::debug!(error = %e, "PRAGMA optimize at close failed");
        }
        let wal = self
            .conn
            .query_row("PRAGMA journal_mode", [], |r| r.get::<_, String>(0))
            .map(|m| m.eq_ignore_ascii_case("wal"))
            .unwrap_or(false);
        if wal {
            // Fold the WAL back into the database so the file is complete on its own after close.
            if let Err(e) = self
                .conn
                .query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()))
            {
                tracing::warn!(error = %e, "final checkpoint failed");
            }
        }
        if let Err((_, e)) = self.conn.close() {
            tracing::warn!(error = %e, "closing the writer connection failed");
        }
    }
}

/// Copies a SQLite error so every request of a group can get its own.
fn copy_error(e: &rusqlite::Error) -> Error {
    let (extended_code, message) = sqlite_parts(e);
    Error::Sqlite(rusqlite::Error::SqliteFailure(
        ffi::Error::new(extended_code),
        Some(message),
    ))
}

fn sqlite_parts(e: &rusqlite::Error) -> (i32, String) {
    match e {
        rusqlite::Error::SqliteFailure(err, msg) => (
            err.extended_code,
            msg.clone().unwrap_or_else(|| err.to_string()),
        ),
        other => (ffi::SQLITE_ERROR, other.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn savepoint_statements_name_the_guarded_savepoint() {
        for sql in [SAVEPOINT_SQL, RELEASE_SQL, ROLLBACK_TO_SQL] {
            assert!(sql.ends_with(SAVEPOINT));
        }
    }
}
