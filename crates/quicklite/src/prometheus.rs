//! Prometheus exposition of [`MetricsSnapshot`]s, through the `prometheus-client` crate (OpenMetrics text, which
//! Prometheus scrapes). Enabled by the `prometheus` feature.
//!
//! Every series carries a `database` label, so one scrape can cover many databases. Durations are in seconds and
//! sizes in bytes, as Prometheus' naming conventions ask; counters end in `_total`.
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> quicklite::Result<()> {
//! # let dir = tempfile::tempdir().unwrap();
//! let db = quicklite::Database::open(dir.path().join("app.db")).await?;
//! db.execute_batch("CREATE TABLE t (x)").await?;
//! let text = quicklite::prometheus::render(&[("app", &db.metrics())]);
//! assert!(text.contains("quicklite_commits_total{database=\"app\"} 1"));
//! # Ok(()) }
//! ```

use std::fmt;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, NoLabelSet};
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::{Registry as PromRegistry, Unit};

use crate::{Database, Distribution, MetricsSnapshot, Registry};

/// Renders the metrics of `databases` (each a `database` label value and a snapshot) as OpenMetrics text,
/// ending with `# EOF`; serve it with the content type
/// `application/openmetrics-text; version=1.0.0; charset=utf-8`.
pub fn render(databases: &[(&str, &MetricsSnapshot)]) -> String {
    let snapshots = databases
        .iter()
        .map(|(name, s)| (name.to_string(), (*s).clone()))
        .collect();
    let mut registry = PromRegistry::default();
    registry.register_collector(Box::new(Snapshots(snapshots)));
    let mut out = String::new();
    prometheus_client::encoding::text::encode(&mut out, &registry)
        .expect("writing to a String cannot fail");
    out
}

/// Renders a [`Registry`]: its own figures (`quicklite_registry_*`: threads, write threads added, retired and at
/// their peak, open and known databases, opens, evictions, idle closes, queued tasks) and every known database's metrics, labelled with its name.
pub fn render_registry(registry: &Registry) -> String {
    let mut out = String::new();
    let mut prom = PromRegistry::default();
    prom.register_collector(Box::new(RegistryCollector(registry.clone())));
    prometheus_client::encoding::text::encode(&mut out, &prom)
        .expect("writing to a String cannot fail");
    out
}

/// A `prometheus-client` collector for a [`Registry`] (see [`render_registry`]).
#[derive(Debug, Clone)]
pub struct RegistryCollector(pub Registry);

impl Collector for RegistryCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> fmt::Result {
        let m = self.0.metrics();
        let gauges: [(&str, &str, u64); 8] = [
            (
                "quicklite_registry_threads",
                "Threads of the registry's pool when it started.",
                m.threads as u64,
            ),
            (
                "quicklite_registry_write_threads",
                "Write threads now, those added while writes waited behind blocked ones included.",
                m.write_threads as u64,
            ),
            (
                "quicklite_registry_write_threads_peak",
                "The most write threads at once.",
                m.write_threads_peak as u64,
            ),
            (
                "quicklite_registry_open_databases",
                "Databases with open connections.",
                m.open_databases as u64,
            ),
            (
                "quicklite_registry_known_databases",
                "Databases the registry holds a handle to.",
                m.known_databases as u64,
            ),
            (
                "quicklite_registry_max_open",
                "Cap on open databases.",
                m.max_open as u64,
            ),
            (
                "quicklite_registry_reader_connections",
                "Reader connections open (the other databases read on their writer's connection).",
                m.reader_connections as u64,
            ),
            (
                "quicklite_registry_queued_tasks",
                "Tasks waiting for a pool thread, or for room to open their database.",
                m.queued_tasks as u64,
            ),
        ];
        for (name, help, value) in gauges {
            encoder
                .encode_descriptor(name, help, None, MetricType::Gauge)?
                .encode_gauge(&value)?;
        }
        let counters: [(&str, &str, u64); 5] = [
            (
                "quicklite_registry_write_threads_added",
                "Write threads added while writes waited behind blocked ones.",
                m.write_threads_added,
            ),
            (
                "quicklite_registry_write_threads_retired",
                "Added write threads retired once no longer needed.",
                m.write_threads_retired,
            ),
            (
                "quicklite_registry_opens",
                "Times a database's connections were opened.",
                m.opens,
            ),
            (
                "quicklite_registry_evictions",
                "Databases closed because the open cap was passed.",
                m.evictions,
            ),
            (
                "quicklite_registry_idle_closes",
                "Databases closed because they were idle.",
                m.idle_closes,
            ),
        ];
        for (name, help, value) in counters {
            encoder
                .encode_descriptor(name, help, None, MetricType::Counter)?
                .encode_counter::<NoLabelSet, _, u64>(&value, None)?;
        }
        encode(encoder, &self.0.database_metrics())
    }
}

