//! Counters and distributions the worker threads update without locks, and the snapshot users read.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::Duration;

use crate::replica::Position;

/// Number of power-of-two buckets: bucket `i` counts values in `[2^(i-1), 2^i)` (bucket 0 counts zeros), which
/// covers batch sizes and microsecond waits up to ~35 minutes.
const BUCKETS: usize = 32;

/// A lock-free histogram with power-of-two buckets: cheap enough to record on every request.
#[derive(Debug)]
pub(crate) struct Log2Histogram {
    buckets: [AtomicU64; BUCKETS],
    sum: AtomicU64,
    max: AtomicU64,
}

impl Default for Log2Histogram {
    fn default() -> Self {
        Log2Histogram {
            buckets: std::array::from_fn(|_| AtomicU64::new(0)),
            sum: AtomicU64::new(0),
            max: AtomicU64::new(0),
        }
    }
}

/// The bucket that counts `value`.
fn bucket(value: u64) -> usize {
    ((u64::BITS - value.leading_zeros()) as usize).min(BUCKETS - 1)
}

fn micros(d: Duration) -> u64 {
    u64::try_from(d.as_micros()).unwrap_or(u64::MAX)
}

impl Log2Histogram {
    pub(crate) fn record(&self, value: u64) {
        self.buckets[bucket(value)].fetch_add(1, Relaxed);
        self.sum.fetch_add(value, Relaxed);
        self.max.fetch_max(value, Relaxed);
    }

    pub(crate) fn record_duration(&self, d: Duration) {
        self.record(micros(d));
    }

    pub(crate) fn snapshot(&self) -> Distribution {
        let counts: Vec<u64> = self.buckets.iter().map(|b| b.load(Relaxed)).collect();
        let last = counts.iter().rposition(|&c| c > 0).map_or(0, |i| i + 1);
        Distribution {
            count: counts.iter().sum(),
            sum: self.sum.load(Relaxed),
            max: self.max.load(Relaxed),
            buckets: counts[..last].to_vec(),
        }
    }
}

/// A histogram one thread fills without atomic operations and adds to a shared [`Log2Histogram`] now and then:
/// threads recording every request into the same shared histogram would bounce its cache lines between cores.
#[derive(Debug)]
pub(crate) struct LocalHistogram {
    buckets: [u64; BUCKETS],
    sum: u64,
    max: u64,
}

impl Default for LocalHistogram {
    fn default() -> Self {
        LocalHistogram {
            buckets: [0; BUCKETS],
            sum: 0,
            max: 0,
        }
    }
}

impl LocalHistogram {
    pub(crate) fn record_duration(&mut self, d: Duration) {
        let value = micros(d);
        self.buckets[bucket(value)] += 1;
        self.sum = self.sum.saturating_add(value);
        self.max = self.max.max(value);
    }

    /// Adds what was recorded to `shared` and starts again from empty.
    pub(crate) fn drain_into(&mut self, shared: &Log2Histogram) {
        for (count, total) in self.buckets.iter_mut().zip(&shared.buckets) {
            if *count > 0 {
                total.fetch_add(std::mem::take(count), Relaxed);
            }
        }
        if self.sum > 0 {
            shared.sum.fetch_add(std::mem::take(&mut self.sum), Relaxed);
        }
        shared.max.fetch_max(std::mem::take(&mut self.max), Relaxed);
    }
}

/// A distribution of values (batch sizes, or waits in microseconds).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Distribution {
    /// Number of values recorded.
    pub count: u64,
    /// Sum of the values.
    pub sum: u64,
    /// Largest value recorded.
    pub max: u64,
    /// Power-of-two buckets: `buckets[0]` counts zeros, `buckets[i]` counts values in `[2^(i-1), 2^i)`.
    /// Trailing empty buckets are left out.
    pub buckets: Vec<u64>,
}

impl Distribution {
    /// The mean value, or 0 when nothing was recorded.
    pub fn mean(&self) -> f64 {
        if self.count == 0 {
            0.0
        } else {
            self.sum as f64 / self.count as f64
        }
    }
}

