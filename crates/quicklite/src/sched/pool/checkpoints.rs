//! A registry's `PASSIVE` checkpoints, off its databases' write tasks: each on a short-lived thread with a
//! connection of its own, a bounded number at a time in the process.
//!
//! A checkpoint copies the WAL back into the database and syncs both files; run inside the database's write task, it
//! held that database's next write for as long as the disk took (docs/design.md). A `PASSIVE` checkpoint takes no
//! lock a writer needs, so the writes go on beside it, as beside a standalone database's checkpoint thread. A
//! registry serves thousands of databases on a bounded pool, so these threads are few and short-lived rather than
//! one per database.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;

use crate::config::Config;
use crate::engine::Shared;
use crate::engine::checkpoint::{Checkpointer, PassiveCheckpoints};
use crate::util::{cpus, lock, spawn};

/// Checkpoint threads running in the process.
static RUNNING: AtomicUsize = AtomicUsize::new(0);

/// The most checkpoint threads at once: they mostly wait for the disk.
fn most_at_once() -> usize {
    2 * cpus()
}

/// One database's `PASSIVE` checkpoints, each on a thread of its own (see the module's documentation).
pub(crate) struct CheckpointsBeside {
    path: PathBuf,
    config: Config,
    shared: Arc<Shared>,
    /// Held while a checkpoint runs.
    running: Arc<Mutex<()>>,
    /// Raised from the start of a checkpoint thread to its end, for the pool's evictions to see (the database's,
    /// shared by its successive writers).
    checkpointing: Arc<AtomicBool>,
    /// The thread of the last checkpoint asked for.
    thread: Mutex<Option<JoinHandle<()>>>,
}

impl CheckpointsBeside {
    pub(crate) fn new(
        path: &Path,
        config: &Config,
        shared: Arc<Shared>,
        checkpointing: Arc<AtomicBool>,
    ) -> CheckpointsBeside {
        CheckpointsBeside {
            path: path.to_path_buf(),
            config: config.clone(),
            shared,
            running: Arc::new(Mutex::new(())),
            checkpointing,
            thread: Mutex::new(None),
        }
    }
}

impl PassiveCheckpoints for CheckpointsBeside {
    /// Starts a checkpoint thread, unless the last one asked for has not ended (it covers this one) or the process
    /// runs as many as it may: then this one is skipped, the next comes `passive_at_frames` later, and `RESTART`
    /// bounds the WAL meanwhile.
    fn request(&self) {
        let mut thread = lock(&self.thread);
        if thread.as_ref().is_some_and(|t| !t.is_finished()) {
            return;
        }
        if RUNNING.fetch_add(1, Ordering::SeqCst) >= most_at_once() {
            RUNNING.fetch_sub(1, Ordering::SeqCst);
            tracing::debug!("a PASSIVE checkpoint skipped: the process runs as many as it may");
            return;
        }
        if let Some(ended) = thread.take() {
            let _ = ended.join();
        }
        let (path, config, shared) = (self.path.clone(), self.config.clone(), self.shared.clone());
        let (running, checkpointing) = (self.running.clone(), self.checkpointing.clone());
        self.checkpointing.store(true, Ordering::SeqCst);
        let spawned = spawn("quicklite-rckpt", move || {
            {
                let _running = lock(&running);
                match Checkpointer::open(&path, &config, shared) {
                    Ok(checkpointer) => checkpointer.passive(),
                    Err(e) => tracing::warn!(error = %e, "no connection for a PASSIVE checkpoint"),
                }
            }
            checkpointing.store(false, Ordering::SeqCst);
            RUNNING.fetch_sub(1, Ordering::SeqCst);
        });
        match spawned {
            Ok(spawned) => *thread = Some(spawned),
            Err(e) => {
                self.checkpointing.store(false, Ordering::SeqCst);
                RUNNING.fetch_sub(1, Ordering::SeqCst);
                tracing::warn!(error = %e, "no thread for a PASSIVE checkpoint");
            }
        }
    }

    fn hold(&self) -> MutexGuard<'_, ()> {
        lock(&self.running)
    }
}

impl Drop for CheckpointsBeside {
    /// Waits for the last checkpoint asked for to end: the writer closes (and may checkpoint by itself) only after it.
    fn drop(&mut self) {
        if let Some(thread) = lock(&self.thread).take()
            && thread.join().is_err()
        {
            tracing::error!("a checkpoint thread panicked");
        }
    }
}
