//! Bounds on a read's run: what happens once a read has run long, enforced while it runs (SQLite's progress handler,
//! called every so many virtual-machine instructions of every statement, looks: [`check`]), not only learnt after.
//!
//! Past its bound ([`LONG_AFTER`] of the thread's CPU time: a read whose thread the system preempted is no long
//! read) a read is a long one, and two things happen:
//! - what its scheduler asked for ([`Bound::past`]): a read on its caller's thread hands the async runtime's worker
//!   to another thread ([`crate::sched`]; the engine knows nothing of who calls it);
//! - it takes its turn among the process's long reads ([`LongReads`]): at most one fewer than the CPUs run at once,
//!   the others wait (asleep, in the progress handler) for a turn. A read whose cost depends on its parameters may
//!   run short a thousand times and then for hundreds of milliseconds on several threads at once; run all together,
//!   such reads would take every CPU from the threads whose latency the service depends on — the async runtime's
//!   workers, its timers, the writer — and the runtime's timers would be late by tens of milliseconds. One CPU is
//!   always left to them, and where the process may raise a thread's priority again (root, `CAP_SYS_NICE`), a long
//!   read runs on at a lower one. A read waiting for its turn still stops at its deadline, or once its caller stops
//!   waiting.

use std::cell::RefCell;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use crate::permits::{Permit, Permits};
use crate::util::{Lowered, cpus, lower_for_a_while};

/// How long a read runs before it is a long one.
pub(crate) const LONG_AFTER: Duration = Duration::from_millis(1);

/// How many steps a long read's thread's priority is lowered while it runs long (where it can be raised back).
const LONG_READ_NICE: u8 = 10;

/// How long a long read that waits for its turn sleeps between two looks.
const TURN_LOOK_EVERY: Duration = Duration::from_micros(500);

/// A read's bound: when it began, and what its scheduler does once it passes [`LONG_AFTER`].
#[derive(Debug, Clone, Copy)]
pub(crate) struct Bound {
    /// When the run began, if its caller read the clock; else the run's time counts from the first look at it
    /// ([`check`]), a thousand of SQLite's instructions in: a short read then takes no clock reading at all.
    began: Option<Instant>,
    /// Called once the run is past `at`, on the run's thread; returns whether it did what it had to (then it is
    /// not called again in this run), else is called again once the run is as long again.
    past: Option<fn() -> bool>,
    /// Whether the run takes its turn among the long reads once past `at`: a write holds the write lock, which
    /// every other write waits for, and goes on at once.
    takes_turn: bool,
}

impl Bound {
    /// The bound of a read that began at `began` (the caller's clock reading, if it took one: a read takes no
    /// other before its first look), past which `past`, if any, is called.
    pub(crate) fn new(began: Option<Instant>, past: Option<fn() -> bool>) -> Bound {
        Bound {
            began,
            past,
            takes_turn: true,
        }
    }

    /// The bound of a write that began at `began`: as a read's, but it takes no turn among the long reads (it holds
    /// the write lock: waiting for a turn would hold every other write back) and its priority stays.
    pub(crate) fn write(began: Instant, past: Option<fn() -> bool>) -> Bound {
        Bound {
            takes_turn: false,
            ..Bound::new(Some(began), past)
        }
    }
}

/// The process's turns for long reads: one fewer than the CPUs (at least one).
pub(crate) struct LongReads;

impl LongReads {
    fn turns() -> &'static Arc<Permits> {
        static TURNS: OnceLock<Arc<Permits>> = OnceLock::new();
        TURNS.get_or_init(|| Arc::new(Permits::new(cpus().saturating_sub(1).max(1))))
    }
}

/// Whether a long read of this process runs now (holding a turn): a checkpoint that waited for readers to leave
/// the WAL would wait for it, and the writes behind the checkpoint with it.
pub(crate) fn long_reads_running() -> bool {
    LongReads::turns().taken() > 0
}