/// Live counters of one database, shared by its threads.
#[derive(Debug, Default)]
pub(crate) struct Metrics {
    pub(crate) writes: AtomicU64,
    pub(crate) write_errors: AtomicU64,
    pub(crate) commits: AtomicU64,
    pub(crate) failed_commits: AtomicU64,
    pub(crate) rolled_back_groups: AtomicU64,
    pub(crate) held_transactions_expired: AtomicU64,
    pub(crate) reads: AtomicU64,
    pub(crate) inline_reads: AtomicU64,
    pub(crate) inline_reads_on_writer: AtomicU64,
    pub(crate) inline_writes: AtomicU64,
    pub(crate) writer_switches: AtomicU64,
    pub(crate) long_reads: AtomicU64,
    pub(crate) runtime_hand_offs: AtomicU64,
    pub(crate) read_errors: AtomicU64,
    pub(crate) read_transactions: AtomicU64,
    pub(crate) panics: AtomicU64,
    pub(crate) overloaded: AtomicU64,
    pub(crate) abandoned_reads: AtomicU64,
    pub(crate) abandoned_writes: AtomicU64,
    pub(crate) external_commits: AtomicU64,
    pub(crate) rollbacks: AtomicU64,
    pub(crate) busy_retries: AtomicU64,
    pub(crate) busy_timeouts: AtomicU64,
    pub(crate) checkpoint_reader_waits_given_up: AtomicU64,
    pub(crate) slow_statements: AtomicU64,
    pub(crate) checkpoints: AtomicU64,
    pub(crate) checkpoints_incomplete: AtomicU64,
    pub(crate) checkpoint_errors: AtomicU64,
    pub(crate) wal_size_warnings: AtomicU64,
    /// Whether another program checkpoints the database (the writer defers to it).
    pub(crate) another_checkpointer: std::sync::atomic::AtomicBool,
    /// Frames in the WAL after the last commit, as SQLite's WAL hook reports them (or a no-op checkpoint reads
    /// them, under `Checkpointing::Sqlite`).
    pub(crate) wal_frames: AtomicU64,
    /// A replica's last transaction at its writer's last look; 0 before a look (Litestream's TXIDs start at 1).
    pub(crate) replica_txid: AtomicU64,
    /// Seconds since a replica's writer's connection last heard from object storage, at its last look (read with
    /// `replica_txid`); `u64::MAX` before its first poll answered.
    pub(crate) replica_since_poll_s: AtomicU64,
    pub(crate) checkpoint_frames: Log2Histogram,
    pub(crate) checkpoint_us: Log2Histogram,
    pub(crate) write_transaction_us: Log2Histogram,
    pub(crate) held_transaction_us: Log2Histogram,
    pub(crate) read_transaction_us: Log2Histogram,
    pub(crate) write_batch: Log2Histogram,
    pub(crate) read_batch: Log2Histogram,
    pub(crate) write_queue_wait_us: Log2Histogram,
    pub(crate) read_queue_wait_us: Log2Histogram,
    pub(crate) commit_us: Log2Histogram,
}

