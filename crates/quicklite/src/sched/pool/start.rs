//! Starting a registry's pool: its state, its write threads with the write lane's supervisor, and its read threads —
//! the pool's counterpart of a standalone database's [`Threads::start`](crate::sched::threads::Threads::start).

use std::sync::Arc;
use std::sync::mpsc::SyncSender;
use std::thread::JoinHandle;

use crate::sched::pool::actor::Actor;
use crate::sched::pool::elastic::{Lane, supervise};
use crate::sched::pool::{GiveWay, Pool, Serves, run_pool_thread};
use crate::util::{lower_own_priority, spawn};

/// The sizes of a registry's pool.
#[derive(Debug, Clone, Copy)]
pub(crate) struct PoolSize {
    /// Write threads the lane starts with and never goes below.
    pub(crate) write_threads: usize,
    /// Write threads it never goes above.
    pub(crate) max_write_threads: usize,
    /// Read threads.
    pub(crate) read_threads: usize,
    /// CPU priority steps of the read threads below the write threads'.
    pub(crate) read_thread_nice: u8,
    /// Databases open at once.
    pub(crate) max_open: usize,
    /// Reader connections open at once, over all databases.
    pub(crate) max_readers: usize,
}

/// A pool that runs, and its threads, which end once it is stopped ([`Pool::stop`]).
pub(crate) struct StartedPool {
    pub(crate) pool: Arc<Pool<Actor>>,
    pub(crate) threads: Vec<JoinHandle<()>>,
}

/// Starts a pool of `size`; `wake` asks the registry's housekeeping for a sweep. If a thread cannot be started,
/// the pool is stopped (the threads started so far end) and the error returned.
pub(crate) fn start_pool(size: PoolSize, wake: SyncSender<()>) -> std::io::Result<StartedPool> {
    let (lane, stalls) = Lane::new(size.write_threads, size.max_write_threads);
    let (pool, write_tasks, read_tasks) =
        Pool::<Actor>::new(size.max_open, size.max_readers, wake, lane.clone());
    let mut handles = Vec::with_capacity(size.write_threads + size.read_threads + 1);
    let started = (|| {
        for i in 0..size.write_threads {
            let (tasks, lane) = (write_tasks.clone(), lane.clone());
            handles.push(spawn(format!("quicklite-write-{i}"), move || {
                run_pool_thread(tasks, Serves::Write(lane))
            })?);
        }
        for i in 0..size.read_threads {
            let tasks = read_tasks.clone();
            let give_way = GiveWay::new(&write_tasks, &lane);
            let nice = size.read_thread_nice;
            handles.push(spawn(format!("quicklite-read-{i}"), move || {
                lower_own_priority(nice);
                run_pool_thread(tasks, Serves::Read(give_way))
            })?);
        }
        let weak_pool = Arc::downgrade(&pool);
        handles.push(spawn("quicklite-supervisor", move || {
            supervise(weak_pool, write_tasks, lane, stalls)
        })?);
        Ok(())
    })();
    match started {
        Ok(()) => Ok(StartedPool {
            pool,
            threads: handles,
        }),
        Err(e) => {
            pool.stop();
            Err(e)
        }
    }
}
