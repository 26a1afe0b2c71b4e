//! Small helpers every layer uses: locks that outlive a panic, companion file names, named threads, the coarse clock.

use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard, PoisonError, RwLock, RwLockReadGuard, RwLockWriteGuard};
use std::thread::JoinHandle;

/// The CPUs this process may use (1 where the system cannot tell), read once.
pub(crate) fn cpus() -> usize {
    static CPUS: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *CPUS.get_or_init(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
}

/// Milliseconds since the first call in the process, wrapping after 49 days: a time that fits an `AtomicU32`.
pub(crate) fn clock_ms() -> u32 {
    static START: std::sync::OnceLock<std::time::Instant> = std::sync::OnceLock::new();
    START
        .get_or_init(std::time::Instant::now)
        .elapsed()
        .as_millis() as u32
}

/// A reading of the system's coarse monotonic clock: a few nanoseconds to take where [`std::time::Instant`] takes
/// tens, and exact to its tick ([`Coarse::tick`], a few milliseconds). For what every read on a caller's thread
/// must time — how old its snapshot is, when its connection was last used, whether it ran for ticks — where the fine
/// clock, read twice a read, would be a sizeable part of a point read's cost.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct Coarse(std::time::Duration);

impl Coarse {
    /// The clock now.
    pub(crate) fn now() -> Coarse {
        #[cfg(target_os = "linux")]
        {
            Coarse(duration_of(rustix::time::clock_gettime(
                rustix::time::ClockId::MonotonicCoarse,
            )))
        }
        #[cfg(not(target_os = "linux"))]
        {
            static START: std::sync::OnceLock<std::time::Instant> = std::sync::OnceLock::new();
            Coarse(START.get_or_init(std::time::Instant::now).elapsed())
        }
    }

    /// The clock's tick: a reading is at most this much behind the fine clock's.
    pub(crate) fn tick() -> std::time::Duration {
        static TICK: std::sync::OnceLock<std::time::Duration> = std::sync::OnceLock::new();
        *TICK.get_or_init(|| {
            #[cfg(target_os = "linux")]
            {
                duration_of(rustix::time::clock_getres(
                    rustix::time::ClockId::MonotonicCoarse,
                ))
            }
            #[cfg(not(target_os = "linux"))]
            {
                std::time::Duration::ZERO
            }
        })
    }

    /// The time from `earlier` to this reading (zero if `earlier` is later).
    pub(crate) fn since(self, earlier: Coarse) -> std::time::Duration {
        self.0.saturating_sub(earlier.0)
    }
}

/// A clock's reading (or resolution) as a `Duration` (zero for a negative part, which no clock here gives).
#[cfg(target_os = "linux")]
pub(crate) fn duration_of(t: rustix::time::Timespec) -> std::time::Duration {
    std::time::Duration::new(
        u64::try_from(t.tv_sec).unwrap_or(0),
        u32::try_from(t.tv_nsec).unwrap_or(0),
    )
}

/// Locks `m`, also after a thread panicked while holding it: every lock of the crate guards state that a panic
/// cannot leave half-updated (user closures never run under one).
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Read-locks `l` (see [`lock`]).
pub(crate) fn read<T>(l: &RwLock<T>) -> RwLockReadGuard<'_, T> {
    l.read().unwrap_or_else(PoisonError::into_inner)
}

/// Write-locks `l` (see [`lock`]).
pub(crate) fn write<T>(l: &RwLock<T>) -> RwLockWriteGuard<'_, T> {
    l.write().unwrap_or_else(PoisonError::into_inner)
}

/// The companion file SQLite keeps next to `db`: `suffix` is `-wal`, `-shm` or `-journal`.
pub(crate) fn companion(db: &Path, suffix: &str) -> PathBuf {
    let mut name = db.as_os_str().to_owned();
    name.push(suffix);
    PathBuf::from(name)
}

/// Starts a thread named `name` (the kernel shows its first 15 bytes).
pub(crate) fn spawn(
    name: impl Into<String>,
    f: impl FnOnce() + Send + 'static,
) -> std::io::Result<JoinHandle<()>> {
    std::thread::Builder::new().name(name.into()).spawn(f)
}

/// Lowers the calling thread's CPU priority by `nice` steps below the one it was started with (its nice value, on
/// Linux, where it is the thread's own); elsewhere nothing. A thread may always lower its own priority, never raise
/// it back without privilege. A failure is logged and the thread runs on as it was.
pub(crate) fn lower_own_priority(nice: u8) {
    if nice == 0 {
        return;
    }
    #[cfg(target_os = "linux")]
    {
        use rustix::process::{getpriority_process, setpriority_process};
        let lowered = getpriority_process(None)
            .and_then(|now| setpriority_process(None, (now + i32::from(nice)).min(19)));
        if let Err(e) = lowered {
            tracing::debug!(error = %e, "could not lower a thread's priority");
        }
    }
}

