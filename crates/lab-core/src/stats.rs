//! Counters and HDR histograms of the client tasks (a block per recording thread), merged into [`OpStats`] at
//! the end of a cell.

use std::cell::RefCell;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use hdrhistogram::Histogram;

use crate::result::OpStats;

/// Distinct error messages kept for the report; more would only repeat the same failure.
pub const MAX_ERROR_SAMPLES: usize = 5;

/// Where a cell's client tasks record their measurements: one block of statistics per OS thread that records
/// (the runtime's worker threads), merged when the window closes.
///
/// A block per task, or a few tasks, kept its histograms and its lock moving between cores with the task: at 64
/// tasks and several hundred thousand operations a second, recording took a tenth of the runtime's CPU, which the
/// lab charged to the fastest approaches most. A thread's own block stays in its core's cache, and its lock is
/// only ever contended by the final merge. It also keeps the lab's own memory flat however many tasks a cell runs
/// (10,000 databases' writers and readers share a handful of blocks).
#[derive(Debug)]
pub(crate) struct StatsSink {
    /// Tells this sink's blocks from another's in a thread's cache.
    id: u64,
    /// Every block handed out, one per recording thread.
    blocks: Mutex<Vec<Arc<Mutex<TaskStats>>>>,
}

impl StatsSink {
    /// An empty sink.
    pub(crate) fn new() -> Arc<Self> {
        static NEXT_ID: AtomicU64 = AtomicU64::new(0);
        Arc::new(Self {
            id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
            blocks: Mutex::new(Vec::new()),
        })
    }

    /// Runs `f` on the calling thread's block of this sink (created and registered on the thread's first use).
    pub(crate) fn with<R>(&self, f: impl FnOnce(&mut TaskStats) -> R) -> R {
        thread_local! {
            /// This thread's block of each live sink it recorded into, with the sink's id.
            static BLOCKS: RefCell<Vec<(u64, Arc<Mutex<TaskStats>>)>> = const { RefCell::new(Vec::new()) };
        }
        BLOCKS.with(|blocks| {
            let mut blocks = blocks.borrow_mut();
            let index = match blocks.iter().position(|(id, _)| *id == self.id) {
                Some(index) => index,
                None => {
                    // Blocks only this thread still holds belong to sinks that are gone.
                    blocks.retain(|(_, block)| Arc::strong_count(block) > 1);
                    let block = Arc::new(Mutex::new(TaskStats::new()));
                    lock(&self.blocks).push(block.clone());
                    blocks.push((self.id, block));
                    blocks.len() - 1
                }
            };
            f(&mut lock(&blocks[index].1))
        })
    }

    /// Every block's measurements, added up.
    pub(crate) fn merged(&self) -> TaskStats {
        let mut total = TaskStats::new();
        for block in lock(&self.blocks).iter() {
            total.merge(&lock(block));
        }
        total
    }
}

/// Locks `mutex`; nothing panics while holding these locks, and a poisoned one still guards consistent numbers.
fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Which histogram an operation belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OpKind {
    /// Point reads and JOIN queries.
    Read,
    /// Inserts, updates and ledger blocks.
    Write,
}

/// Measurements of operations: a thread's block in a cell's statistics sink, or one suite's own (the ORM suite runs one
/// operation at a time). Blocks are merged at the end.
#[derive(Debug, Clone)]
pub struct TaskStats {
    /// Read latencies in nanoseconds.
    reads: Histogram<u64>,
    /// Write latencies in nanoseconds.
    writes: Histogram<u64>,
    /// Latencies of named operations in nanoseconds (the `queue` workload's publish, claim, ack and cycle), in
    /// the order first recorded.
    named: Vec<(&'static str, Histogram<u64>)>,
    /// Operations that returned an error in the measured window.
    errors: u64,
    /// The first distinct error messages.
    samples: Vec<String>,
}

impl Default for TaskStats {
    fn default() -> Self {
        Self::new()
    }
}

impl TaskStats {
    /// Empty statistics.
    pub fn new() -> Self {
        // Three significant figures, auto-resizing: nanosecond precision for microsecond reads without
        // allocating the full range up front for each of (possibly) hundreds of tasks.
        let histogram =
            || Histogram::new(3).expect("3 significant figures is a valid histogram precision");
        Self {
            reads: histogram(),
            writes: histogram(),
            named: Vec::new(),
            errors: 0,
            samples: Vec::new(),
        }
    }

