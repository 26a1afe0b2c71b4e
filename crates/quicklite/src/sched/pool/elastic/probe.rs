//! What the kernel says of a thread of this process: its id, and whether it is blocked (asleep, or waiting for the
//! disk) rather than running or waiting for a CPU.

/// The calling thread's id, from `/proc/thread-self` (`<pid>/task/<tid>`).
pub(super) fn own_tid() -> Option<u32> {
    let link = std::fs::read_link("/proc/thread-self").ok()?;
    link.file_name()?.to_str()?.parse().ok()
}

/// Whether thread `tid` of this process is blocked (sleeping, or waiting for the disk) rather than running or
/// waiting for a CPU; `true` when the kernel cannot tell us.
pub(super) fn blocked(tid: Option<u32>) -> bool {
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

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::time::{Duration, Instant};

    use super::*;

    #[test]
    fn the_kernel_tells_a_sleeping_thread_from_a_running_one() {
        let (tid_tx, tid_rx) = std::sync::mpsc::channel();
        // Asleep until told to stop.
        let (wake, asleep_on) = std::sync::mpsc::channel::<()>();
        let sleeper = {
            let tid_tx = tid_tx.clone();
            std::thread::spawn(move || {
                tid_tx.send(own_tid()).unwrap();
                let _ = asleep_on.recv();
            })
        };
        let sleeper_tid = tid_rx.recv().unwrap();
        // Running (or waiting for a CPU) until told to stop.
        let stop = Arc::new(AtomicBool::new(false));
        let spinner = {
            let stop = stop.clone();
            std::thread::spawn(move || {
                tid_tx.send(own_tid()).unwrap();
                while !stop.load(Ordering::Relaxed) {
                    std::hint::spin_loop();
                }
            })
        };
        let spinner_tid = tid_rx.recv().unwrap();
        assert!(sleeper_tid.is_some(), "no /proc/thread-self here");

        // Once the sleeper waits on its channel, every look finds it blocked; no look finds the spinner so.
        let asleep_by = Instant::now() + Duration::from_secs(10);
        while !blocked(sleeper_tid) {
            assert!(Instant::now() < asleep_by, "the sleeper never blocked");
            std::thread::yield_now();
        }
        assert!((0..50).all(|_| blocked(sleeper_tid)));
        assert!((0..50).all(|_| !blocked(spinner_tid)));

        drop(wake);
        stop.store(true, Ordering::Relaxed);
        sleeper.join().unwrap();
        spinner.join().unwrap();
        assert!(blocked(None));
    }
}