/// A `prometheus-client` collector that snapshots databases at every scrape, for applications that already
/// keep a `prometheus_client::registry::Registry`.
#[derive(Debug, Clone, Default)]
pub struct DatabaseCollector {
    databases: Vec<(String, Database)>,
}

impl DatabaseCollector {
    /// A collector of no database yet.
    pub fn new() -> DatabaseCollector {
        DatabaseCollector::default()
    }

    /// Adds `db`, reported with the label `database="<name>"`.
    pub fn with(mut self, name: impl Into<String>, db: Database) -> DatabaseCollector {
        self.databases.push((name.into(), db));
        self
    }
}

impl Collector for DatabaseCollector {
    fn encode(&self, encoder: DescriptorEncoder) -> fmt::Result {
        let snapshots: Vec<(String, MetricsSnapshot)> = self
            .databases
            .iter()
            .map(|(name, db)| (name.clone(), db.metrics()))
            .collect();
        encode(encoder, &snapshots)
    }
}

/// Fixed snapshots, for [`render`].
#[derive(Debug)]
struct Snapshots(Vec<(String, MetricsSnapshot)>);

impl Collector for Snapshots {
    fn encode(&self, encoder: DescriptorEncoder) -> fmt::Result {
        encode(encoder, &self.0)
    }
}

type Dbs<'a> = &'a [(String, MetricsSnapshot)];

/// A counter: name (without `_total`), help, value.
type CounterSeries = (&'static str, &'static str, fn(&MetricsSnapshot) -> u64);
/// A gauge: name, help, unit, value.
/// A gauge only some databases have: its name, help, unit, and each database's value, if it has one.
type ReplicaGauge = (
    &'static str,
    &'static str,
    Option<Unit>,
    fn(&MetricsSnapshot) -> Option<u64>,
);

type GaugeSeries = (
    &'static str,
    &'static str,
    Option<Unit>,
    fn(&MetricsSnapshot) -> u64,
);
/// A histogram: name, help, unit, scale from the recorded values to the unit, distribution.
type HistogramSeries = (
    &'static str,
    &'static str,
    Option<Unit>,
    f64,
    fn(&MetricsSnapshot) -> &Distribution,
);

