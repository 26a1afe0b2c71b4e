//! The write lane's threads: a base count that serves the normal case, and more while every one of them is held by
//! a long write and other databases' writes wait — the hand-off tokio's blocking pool and Go's scheduler make when a
//! thread blocks. Without it, writes that block (work inside the transaction, a slow disk) hold every write thread
//! and the other databases' writes stop completing, however few of them are slow.
//!
//! A supervisor thread sleeps until a write task starts with every write thread busy; from then on it looks every
//! [`TICK`]. It adds threads (up to as many as are queued, doubling at most, within the cap) when write tasks have
//! been queued at [`QUEUED_LOOKS`] looks in a row, no thread is idle, most of the lane's threads are blocked in an
//! application's closure or in a commit (asleep or waiting for the disk, as the kernel reports the thread: not
//! running or runnable), and one of them has been so for long — its task has run for [`HELD`] or longer and it was
//! blocked at [`BLOCKED_LOOKS`] looks in a row. Threads that run (or wait for a CPU) would not serve the queue
//! faster with more threads beside them; blocked ones leave their CPUs idle. The rule asks for most threads
//! blocked, not all held: at a hundred databases writing one long write after another, some thread has always just
//! started its next write, so a lane that waited for every thread to be held would stop growing short of what the
//! writes need, and the rest of the writes would wait. When, over the last [`RETIRE_AFTER`], the lane's threads
//! were on average busy for fewer than half of them (less one), it retires the extra ones, one per tick, by queueing
//! a [`Task::Retire`](super::task::Task::Retire) that the next free thread takes and exits on. The base threads never
//! go. The average, not a moment of idleness: a lane that serves steady short writes always has a task queued at
//! some look and every thread busy at another, and would otherwise keep for good the threads a burst of long writes
//! made it add.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError, SyncSender, sync_channel};
use std::sync::{Arc, Mutex, Weak};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::task::PooledDatabase;
use super::{Pool, Role, RunQueue, run_pool_thread};
use crate::util::{lock, spawn, watch_blocking_work};

/// How often the supervisor looks while the lane is saturated or has extra threads.
const TICK: Duration = Duration::from_millis(5);

/// How long a task must have run for its thread to count as held by it: far longer than a normal write group
/// (tens of microseconds to a millisecond), so a lane that is merely busy with short writes does not grow.
const HELD: Duration = Duration::from_millis(20);

/// Looks in a row that must find a held thread blocked before it counts as blocked.
const BLOCKED_LOOKS: u32 = 3;

/// Looks in a row that must find tasks queued before the lane grows: a queue that the threads empty between two
/// looks needs no more of them.
const QUEUED_LOOKS: u32 = 3;

/// The span over which the lane's busy threads are averaged before extra threads retire.
const RETIRE_AFTER: Duration = Duration::from_secs(1);

/// Looks (one per [`TICK`]) that make up [`RETIRE_AFTER`].
const LOOKS_PER_AVERAGE: usize = (RETIRE_AFTER.as_millis() / TICK.as_millis()) as usize;

/// One thread of the lane: its current task, and where the kernel reports its state.
#[derive(Debug, Default)]
pub(crate) struct SlotState {
    /// When its current task started, on the lane's clock, plus one; `0` while idle.
    started: AtomicU64,
    /// Its thread id, where the kernel says whether it runs (`/proc/self/task/<tid>/stat`); `None` where there is
    /// no `/proc`, and then a held thread counts as blocked.
    tid: Option<u32>,
    /// The supervisor's looks in a row that found it blocked: a thread starved of CPU is caught waiting for a lock
    /// now and then, a thread in a long sleep or a slow write at every look.
    blocked_looks: AtomicU32,
    /// Raised while it runs an application's closure or a commit ([`crate::util::blocking_work`]): a thread that
    /// waits inside quicklite (for a lock, a database closing) waits for the other threads, which more threads would
    /// not help.
    in_work: Arc<AtomicBool>,
}

type Slot = Arc<SlotState>;