/// The run bounded on this thread.
struct Run {
    bound: Bound,
    /// When the run passes its bound, known from its first look on.
    at: Option<Instant>,
    /// The thread's CPU time, and the time, at the run's first look ([`check`]): from then on the time the
    /// thread spent off its CPU is known, and not counted.
    first_look: Option<(Duration, Instant)>,
    /// Whether `past` has done what it had to.
    past_done: bool,
    /// Whether `past` was called.
    past_called: bool,
    /// The long reads' turn it holds, once past its bound.
    turn: Option<Permit>,
    /// Its thread's priority, lowered while it runs long (where it can be raised back).
    _lowered: Option<Lowered>,
}

/// What became of a bounded run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Passed {
    /// It ran past its bound: a long read, which took a turn.
    pub(crate) long: bool,
    /// Its scheduler's `past` was called.
    pub(crate) past: bool,
    /// When it began: its bound's time, or else its first look's, if it ran long enough to be looked at.
    pub(crate) began: Option<Instant>,
}

/// The CPU time of this thread so far (its wall time where the system does not tell).
fn thread_cpu_time() -> Option<Duration> {
    #[cfg(target_os = "linux")]
    {
        Some(crate::util::duration_of(rustix::time::clock_gettime(
            rustix::time::ClockId::ThreadCPUTime,
        )))
    }
    #[cfg(not(target_os = "linux"))]
    {
        None
    }
}

thread_local! {
    /// The run bounded on this thread, if any.
    static RUN: RefCell<Option<Run>> = const { RefCell::new(None) };
}

/// Runs `f` with `bound` watched on this thread (a run within another keeps the outer one's bound); a turn among
/// the long reads that `f` took is given back when it ends. Says what became of the run.
pub(crate) fn within<T>(bound: Bound, f: impl FnOnce() -> T) -> (T, Passed) {
    struct End;
    impl Drop for End {
        fn drop(&mut self) {
            RUN.with(|run| run.borrow_mut().take());
        }
    }
    if RUN.with(|run| run.borrow().is_some()) {
        return (f(), Passed::default());
    }
    RUN.with(|run| {
        *run.borrow_mut() = Some(Run {
            bound,
            at: None,
            first_look: None,
            past_done: bound.past.is_none(),
            past_called: false,
            turn: None,
            _lowered: None,
        })
    });
    let end = End;
    let out = f();
    let passed = RUN.with(|run| {
        run.borrow()
            .as_ref()
            .map_or(Passed::default(), |run| Passed {
                long: run.turn.is_some(),
                past: run.past_called,
                began: run.bound.began,
            })
    });
    drop(end);
    (out, passed)
}

/// For a busy handler about to wait for a lock another connection holds, or the application's code about to block
/// ([`crate::about_to_block`]): a wait of unknown length is no short run, so the run on this thread does at once what
/// its scheduler asked of it past its bound (a read or write on its caller's thread hands the runtime's worker away
/// before it waits), if it has not yet.
pub(crate) fn before_waiting() {
    let past = RUN.with(|run| {
        let run = run.borrow();
        let run = run.as_ref()?;
        if run.past_done { None } else { run.bound.past }
    });
    let Some(past) = past else {
        return;
    };
    called_past(past(), None);
}

/// Records that the run on this thread called its `past`, and whether that did what was asked; `again_at`, if any,
/// is when the run is next looked at.
fn called_past(done: bool, again_at: Option<Instant>) {
    RUN.with(|run| {
        if let Some(run) = run.borrow_mut().as_mut() {
            run.past_done = done;
            run.past_called = true;
            if again_at.is_some() {
                run.at = again_at;
            }
        }
    });
}