fn encode(mut e: DescriptorEncoder, dbs: Dbs<'_>) -> fmt::Result {
    let counters: [CounterSeries; 32] = [
        ("quicklite_writes", "Write requests run.", |s| s.writes),
        (
            "quicklite_write_errors",
            "Write requests that returned an error.",
            |s| s.write_errors,
        ),
        (
            "quicklite_commits",
            "Transactions committed by the writer.",
            |s| s.commits,
        ),
        (
            "quicklite_failed_commits",
            "COMMITs that failed (the whole group got the error).",
            |s| s.failed_commits,
        ),
        (
            "quicklite_rolled_back_groups",
            "Write groups SQLite rolled back by itself.",
            |s| s.rolled_back_groups,
        ),
        (
            "quicklite_held_transactions_expired",
            "Transactions held across awaits that ran past their limit and were rolled back.",
            |s| s.held_transactions_expired,
        ),
        (
            "quicklite_rollbacks",
            "Savepoints and transactions rolled back.",
            |s| s.rollbacks,
        ),
        ("quicklite_reads", "Read requests served.", |s| s.reads),
        (
            "quicklite_read_errors",
            "Read requests that returned an error.",
            |s| s.read_errors,
        ),
        (
            "quicklite_read_transactions",
            "Read transactions begun by the readers.",
            |s| s.read_transactions,
        ),
        (
            "quicklite_panics",
            "Closures that panicked (caught).",
            |s| s.panics,
        ),
        (
            "quicklite_overloaded",
            "Requests refused because a queue was full.",
            |s| s.overloaded,
        ),
        (
            "quicklite_inline_reads",
            "Reads run on their callers' threads (counted in quicklite_reads too).",
            |s| s.inline_reads,
        ),
        (
            "quicklite_inline_reads_on_writer",
            "Reads run on callers' threads on the writer's connection, while it waited for writes (counted in \
             quicklite_inline_reads too).",
            |s| s.inline_reads_on_writer,
        ),
        (
            "quicklite_inline_writes",
            "Writes run on their callers' threads, on the writer's connection while it waited for work (counted in \
             quicklite_writes too).",
            |s| s.inline_writes,
        ),
        (
            "quicklite_replication_syncs",
            "Uploads object storage confirmed, each answering the writes committed before it began.",
            |s| s.replication_syncs,
        ),
        (
            "quicklite_replication_sync_failures",
            "Uploads that failed; the writes waiting for them wait on.",
            |s| s.replication_sync_failures,
        ),
        (
            "quicklite_writes_not_replicated",
            "Writes committed here and answered NotReplicated at their deadline.",
            |s| s.writes_not_replicated,
        ),
        (
            "quicklite_writer_switches",
            "Times the writer went on with its second connection because a read kept its lent one past the wait.",
            |s| s.writer_switches,
        ),
        (
            "quicklite_long_reads",
            "Reads that ran past their bound and took one of the process's turns for long reads.",
            |s| s.long_reads,
        ),
        (
            "quicklite_runtime_hand_offs",
            "Reads on callers' threads that ran past their bound and handed the async runtime's worker to another \
             thread.",
            |s| s.runtime_hand_offs,
        ),
        (
            "quicklite_abandoned_reads",
            "Reads whose caller had stopped waiting: skipped before they started, or interrupted.",
            |s| s.abandoned_reads,
        ),
        (
            "quicklite_abandoned_writes",
            "Writes skipped because their caller had stopped waiting before they started.",
            |s| s.abandoned_writes,
        ),
        (
            "quicklite_external_commits",
            "Looks that found commits made to the file from outside this database.",
            |s| s.external_commits,
        ),
        (
            "quicklite_busy_retries",
            "Waits for a lock held elsewhere, retried.",
            |s| s.busy_retries,
        ),
        (
            "quicklite_busy_timeouts",
            "Waits for a lock that ran out (SQLITE_BUSY).",
            |s| s.busy_timeouts,
        ),
        (
            "quicklite_checkpoint_reader_waits_given_up",
            "RESTART or TRUNCATE checkpoints that stopped waiting for readers (retried later; no request failed).",
            |s| s.checkpoint_reader_waits_given_up,
        ),
        (
            "quicklite_slow_statements",
            "Statements slower than the slow-statement threshold.",
            |s| s.slow_statements,
        ),
        (
            "quicklite_checkpoints",
            "Checkpoints run by the writer.",
            |s| s.checkpoints,
        ),
        (
            "quicklite_checkpoints_incomplete",
            "Checkpoints that could not finish (retried later).",
            |s| s.checkpoints_incomplete,
        ),
        (
            "quicklite_checkpoint_errors",
            "Checkpoints that failed.",
            |s| s.checkpoint_errors,
        ),
        (
            "quicklite_wal_size_warnings",
            "Times the WAL grew past the warning size (the tool that owns checkpoints may not be running).",
            |s| s.wal_size_warnings,
        ),
    ];
    for (name, help, get) in counters {
        let mut family = e.encode_descriptor(name, help, None, MetricType::Counter)?;
        for (db, s) in dbs {
            family
                .encode_family(&[("database", db.as_str())])?
                .encode_counter::<NoLabelSet, _, u64>(&get(s), None)?;
        }
    }

    let gauges: [GaugeSeries; 5] = [
        (
            "quicklite_write_queue_depth",
            "Write requests queued.",
            None,
            |s| s.write_queue_depth as u64,
        ),
        (
            "quicklite_read_queue_depth",
            "Read requests queued.",
            None,
            |s| s.read_queue_depth as u64,
        ),
        (
            "quicklite_wal_frames",
            "Frames in the WAL after the last commit.",
            None,
            |s| s.wal_frames,
        ),
        (
            "quicklite_wal_size",
            "Size of the -wal file.",
            Some(Unit::Bytes),
            |s| s.wal_bytes,
        ),
        (
            "quicklite_another_checkpointer",
            "1 when another program (Litestream) checkpoints the database and the writer runs only PASSIVE ones.",
            None,
            |s| u64::from(s.another_checkpointer),
        ),
    ];
    for (name, help, unit, get) in gauges {
        let mut family = e.encode_descriptor(name, help, unit.as_ref(), MetricType::Gauge)?;
        for (db, s) in dbs {
            family
                .encode_family(&[("database", db.as_str())])?
                .encode_gauge(&get(s))?;
        }
    }
    // Read replicas only: the position of each, and how long since it heard from object storage (nothing for a
    // replica that has not yet).
    let replica_gauges: [ReplicaGauge; 2] = [
        (
            "quicklite_replica_txid",
            "A read replica's last transaction (Litestream's TXID), as its writer last looked.",
            None,
            |s| s.replica_position.map(|p| p.txid()),
        ),
        (
            "quicklite_replica_since_poll",
            "Time since a read replica last heard from object storage, in whole seconds as Litestream's VFS counts.",
            Some(Unit::Seconds),
            |s| s.replica_since_poll.map(|d| d.as_secs()),
        ),
    ];
    for (name, help, unit, get) in replica_gauges {
        let mut family = e.encode_descriptor(name, help, unit.as_ref(), MetricType::Gauge)?;
        for (db, s) in dbs {
            if let Some(value) = get(s) {
                family
                    .encode_family(&[("database", db.as_str())])?
                    .encode_gauge(&value)?;
            }
        }
    }

    // Microsecond distributions are exposed in seconds; sizes as they are.
    const MICROS: f64 = 1e-6;
    let histograms: [HistogramSeries; 11] = [
        (
            "quicklite_write_batch_size",
            "Writes per committed group.",
            None,
            1.0,
            |s| &s.write_batch,
        ),
        (
            "quicklite_read_batch_size",
            "Reads per read transaction.",
            None,
            1.0,
            |s| &s.read_batch,
        ),
        (
            "quicklite_write_queue_wait",
            "Time write requests waited in the queue.",
            Some(Unit::Seconds),
            MICROS,
            |s| &s.write_queue_wait_us,
        ),
        (
            "quicklite_read_queue_wait",
            "Time read requests waited in the queue.",
            Some(Unit::Seconds),
            MICROS,
            |s| &s.read_queue_wait_us,
        ),
        (
            "quicklite_replication_wait",
            "Time committed writes waited for their upload to object storage.",
            Some(Unit::Seconds),
            MICROS,
            |s| &s.replication_wait_us,
        ),
        (
            "quicklite_commit_duration",
            "Duration of COMMIT.",
            Some(Unit::Seconds),
            MICROS,
            |s| &s.commit_us,
        ),
        (
            "quicklite_write_transaction_duration",
            "Duration of write transactions.",
            Some(Unit::Seconds),
            MICROS,
            |s| &s.write_transaction_us,
        ),
        (
            "quicklite_held_transaction_duration",
            "How long transactions held across awaits kept the writer.",
            Some(Unit::Seconds),
            MICROS,
            |s| &s.held_transaction_us,
        ),
        (
            "quicklite_read_transaction_duration",
            "Duration of shared read transactions.",
            Some(Unit::Seconds),
            MICROS,
            |s| &s.read_transaction_us,
        ),
        (
            "quicklite_checkpoint_duration",
            "Duration of checkpoints.",
            Some(Unit::Seconds),
            MICROS,
            |s| &s.checkpoint_us,
        ),
        (
            "quicklite_checkpoint_wal_frames",
            "WAL frames when each checkpoint ran.",
            None,
            1.0,
            |s| &s.checkpoint_frames,
        ),
    ];
    for (name, help, unit, scale, get) in histograms {
        let mut family = e.encode_descriptor(name, help, unit.as_ref(), MetricType::Histogram)?;
        for (db, s) in dbs {
            let d = get(s);
            family
                .encode_family(&[("database", db.as_str())])?
                .encode_histogram::<NoLabelSet>(
                    d.sum as f64 * scale,
                    d.count,
                    &buckets(d, scale),
                    None,
                )?;
        }
    }
    Ok(())
}

