//! The registry's housekeeping thread.

use std::sync::Weak;
use std::sync::atomic::Ordering;
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::time::Duration;

use crate::registry::RegistryInner;
use crate::sched::pool::task::PooledDatabase;
use crate::util::write;

/// Tasks waiting for room that each housekeeping tick puts back on the run queues.
const RESUMED_PER_TICK: usize = 16;

/// The housekeeping thread: closes idle databases, enforces the open cap, forgets closed databases nobody holds, and
/// has databases look for commits from outside. It runs every `tick`, or more often while a database looks for
/// commits from outside more often.
pub(super) fn housekeeping(registry: Weak<RegistryInner>, wakes: Receiver<()>, tick: Duration) {
    let mut next_tick = tick;
    loop {
        match wakes.recv_timeout(next_tick) {
            Ok(()) | Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => return,
        }
        let Some(registry) = registry.upgrade() else {
            return;
        };
        if registry.closed.load(Ordering::Acquire) {
            return;
        }
        // A failed sweep must not end housekeeping: the next tick tries again.
        match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| registry.sweep())) {
            Ok(looks) => next_tick = looks.map_or(tick, |every| every.min(tick)),
            Err(_) => tracing::error!("registry housekeeping panicked; retrying at the next tick"),
        }
    }
}

impl RegistryInner {
    /// One round of housekeeping; returns the shortest interval at which an open database looks for commits from
    /// outside, if any does.
    fn sweep(&self) -> Option<Duration> {
        let pool = &self.pool;
        let now = pool.now_ms();
        let idle_ms = u64::try_from(self.idle_timeout.as_millis()).unwrap_or(u64::MAX);
        let open = pool.open_actors();
        let mut shortest_look = None::<Duration>;
        for actor in &open {
            let idle_for = now.saturating_sub(actor.last_used_ms());
            // A database whose subscribers hear of commits from outside stays open: its writer's connection looks.
            let looks = actor.outside_look_interval();
            if looks.is_none() && idle_for >= idle_ms && actor.try_close() {
                pool.idle_closes.fetch_add(1, Ordering::Relaxed);
                continue;
            }
            actor.truncate_wal_if_idle(idle_for);
            if let Some(every) = looks {
                actor.wake_writer();
                shortest_look = Some(shortest_look.map_or(every, |s| s.min(every)));
            }
        }
        // Tasks waiting for room are resumed as databases go idle; a few more each tick cover a missed chance.
        pool.resume_waiting(RESUMED_PER_TICK);
        // Forget closed databases that only the registry holds; `get` recreates them on demand.
        write(&self.known).retain(|_, known| known.db.handles() > 1 || !known.actor.is_quiet());
        shortest_look
    }
}