/// The calling thread's CPU priority lowered for a while, put back when dropped ([`lower_for_a_while`]).
pub(crate) struct Lowered {
    #[cfg(target_os = "linux")]
    before: i32,
}

impl Drop for Lowered {
    fn drop(&mut self) {
        #[cfg(target_os = "linux")]
        if let Err(e) = rustix::process::setpriority_process(None, self.before) {
            tracing::debug!(error = %e, "could not put a thread's priority back");
        }
    }
}

/// Lowers the calling thread's CPU priority by `nice` steps until the value returned is dropped — only where the
/// process may raise it back (root, `CAP_SYS_NICE`, or an `RLIMIT_NICE` that allows it: found out once, on a thread
/// of its own); elsewhere, and on other systems, `None` and nothing changes.
pub(crate) fn lower_for_a_while(nice: u8) -> Option<Lowered> {
    #[cfg(target_os = "linux")]
    {
        use rustix::process::{getpriority_process, setpriority_process};
        static MAY_RAISE: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
        let may_raise = *MAY_RAISE.get_or_init(|| {
            std::thread::spawn(|| {
                getpriority_process(None).is_ok_and(|now| {
                    setpriority_process(None, (now + 1).min(19)).is_ok()
                        && setpriority_process(None, now).is_ok()
                })
            })
            .join()
            .unwrap_or(false)
        });
        if !may_raise || nice == 0 {
            return None;
        }
        let before = getpriority_process(None).ok()?;
        setpriority_process(None, (before + i32::from(nice)).min(19)).ok()?;
        Some(Lowered { before })
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = nice;
        None
    }
}

/// What [`blocking_work`] raises on a flagged thread: its own flag, and the count of its lane's threads with theirs
/// raised.
struct WorkFlags {
    flag: std::sync::Arc<std::sync::atomic::AtomicBool>,
    raised: std::sync::Arc<std::sync::atomic::AtomicUsize>,
}

thread_local! {
    /// The flags of a pool thread whose blocking work is flagged ([`flag_blocking_work`]); `None` on other threads.
    static BLOCKING_WORK: std::cell::RefCell<Option<WorkFlags>> = const { std::cell::RefCell::new(None) };
}

/// Has [`blocking_work`] raise `flag` on the calling thread while it runs, and count it in `raised`: a registry's
/// write lane flags its threads this way, so that only a thread inside an application's closure or SQLite's
/// commit (work that may sleep or wait for the disk for as long as it likes) makes the lane grow — not one waiting
/// inside quicklite — and its read threads give way only to write threads that are not.
pub(crate) fn flag_blocking_work(
    flag: std::sync::Arc<std::sync::atomic::AtomicBool>,
    raised: std::sync::Arc<std::sync::atomic::AtomicUsize>,
) {
    BLOCKING_WORK.with(|flags| *flags.borrow_mut() = Some(WorkFlags { flag, raised }));
}

/// Runs `f`, an application's closure or a commit, with the calling thread's work flag (if any) raised. On the
/// write path of every database: it touches the thread-local, never the flags' reference counts.
pub(crate) fn blocking_work<T>(f: impl FnOnce() -> T) -> T {
    fn set(raised: bool) {
        use std::sync::atomic::Ordering::SeqCst;
        BLOCKING_WORK.with(|flags| {
            if let Some(own) = &*flags.borrow()
                && own.flag.swap(raised, SeqCst) != raised
            {
                if raised {
                    own.raised.fetch_add(1, SeqCst);
                } else {
                    own.raised.fetch_sub(1, SeqCst);
                }
            }
        });
    }
    /// Lowers the flag however `f` ends.
    struct Lower;
    impl Drop for Lower {
        fn drop(&mut self) {
            set(false);
        }
    }
    set(true);
    let _lower = Lower;
    f()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, Instant};

    #[test]
    fn the_coarse_clock_keeps_the_fine_clock_s_time_within_its_tick() {
        let tick = Coarse::tick();
        #[cfg(target_os = "linux")]
        assert!(
            tick > Duration::ZERO && tick <= Duration::from_millis(20),
            "tick {tick:?}"
        );
        // Each coarse reading between two fine ones: whatever the thread waited between them, the coarse clock
        // read the time of some moment between the two, less up to a tick.
        let (before, coarse, after) = (Instant::now(), Coarse::now(), Instant::now());
        std::thread::sleep(Duration::from_millis(50));
        let (before_later, coarse_later, after_later) =
            (Instant::now(), Coarse::now(), Instant::now());
        let by_coarse = coarse_later.since(coarse);
        assert!(by_coarse > Duration::ZERO, "the coarse clock moved");
        let (least, most) = (before_later - after, after_later - before);
        assert!(
            by_coarse + tick >= least && by_coarse <= most + tick,
            "{by_coarse:?} by the coarse clock, {least:?} to {most:?} by the fine one, tick {tick:?}"
        );
        assert_eq!(coarse.since(coarse_later), Duration::ZERO, "never negative");
    }
}
