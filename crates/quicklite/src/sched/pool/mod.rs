//! Databases as actors on a shared, bounded thread pool: the scheduler behind [`Registry`](crate::Registry).
//!
//! Each database keeps the queues and the group-commit / batched-read logic of a standalone [`Database`](crate::Database); what
//! changes is who runs them. Instead of a writer thread and reader threads of its own, a database with queued
//! work puts a *task* on the pool's run queue: a write task serves one group (or one request that runs alone) on
//! the database's writer connection, a read task one batch of reads on one of its reader connections. A database
//! has at most one write task at a time, so its writes stay serialized, and at most `readers` read tasks. A task
//! that leaves work behind goes to the back of the run queue instead of looping, so a busy database cannot starve
//! the others: every database with work gets a turn per round.
//!
//! Connections open on a database's first task and close when it has been idle for a while, or when the number of
//! open databases passes its cap (least recently used first). Closing takes both claims (no task may run), so a
//! request that arrives meanwhile waits in its queue and reopens the database when the claims are released.

use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize};
use std::sync::mpsc::SyncSender;
use std::time::Instant;

use crate::Error;
use crate::queue::{self, Length, Receiver, Sender, Taken, TrySendError};

pub(crate) mod actor;
mod checkpoints;
mod claims;
pub(crate) mod elastic;
mod evict;
pub(crate) mod ranked;
mod room;
pub(crate) mod start;
pub(crate) mod task;

use crate::permits::Permits;
use elastic::Lane;
use evict::OpenSet;
use ranked::{Rank, Ranked};
use task::{PooledDatabase, Task};

/// A registry's pool: its run queues and threads' shared state, the open databases, the waiting room and the
/// budget of reader connections.
pub(crate) struct Pool<D> {
    /// The run queue of write tasks.
    writes: Sender<Task<D>>,
    /// The run queue of read tasks: reads have threads of their own, so writes that occupy their thread for long
    /// (a slow closure, a commit waiting for the disk) never leave reads without one. Those threads give way to a
    /// write that waits for a core ([`GiveWay`]).
    reads: Sender<Task<D>>,
    /// Databases with open connections.
    pub(crate) open: Ranked<OpenSet<D>>,
    /// Permits under the cap on open databases, taken by databases open or opening: a database reserves its permit
    /// ([`Pool::reserve_open`]) before it opens.
    open_permits: Permits,
    /// Wakes the housekeeping thread (when the cap is passed); a full channel means a wake-up is pending already.
    wake: SyncSender<()>,
    pub(crate) opens: AtomicU64,
    pub(crate) evictions: AtomicU64,
    pub(crate) idle_closes: AtomicU64,
    /// Samples drawn for eviction: the seed of the next one.
    pub(crate) draws: AtomicU64,
    /// Tasks of databases that could not open because every open one was busy, oldest first. They leave the run
    /// queues, so that the tasks of open databases (whose ending makes room) do not wait behind them, and come
    /// back when a task ends or a database closes ([`Pool::resume_waiting`]).
    waiting: Ranked<VecDeque<Task<D>>>,
    /// `waiting.len()`, readable without the lock.
    waiting_len: AtomicUsize,
    /// Permits under the cap on reader connections open at once, over all databases (each holds two file
    /// descriptors).
    reader_permits: Permits,
    /// The write threads: their count grows while writes wait behind threads blocked in long writes.
    pub(crate) write_lane: Arc<Lane>,
    epoch: Instant,
}

/// The receiving end of a run queue, for the threads of one lane (writes or reads).
pub(crate) struct RunQueue<D> {
    tasks: Receiver<Task<D>>,
}

impl<D> Clone for RunQueue<D> {
    fn clone(&self) -> Self {
        Self {
            tasks: self.tasks.clone(),
        }
    }
}

impl<D> RunQueue<D> {
    /// The next task; `None` once the queue is closed and empty.
    ///
    /// When the queue is empty the thread spins a little before it sleeps, as a standalone database's threads do
    /// ([`Receiver::spin_take`]: at low load one thread of the lane at a time, and a push wakes a sleeping thread only
    /// when none spins): the next task often comes right after the caller's answer, and a thread that slept in
    /// between would have to be woken for every one.
    ///
    /// `buffer` is the calling thread's, empty between calls: the queue takes into it.
    fn next(&self, buffer: &mut VecDeque<Task<D>>) -> Option<Task<D>> {
        let taken = match self.tasks.spin_take(1, buffer) {
            Taken::Empty => self.tasks.take_timeout(1, buffer, None),
            taken => taken,
        };
        match taken {
            Taken::Got(_) => buffer.pop_front(),
            Taken::Closed | Taken::Empty => None,
        }
    }

