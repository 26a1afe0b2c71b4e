//! A standalone database's threads: one writer and `readers` readers of its own, each spinning briefly for its
//! next request before it sleeps, and a thread for `PASSIVE` checkpoints; a read replica's one thread, on its one
//! connection.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::mpsc::{SyncSender, TrySendError};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use tokio::sync::{oneshot, watch};

use crate::config::Config;
use crate::engine::Shared;
use crate::engine::checkpoint::{Checkpointer, PassiveCheckpoints};
use crate::engine::read::{BatchedReads, Reader};
use crate::engine::seat::WriterSeat;
use crate::engine::write::{Close, Writer};
use crate::queue::{Receiver, Taken};
use crate::reply::RELAY_GRACE;
use crate::request::{ReadRequest, WriteRequest};
use crate::util::{lock, lower_own_priority, spawn};
use crate::{Error, Result};

/// The threads serving one database.
pub(crate) struct Threads {
    /// Number of threads still running; `close` waits for zero.
    alive: watch::Receiver<usize>,
    handles: Mutex<Vec<JoinHandle<()>>>,
}

/// Threads started, with what the writer's connection reported.
pub(crate) struct Started {
    pub(crate) threads: Threads,
    /// The PRAGMAs read back from the writer's connection.
    pub(crate) pragmas: BTreeMap<String, String>,
    /// The file SQLite opened, when it reports one.
    pub(crate) file: Option<PathBuf>,
}

/// Decrements the live-thread count when a thread ends, however it ends.
struct AliveGuard(Arc<watch::Sender<usize>>);

impl AliveGuard {
    fn new(count: &Arc<watch::Sender<usize>>) -> AliveGuard {
        count.send_modify(|n| *n += 1);
        AliveGuard(count.clone())
    }
}

impl Drop for AliveGuard {
    fn drop(&mut self) {
        self.0.send_modify(|n| *n -= 1);
    }
}

impl Threads {
    /// Opens the writer, then the readers, each on a thread of its own. The writer opens first: it creates the
    /// file, switches it to WAL and reads the PRAGMAs back; only then can the read-only connections open it. The
    /// threads end once their queues are closed (by the handle) and drained. With a `seat`, the writer lends its
    /// connection there to reads on callers' threads whenever it waits for work. A read replica has one thread and
    /// one connection instead ([`serve_replica`]).
    pub(crate) async fn start(
        path: &Path,
        config: &Config,
        shared: &Arc<Shared>,
        write_rx: Receiver<WriteRequest>,
        read_rx: Receiver<ReadRequest>,
        seat: Option<Arc<WriterSeat>>,
    ) -> Result<Started> {
        let (count, alive) = watch::channel(0_usize);
        let count = Arc::new(count);
        let mut handles = Vec::with_capacity(config.readers + 1);

        if config.replica.is_some() {
            let (ready, ready_rx) = oneshot::channel();
            let (path, config, shared) = (path.to_path_buf(), config.clone(), shared.clone());
            let guard = AliveGuard::new(&count);
            handles.push(spawn("quicklite-replica", move || {
                let _alive = guard;
                match Writer::open(&path, &config, &shared, write_rx, true) {
                    Ok(mut opened) => {
                        let _ = ready.send(Ok((opened.pragmas, opened.file)));
                        if let Some(seat) = seat {
                            opened.writer.lend_when_idle(seat);
                        }
                        let reads = BatchedReads::new(read_rx, &config, &shared);
                        serve_replica(opened.writer, reads);
                    }
                    Err(e) => {
                        let _ = ready.send(Err(e));
                    }
                }
            })?);
            let (pragmas, file) = ready_rx.await.map_err(|_| Error::Closed)??;
            return Ok(Started {
                threads: Threads {
                    alive,
                    handles: Mutex::new(handles),
                },
                pragmas,
                file,
            });
        }

        let (ready, ready_rx) = oneshot::channel();
        let (path_, config_, shared_) = (path.to_path_buf(), config.clone(), shared.clone());
        let guard = AliveGuard::new(&count);
        handles.push(spawn("quicklite-writer", move || {
            let _alive = guard;
            match Writer::open(&path_, &config_, &shared_, write_rx, true) {
                Ok(mut opened) => {
                    let _ = ready.send(Ok((opened.pragmas, opened.file)));
                    if let Some(seat) = seat {
                        opened.writer.lend_when_idle(seat);
                    }
                    serve_writes(opened.writer, &path_, &config_, &shared_);
                }
                Err(e) => {
                    let _ = ready.send(Err(e));
                }
            }
        })?);
        let (pragmas, file) = ready_rx.await.map_err(|_| Error::Closed)??;

        let mut readies = Vec::with_capacity(config.readers);
        for i in 0..config.readers {
            let (ready, ready_rx) = oneshot::channel::<Result<()>>();
            readies.push(ready_rx);
            let (path, config, shared, rx) = (
                path.to_path_buf(),
                config.clone(),
                shared.clone(),
                read_rx.clone(),
            );
            let guard = AliveGuard::new(&count);
            handles.push(spawn(format!("quicklite-reader-{i}"), move || {
                let _alive = guard;
                lower_own_priority(config.read_thread_nice);
                match Reader::open(&path, &config, &shared, rx) {
                    Ok(reader) => {
                        let _ = ready.send(Ok(()));
                        serve_reads(reader);
                    }
                    Err(e) => {
                        let _ = ready.send(Err(e));
                    }
                }
            })?);
        }
        drop(read_rx);
        for ready in readies {
            // On failure the caller drops its senders: the queues close and the threads already started exit.
            ready.await.map_err(|_| Error::Closed)??;
        }
        Ok(Started {
            threads: Threads {
                alive,
                handles: Mutex::new(handles),
            },
            pragmas,
            file,
        })
    }

