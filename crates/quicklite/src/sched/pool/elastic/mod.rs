//! The write lane's threads: a base count that serves the normal case, and more while every one of them is stuck in
//! a long write and other databases' writes wait — the hand-off tokio's blocking pool and Go's scheduler make when a
//! thread blocks. Without it, writes that block (work inside the transaction, a slow disk) occupy every write thread
//! and the other databases' writes stop completing, however few of them are slow.
//!
//! A supervisor thread sleeps until a write task starts with every write thread busy; from then on it looks every
//! [`TICK`]. It adds threads (up to as many as are queued, doubling at most, within the cap) when write tasks have been
//! queued at [`QUEUED_LOOKS`](rule::QUEUED_LOOKS) looks in a row, no thread is idle, most of the lane's threads are
//! blocked in an application's closure or in a commit (asleep or waiting for the disk, as the kernel reports the
//! thread: not running or runnable), and one of them has been so for long — its task has run for [`STUCK_AFTER`] or
//! longer and it was blocked at [`BLOCKED_LOOKS`] looks in a row. Threads that run (or wait for a CPU) would not serve
//! the queue faster with more threads beside them; blocked ones leave their CPUs idle. The rule asks for most threads
//! blocked, not all stuck: at a hundred databases writing one long write after another, some thread has always just
//! started its next write, so a lane that waited for every thread to be stuck would stop growing short of what the
//! writes need, and the rest of the writes would wait. When, over the last [`RETIRE_AFTER`](rule::RETIRE_AFTER), the
//! lane's threads were on average busy for fewer than half of them (less one), it retires the extra ones, one per tick,
//! by queueing a [`Task::Retire`](super::task::Task::Retire) that the next free thread takes and exits on. The base
//! threads never go. The average, not a moment of idleness: a lane that serves steady short writes always has a task
//! queued at some look and every thread busy at another, and would otherwise keep for good the threads a burst of long
//! writes made it add.

mod probe;
mod rule;

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError, SyncSender, sync_channel};
use std::sync::{Arc, Mutex, Weak};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::task::PooledDatabase;
use super::{Pool, RunQueue, Serves, run_pool_thread};
use crate::util::{flag_blocking_work, lock, spawn};
use probe::{blocked, own_tid};
use rule::{BusyAverage, Decision, Look, Seen, TICK, decide};

/// How long a task must have run for its thread to count as stuck in it: far longer than a normal write group
/// (tens of microseconds to a millisecond), so a lane that is merely busy with short writes does not grow.
const STUCK_AFTER: Duration = Duration::from_millis(20);

/// Looks in a row that must find a stuck thread blocked before it counts as blocked.
const BLOCKED_LOOKS: u32 = 3;

/// One thread of the lane: its current task, and where the kernel reports its state.
#[derive(Debug, Default)]
pub(crate) struct MemberState {
    /// When its current task started, on the lane's clock, plus one; `0` while idle.
    started: AtomicU64,
    /// Its thread id, where the kernel says whether it runs (`/proc/self/task/<tid>/stat`); `None` where there is
    /// no `/proc`, and then a stuck thread counts as blocked.
    tid: Option<u32>,
    /// The supervisor's looks in a row that found it blocked: a thread starved of CPU is caught waiting for a lock
    /// now and then, a thread in a long sleep or a slow write at every look.
    blocked_looks: AtomicU32,
    /// Raised while it runs an application's closure or a commit ([`crate::util::blocking_work`]): a thread that
    /// waits inside quicklite (for a lock, a database closing) waits for the other threads, which more threads would
    /// not help.
    in_work: Arc<AtomicBool>,
}

type Member = Arc<MemberState>;

/// The write lane's thread counts and the threads' current tasks.
pub(crate) struct Lane {
    /// Threads the lane starts with and never goes below.
    pub(crate) base: usize,
    /// Threads it never goes above.
    pub(crate) max: usize,
    /// Threads running (or about to retire: a retirement counts once it is queued).
    pub(crate) threads: AtomicUsize,
    /// Threads running a task now.
    busy: AtomicUsize,
    /// Threads inside an application's closure or a commit now ([`crate::util::blocking_work`]).
    in_work: Arc<AtomicUsize>,
    /// Its members: the threads that joined it.
    members: Mutex<Vec<Member>>,
    /// Wakes the supervisor: a task started with every thread busy. A full channel means a wake-up is pending.
    stall: SyncSender<()>,
    pub(crate) added: AtomicU64,
    pub(crate) retired: AtomicU64,
    pub(crate) peak: AtomicUsize,
    epoch: Instant,
}