    /// Tasks queued now.
    pub(crate) fn len(&self) -> usize {
        self.tasks.len()
    }

    /// Whether the pool stopped taking tasks.
    pub(crate) fn is_closed(&self) -> bool {
        self.tasks.is_closed()
    }
}

impl<D: PooledDatabase> Pool<D> {
    /// A pool state and the receiving ends of its write and read run queues, for the pool threads.
    pub(crate) fn new(
        max_open: usize,
        max_readers: usize,
        wake: SyncSender<()>,
        write_lane: Arc<Lane>,
    ) -> (Arc<Pool<D>>, RunQueue<D>, RunQueue<D>) {
        let (writes, write_rx) = queue::bounded(usize::MAX);
        let (reads, read_rx) = queue::bounded(usize::MAX);
        let shared = Arc::new(Pool {
            writes,
            reads,
            open: Ranked::new(Rank::PoolOpen, OpenSet::default()),
            open_permits: Permits::new(max_open),
            wake,
            opens: AtomicU64::new(0),
            evictions: AtomicU64::new(0),
            idle_closes: AtomicU64::new(0),
            draws: AtomicU64::new(0),
            waiting: Ranked::new(Rank::PoolWaiting, VecDeque::new()),
            waiting_len: AtomicUsize::new(0),
            reader_permits: Permits::new(max_readers),
            write_lane,
            epoch: Instant::now(),
        });
        let lane = |tasks| RunQueue { tasks };
        (shared, lane(write_rx), lane(read_rx))
    }

    pub(crate) fn push(&self, task: Task<D>) {
        // Refused only once the pool is stopped (the registry closed or dropped): nothing will serve the
        // database any more, so whatever it has queued is answered `Closed` rather than left waiting.
        let lane = match task {
            Task::Write(_) | Task::Retire => &self.writes,
            Task::Read(_) => &self.reads,
        };
        if let Err(TrySendError::Closed(refused) | TrySendError::Full(refused)) =
            lane.try_send(task)
            && let Task::Write(actor) | Task::Read(actor) = refused
        {
            actor.fail_queued(&Error::Closed);
        }
    }

    /// Queues the retirement of one write thread; `false` once the pool has stopped.
    pub(crate) fn retire_write_thread(&self) -> bool {
        self.writes.try_send(Task::Retire).is_ok()
    }