    /// Records a successful operation that took `nanos`.
    pub fn record(&mut self, kind: OpKind, nanos: u64) {
        let histogram = match kind {
            OpKind::Read => &mut self.reads,
            OpKind::Write => &mut self.writes,
        };
        // `record` grows an auto-resizing histogram as needed (`saturating_record` would clamp instead);
        // it can only fail on a value no latency reaches.
        let _ = histogram.record(nanos.max(1));
    }

    /// Records a successful named operation (e.g. the queue's `claim`) that took `nanos`.
    pub fn record_named(&mut self, name: &'static str, nanos: u64) {
        let index = match self.named.iter().position(|(n, _)| *n == name) {
            Some(index) => index,
            None => {
                let histogram = Histogram::new(3)
                    .expect("3 significant figures is a valid histogram precision");
                self.named.push((name, histogram));
                self.named.len() - 1
            }
        };
        let _ = self.named[index].1.record(nanos.max(1));
    }

    /// Throughput and latency of every named operation over `wall_secs`, in the order first recorded.
    pub fn named_stats(&self, wall_secs: f64) -> Vec<(&'static str, OpStats)> {
        self.named
            .iter()
            .map(|(name, h)| (*name, histogram_stats(h, wall_secs)))
            .collect()
    }

    /// Records a failed operation.
    pub fn record_error(&mut self, message: String) {
        self.errors += 1;
        if self.samples.len() < MAX_ERROR_SAMPLES && !self.samples.contains(&message) {
            self.samples.push(message);
        }
    }

    /// Adds `other`'s measurements to these.
    pub fn merge(&mut self, other: &TaskStats) {
        // Both histograms auto-resize, so adding cannot fail for range reasons.
        let _ = self.reads.add(&other.reads);
        let _ = self.writes.add(&other.writes);
        for (name, h) in &other.named {
            match self.named.iter_mut().find(|(n, _)| n == name) {
                Some((_, mine)) => {
                    let _ = mine.add(h);
                }
                None => self.named.push((name, h.clone())),
            }
        }
        self.errors += other.errors;
        for message in &other.samples {
            if self.samples.len() < MAX_ERROR_SAMPLES && !self.samples.contains(message) {
                self.samples.push(message.clone());
            }
        }
    }

    /// Successful operations of `kind`.
    pub fn count(&self, kind: OpKind) -> u64 {
        match kind {
            OpKind::Read => self.reads.len(),
            OpKind::Write => self.writes.len(),
        }
    }

    /// Failed operations.
    pub fn errors(&self) -> u64 {
        self.errors
    }

    /// The first distinct error messages.
    pub fn error_samples(&self) -> &[String] {
        &self.samples
    }

    /// Every successful operation's latency, reads and writes together, in nanoseconds.
    pub(crate) fn all_latencies(&self) -> Histogram<u64> {
        let mut all = self.reads.clone();
        // Both histograms auto-resize, so adding cannot fail for range reasons.
        let _ = all.add(&self.writes);
        all
    }

