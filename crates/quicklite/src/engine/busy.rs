//! How long a connection waits for a lock held elsewhere, and how often it tries meanwhile.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use rusqlite::Connection;

use crate::engine::{Shared, bound, hooks};

/// How long a connection's busy handler waits for a lock, and how often it tries.
///
/// The writer tries every millisecond ([`BusyLimit::polling`]): a lock it waits for is held by another process
/// (quicklite has one writer), and SQLite's growing schedule ([`BUSY_DELAYS_MS`]) sleeps through the
/// moments that process lets go, so a writer that commits back to back wins nearly every race. Each of its waits
/// outside a checkpoint tells the database that another connection contends for the write lock
/// ([`Shared::write_lock_contended`]), which keeps reads off the callers' threads for a while. The writer
/// lengthens the wait while a write waits for the write lock ([`BusyLimit::waiting_up_to`], up to the write's
/// deadline or `write_lock_wait`), and shortens it while a checkpoint waits for readers, so that a long read cannot
/// stall writes for the whole busy timeout; quicklite's readers leave the WAL within a batch. Readers keep SQLite's
/// schedule.
#[derive(Debug, Clone)]
pub(crate) struct BusyLimit {
    inner: Arc<Limit>,
}

#[derive(Debug)]
struct Limit {
    /// The longest wait for one lock, in microseconds (a wait up to a deadline ends at it, not a millisecond
    /// before).
    wait_us: AtomicU64,
    /// Whether to try every millisecond instead of following SQLite's schedule.
    every_millisecond: AtomicBool,
    /// Whether a checkpoint is waiting for readers (its give-ups are counted apart).
    checkpointing: AtomicBool,
    /// Whether the last checkpoint that waited for readers gave up because a long read of the process ran.
    gave_way_to_long_read: AtomicBool,
    /// Whether this is the writer's limit: outside checkpoints, and unless its connection is lent to reads (a limit
    /// of zero), a wait of its is for the write lock another connection holds.
    writer: bool,
}

impl BusyLimit {
    /// A limit of `limit` that follows SQLite's schedule of tries.
    pub(crate) fn new(limit: Duration) -> BusyLimit {
        Self::with_schedule(limit, false)
    }

    /// The writer's limit of `limit`: it tries every millisecond, and says when it waits for the write lock
    /// ([`Shared::write_lock_held_elsewhere`]).
    pub(crate) fn polling(limit: Duration) -> BusyLimit {
        Self::with_schedule(limit, true)
    }

    fn with_schedule(limit: Duration, writer: bool) -> BusyLimit {
        BusyLimit {
            inner: Arc::new(Limit {
                wait_us: AtomicU64::new(micros(limit)),
                every_millisecond: AtomicBool::new(writer),
                checkpointing: AtomicBool::new(false),
                gave_way_to_long_read: AtomicBool::new(false),
                writer,
            }),
        }
    }

    /// Runs `f`, a checkpoint waiting for readers, with the limit set to `limit`, trying every millisecond; a
    /// give-up meanwhile is counted as the checkpoint's, not as a busy timeout.
    pub(crate) fn for_checkpoint<T>(&self, limit: Duration, f: impl FnOnce() -> T) -> T {
        let before = self.inner.wait_us.swap(micros(limit), Ordering::Relaxed);
        let schedule = self.inner.every_millisecond.swap(true, Ordering::Relaxed);
        self.inner.checkpointing.store(true, Ordering::Relaxed);
        self.inner
            .gave_way_to_long_read
            .store(false, Ordering::Relaxed);
        let out = f();
        self.inner.checkpointing.store(false, Ordering::Relaxed);
        self.inner
            .every_millisecond
            .store(schedule, Ordering::Relaxed);
        self.inner.wait_us.store(before, Ordering::Relaxed);
        out
    }

    /// Whether the last checkpoint run by [`BusyLimit::for_checkpoint`] gave up waiting for readers because a long
    /// read of the process ran, not because its wait ran out.
    pub(crate) fn gave_way_to_long_read(&self) -> bool {
        self.inner.gave_way_to_long_read.load(Ordering::Relaxed)
    }

    /// Runs `f`, a write that may wait for the write lock another connection holds, with the limit set to `limit`
    /// instead of the busy timeout.
    pub(crate) fn waiting_up_to<T>(&self, limit: Duration, f: impl FnOnce() -> T) -> T {
        let before = self.inner.wait_us.swap(micros(limit), Ordering::Relaxed);
        let out = f();
        self.inner.wait_us.store(before, Ordering::Relaxed);
        out
    }

    /// Sets the longest wait for one lock to `limit`.
    pub(crate) fn set(&self, limit: Duration) {
        self.inner.wait_us.store(micros(limit), Ordering::Relaxed);
    }