impl Lane {
    /// A lane of `base` threads that may grow to `max`, and the receiving end of its supervisor's wake-ups.
    pub(crate) fn new(base: usize, max: usize) -> (Arc<Lane>, Receiver<()>) {
        let (stall, stalls) = sync_channel(1);
        let lane = Lane {
            base,
            max: max.max(base),
            threads: AtomicUsize::new(base),
            busy: AtomicUsize::new(0),
            in_work: Arc::new(AtomicUsize::new(0)),
            members: Mutex::new(Vec::new()),
            stall,
            added: AtomicU64::new(0),
            retired: AtomicU64::new(0),
            peak: AtomicUsize::new(base),
            epoch: Instant::now(),
        };
        (Arc::new(lane), stalls)
    }

    /// Milliseconds since the lane started: the clock of its members.
    fn now_ms(&self) -> u64 {
        u64::try_from(self.epoch.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    /// Registers the calling thread in the lane, a member that says what it runs.
    pub(crate) fn join(&self) -> Member {
        let in_work = Arc::new(AtomicBool::new(false));
        flag_blocking_work(in_work.clone(), self.in_work.clone());
        let member = Arc::new(MemberState {
            started: AtomicU64::new(0),
            tid: own_tid(),
            blocked_looks: AtomicU32::new(0),
            in_work,
        });
        lock(&self.members).push(member.clone());
        member
    }

    /// Unregisters a thread that exits.
    pub(crate) fn leave(&self, member: &Member) {
        lock(&self.members).retain(|m| !Arc::ptr_eq(m, member));
    }

    /// A thread of the lane starts a task.
    pub(crate) fn started(&self, member: &Member) {
        self.started_at(member, self.now_ms());
    }

    fn started_at(&self, member: &Member, now_ms: u64) {
        member.started.store(now_ms + 1, Ordering::SeqCst);
        let busy = self.busy.fetch_add(1, Ordering::SeqCst) + 1;
        if busy >= self.threads.load(Ordering::SeqCst) {
            let _ = self.stall.try_send(());
        }
    }

    /// A thread of the lane finished its task.
    pub(crate) fn finished(&self, member: &Member) {
        member.started.store(0, Ordering::SeqCst);
        self.busy.fetch_sub(1, Ordering::SeqCst);
    }

    /// Looks at every registered thread at `now_ms` (the kernel's state of each one in work): how many are blocked
    /// now, and whether one of them is stuck — its task has run for `stuck_ms` or longer, and it was blocked at
    /// [`BLOCKED_LOOKS`] looks in a row, this one included.
    fn look(&self, now_ms: u64, stuck_ms: u64) -> Look {
        let members: Vec<Member> = lock(&self.members).clone();
        let mut look = Look::default();
        for member in members {
            let blocked_looks = if member.in_work.load(Ordering::SeqCst) && blocked(member.tid) {
                look.blocked += 1;
                member.blocked_looks.fetch_add(1, Ordering::Relaxed) + 1
            } else {
                member.blocked_looks.store(0, Ordering::Relaxed);
                0
            };
            let started = member.started.load(Ordering::SeqCst);
            let long = started != 0 && now_ms.saturating_sub(started - 1) >= stuck_ms;
            look.stuck |= long && blocked_looks >= BLOCKED_LOOKS;
        }
        look
    }

    /// Forgets the threads' looks in a row: the supervisor stopped looking.
    fn forget_looks(&self) {
        for member in lock(&self.members).iter() {
            member.blocked_looks.store(0, Ordering::Relaxed);
        }
    }

    /// Wakes the supervisor, e.g. to see that the pool has stopped.
    pub(crate) fn wake(&self) {
        let _ = self.stall.try_send(());
    }

    /// Whether some thread has no task.
    fn some_idle(&self) -> bool {
        self.busy.load(Ordering::SeqCst) < self.threads.load(Ordering::SeqCst)
    }

    /// Whether some thread is outside an application's closure and a commit: idle, or running quicklite's own work
    /// (opening a database, preparing, answering) — a thread that needs a core to go on, where one in a closure or
    /// a commit may be asleep or waiting for the disk.
    pub(crate) fn some_outside_work(&self) -> bool {
        self.in_work.load(Ordering::SeqCst) < self.threads.load(Ordering::SeqCst)
    }
}

/// The supervisor: runs until the pool stops, then joins the threads it started.
pub(crate) fn supervise<D: PooledDatabase>(
    pool: Weak<Pool<D>>,
    tasks: RunQueue<D>,
    lane: Arc<Lane>,
    stalls: Receiver<()>,
) {
    let mut started: Vec<JoinHandle<()>> = Vec::new();
    let mut busy = BusyAverage::default();
    let mut queued_looks = 0;
    loop {
        let looking = lane.threads.load(Ordering::SeqCst) > lane.base || !lane.some_idle();
        let woke = if looking {
            stalls.recv_timeout(TICK)
        } else {
            stalls.recv().map_err(|_| RecvTimeoutError::Disconnected)
        };
        if matches!(woke, Err(RecvTimeoutError::Disconnected)) || tasks.is_closed() {
            break;
        }
        let Some(pool) = pool.upgrade() else { break };
        let threads = lane.threads.load(Ordering::SeqCst);
        let queued = tasks.len();
        let some_idle = lane.some_idle();
        busy.record(Instant::now(), lane.busy.load(Ordering::SeqCst));
        // The threads are looked at (a read of the kernel's state each) only while tasks wait, and then at every
        // tick, so that "blocked at looks in a row" means what it says.
        let look = if queued > 0 {
            queued_looks += 1;
            lane.look(lane.now_ms(), STUCK_AFTER.as_millis() as u64)
        } else {
            if queued_looks > 0 {
                lane.forget_looks();
            }
            queued_looks = 0;
            Look::default()
        };
        let seen = Seen {
            threads,
            queued,
            queued_looks,
            some_idle,
            look,
            mean_busy: busy.mean(),
        };
        match decide(seen, (lane.base, lane.max)) {
            Decision::Grow(n) => {
                for _ in 0..n {
                    let index = lane.threads.fetch_add(1, Ordering::SeqCst);
                    let (tasks, lane_for_thread) = (tasks.clone(), lane.clone());
                    match spawn(format!("quicklite-write-{index}"), move || {
                        run_pool_thread(tasks, Serves::Write(lane_for_thread));
                    }) {
                        Ok(handle) => {
                            started.push(handle);
                            lane.added.fetch_add(1, Ordering::Relaxed);
                            lane.peak.fetch_max(index + 1, Ordering::Relaxed);
                        }
                        Err(_) => {
                            // No thread to be had: the lane serves on with what it has.
                            lane.threads.fetch_sub(1, Ordering::SeqCst);
                            break;
                        }
                    }
                }
            }
            Decision::Retire => {
                if pool.retire_write_thread() {
                    lane.threads.fetch_sub(1, Ordering::SeqCst);
                    lane.retired.fetch_add(1, Ordering::Relaxed);
                }
                // The next retirement waits a tick, so the lane shrinks one thread at a time.
            }
            Decision::Stay => {}
        }
        started.retain(|h| !h.is_finished());
    }
    for handle in started {
        let _ = handle.join();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_look_counts_the_blocked_threads_and_finds_one_stuck_once_its_task_has_run_long_enough() {
        let (lane, _stalls) = Lane::new(2, 4);
        let (joined, joined_rx) = std::sync::mpsc::channel();
        let (stop, stop_rx) = std::sync::mpsc::channel::<()>();
        let lane_for_thread = lane.clone();
        // A thread of the lane asleep in an application's closure.
        let sleeper = std::thread::spawn(move || {
            let member = lane_for_thread.join();
            joined.send(member).unwrap();
            crate::util::blocking_work(|| stop_rx.recv().ok());
        });
        let asleep = joined_rx.recv().unwrap();
        // A thread of the lane that is not in work (this one): never blocked.
        let running = lane.join();
        lane.started_at(&asleep, 100);
        lane.started_at(&running, 100);
        // Until the kernel reports the sleeper asleep in its closure (waiting on the channel, it stays so).
        let asleep_by = Instant::now() + Duration::from_secs(10);
        while !(asleep.in_work.load(Ordering::SeqCst) && blocked(asleep.tid)) {
            assert!(Instant::now() < asleep_by, "the sleeper never blocked");
            std::thread::yield_now();
        }

        let first = lane.look(110, 20);
        assert_eq!(first.blocked, 1);
        assert!(
            !first.stuck,
            "its task is 10 ms old, and it was blocked at one look"
        );
        lane.look(120, 20);
        let third = lane.look(130, 20);
        assert_eq!(
            third,
            Look {
                blocked: 1,
                stuck: true
            }
        );

        lane.forget_looks();
        assert!(!lane.look(140, 20).stuck, "its looks in a row start again");

        stop.send(()).unwrap();
        sleeper.join().unwrap();
        lane.finished(&asleep);
        lane.leave(&asleep);
        assert_eq!(
            lane.look(500, 20),
            Look::default(),
            "the thread that left no longer counts"
        );
    }
}
