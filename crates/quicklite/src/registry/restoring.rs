//! Tenants looked up in their replicas before they open
//! ([`RegistryBuilder::restore_missing`](crate::RegistryBuilder::restore_missing)): a missing one is restored, one
//! that is here is checked against its replica. One look per tenant at a time, on a thread of its own, bounded by
//! [`Restore::timeout`]: every `get` of the tenant that comes while it runs waits for the same look, and once the
//! last of them gave up (its future dropped) the look stops and its `litestream` is killed.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, Weak};
use std::thread::JoinHandle;

use tokio::sync::watch;

use crate::replica::{self, Failure, Look, Restore, Stop};
use crate::util::{lock, spawn};
use crate::{Error, Result};

/// A registry's restores and checks of its tenants against their replicas.
pub(super) struct Restoring {
    restore: Restore,
    /// The looks under way, by tenant, and whether the registry closed.
    under_way: Arc<Mutex<UnderWay>>,
    /// The threads of the looks started, joined when the registry closes (those that ended are let go as new
    /// ones start).
    threads: Mutex<Vec<JoinHandle<()>>>,
    /// The tenants whose copy here has been compared with their replica's content since the registry opened.
    compared: Mutex<HashSet<String>>,
}

#[derive(Default)]
struct UnderWay {
    /// By tenant. Weak: a look lives as long as a `get` waits for it.
    looks: HashMap<String, Weak<Pending>>,
    /// Set when the registry closes: no look starts after.
    closed: bool,
}

/// A look's outcome once its thread is done: `Ok(true)` if it compared the copy here with the replica's content.
type Outcome = Option<Arc<Result<bool>>>;

/// One look under way, held by every `get` that waits for it.
struct Pending {
    name: String,
    /// Its outcome, once its thread is done.
    outcome: watch::Receiver<Outcome>,
    /// Told when the last `get` waiting for it is gone.
    stop: Stop,
    /// The map it is listed in, to leave it when it ends.
    under_way: Arc<Mutex<UnderWay>>,
}

impl Drop for Pending {
    fn drop(&mut self) {
        // Nobody waits for this look any more, whether it ended or not: a look under way stops, its `litestream`
        // is killed and its scratch directory removed (on its thread).
        self.stop.stop();
        let looks = &mut lock(&self.under_way).looks;
        if looks
            .get(&self.name)
            .is_some_and(|look| look.strong_count() == 0)
        {
            looks.remove(&self.name);
        }
    }
}

impl Restoring {
    pub(super) fn new(restore: Restore) -> Restoring {
        Restoring {
            restore,
            under_way: Arc::default(),
            threads: Mutex::default(),
            compared: Mutex::default(),
        }
    }

    /// Restores tenant `name` to `path` if it is missing, or fails with [`Error::TenantMoved`] if the copy at `path`
    /// does not lead to its replica (see `check`); waits for the look under way if another `get` started one.
    pub(super) async fn before_open(&self, name: &str, path: &Path) -> Result<()> {
        let pending = self.join_or_start(name, path)?;
        let mut outcome = pending.outcome.clone();
        let outcome = outcome
            .wait_for(Option::is_some)
            .await
            .map(|done| done.clone())
            .map_err(|_| {
                Error::Litestream("the restore's thread ended without an answer".into())
            })?;
        match outcome.as_deref() {
            Some(Ok(compared)) => {
                if *compared {
                    lock(&self.compared).insert(name.to_owned());
                }
                Ok(())
            }
            Some(Err(e)) => Err(e.duplicate()),
            None => unreachable!("waited for an outcome"),
        }
    }

    /// Stops every look under way and keeps new ones from starting (the registry closes): their `get`s fail with
    /// [`Error::Closed`]. Returns the looks' threads, which end once their `litestream` is killed.
    pub(super) fn stop_all(&self) -> Vec<JoinHandle<()>> {
        // Upgraded under the lock, dropped after it: the last reference's drop takes the lock.
        let pending: Vec<Arc<Pending>> = {
            let mut under_way = lock(&self.under_way);
            under_way.closed = true;
            under_way.looks.values().filter_map(Weak::upgrade).collect()
        };
        for pending in &pending {
            pending.stop.stop();
        }
        std::mem::take(&mut *lock(&self.threads))
    }