/// A point-in-time copy of a database's metrics ([`Database::metrics`](crate::Database::metrics)).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct MetricsSnapshot {
    /// Write requests run (each `write`, `transaction`, `execute`, …).
    pub writes: u64,
    /// Write requests that returned an error (their own, or their group's).
    pub write_errors: u64,
    /// Transactions committed by the writer.
    pub commits: u64,
    /// `COMMIT`s that failed (every write of the group got the error).
    pub failed_commits: u64,
    /// Groups that SQLite rolled back by itself in the middle (I/O error, full disk).
    pub rolled_back_groups: u64,
    /// Transactions held across `.await` ([`Database::begin`](crate::Database::begin)) that ran past their limit
    /// and were rolled back by the writer.
    pub held_transactions_expired: u64,
    /// Read requests served.
    pub reads: u64,
    /// Of those, reads run on their callers' threads ([`Builder::inline_reads`](crate::Builder::inline_reads)).
    pub inline_reads: u64,
    /// Of those, reads run on the writer's connection while the writer waited for writes (a standalone database's):
    /// the connection whose page cache commits leave warm.
    pub inline_reads_on_writer: u64,
    /// Writes run on their callers' threads, on the writer's connection while the writer waited for work
    /// ([`Builder::inline_writes`](crate::Builder::inline_writes)); counted in `writes` too.
    pub inline_writes: u64,
    /// Times the writer went on with its second connection because a read on its lent one ran past the wait
    /// (a short call site's read that turned long).
    pub writer_switches: u64,
    /// Reads that ran past their bound (a millisecond of their thread's CPU): each took one of the process's turns
    /// for long reads, of which one fewer than the CPUs run at once.
    pub long_reads: u64,
    /// Reads on their callers' threads that ran past their bound and handed the async runtime's worker to another
    /// thread.
    pub runtime_hand_offs: u64,
    /// Read requests that returned an error.
    pub read_errors: u64,
    /// Read transactions begun by the readers (reads / read_transactions = reads per snapshot).
    pub read_transactions: u64,
    /// Closures that panicked (caught; the threads survive).
    pub panics: u64,
    /// Requests refused with [`Error::Overloaded`](crate::Error::Overloaded).
    pub overloaded: u64,
    /// Reads whose caller had stopped waiting: skipped if they had not started, interrupted if they were running.
    pub abandoned_reads: u64,
    /// Writes skipped because their caller had stopped waiting before they started: not run, not committed.
    pub abandoned_writes: u64,
    /// Looks that found commits made to the file from outside this database
    /// ([`Builder::notice_external_commits`](crate::Builder::notice_external_commits)).
    pub external_commits: u64,
    /// Savepoints and transactions rolled back: a failing write's savepoint, a failed `COMMIT`, a group SQLite
    /// rolled back by itself, a transaction a closure left open.
    pub rollbacks: u64,
    /// Times a connection waited for a lock held by another connection or process and tried again.
    pub busy_retries: u64,
    /// Times a connection gave up waiting for a lock: the busy timeout ran out (the caller got `SQLITE_BUSY`), or a
    /// write's wait for the write lock did ([`Error::WriteLockHeld`](crate::Error::WriteLockHeld), or
    /// [`Error::Timeout`](crate::Error::Timeout) at its deadline). A
    /// checkpoint that gave up waiting for readers is counted apart, in
    /// [`checkpoint_reader_waits_given_up`](Self::checkpoint_reader_waits_given_up).
    pub busy_timeouts: u64,
    /// Times a `RESTART` or `TRUNCATE` checkpoint stopped waiting for readers to leave the WAL (after the
    /// `reader_wait` of [`Checkpointing::Managed`](crate::Checkpointing::Managed)): no request failed; the
    /// checkpoint is retried later. Many of them mean something else holds long reads (a replicator, a backup).
    pub checkpoint_reader_waits_given_up: u64,
    /// Statements that ran longer than the slow-statement threshold (each logged).
    pub slow_statements: u64,
    /// Checkpoints the writer ran (none under [`Checkpointing::Sqlite`](crate::Checkpointing::Sqlite) or
    /// [`Checkpointing::External`](crate::Checkpointing::External)).
    pub checkpoints: u64,
    /// Checkpoints that could not copy back the whole WAL (or wait for readers to leave it) and will be retried.
    pub checkpoints_incomplete: u64,
    /// Checkpoints that failed with an error.
    pub checkpoint_errors: u64,
    /// Times the WAL grew past [`Builder::wal_size_warning`](crate::Builder::wal_size_warning) (each logged as a
    /// warning): under [`Checkpointing::External`](crate::Checkpointing::External), most likely the tool that
    /// owns checkpoints is not running.
    pub wal_size_warnings: u64,
    /// Another program checkpoints this database — Litestream, whose tables are in it — so the writer runs only
    /// `PASSIVE` checkpoints, which never wait for readers (logged once; `quicklite doctor` advises
    /// [`Checkpointing::External`](crate::Checkpointing::External)).
    pub another_checkpointer: bool,
    /// Frames (pages) in the WAL after the last commit: as SQLite reports them to the WAL hook, or, under
    /// [`Checkpointing::Sqlite`](crate::Checkpointing::Sqlite), which keeps SQLite's own hook, as a no-op checkpoint
    /// reads them after each commit ([`wal_frames`](crate::wal_frames()); unknown, so 0, on a SQLite without the
    /// no-op mode).
    pub wal_frames: u64,
    /// Size of the `-wal` file now, in bytes (0 when there is none).
    pub wal_bytes: u64,
    /// A read replica's last transaction, as its writer last looked (every poll interval); `None` for a database
    /// that is not a replica.
    pub replica_position: Option<Position>,
    /// How long since a read replica last heard from object storage, in whole seconds as Litestream's VFS counts,
    /// at the same look; `None` before its first poll answered, and for a database that is not a replica.
    pub replica_since_poll: Option<Duration>,
    /// WAL frames when each checkpoint ran.
    pub checkpoint_frames: Distribution,
    /// Duration of each checkpoint, in microseconds.
    pub checkpoint_us: Distribution,
    /// Duration of write transactions, from `BEGIN` to the end of `COMMIT`, in microseconds.
    pub write_transaction_us: Distribution,
    /// How long each transaction held across `.await` ([`Database::begin`](crate::Database::begin)) kept the
    /// writer, from its `BEGIN` to its commit or rollback, in microseconds: the database's other writes waited
    /// meanwhile.
    pub held_transaction_us: Distribution,
    /// Duration of read transactions shared by several reads, in microseconds.
    pub read_transaction_us: Distribution,
    /// Writes per committed group.
    pub write_batch: Distribution,
    /// Reads per read transaction.
    pub read_batch: Distribution,
    /// Time write requests waited in the queue, in microseconds.
    pub write_queue_wait_us: Distribution,
    /// Time read requests waited in the queue, in microseconds.
    pub read_queue_wait_us: Distribution,
    /// Duration of `COMMIT`, in microseconds.
    pub commit_us: Distribution,
    /// Uploads object storage confirmed, under [`Acknowledge::Replicated`](crate::Acknowledge::Replicated): each
    /// answered every write committed before it began.
    pub replication_syncs: u64,
    /// Uploads that failed (Litestream out of reach, or object storage down or slower than the upload's timeout);
    /// the writes waiting for them wait on.
    pub replication_sync_failures: u64,
    /// Writes committed here and answered with [`Error::NotReplicated`](crate::Error::NotReplicated) at their
    /// deadline.
    pub writes_not_replicated: u64,
    /// Time committed writes waited for their upload, in microseconds.
    pub replication_wait_us: Distribution,
    /// Write requests queued right now.
    pub write_queue_depth: usize,
    /// Read requests queued right now.
    pub read_queue_depth: usize,
}