    /// Milliseconds since the pool started: the clock of `last_used`.
    pub(crate) fn now_ms(&self) -> u64 {
        u64::try_from(self.epoch.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    /// The databases open now.
    pub(crate) fn open_actors(&self) -> Vec<Arc<D>> {
        self.open.lock().actors().to_vec()
    }

    pub(crate) fn open_count(&self) -> usize {
        self.open.lock().actors().len()
    }

    /// Tasks waiting for a pool thread, or for room to open their database.
    pub(crate) fn queued_tasks(&self) -> usize {
        self.writes.len() + self.reads.len() + self.waiting_tasks()
    }

    /// Asks the registry's housekeeping thread for a sweep now.
    pub(crate) fn wake_housekeeping(&self) {
        let _ = self.wake.try_send(());
    }

    /// Stops the pool threads once the run queue is empty; tasks waiting for room are answered `Closed`.
    pub(crate) fn stop(&self) {
        self.writes.close();
        self.reads.close();
        self.write_lane.wake();
        self.resume_waiting(usize::MAX);
    }

    /// Takes one reader connection from the budget, if any is left.
    pub(crate) fn reserve_reader(&self) -> bool {
        self.reader_permits.try_take()
    }

    /// Gives `n` closed reader connections back to the budget.
    pub(crate) fn release_readers(&self, n: usize) {
        self.reader_permits.give_back(n);
    }

    /// Reader connections open now.
    pub(crate) fn reader_connections(&self) -> usize {
        self.reader_permits.taken()
    }
}

/// What a pool thread serves.
pub(crate) enum Serves<D> {
    /// Write tasks, each reported to the write lane, whose supervisor adds threads while every one is stuck.
    Write(Arc<Lane>),
    /// Read tasks, giving way to writes after each one.
    Read(GiveWay<D>),
}

/// What a read thread looks at to give way to writes: after a task it yields its core while a write task is queued
/// and some write thread is outside an application's closure and a commit. Such a thread needs a core to go on — one
/// woken for the queued write, or one busy with quicklite's own work for an earlier write (opening its database,
/// answering it) — and on a machine whose cores the reads keep busy it would wait for the rest of a read thread's
/// time slice, at every write. When no write waits, the look costs two loads; while every write thread is inside a
/// closure or a commit (asleep, or waiting for the disk, as often as not), a yield could not start the write sooner,
/// and the read thread keeps its core.
pub(crate) struct GiveWay<D> {
    writes: Length<Task<D>>,
    lane: Arc<Lane>,
}

impl<D> GiveWay<D> {
    /// Looks at the write run queue (`writes`) and its lane.
    pub(crate) fn new(writes: &RunQueue<D>, lane: &Arc<Lane>) -> Self {
        Self {
            writes: writes.tasks.length(),
            lane: lane.clone(),
        }
    }

    /// Whether a write waits while some write thread needs a core to go on.
    fn due(&self) -> bool {
        self.writes.get() > 0 && self.lane.some_outside_work()
    }
}

/// The body of a pool thread: runs tasks until the run queue is closed and empty, or it takes a retirement.
pub(crate) fn run_pool_thread<D: PooledDatabase>(tasks: RunQueue<D>, serves: Serves<D>) {
    let member = match &serves {
        Serves::Write(lane) => Some(lane.join()),
        Serves::Read(_) => None,
    };
    let mut buffer = VecDeque::with_capacity(1);
    while let Some(task) = tasks.next(&mut buffer) {
        match (task, &serves, &member) {
            (Task::Write(actor), Serves::Write(lane), Some(member)) => {
                lane.started(member);
                actor.run_write();
                lane.finished(member);
            }
            (Task::Write(actor), ..) => actor.run_write(),
            (Task::Read(actor), Serves::Read(give_way), _) => {
                actor.run_read();
                if give_way.due() {
                    std::thread::yield_now();
                }
            }
            (Task::Read(actor), ..) => actor.run_read(),
            (Task::Retire, ..) => break,
        }
    }
    if let (Serves::Write(lane), Some(member)) = (&serves, &member) {
        lane.leave(member);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_read_thread_gives_way_to_a_queued_write_while_a_write_thread_is_outside_a_closure_and_a_commit()
     {
        let (writes, tasks) = queue::bounded::<Task<()>>(usize::MAX);
        let writes_queue = RunQueue { tasks };
        let (lane, _stalls) = Lane::new(1, 4);
        let give_way = GiveWay::new(&writes_queue, &lane);
        // This thread is the lane's only write thread.
        let member = lane.join();
        assert!(!give_way.due(), "no write queued");
        assert!(writes.try_send(Task::Retire).is_ok());
        assert!(
            give_way.due(),
            "a write queued, and the lane's thread has no task"
        );
        lane.started(&member);
        assert!(
            give_way.due(),
            "its thread busy with quicklite's own work, which needs a core"
        );
        crate::util::blocking_work(|| {
            assert!(
                !give_way.due(),
                "its thread inside a closure or a commit: a yield would not run the queued write sooner"
            );
        });
        assert!(give_way.due(), "out of the closure again");
        lane.finished(&member);
        let mut taken = VecDeque::new();
        assert!(matches!(writes_queue.next(&mut taken), Some(Task::Retire)));
        assert!(!give_way.due(), "the write was taken");
    }

    #[test]
    fn a_thread_whose_closure_panicked_is_counted_outside_work_again() {
        let (lane, _stalls) = Lane::new(1, 4);
        let lane_for_thread = lane.clone();
        let panicked = std::thread::spawn(move || {
            let _slot = lane_for_thread.join();
            crate::util::blocking_work(|| panic!("the application's closure panics"));
        })
        .join();
        assert!(panicked.is_err());
        assert!(lane.some_outside_work());
    }
}