    /// The look under way for `name`, or a new one started on a thread of its own.
    fn join_or_start(&self, name: &str, path: &Path) -> Result<Arc<Pending>> {
        let (tx, outcome) = watch::channel(None);
        let pending = {
            let mut under_way = lock(&self.under_way);
            if under_way.closed {
                return Err(Error::Closed);
            }
            if let Some(pending) = under_way.looks.get(name).and_then(Weak::upgrade) {
                return Ok(pending);
            }
            let pending = Arc::new(Pending {
                name: name.to_owned(),
                outcome,
                stop: Stop::default(),
                under_way: self.under_way.clone(),
            });
            under_way
                .looks
                .insert(name.to_owned(), Arc::downgrade(&pending));
            pending
        };
        // Outside the lock: if the thread cannot start, `pending` is dropped here, and its drop takes the lock.
        let compare = !lock(&self.compared).contains(name);
        let (restore, tenant, file) = (self.restore.clone(), name.to_owned(), path.to_owned());
        let look = Look::new(&self.restore, pending.stop.clone());
        let thread = spawn("quicklite-restore", move || {
            let outcome = look_at(&restore, &tenant, &file, compare, &look);
            tx.send_replace(Some(Arc::new(outcome)));
        })?;
        let mut threads = lock(&self.threads);
        threads.retain(|thread| !thread.is_finished());
        threads.push(thread);
        Ok(pending)
    }
}

/// Restores tenant `name` to `path` if it is missing; otherwise checks the copy there against its replica. `Ok(true)`
/// if it compared content.
fn look_at(restore: &Restore, name: &str, path: &Path, compare: bool, look: &Look) -> Result<bool> {
    if path.exists() {
        check(restore, name, path, compare, look)
    } else {
        restore
            .restore_in_place(name, path, look)
            .map_err(|failure| error_of(failure, restore, name))?;
        Ok(false)
    }
}

/// Fails with [`Error::TenantMoved`] if another machine wrote tenant `name` since Litestream here last recorded a
/// transaction of the file at `path`: its replica holds a transaction past that one or, with `compare`, other
/// pages than this machine's transactions up to the replica's last wrote (transactions under the same numbers,
/// written elsewhere: the replica restored as of its last transaction is compared, a download of the tenant). A
/// file Litestream has no state for here (just restored, or never replicated from here) is not refused: there is
/// nothing to compare. `Ok(true)` if it compared content.
fn check(restore: &Restore, name: &str, path: &Path, compare: bool, look: &Look) -> Result<bool> {
    let Some(local) = replica::local_position(path) else {
        return Ok(false);
    };
    let failed = |failure| error_of(failure, restore, name);
    let moved = |replica| Error::TenantMoved {
        name: name.to_owned(),
        local,
        replica,
    };
    match restore.replica_position(name, look).map_err(failed)? {
        Some(replica) if replica > local => Err(moved(replica)),
        Some(replica) if compare => {
            if restore
                .diverged(name, path, (local, replica), look)
                .map_err(failed)?
            {
                Err(moved(replica))
            } else {
                Ok(true)
            }
        }
        _ => Ok(false),
    }
}

/// The error a `get` of tenant `name` gets for a run of `litestream` that gave no answer.
fn error_of(failure: Failure, restore: &Restore, name: &str) -> Error {
    match failure {
        Failure::TimedOut(command) => Error::RestoreTimedOut {
            name: name.to_owned(),
            command,
            timeout: restore.bound(),
        },
        // Nobody hears it: every `get` waiting for it gave up, or the registry closed.
        Failure::Stopped => Error::Closed,
        Failure::Failed(message) => Error::Litestream(message),
    }
}

/// Removes the scratch directories of restores and comparisons a process that died left in `dir`, on a thread of
/// its own (it reads the whole directory); a failure is logged.
pub(super) async fn remove_stale_scratch(dir: PathBuf) {
    let (tx, rx) = tokio::sync::oneshot::channel();
    let spawned = spawn("quicklite-registry", move || {
        let _ = tx.send(replica::remove_stale(&dir).map_err(|e| (dir, e)));
    });
    if let Err(e) = spawned {
        tracing::warn!(error = %e, "could not look for the scratch directories of unfinished restores");
    } else if let Ok(Err((dir, e))) = rx.await {
        tracing::warn!(
            dir = %dir.display(),
            error = %e,
            "could not look for the scratch directories of unfinished restores"
        );
    }
}