/// The distribution's power-of-two buckets as Prometheus buckets (upper bound, count in this bucket), ending with
/// `+Inf`. Values are integers, so bucket `i` (values in `[2^(i-1), 2^i)`) has the inclusive bound `2^i - 1`.
fn buckets(d: &Distribution, scale: f64) -> Vec<(f64, u64)> {
    let mut out: Vec<(f64, u64)> = d
        .buckets
        .iter()
        .enumerate()
        .map(|(i, &count)| ((((1_u64 << i) - 1) as f64) * scale, count))
        .collect();
    out.push((f64::INFINITY, 0));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_are_inclusive_upper_bounds() {
        let d = Distribution {
            count: 4,
            sum: 1 + 2 + 3 + 9,
            max: 9,
            buckets: vec![0, 1, 2, 0, 0, 1],
        };
        assert_eq!(
            buckets(&d, 1.0),
            vec![
                (0.0, 0),
                (1.0, 1),
                (3.0, 2),
                (7.0, 0),
                (15.0, 0),
                (31.0, 1),
                (f64::INFINITY, 0)
            ]
        );
    }

    #[test]
    fn renders_labelled_counters_gauges_and_histograms() {
        let mut s = MetricsSnapshot {
            commits: 3,
            wal_bytes: 4096,
            ..MetricsSnapshot::default()
        };
        s.write_queue_wait_us = Distribution {
            count: 2,
            sum: 3,
            max: 2,
            buckets: vec![0, 1, 1],
        };
        let text = render(&[("a\"b", &s)]);
        assert!(
            text.contains("quicklite_commits_total{database=\"a\\\"b\"} 3"),
            "{text}"
        );
        assert!(
            text.contains("quicklite_wal_size_bytes{database=\"a\\\"b\"} 4096"),
            "{text}"
        );
        assert!(
            text.contains(
                "quicklite_write_queue_wait_seconds_bucket{le=\"0.000003\",database=\"a\\\"b\"} 2"
            ) || text.contains(
                "quicklite_write_queue_wait_seconds_bucket{database=\"a\\\"b\",le=\"0.000003\"} 2"
            ),
            "{text}"
        );
        assert!(text.ends_with("# EOF\n"), "{text}");
    }
}