/// The calling thread's id, from `/proc/thread-self` (`<pid>/task/<tid>`).
fn own_tid() -> Option<u32> {
    let link = std::fs::read_link("/proc/thread-self").ok()?;
    link.file_name()?.to_str()?.parse().ok()
}

/// Whether thread `tid` of this process is blocked (sleeping, or waiting for the disk) rather than running or
/// waiting for a CPU; `true` when the kernel cannot tell us.
fn blocked(tid: Option<u32>) -> bool {
    let Some(tid) = tid else { return true };
    let Ok(stat) = std::fs::read_to_string(format!("/proc/self/task/{tid}/stat")) else {
        // The thread is gone (it just retired): it holds nothing.
        return true;
    };
    // `tid (comm) state …`; the name may hold spaces and parentheses, the state follows the last `)`.
    let state = stat
        .rsplit_once(')')
        .and_then(|(_, rest)| rest.trim_start().chars().next());
    !matches!(state, Some('R'))
}

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
    /// The threads' slots.
    slots: Mutex<Vec<Slot>>,
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
            slots: Mutex::new(Vec::new()),
            stall,
            added: AtomicU64::new(0),
            retired: AtomicU64::new(0),
            peak: AtomicUsize::new(base),
            epoch: Instant::now(),
        };
        (Arc::new(lane), stalls)
    }

    /// Milliseconds since the lane started: the clock of the slots.
    fn now_ms(&self) -> u64 {
        u64::try_from(self.epoch.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    /// Registers the calling thread in the lane; its slot says what it runs.
    pub(crate) fn join(&self) -> Slot {
        let in_work = Arc::new(AtomicBool::new(false));
        watch_blocking_work(in_work.clone(), self.in_work.clone());
        let slot = Arc::new(SlotState {
            started: AtomicU64::new(0),
            tid: own_tid(),
            blocked_looks: AtomicU32::new(0),
            in_work,
        });
        lock(&self.slots).push(slot.clone());
        slot
    }

    /// Unregisters a thread that exits.
    pub(crate) fn leave(&self, slot: &Slot) {
        lock(&self.slots).retain(|s| !Arc::ptr_eq(s, slot));
    }

    /// A thread of the lane starts a task.
    pub(crate) fn started(&self, slot: &Slot) {
        self.started_at(slot, self.now_ms());
    }

    fn started_at(&self, slot: &Slot, now_ms: u64) {
        slot.started.store(now_ms + 1, Ordering::SeqCst);
        let busy = self.busy.fetch_add(1, Ordering::SeqCst) + 1;
        if busy >= self.threads.load(Ordering::SeqCst) {
            let _ = self.stall.try_send(());
        }
    }

    /// A thread of the lane finished its task.
    pub(crate) fn finished(&self, slot: &Slot) {
        slot.started.store(0, Ordering::SeqCst);
        self.busy.fetch_sub(1, Ordering::SeqCst);
    }

    /// Looks at every registered thread at `now_ms` (the kernel's state of each one in work): how many are blocked
    /// now, and whether one of them is held — its task has run for `held_ms` or longer, and it was blocked at
    /// [`BLOCKED_LOOKS`] looks in a row, this one included.
    fn look(&self, now_ms: u64, held_ms: u64) -> Look {
        let slots: Vec<Slot> = lock(&self.slots).clone();
        let mut look = Look::default();
        for slot in slots {
            let blocked_looks = if slot.in_work.load(Ordering::SeqCst) && blocked(slot.tid) {
                look.blocked += 1;
                slot.blocked_looks.fetch_add(1, Ordering::Relaxed) + 1
            } else {
                slot.blocked_looks.store(0, Ordering::Relaxed);
                0
            };
            let started = slot.started.load(Ordering::SeqCst);
            let long = started != 0 && now_ms.saturating_sub(started - 1) >= held_ms;
            look.held |= long && blocked_looks >= BLOCKED_LOOKS;
        }
        look
    }

    /// Forgets the threads' looks in a row: the supervisor stopped looking.
    fn forget_looks(&self) {
        for slot in lock(&self.slots).iter() {
            slot.blocked_looks.store(0, Ordering::Relaxed);
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

/// What one look at the lane's threads found.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Look {
    /// Threads blocked now in an application's closure or a commit.
    pub(crate) blocked: usize,
    /// Whether one of them has been held for long ([`HELD`], [`BLOCKED_LOOKS`]).
    pub(crate) held: bool,
}

/// What the supervisor saw on one tick.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct Seen {
    /// The lane's threads.
    pub(crate) threads: usize,
    /// Write tasks queued.
    pub(crate) queued: usize,
    /// Ticks in a row, this one included, that found tasks queued.
    pub(crate) queued_looks: u32,
    /// Whether some thread has no task.
    pub(crate) some_idle: bool,
    /// Its threads, when it looked at them (only with tasks queued).
    pub(crate) look: Look,
    /// Threads busy on average over the last [`RETIRE_AFTER`]; `None` until the supervisor has looked that long.
    pub(crate) mean_busy: Option<f64>,
}

/// What the supervisor decides on one look.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Decision {
    /// Start this many threads.
    Grow(usize),
    /// Retire one extra thread.
    Retire,
    /// Nothing to do.
    Hold,
}

/// The supervisor's rule, apart from its clock and threads so that it can be tested alone: grow when tasks have
/// waited for several looks behind threads most of which are blocked, one of them for long; retire an extra thread
/// while the threads busy on average over the last `RETIRE_AFTER`, doubled and one added, are fewer than the lane
/// has.
pub(crate) fn decide(seen: Seen, lane: (usize, usize)) -> Decision {
    let (base, max) = lane;
    let Seen {
        threads,
        queued,
        queued_looks,
        some_idle,
        look,
        mean_busy,
    } = seen;
    let waiting = queued > 0 && queued_looks >= QUEUED_LOOKS && !some_idle;
    if waiting && look.held && 2 * look.blocked > threads && threads < max {
        return Decision::Grow(queued.min(threads.max(1)).min(max - threads));
    }
    if threads > base && mean_busy.is_some_and(|busy| 2.0 * busy + 1.0 < threads as f64) {
        return Decision::Retire;
    }
    Decision::Hold
}

/// The lane's busy threads, one sample per [`TICK`], averaged over the last [`RETIRE_AFTER`].
#[derive(Debug, Default)]
struct BusyAverage {
    samples: VecDeque<usize>,
    sum: usize,
    last: Option<Instant>,
}

impl BusyAverage {
    /// Takes `busy` as the sample of the tick that ends at `now`. Looks closer together than a tick (the supervisor
    /// is also woken when a task starts with every thread busy) are skipped, so that busy moments do not weigh
    /// more; after a gap of several ticks (the supervisor slept: the lane had its base and an idle thread) the
    /// samples start over.
    fn record(&mut self, now: Instant, busy: usize) {
        if let Some(last) = self.last {
            let since = now.saturating_duration_since(last);
            if since < TICK {
                return;
            }
            if since > 4 * TICK {
                self.samples.clear();
                self.sum = 0;
            }
        }
        self.last = Some(now);
        self.samples.push_back(busy);
        self.sum += busy;
        if self.samples.len() > LOOKS_PER_AVERAGE {
            self.sum -= self.samples.pop_front().unwrap_or(0);
        }
    }

    /// The threads busy on average over the last [`RETIRE_AFTER`]; `None` until sampled that long.
    fn mean(&self) -> Option<f64> {
        (self.samples.len() == LOOKS_PER_AVERAGE)
            .then(|| self.sum as f64 / LOOKS_PER_AVERAGE as f64)
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
        let watching = lane.threads.load(Ordering::SeqCst) > lane.base || !lane.some_idle();
        let woke = if watching {
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
            lane.look(lane.now_ms(), HELD.as_millis() as u64)
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
                        run_pool_thread(tasks, Role::Write(lane_for_thread));
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
            Decision::Hold => {}
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

    /// Tasks queued at enough looks in a row, no thread idle, `blocked` threads blocked, one of them held.
    fn waiting(threads: usize, queued: usize, blocked: usize) -> Seen {
        Seen {
            threads,
            queued,
            queued_looks: QUEUED_LOOKS,
            some_idle: false,
            look: Look {
                blocked,
                held: true,
            },
            mean_busy: None,
        }
    }

    #[test]
    fn the_lane_grows_while_work_waits_behind_threads_most_of_which_are_blocked() {
        let lane = (2, 8);
        // Two threads held by long writes, five writes waiting: double.
        assert_eq!(decide(waiting(2, 5, 2), lane), Decision::Grow(2));
        // One waiting: one more.
        assert_eq!(decide(waiting(4, 1, 3), lane), Decision::Grow(1));
        // Never past the cap.
        assert_eq!(decide(waiting(7, 50, 7), lane), Decision::Grow(1));
        assert_eq!(decide(waiting(8, 50, 8), lane), Decision::Hold);
    }

    #[test]
    fn threads_that_have_just_started_their_next_long_writes_do_not_stop_the_growth() {
        // A hundred databases, each writing one long write after another, on 80 threads: 70 are asleep in a
        // write, 10 have just started theirs (or are committing), 20 databases wait.
        assert_eq!(decide(waiting(80, 20, 70), (2, 256)), Decision::Grow(20));
    }

    #[test]
    fn a_lane_busy_with_short_or_running_work_does_not_grow() {
        let lane = (2, 8);
        // Half the threads running (a CPU-bound write beside a long one): no growth.
        assert_eq!(decide(waiting(2, 5, 1), lane), Decision::Hold);
        assert_eq!(decide(waiting(4, 5, 2), lane), Decision::Hold);
        // No thread blocked for long: short commits caught waiting for the disk.
        let short = Seen {
            look: Look {
                blocked: 2,
                held: false,
            },
            ..waiting(2, 5, 2)
        };
        assert_eq!(decide(short, lane), Decision::Hold);
        // A queue the threads empty between looks, or a thread idle: it serves the queue.
        let brief = Seen {
            queued_looks: QUEUED_LOOKS - 1,
            ..waiting(2, 5, 2)
        };
        assert_eq!(decide(brief, lane), Decision::Hold);
        let idle = Seen {
            some_idle: true,
            ..waiting(2, 5, 2)
        };
        assert_eq!(decide(idle, lane), Decision::Hold);
        assert_eq!(decide(waiting(2, 0, 2), lane), Decision::Hold);
    }

    #[test]
    fn extra_threads_retire_while_fewer_than_half_were_busy_over_a_second_and_the_base_stays() {
        let lane = (2, 8);
        let quiet = |threads, busy| Seen {
            threads,
            some_idle: true,
            mean_busy: busy,
            ..Seen::default()
        };
        // Not looked at for a second yet.
        assert_eq!(decide(quiet(6, None), lane), Decision::Hold);
        // Idle, or one short write at a time, whether or not a task was queued at some look.
        assert_eq!(decide(quiet(6, Some(0.0)), lane), Decision::Retire);
        assert_eq!(decide(quiet(6, Some(1.2)), lane), Decision::Retire);
        let queued_at_times = Seen {
            queued: 1,
            queued_looks: 1,
            ..quiet(6, Some(1.2))
        };
        assert_eq!(decide(queued_at_times, lane), Decision::Retire);
        // Most of them busy: they are kept.
        assert_eq!(decide(quiet(6, Some(2.5)), lane), Decision::Hold);
        assert_eq!(decide(quiet(6, Some(5.9)), lane), Decision::Hold);
        // Never below the base.
        assert_eq!(decide(quiet(3, Some(0.0)), lane), Decision::Retire);
        assert_eq!(decide(quiet(2, Some(0.0)), lane), Decision::Hold);
    }

    #[test]
    fn the_busy_average_takes_a_sample_per_tick_over_a_second_and_starts_over_after_a_gap() {
        let mut busy = BusyAverage::default();
        let t0 = Instant::now();
        let at = |ticks: u32| t0 + TICK * ticks;
        for tick in 0..LOOKS_PER_AVERAGE as u32 - 1 {
            busy.record(at(tick), if tick % 2 == 0 { 4 } else { 0 });
        }
        assert_eq!(busy.mean(), None, "not a second yet");
        // A wake-up between two ticks, with every thread busy, is not a sample.
        busy.record(at(LOOKS_PER_AVERAGE as u32 - 2) + TICK / 2, 100);
        busy.record(at(LOOKS_PER_AVERAGE as u32 - 1), 0);
        assert_eq!(busy.mean(), Some(2.0));
        // The oldest sample leaves as a new one comes.
        busy.record(at(LOOKS_PER_AVERAGE as u32), 0);
        assert_eq!(busy.mean(), Some(2.0 - 4.0 / LOOKS_PER_AVERAGE as f64));
        // After a gap of many ticks it starts over.
        busy.record(at(LOOKS_PER_AVERAGE as u32 + 100), 1);
        assert_eq!(busy.mean(), None);
    }

    #[test]
    fn the_kernel_tells_a_sleeping_thread_from_a_running_one() {
        use std::sync::atomic::AtomicBool;
        let stop = Arc::new(AtomicBool::new(false));
        let spawn_reporting = |spin: bool| {
            let stop = stop.clone();
            let (tx, rx) = std::sync::mpsc::channel();
            let handle = std::thread::spawn(move || {
                tx.send(own_tid()).unwrap();
                while !stop.load(Ordering::Relaxed) {
                    if !spin {
                        std::thread::sleep(Duration::from_millis(5));
                    }
                }
            });
            (rx.recv().unwrap(), handle)
        };
        let (sleeper, a) = spawn_reporting(false);
        let (spinner, b) = spawn_reporting(true);
        assert!(sleeper.is_some(), "no /proc/thread-self here");
        // A sleeper may be caught between two sleeps; most looks find it asleep. A spinner is always running or
        // waiting for a CPU.
        let asleep = (0..50)
            .filter(|_| {
                std::thread::sleep(Duration::from_millis(1));
                blocked(sleeper)
            })
            .count();
        assert!(asleep > 25, "{asleep} of 50");
        assert!((0..50).all(|_| !blocked(spinner)));
        stop.store(true, Ordering::Relaxed);
        a.join().unwrap();
        b.join().unwrap();
        assert!(blocked(None));
    }

    #[test]
    fn a_look_counts_the_blocked_threads_and_finds_one_held_once_its_task_has_run_long_enough() {
        let (lane, _stalls) = Lane::new(2, 4);
        let (joined, joined_rx) = std::sync::mpsc::channel();
        let (stop, stop_rx) = std::sync::mpsc::channel::<()>();
        let lane_for_thread = lane.clone();
        // A thread of the lane asleep in an application's closure.
        let sleeper = std::thread::spawn(move || {
            let slot = lane_for_thread.join();
            joined.send(slot).unwrap();
            crate::util::blocking_work(|| stop_rx.recv().ok());
        });
        let asleep = joined_rx.recv().unwrap();
        // A thread of the lane that is not in work (this one): never blocked.
        let running = lane.join();
        lane.started_at(&asleep, 100);
        lane.started_at(&running, 100);
        while !asleep.in_work.load(Ordering::SeqCst) {
            std::thread::yield_now();
        }
        // Give the sleeper time to be asleep as the kernel reports it.
        std::thread::sleep(Duration::from_millis(20));

        let first = lane.look(110, 20);
        assert_eq!(first.blocked, 1);
        assert!(
            !first.held,
            "its task is 10 ms old, and it was blocked at one look"
        );
        lane.look(120, 20);
        let third = lane.look(130, 20);
        assert_eq!(
            third,
            Look {
                blocked: 1,
                held: true
            }
        );

        lane.forget_looks();
        assert!(!lane.look(140, 20).held, "its looks in a row start again");

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