    fn get(&self) -> Duration {
        Duration::from_micros(self.inner.wait_us.load(Ordering::Relaxed))
    }

    /// The sleep before try `count + 1`.
    fn delay(&self, count: i32) -> Duration {
        let ms = if self.inner.every_millisecond.load(Ordering::Relaxed) {
            1
        } else {
            BUSY_DELAYS_MS[usize::try_from(count)
                .unwrap_or(0)
                .min(BUSY_DELAYS_MS.len() - 1)]
        };
        Duration::from_millis(ms)
    }

    /// Installs a busy handler on `conn` that waits as `busy_timeout` would and counts the retries in `shared`.
    ///
    /// A busy handler replaces SQLite's busy timeout (`PRAGMA busy_timeout` then reads 0), so the handler enforces
    /// the configured timeout itself.
    pub(crate) fn install(
        &self,
        conn: &mut Connection,
        shared: &Arc<Shared>,
    ) -> rusqlite::Result<hooks::Armed> {
        let busy = self.clone();
        let counters = shared.clone();
        let mut episode_start = Instant::now();
        hooks::busy_handler(conn, move |count| {
            let now = Instant::now();
            if count == 0 {
                episode_start = now;
            }
            let waited = now - episode_start;
            let limit = busy.get();
            let checkpointing = busy.inner.checkpointing.load(Ordering::Relaxed);
            if busy.inner.writer && !checkpointing && !limit.is_zero() {
                counters.write_lock_held_elsewhere();
            }
            let metrics = &counters.metrics;
            // A checkpoint waiting for readers makes the writes queued behind it wait too: not for a long read,
            // which holds the WAL for as long as it runs ([`bound::long_reads_running`]).
            let long_read = checkpointing && waited < limit && bound::long_reads_running();
            if waited >= limit || long_read {
                if long_read {
                    busy.inner
                        .gave_way_to_long_read
                        .store(true, Ordering::Relaxed);
                }
                let given_up = if checkpointing {
                    &metrics.checkpoint_reader_waits_given_up
                } else {
                    &metrics.busy_timeouts
                };
                given_up.fetch_add(1, Ordering::Relaxed);
                return false;
            }
            metrics.busy_retries.fetch_add(1, Ordering::Relaxed);
            // On a caller's thread, the runtime goes on without it first.
            bound::before_waiting();
            std::thread::sleep(busy.delay(count).min(limit - waited));
            true
        })
    }
}

fn micros(d: Duration) -> u64 {
    u64::try_from(d.as_micros()).unwrap_or(u64::MAX)
}

/// Sleeps between tries for a busy lock, the schedule of SQLite's own busy-timeout handler (`sqliteDefaultBusy
/// Callback` in main.c): short at first, for the common brief lock, then longer.
const BUSY_DELAYS_MS: [u64; 12] = [1, 2, 5, 10, 15, 20, 25, 25, 25, 50, 50, 100];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_checkpoint_waiting_for_readers_tries_every_millisecond() {
        let busy = BusyLimit::new(Duration::from_secs(5));
        assert_eq!(busy.delay(0), Duration::from_millis(1));
        assert_eq!(busy.delay(6), Duration::from_millis(25));
        assert_eq!(busy.delay(50), Duration::from_millis(100));
        busy.for_checkpoint(Duration::from_millis(100), || {
            assert_eq!(busy.get(), Duration::from_millis(100));
            assert_eq!(busy.delay(6), Duration::from_millis(1));
            assert_eq!(busy.delay(50), Duration::from_millis(1));
        });
        assert_eq!(busy.get(), Duration::from_secs(5));
        assert_eq!(busy.delay(6), Duration::from_millis(25));
    }

    #[test]
    fn a_write_waiting_for_the_write_lock_waits_its_own_limit_to_the_microsecond_then_the_timeout_returns()
     {
        let busy = BusyLimit::polling(Duration::from_secs(5));
        busy.waiting_up_to(Duration::from_secs(30), || {
            assert_eq!(busy.get(), Duration::from_secs(30));
            assert_eq!(busy.delay(50), Duration::from_millis(1));
        });
        busy.waiting_up_to(Duration::from_micros(1500), || {
            assert_eq!(busy.get(), Duration::from_micros(1500))
        });
        assert_eq!(busy.get(), Duration::from_secs(5));
    }

    #[test]
    fn a_polling_limit_tries_every_millisecond_and_keeps_doing_so_after_a_checkpoint() {
        let busy = BusyLimit::polling(Duration::from_secs(5));
        assert_eq!(busy.delay(50), Duration::from_millis(1));
        busy.for_checkpoint(Duration::from_millis(100), || {
            assert_eq!(busy.get(), Duration::from_millis(100))
        });
        assert_eq!(busy.get(), Duration::from_secs(5));
        assert_eq!(busy.delay(50), Duration::from_millis(1));
    }
}