    /// Waits for every thread to end (the queues are closed), then joins them.
    pub(crate) async fn close(&self) -> Result<()> {
        let mut alive = self.alive.clone();
        // The sender lives as long as any thread; an error means every thread is gone, which is what we wait for.
        let _ = alive.wait_for(|n| *n == 0).await;
        let handles = std::mem::take(&mut *lock(&self.handles));
        for h in handles {
            // Each thread has already passed its last statement (the live count is zero), so this does not block.
            if h.join().is_err() {
                return Err(Error::Panic {
                    message: "a quicklite worker thread panicked".into(),
                });
            }
        }
        Ok(())
    }
}

/// How long a writer whose last turn served several callers' writes together waits idle before writes may run on
/// their callers' threads again ([`Writer::idle`]): a gap between writes rare under a load that groups them, and
/// short against the wake-up a write that finds the writer asleep would pay.
const GROUPING_IDLE: Duration = Duration::from_millis(1);

/// The writer thread: serves requests until the queue is closed and drained, then closes for good. `path` is what
/// the database was opened with, for the checkpoint thread's connection.
fn serve_writes(mut writer: Writer, path: &Path, config: &Config, shared: &Arc<Shared>) {
    // The checkpoint thread opens the same path or URI as the writer, not the file SQLite resolved: a URI's `vfs=`
    // and other parameters must hold for every connection, or its checkpoints would write through another VFS.
    if writer.manages_checkpoints() && writer.file().is_some() {
        match CheckpointThread::start(path, config, shared.clone()) {
            Ok(thread) => writer.hand_passive_checkpoints_to(Box::new(thread)),
            Err(e) => {
                tracing::warn!(error = %e, "no checkpoint thread; the writer checkpoints by itself")
            }
        }
    }
    while let Some(first) = writer
        .inbox()
        .pop_taken()
        .or_else(|| next_write(&mut writer))
    {
        writer.serve(first);
    }
    writer.shut_down(Close::ForGood);
}

/// Waits for the next write; `None` once the queue is closed and empty. Spins briefly first; gives callers
/// carrying answers for others [`RELAY_GRACE`] to pass them on; when the WAL should be truncated after an idle
/// spell, truncates it once idle that long; and, if it looks for commits from outside, looks whenever a look is due.
fn next_write(writer: &mut Writer) -> Option<WriteRequest> {
    writer.lend_to_reads();
    let next = wait_for_write(writer);
    writer.take_back();
    match next {
        Taken::Got(_) => writer.inbox().pop_taken(),
        Taken::Closed | Taken::Empty => None,
    }
}

/// [`next_write`]'s wait, while the connection is lent to reads (taken back for the writer's own work meanwhile).
fn wait_for_write(writer: &mut Writer) -> Taken<usize> {
    let mut next = writer.inbox().spin();
    if matches!(next, Taken::Empty) && writer.relays().pending() {
        next = writer.inbox().wait(Some(RELAY_GRACE));
        if matches!(next, Taken::Empty) {
            writer.relays().deliver_all();
        }
    }
    if matches!(next, Taken::Empty) && writer.grouping() {
        // Writes came together lately: more are likely, and group commit serves them best. Writes run on their
        // callers' threads only once none has come for a while.
        next = writer.inbox().wait(Some(GROUPING_IDLE));
    }
    if matches!(next, Taken::Empty) {
        writer.idle();
    }
    let mut truncate_at = writer
        .idle_truncate_after()
        .map(|idle| Instant::now() + idle);
    let look_back_every = writer.look_back_every();
    while matches!(next, Taken::Empty) {
        let wake = truncate_at
            .into_iter()
            .chain(writer.next_outside_look())
            .chain(look_back_every.map(|every| Instant::now() + every))
            .min();
        next = writer
            .inbox()
            .wait(wake.map(|at| at.saturating_duration_since(Instant::now())));
        if matches!(next, Taken::Empty) {
            if writer.take_back() {
                // Writes ran on their callers' threads meanwhile: the writer was not idle.
                truncate_at = writer
                    .idle_truncate_after()
                    .map(|idle| Instant::now() + idle);
            }
            if truncate_at.is_some_and(|at| Instant::now() >= at) {
                writer.truncate_wal();
                truncate_at = None;
            }
            writer.look_outside_if_due();
            writer.lend_to_reads();
        }
    }
    next
}

