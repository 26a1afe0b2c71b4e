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
    use std::sync::atomic::Ordering;
    use std::time::Duration;

    use super::*;

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
}