    /// Throughput and latency of `kind` over `wall_secs`.
    pub fn op_stats(&self, kind: OpKind, wall_secs: f64) -> OpStats {
        let h = match kind {
            OpKind::Read => &self.reads,
            OpKind::Write => &self.writes,
        };
        histogram_stats(h, wall_secs)
    }
}

/// Throughput and latency of one histogram of nanoseconds over `wall_secs`.
fn histogram_stats(h: &Histogram<u64>, wall_secs: f64) -> OpStats {
    if h.is_empty() {
        return OpStats::default();
    }
    let us = |nanos: u64| nanos as f64 / 1_000.0;
    OpStats {
        ops: h.len(),
        ops_per_sec: if wall_secs > 0.0 {
            h.len() as f64 / wall_secs
        } else {
            0.0
        },
        avg_us: h.mean() / 1_000.0,
        p50_us: us(h.value_at_quantile(0.50)),
        p99_us: us(h.value_at_quantile(0.99)),
        max_us: us(h.max()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn merge_adds_counts_and_keeps_distinct_samples() {
        let mut a = TaskStats::new();
        let mut b = TaskStats::new();
        for ns in [1_000, 2_000, 3_000] {
            a.record(OpKind::Read, ns);
        }
        b.record(OpKind::Read, 4_000);
        b.record(OpKind::Write, 10_000);
        a.record_error("busy".into());
        b.record_error("busy".into());
        for i in 0..10 {
            b.record_error(format!("error {i}"));
        }
        a.merge(&b);
        assert_eq!(a.count(OpKind::Read), 4);
        assert_eq!(a.count(OpKind::Write), 1);
        assert_eq!(a.errors(), 12);
        assert_eq!(a.error_samples().len(), MAX_ERROR_SAMPLES);
        assert_eq!(a.error_samples()[0], "busy");

        let reads = a.op_stats(OpKind::Read, 2.0);
        assert_eq!(reads.ops, 4);
        assert_eq!(reads.ops_per_sec, 2.0);
        assert!((reads.avg_us - 2.5).abs() < 0.01, "{reads:?}");
        assert!((reads.max_us - 4.0).abs() < 0.01, "{reads:?}");
        assert_eq!(a.op_stats(OpKind::Write, 0.0).ops_per_sec, 0.0);
    }

    #[test]
    fn named_operations_merge_by_name_in_first_seen_order() {
        let mut a = TaskStats::new();
        let mut b = TaskStats::new();
        a.record_named("publish", 1_000);
        b.record_named("claim", 3_000);
        b.record_named("publish", 3_000);
        a.merge(&b);
        let named = a.named_stats(1.0);
        let names: Vec<&str> = named.iter().map(|(n, _)| *n).collect();
        assert_eq!(names, ["publish", "claim"]);
        assert_eq!(named[0].1.ops, 2);
        assert!((named[0].1.avg_us - 2.0).abs() < 0.01, "{:?}", named[0]);
        assert_eq!(named[1].1.ops, 1);
    }

    #[test]
    fn a_sink_keeps_one_block_per_thread_and_merges_them_all() {
        let sink = StatsSink::new();
        let other = StatsSink::new();
        std::thread::scope(|scope| {
            for thread in 0..3_u64 {
                let (sink, other) = (&sink, &other);
                scope.spawn(move || {
                    for i in 0..100 {
                        sink.with(|s| s.record(OpKind::Read, 1_000 + thread));
                        if i % 10 == 0 {
                            // Recording into another sink in between must not lose or move this one's block.
                            other.with(|s| s.record(OpKind::Write, 5_000));
                        }
                    }
                    sink.with(|s| s.record_error(format!("thread {thread}")));
                });
            }
        });
        assert_eq!(lock(&sink.blocks).len(), 3);
        assert_eq!(lock(&other.blocks).len(), 3);
        let total = sink.merged();
        assert_eq!(total.count(OpKind::Read), 300);
        assert_eq!(total.count(OpKind::Write), 0);
        assert_eq!(total.errors(), 3);
        assert_eq!(other.merged().count(OpKind::Write), 30);
    }

    #[test]
    fn empty_stats_are_zero() {
        assert_eq!(
            TaskStats::new().op_stats(OpKind::Read, 1.0),
            OpStats::default()
        );
    }
}