/// For SQLite's progress handler: if the run on this thread is past its bound, does what its scheduler asked, then
/// (once that is done) waits for a turn among the long reads — until `stop` says the read is to stop (its deadline
/// passed, its caller left), which the progress handler then does.
pub(crate) fn check(stop: impl Fn() -> bool) {
    let now = Instant::now();
    let past = RUN.with(|run| {
        let mut run = run.borrow_mut();
        let run = run.as_mut()?;
        let at = match run.at {
            Some(at) => at,
            None => {
                // The first look: the run's time counts from here if its caller took no clock reading.
                run.first_look = thread_cpu_time().map(|cpu| (cpu, now));
                *run.at
                    .insert(*run.bound.began.get_or_insert(now) + LONG_AFTER)
            }
        };
        // Set at the first look, if not before.
        let began = run.bound.began.unwrap_or(now);
        if now < at || (run.past_done && (run.turn.is_some() || !run.bound.takes_turn)) {
            return None;
        }
        // Past the bound by the clock; by the thread's CPU time, perhaps not (the system preempted it).
        if let Some((cpu_then, then)) = run.first_look
            && let Some(cpu) = thread_cpu_time()
        {
            let off_cpu = now
                .saturating_duration_since(then)
                .saturating_sub(cpu.saturating_sub(cpu_then));
            let ran = now.saturating_duration_since(began).saturating_sub(off_cpu);
            if ran < LONG_AFTER {
                run.at = Some(now + (LONG_AFTER - ran));
                return None;
            }
        }
        Some((run.past_done, run.bound.past, began, run.bound.takes_turn))
    });
    let Some((past_done, past, began, takes_turn)) = past else {
        return;
    };
    if !past_done && let Some(past) = past {
        let done = past();
        // Not done: try again once the run is as long again.
        let again_at = (!done).then(|| {
            now + now
                .saturating_duration_since(began)
                .max(Duration::from_micros(1))
        });
        called_past(done, again_at);
        if !done {
            // Its scheduler's thread is still held (the runtime's worker was not taken): waiting for a turn would
            // hold it longer.
            return;
        }
    }
    if !takes_turn || RUN.with(|run| run.borrow().as_ref().is_some_and(|run| run.turn.is_some())) {
        return;
    }
    let turns = LongReads::turns();
    let turn = loop {
        if let Some(turn) = turns.take_owned() {
            break Some(turn);
        }
        if stop() {
            break None;
        }
        std::thread::sleep(TURN_LOOK_EVERY);
    };
    // A long read runs on at a lower priority: the runtime's workers, its timers and the writer come first.
    let lowered = turn
        .as_ref()
        .and_then(|_| lower_for_a_while(LONG_READ_NICE));
    RUN.with(|run| {
        if let Some(run) = run.borrow_mut().as_mut() {
            run.turn = turn;
            run._lowered = lowered;
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    static CALLS: AtomicUsize = AtomicUsize::new(0);

    fn counted() -> bool {
        CALLS.fetch_add(1, Ordering::SeqCst);
        true
    }

    /// Every long reads' turn, held until dropped: taken one test at a time, each waited for while a read of another
    /// test holds it (a test that found a turn held elsewhere would see it given back mid-run).
    fn every_turn() -> (std::sync::MutexGuard<'static, ()>, Vec<Permit>) {
        static ONE_TEST: std::sync::Mutex<()> = std::sync::Mutex::new(());
        let one = ONE_TEST
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let turns = LongReads::turns();
        let mut taken = Vec::new();
        while taken.len() < turns.max() {
            match turns.take_owned() {
                Some(turn) => taken.push(turn),
                None => std::thread::sleep(TURN_LOOK_EVERY),
            }
        }
        (one, taken)
    }

    /// Spins until this thread has run for `d` on its CPU (by the wall clock where the system does not tell).
    fn spin_on_cpu(d: Duration) {
        let (cpu, wall) = (thread_cpu_time(), Instant::now());
        while match (cpu, thread_cpu_time()) {
            (Some(then), Some(now)) => now.saturating_sub(then) < d,
            _ => wall.elapsed() < d,
        } {}
    }

    #[test]
    fn past_its_bound_a_run_calls_past_once_takes_a_turn_and_gives_it_back() {
        CALLS.store(0, Ordering::SeqCst);
        let turns = LongReads::turns();
        let bound = Bound::new(Some(Instant::now() - LONG_AFTER), Some(counted));
        let ((), passed) = within(bound, || {
            // A run past its bound by the thread's CPU time too.
            spin_on_cpu(LONG_AFTER * 2);
            check(|| false);
            check(|| false);
            assert!(turns.taken() >= 1, "the run holds a turn");
        });
        assert!(passed.long && passed.past);
        assert_eq!(CALLS.load(Ordering::SeqCst), 1);
        check(|| false);
        assert_eq!(CALLS.load(Ordering::SeqCst), 1, "no run is bounded now");
        let later = Bound::new(
            Some(Instant::now() + Duration::from_secs(3600)),
            Some(counted),
        );
        let ((), passed) = within(later, || check(|| false));
        assert!(!passed.long && !passed.past);
        assert_eq!(CALLS.load(Ordering::SeqCst), 1, "not past the bound");
    }

    #[test]
    fn a_run_about_to_wait_for_a_lock_does_at_once_what_its_bound_asks_once() {
        static WAITS: AtomicUsize = AtomicUsize::new(0);
        fn counted_wait() -> bool {
            WAITS.fetch_add(1, Ordering::SeqCst);
            true
        }
        let far = Bound::write(
            Instant::now() + Duration::from_secs(3600),
            Some(counted_wait),
        );
        let ((), passed) = within(far, || {
            before_waiting();
            before_waiting();
        });
        assert!(passed.past && !passed.long, "{passed:?}");
        assert_eq!(WAITS.load(Ordering::SeqCst), 1);
        before_waiting();
        assert_eq!(WAITS.load(Ordering::SeqCst), 1, "no run is bounded now");
    }

    #[test]
    fn a_run_its_caller_did_not_time_counts_from_its_first_look() {
        static PAST: AtomicUsize = AtomicUsize::new(0);
        fn past() -> bool {
            PAST.fetch_add(1, Ordering::SeqCst);
            true
        }
        let before = Instant::now();
        // `check(|| true)`: a run past its bound that finds no turn free (another test may hold them) stops waiting.
        let ((), passed) = within(Bound::new(None, Some(past)), || {
            // Long by the clock before anything looked: not counted.
            let spin = Instant::now();
            while spin.elapsed() < LONG_AFTER * 2 {}
            check(|| true);
            assert_eq!(PAST.load(Ordering::SeqCst), 0, "not past its bound yet");
            // Past it by the thread's CPU time, which is what counts (a preempted thread's wall time is not).
            spin_on_cpu(LONG_AFTER * 2);
            check(|| true);
        });
        assert!(passed.past, "past its bound from its first look");
        assert_eq!(PAST.load(Ordering::SeqCst), 1);
        let began = passed.began.expect("it was looked at");
        assert!(
            began >= before + LONG_AFTER * 2,
            "it began at its first look"
        );
        let ((), passed) = within(Bound::new(None, None), || {});
        assert_eq!(passed.began, None, "a run never looked at has no time");
    }

    #[test]
    fn a_read_whose_thread_was_off_its_cpu_is_no_long_read() {
        let ((), passed) = within(Bound::new(Some(Instant::now()), None), || {
            check(|| false);
            std::thread::sleep(LONG_AFTER * 3);
            check(|| false);
        });
        assert!(
            !passed.long,
            "a read that slept past its bound by the clock is no long read"
        );
    }

    #[test]
    fn a_long_read_whose_scheduler_could_not_do_what_it_asked_waits_for_no_turn() {
        static TRIES: AtomicUsize = AtomicUsize::new(0);
        fn not_done() -> bool {
            TRIES.fetch_add(1, Ordering::SeqCst);
            false
        }
        // Every turn taken elsewhere: a read that waited for one would wait until told to stop.
        let taken = every_turn();
        let ((), passed) = within(
            Bound::new(Some(Instant::now() - LONG_AFTER), Some(not_done)),
            || {
                spin_on_cpu(LONG_AFTER * 2);
                check(|| panic!("a read still holding its scheduler's thread waited for a turn"));
            },
        );
        assert!(passed.past && !passed.long, "{passed:?}");
        assert_eq!(TRIES.load(Ordering::SeqCst), 1);
        drop(taken);
    }

    #[test]
    fn a_long_read_waits_for_a_turn_and_stops_waiting_when_told() {
        // Every turn taken elsewhere.
        let taken = every_turn();
        let stops = AtomicUsize::new(0);
        within(Bound::new(Some(Instant::now()), None), || {
            spin_on_cpu(LONG_AFTER * 2);
            check(|| stops.fetch_add(1, Ordering::SeqCst) >= 3);
        });
        assert_eq!(
            stops.load(Ordering::SeqCst),
            4,
            "it waited until told to stop"
        );
        drop(taken);
    }
}