/// A read replica's one thread, on its one connection through Litestream's VFS: serves the reads queued, in
/// batches, and follows the replica's position between them (the writer's looks, [`Writer::look_outside_if_due`]).
///
/// One connection, because each connection the VFS opens polls object storage on its own and keeps a page cache of
/// its own (Litestream's `VFSFile.Open` starts a `monitorReplicaClient` per file): five connections were five
/// pollers, listing the replica's files five times over every poll interval (docs/lab.md, 2026-11-28). A replica
/// has no writes to serve (they are refused before they are queued), so its writer's connection is free for the
/// reads. While the thread waits, the connection is lent to reads on callers' threads, as a writer's is
/// ([`Writer::lend_to_reads`]); they have no connections of their own.
fn serve_replica(mut writer: Writer, mut reads: BatchedReads) {
    loop {
        writer.lend_to_reads();
        let next = wait_for_read(&mut writer, &mut reads);
        writer.take_back();
        if matches!(next, Taken::Closed) {
            break;
        }
        writer.lend_read_only(|conn| reads.serve_taken(conn));
        // A replica read without pause still follows it.
        writer.look_outside_if_due();
    }
    writer.shut_down(Close::ForGood);
}

/// [`serve_replica`]'s wait for reads, while the connection is lent to reads on callers' threads (taken back for the
/// looks at the replica's position).
fn wait_for_read(writer: &mut Writer, reads: &mut BatchedReads) -> Taken<usize> {
    let mut next = reads.inbox().spin();
    if matches!(next, Taken::Empty) && reads.relays().pending() {
        next = reads.inbox().wait(Some(RELAY_GRACE));
        if matches!(next, Taken::Empty) {
            reads.relays().deliver_all();
        }
    }
    while matches!(next, Taken::Empty) {
        let wake = writer
            .next_outside_look()
            .map(|at| at.saturating_duration_since(Instant::now()));
        next = reads.inbox().wait(wake);
        if matches!(next, Taken::Empty) {
            writer.take_back();
            writer.look_outside_if_due();
            writer.lend_to_reads();
        }
    }
    next
}

/// A reader thread: serves requests until the queue is closed and drained.
fn serve_reads(mut reader: Reader) {
    loop {
        let reads = reader.reads();
        let mut next = reads.inbox().spin();
        if matches!(next, Taken::Empty) && reads.relays().pending() {
            // Callers carrying answers for others have that long to pass them on; then they go from here.
            next = reads.inbox().wait(Some(RELAY_GRACE));
            if matches!(next, Taken::Empty) {
                reads.relays().deliver_all();
            }
        }
        if matches!(next, Taken::Empty) {
            next = reads.inbox().wait(None);
        }
        if matches!(next, Taken::Closed) {
            return;
        }
        reader.serve_taken();
    }
}

/// `PASSIVE` checkpoints on a thread of their own ([`Checkpointer`]), so that the writer goes on committing while
/// one syncs the files.
struct CheckpointThread {
    wake: Option<SyncSender<()>>,
    /// Held while a checkpoint runs.
    running: Arc<Mutex<()>>,
    thread: Option<JoinHandle<()>>,
}

impl CheckpointThread {
    fn start(path: &Path, config: &Config, shared: Arc<Shared>) -> Result<CheckpointThread> {
        let checkpointer = Checkpointer::open(path, config, shared)?;
        let (wake, wakes) = std::sync::mpsc::sync_channel::<()>(1);
        let running = Arc::new(Mutex::new(()));
        let held = running.clone();
        let thread = spawn("quicklite-ckpt", move || {
            while wakes.recv().is_ok() {
                let _running = lock(&held);
                checkpointer.passive();
            }
        })?;
        Ok(CheckpointThread {
            wake: Some(wake),
            running,
            thread: Some(thread),
        })
    }
}

impl PassiveCheckpoints for CheckpointThread {
    fn request(&self) {
        if let Some(wake) = &self.wake
            && let Err(TrySendError::Disconnected(())) = wake.try_send(())
        {
            tracing::warn!("the checkpoint thread has stopped");
        }
    }

    fn hold(&self) -> MutexGuard<'_, ()> {
        lock(&self.running)
    }
}

impl Drop for CheckpointThread {
    fn drop(&mut self) {
        drop(self.wake.take());
        if let Some(thread) = self.thread.take()
            && thread.join().is_err()
        {
            tracing::error!("the checkpoint thread panicked");
        }
    }
}