impl Metrics {
    pub(crate) fn snapshot(
        &self,
        write_depth: usize,
        read_depth: usize,
        wal_bytes: u64,
    ) -> MetricsSnapshot {
        MetricsSnapshot {
            writes: self.writes.load(Relaxed),
            write_errors: self.write_errors.load(Relaxed),
            commits: self.commits.load(Relaxed),
            failed_commits: self.failed_commits.load(Relaxed),
            rolled_back_groups: self.rolled_back_groups.load(Relaxed),
            held_transactions_expired: self.held_transactions_expired.load(Relaxed),
            reads: self.reads.load(Relaxed),
            inline_reads: self.inline_reads.load(Relaxed),
            inline_reads_on_writer: self.inline_reads_on_writer.load(Relaxed),
            inline_writes: self.inline_writes.load(Relaxed),
            writer_switches: self.writer_switches.load(Relaxed),
            long_reads: self.long_reads.load(Relaxed),
            runtime_hand_offs: self.runtime_hand_offs.load(Relaxed),
            read_errors: self.read_errors.load(Relaxed),
            read_transactions: self.read_transactions.load(Relaxed),
            panics: self.panics.load(Relaxed),
            overloaded: self.overloaded.load(Relaxed),
            abandoned_reads: self.abandoned_reads.load(Relaxed),
            abandoned_writes: self.abandoned_writes.load(Relaxed),
            external_commits: self.external_commits.load(Relaxed),
            rollbacks: self.rollbacks.load(Relaxed),
            busy_retries: self.busy_retries.load(Relaxed),
            busy_timeouts: self.busy_timeouts.load(Relaxed),
            checkpoint_reader_waits_given_up: self.checkpoint_reader_waits_given_up.load(Relaxed),
            slow_statements: self.slow_statements.load(Relaxed),
            checkpoints: self.checkpoints.load(Relaxed),
            checkpoints_incomplete: self.checkpoints_incomplete.load(Relaxed),
            checkpoint_errors: self.checkpoint_errors.load(Relaxed),
            wal_size_warnings: self.wal_size_warnings.load(Relaxed),
            another_checkpointer: self.another_checkpointer.load(Relaxed),
            wal_frames: self.wal_frames.load(Relaxed),
            wal_bytes,
            replica_position: match self.replica_txid.load(Relaxed) {
                0 => None,
                txid => Some(Position::from_txid(txid)),
            },
            replica_since_poll: match (
                self.replica_txid.load(Relaxed),
                self.replica_since_poll_s.load(Relaxed),
            ) {
                (0, _) | (_, u64::MAX) => None,
                (_, secs) => Some(Duration::from_secs(secs)),
            },
            checkpoint_frames: self.checkpoint_frames.snapshot(),
            checkpoint_us: self.checkpoint_us.snapshot(),
            write_transaction_us: self.write_transaction_us.snapshot(),
            held_transaction_us: self.held_transaction_us.snapshot(),
            read_transaction_us: self.read_transaction_us.snapshot(),
            write_batch: self.write_batch.snapshot(),
            read_batch: self.read_batch.snapshot(),
            write_queue_wait_us: self.write_queue_wait_us.snapshot(),
            read_queue_wait_us: self.read_queue_wait_us.snapshot(),
            commit_us: self.commit_us.snapshot(),
            // The gate's, filled in by the handle.
            replication_syncs: 0,
            replication_sync_failures: 0,
            writes_not_replicated: 0,
            replication_wait_us: Distribution::default(),
            write_queue_depth: write_depth,
            read_queue_depth: read_depth,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_are_powers_of_two() {
        let h = Log2Histogram::default();
        for v in [0, 1, 2, 3, 4, 7, 8, 1000] {
            h.record(v);
        }
        let d = h.snapshot();
        assert_eq!(d.count, 8);
        assert_eq!(d.sum, 1025);
        assert_eq!(d.max, 1000);
        // 0 | 1 | 2,3 | 4..7 | 8..15 | ... | 512..1023
        assert_eq!(d.buckets, vec![1, 1, 2, 2, 1, 0, 0, 0, 0, 0, 1]);
        assert!((d.mean() - 1025.0 / 8.0).abs() < 1e-9);
    }

    #[test]
    fn local_histogram_adds_up_to_the_same_distribution() {
        let shared = Log2Histogram::default();
        let mut local = LocalHistogram::default();
        for us in [0, 1, 3, 1000] {
            local.record_duration(Duration::from_micros(us));
        }
        local.drain_into(&shared);
        local.drain_into(&shared);
        local.record_duration(Duration::from_micros(5));
        local.drain_into(&shared);
        let d = shared.snapshot();
        assert_eq!(d.count, 5);
        assert_eq!(d.sum, 1009);
        assert_eq!(d.max, 1000);
        assert_eq!(d.buckets, vec![1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 1]);
    }
}
