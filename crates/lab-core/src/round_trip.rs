//! How long a cache line takes to go from one CPU to another and back: the price of every hand-off between
//! threads, measured before and after each cell.
//!
//! On a virtual machine this is not a constant of the machine: the host runs the virtual CPUs on hardware of its
//! choosing and moves them while the machine runs, and approaches that hand requests between threads follow it
//! (docs/design.md, "Figures behind the design choices"). A number without it cannot tell an approach's change
//! from the host's, so every cell records it.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// Rounds of the measurement; the fastest counts (a round that another thread interrupted only reads slower).
const ROUNDS: u64 = 16;

/// Round trips per round: long enough to average out the clock reads, short enough that a round often runs
/// undisturbed (well under a millisecond).
const TRIPS: u64 = 1_000;

/// How long the measurement may take: it ends with the rounds completed by then (or the part of a round, if none
/// completed), or without a figure if not one trip did (a CPU the process may use but never gets).
const GIVE_UP_AFTER: Duration = Duration::from_secs(1);

/// One word on a cache line of its own, so nothing else travels with it.
#[repr(align(128))]
struct Line(AtomicU64);

/// Nanoseconds for a cache line to go from the first CPU this process may run on to the second and back: two
/// threads, each pinned to one of them, take turns writing one atomic word, in up to 16 rounds of 1,000 round trips
/// (`ROUNDS`, `TRIPS`); the fastest round's mean (when no round completes within a second, `GIVE_UP_AFTER`, the mean
/// of the trips made by then). `None` on a single CPU, where pinning fails, or when not one trip completes in time.
pub fn core_round_trip_ns() -> Option<f64> {
    let [first, second] = first_two_cpus()?;
    let word = Arc::new(Line(AtomicU64::new(0)));
    let stop = Arc::new(AtomicBool::new(false));
    let deadline = Instant::now() + GIVE_UP_AFTER;
    let answering = {
        let (word, stop) = (word.clone(), stop.clone());
        std::thread::Builder::new()
            .name("lab-round-trip".into())
            .spawn(move || {
                if !pin_to(second) {
                    stop.store(true, Ordering::SeqCst);
                    return;
                }
                // Answers every odd value with the next one until the asking side is done.
                let mut asked = 1;
                while wait_for(&word.0, asked, &stop, deadline) {
                    word.0.store(asked + 1, Ordering::Release);
                    asked += 2;
                }
            })
            .ok()?
    };
    let asking = {
        let (word, stop) = (word.clone(), stop.clone());
        std::thread::Builder::new()
            .name("lab-round-trip".into())
            .spawn(move || -> Option<f64> {
                let mut fastest = None::<f64>;
                if pin_to(first) {
                    let mut asked = 1;
                    for _ in 0..ROUNDS {
                        let started = Instant::now();
                        let mut trips = 0;
                        while trips < TRIPS {
                            word.0.store(asked, Ordering::Release);
                            if !wait_for(&word.0, asked + 1, &stop, deadline) {
                                break;
                            }
                            asked += 2;
                            trips += 1;
                        }
                        // A round cut short by the deadline counts only when no round completed: on a machine so
                        // busy that none did, the trips that were made are the figure there is.
                        if trips == TRIPS || (fastest.is_none() && trips > 0) {
                            let ns = started.elapsed().as_nanos() as f64 / trips as f64;
                            fastest = Some(fastest.map_or(ns, |f| f.min(ns)));
                        }
                        if trips < TRIPS || Instant::now() >= deadline {
                            break;
                        }
                    }
                }
                // Whatever happened, the other side stops waiting.
                stop.store(true, Ordering::SeqCst);
                fastest
            })
    };
    let result = match asking {
        Ok(asking) => asking.join().ok().flatten(),
        Err(_) => {
            stop.store(true, Ordering::SeqCst);
            None
        }
    };
    let _ = answering.join();
    result
}

/// Spins until `word` holds `value`; `false` if told to stop or past `deadline` first.
fn wait_for(word: &AtomicU64, value: u64, stop: &AtomicBool, deadline: Instant) -> bool {
    let mut spins = 0_u32;
    while word.load(Ordering::Acquire) != value {
        std::hint::spin_loop();
        spins = spins.wrapping_add(1);
        // Looking at the clock on every spin would slow down the round trip it measures: every few thousand only.
        if spins.is_multiple_of(4_096)
            && (stop.load(Ordering::Relaxed) || Instant::now() >= deadline)
        {
            stop.store(true, Ordering::SeqCst);
            return false;
        }
    }
    true
}

/// The first two CPUs in the calling thread's affinity mask (the process's, for a thread that never changed it).
#[cfg(target_os = "linux")]
fn first_two_cpus() -> Option<[usize; 2]> {
    // SAFETY: `cpu_set_t` is plain bits, valid when zeroed; `sched_getaffinity` writes at most
    // `size_of::<cpu_set_t>()` bytes into it, and `CPU_ISSET` reads within it.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) != 0 {
            return None;
        }
        let mut cpus = (0..libc::CPU_SETSIZE as usize).filter(|&cpu| libc::CPU_ISSET(cpu, &set));
        Some([cpus.next()?, cpus.next()?])
    }
}

#[cfg(not(target_os = "linux"))]
fn first_two_cpus() -> Option<[usize; 2]> {
    None
}

/// Pins the calling thread to `cpu`; whether it worked.
#[cfg(target_os = "linux")]
fn pin_to(cpu: usize) -> bool {
    // SAFETY: as in `first_two_cpus`; `CPU_SET` writes within the zeroed set, and `sched_setaffinity` only reads
    // `size_of::<cpu_set_t>()` bytes of it.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) == 0
    }
}

#[cfg(not(target_os = "linux"))]
fn pin_to(_cpu: usize) -> bool {
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_round_trip_is_measured_on_two_cpus_and_not_on_one() {
        match first_two_cpus() {
            Some([a, b]) => {
                assert!(a < b);
                let ns = core_round_trip_ns().expect("two CPUs: a round trip is measured");
                // A cache line cannot cross and come back in no time, nor take a millisecond on a machine that
                // gets both CPUs (the test suite's own threads can only make the fastest round slower).
                assert!(ns > 1.0 && ns < 1_000_000.0, "{ns} ns");
            }
            None => assert_eq!(core_round_trip_ns(), None),
        }
    }

    #[test]
    fn the_measuring_threads_leave_the_caller_where_it_was() {
        let before = first_two_cpus();
        let _ = core_round_trip_ns();
        assert_eq!(first_two_cpus(), before);
    }

    #[test]
    fn a_side_that_never_sees_its_value_gives_up_at_the_deadline() {
        let word = AtomicU64::new(0);
        let stop = AtomicBool::new(false);
        let deadline = Instant::now() + Duration::from_millis(20);
        assert!(!wait_for(&word, 1, &stop, deadline));
        assert!(
            stop.load(Ordering::SeqCst),
            "the other side is told to stop"
        );
        word.store(1, Ordering::SeqCst);
        assert!(wait_for(&word, 1, &stop, deadline), "a value already there");
    }
}
