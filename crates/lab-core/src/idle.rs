//! The idle window: after a cell's measured window the approach stays open, is sent nothing, and the runner's CPU
//! time is sampled ([`IdleCpu`]).
//!
//! A service spends most of its day far below saturation, and an approach whose threads spin or wake up
//! periodically while they wait for the next request costs CPU even then: the cost throughput and CPU per
//! operation cannot show, because under load that CPU is doing work. The window follows the measured
//! one directly, so it starts with the approach's own wind-down (a thread spinning for a request that no longer
//! comes) and goes on to its steady idle cost (periodic wake-ups, housekeeping timers).

use std::time::{Duration, Instant};

use crate::process;
use crate::result::IdleCpu;

/// How long each cell's approach sits idle after the measured window while the runner's CPU time is sampled.
///
/// Long enough that a thread waking up a few times a second shows and that the wind-down after the last request
/// is a small part of it; short enough that the window adds little to a run of many cells (it is added to every
/// cell, the quick run's included).
pub const IDLE_WINDOW: Duration = Duration::from_millis(500);

/// Waits `window` on the current runtime without sending the approach anything, and returns the process's CPU
/// time over it.
///
/// The caller keeps the approach open across the wait. The wait is one timer on the runtime, so the runtime's own
/// idle cost is a single wake-up.
pub(crate) async fn measure_idle(window: Duration) -> IdleCpu {
    let cpu_start = process::cpu_time();
    let start = Instant::now();
    tokio::time::sleep(window).await;
    let cpu = process::cpu_time().saturating_sub(cpu_start);
    IdleCpu {
        secs: start.elapsed().as_secs_f64(),
        cpu_secs: cpu.as_secs_f64(),
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};

    use super::*;

    /// A thread that burns CPU through the window is counted, and the window reports no more than the process used
    /// around it; nothing is asserted about how much (that is the machine's business).
    #[tokio::test(flavor = "multi_thread", worker_threads = 1)]
    async fn cpu_burnt_during_the_window_is_counted() {
        let (spinning, stop) = (
            Arc::new(AtomicBool::new(false)),
            Arc::new(AtomicBool::new(false)),
        );
        let spinner = {
            let (spinning, stop) = (spinning.clone(), stop.clone());
            std::thread::spawn(move || {
                spinning.store(true, Ordering::Release);
                while !stop.load(Ordering::Relaxed) {
                    std::hint::spin_loop();
                }
            })
        };
        while !spinning.load(Ordering::Acquire) {
            std::hint::spin_loop();
        }
        let before = process::cpu_time();
        let idle = measure_idle(Duration::from_millis(50)).await;
        let around = process::cpu_time().saturating_sub(before);
        stop.store(true, Ordering::Relaxed);
        spinner.join().unwrap();
        assert!(idle.secs >= 0.05, "{idle:?}");
        assert!(idle.cpu_secs > 0.0, "{idle:?}");
        assert!(
            idle.cpu_secs <= around.as_secs_f64(),
            "{idle:?} within {around:?}"
        );
    }
}
