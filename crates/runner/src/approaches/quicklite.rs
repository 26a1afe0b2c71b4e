//! `quicklite`: the project's library, opened with the cell's profile, PRAGMAs and open flags.
//!
//! Single-database workloads open one [`Database`] (a writer thread with group commit, reader threads with read
//! batching). `multi-db` serves its databases through one [`Registry`] over the cell's directory — every
//! database an actor on one bounded pool of threads (the library's default size, twice the cores), whatever
//! the number of databases — which is how the library is meant to hold many databases (seed 004).

use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};
use quicklite::{Builder, Database, Registry};
use quicklite_lab_core::{
    Approach, ApproachName, Block, Bound, Cell, Environment, Knobs, NewItem, NewJob, OrmOp,
    Profile, REPORTED_PRAGMAS, Workload, await_think, process, sql,
};

use crate::sqlite::report::crate_versions;
use crate::sqlite::{connect, ops};

/// File descriptors an open registry database holds: its writer connection's database and WAL files, and the
/// shared-memory file. Reads run on the writer's connection unless a write is queued or running.
const FILES_PER_DATABASE: u64 = 3;

/// File descriptors of a reader connection (its database and WAL files), opened by a database read while its
/// writer is busy.
const FILES_PER_READER: u64 = 2;

/// Databases open at once when the open-file limit cannot hold every one: the registry's default. Past the
/// limit, databases are closed and reopened in turn however many stay open (the `multi-db` readers pick a database
/// at random, the writers come round every one in turn), and each open costs more the more files the process has
/// open: SQLite's unix VFS walks a list of every open file (`findReusableFd`, `findInodeInfo`) on every open.
/// Measured at 10,000 databases, 20,000 descriptors, 16 readers and 1,000 paced writes a second: 6,410 open
/// (every descriptor used) completed 0–6% of the writes, 4,000 41%, 1,500 96%, 400 100% with 1.58k reads/s,
/// 128 100% with 2.05k reads/s.
const OPEN_WHEN_CYCLING: u64 = 128;

/// File descriptors left for everything else: standard streams, the runtime, SQLite's temporary files, the
/// registry's `PASSIVE` checkpoints (two each, at most two per CPU at once).
const RESERVED_FILES: u64 = 256;

/// Databases whose `Registry::get` (which opens them) runs at once while the approach is set up.
const OPENING_AT_ONCE: usize = 64;

/// The cell's databases, in database order, and the registry serving them (`multi-db`).
pub struct Quicklite {
    /// Indexed by database.
    dbs: Vec<Database>,
    /// The registry behind `dbs` for `multi-db`; `None` for single-database workloads.
    registry: Option<Registry>,
    /// Which of quicklite's forms runs `held-tx`'s transaction: `begin()`, or one `write` closure
    /// (`quicklite-closure`).
    variant: Variant,
}

/// Process set-up through the library, as an application would do it (instead of the runner's own
/// `sqlite3_config` call): must run before the first connection in the process. Returns the text for
/// `Environment::memstatus`.
pub fn configure(knobs: &Knobs) -> String {
    let report = quicklite::setup::configure(quicklite::setup::Setup {
        memory_statistics: knobs.memstatus,
    });
    format!(
        "{} (requested {} through quicklite::setup::configure: {})",
        if report.memory_statistics_off {
            "off"
        } else {
            "on"
        },
        if knobs.memstatus { "on" } else { "off" },
        report.detail
    )
}

/// The timeouts of the `quicklite-timeouts` approach: long enough that no request of a cell meets them, so the
/// cell measures what keeping them costs.
const TIMEOUT: std::time::Duration = std::time::Duration::from_secs(60);

/// The nice steps of the `quicklite-writes-first` approach's read threads below its write threads.
const WRITES_FIRST_NICE: u8 = 3;

/// quicklite as the library's defaults have it, or one of its variants (measured only when named).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Variant {
    Defaults,
    /// `quicklite-timeouts`: a timeout on every read and write, [`TIMEOUT`].
    Timeouts,
    /// `quicklite-writes-first`: the read threads [`WRITES_FIRST_NICE`] steps below the write threads.
    WritesFirst,
    /// `quicklite-no-inline`: every read handed to the reader threads and every write to the writer thread
    /// (`Builder::inline_reads(false)`, which takes writes off their callers' threads too), the paths as they were
    /// before requests ran on their callers' threads.
    NoInline,
    /// `quicklite-subscribed` and `quicklite-subscribed-100`: one or a hundred subscribers to the database's change
    /// notices, each taking every notice as it comes, for what notifications cost the writes.
    Subscribed(usize),
    /// `quicklite-closure`: `held-tx`'s transaction as one `write` closure, its think a blocking sleep inside.
    Closure,
    /// `quicklite-feed`: the change feed on the tables the workload writes ([`feed_tables`]).
    Feed,
}

impl Variant {
    fn of(approach: ApproachName) -> Variant {
        match approach {
            ApproachName::QuickliteTimeouts => Variant::Timeouts,
            ApproachName::QuickliteWritesFirst => Variant::WritesFirst,
            ApproachName::QuickliteNoInline => Variant::NoInline,
            ApproachName::QuickliteSubscribed => Variant::Subscribed(1),
            ApproachName::QuickliteSubscribed100 => Variant::Subscribed(100),
            ApproachName::QuickliteClosure => Variant::Closure,
            ApproachName::QuickliteFeed => Variant::Feed,
            _ => Variant::Defaults,
        }
    }

    /// Subscribers to the change notices.
    fn subscribers(self) -> usize {
        match self {
            Variant::Subscribed(n) => n,
            _ => 0,
        }
    }

    /// The read threads' nice steps below the write threads.
    fn read_thread_nice(self) -> u8 {
        if self == Variant::WritesFirst {
            WRITES_FIRST_NICE
        } else {
            0
        }
    }
}

/// `builder` with the cell's profile, open flags and PRAGMAs, and the variant's settings.
fn with_knobs(builder: Builder, knobs: &Knobs, variant: Variant) -> Builder {
    let mut builder = builder
        .profile(match knobs.profile {
            Profile::Server => quicklite::Profile::Server,
            Profile::SqliteDefault => quicklite::Profile::SqliteDefault,
        })
        .open_flags(connect::open_flags(knobs.mutex));
    // The library's profile has the same values; setting them explicitly keeps every approach on exactly the
    // cell's PRAGMAs (and applies the `synchronous` override).
    for pragma in knobs.connection_pragmas() {
        builder = builder.pragma(pragma.name, pragma.value.to_string());
    }
    #[cfg(feature = "sqlcipher")]
    if let Some(key) = connect::KEY {
        builder = builder.key(key);
    }
    if variant == Variant::Timeouts {
        builder = builder
            .read_timeout(Some(TIMEOUT))
            .write_timeout(Some(TIMEOUT));
    }
    builder
        .read_thread_nice(variant.read_thread_nice())
        .inline_reads(variant != Variant::NoInline)
}

/// The tables `workload` writes, on which `quicklite-feed` records every change: `items`, and `held-tx`'s log.
fn feed_tables(workload: Workload) -> &'static [&'static str] {
    if workload == Workload::HeldTx {
        &["items", "item_log"]
    } else {
        &["items"]
    }
}

/// The registry's caps under the open-file limit: `(max_open, max_reader_connections)`. Every database open if
/// the limit allows, with a reader connection each if it allows that too, else with the files left over as the
/// budget of reader connections; otherwise [`OPEN_WHEN_CYCLING`] open databases (fewer if the limit is tight),
/// each allowed a reader connection if the limit allows.
pub fn caps(databases: usize, open_files_limit: u64) -> (usize, usize) {
    let usable = open_files_limit.saturating_sub(RESERVED_FILES);
    let all = databases as u64;
    let max_open = if all.saturating_mul(FILES_PER_DATABASE) <= usable {
        all
    } else {
        OPEN_WHEN_CYCLING.min(usable / FILES_PER_DATABASE)
    }
    .max(1);
    let readers =
        max_open.min(usable.saturating_sub(max_open * FILES_PER_DATABASE) / FILES_PER_READER);
    let size = |n: u64| usize::try_from(n).unwrap_or(usize::MAX);
    (size(max_open), size(readers))
}

impl Quicklite {
    /// Opens every database with the cell's knobs and `approach`'s settings (quicklite or one of its variants), and
    /// describes database 0 into `env`.
    pub async fn open(
        approach: ApproachName,
        cell: &Cell,
        workload: Workload,
        knobs: &Knobs,
        env: &mut Environment,
    ) -> Result<Self> {
        let variant = Variant::of(approach);
        // The variants for one question run only its workloads (`ApproachName::implements`); the lab never sends
        // them others, and a cell sent by hand is refused rather than measured as plain quicklite.
        if !approach.implements(workload) {
            anyhow::bail!("unsupported: `{approach}` does not run the {workload} workload");
        }
        let approach = if workload == Workload::MultiDb {
            Self::open_registry(cell, workload, knobs, variant).await?
        } else {
            let path = workload.database_path(cell, 0);
            let mut builder = with_knobs(Database::builder(&path), knobs, variant);
            if variant == Variant::Feed {
                builder = builder.change_feed(feed_tables(workload).iter().copied());
            }
            let database = builder
                .open()
                .await
                .with_context(|| format!("cannot open {} with quicklite", path.display()))?;
            for _ in 0..variant.subscribers() {
                // Takes every notice until the database closes.
                let mut changes = database.subscribe();
                tokio::spawn(async move { while changes.next().await.is_some() {} });
            }
            Self {
                dbs: vec![database],
                registry: None,
                variant,
            }
        };
        let info = quicklite::setup::sqlite_info()
            .context("cannot read SQLite's version and compile options")?;
        env.sqlite_version = info.version;
        env.compile_options = info.compile_options;
        let pragmas = approach.db(0)?.pragmas();
        env.pragmas = REPORTED_PRAGMAS
            .iter()
            .filter_map(|name| pragmas.get(*name).map(|v| ((*name).to_string(), v.clone())))
            .collect();
        env.crate_versions = crate_versions();
        Ok(approach)
    }

    /// One registry over the cell's directory, with the library's default pool size; `get` on every database
    /// (the lab's file names are registry names), a few at a time so every pool thread opens some.
    async fn open_registry(
        cell: &Cell,
        workload: Workload,
        knobs: &Knobs,
        variant: Variant,
    ) -> Result<Self> {
        let databases = workload.databases(cell);
        let limit = process::open_files_limits().map_or(1024, |(soft, _)| soft);
        let knobs = knobs.clone();
        let (max_open, max_readers) = caps(databases, limit);
        let registry = Registry::builder(&cell.dir)
            .max_open(max_open)
            .max_reader_connections(max_readers)
            .read_thread_nice(variant.read_thread_nice())
            .configure(move |builder| with_knobs(builder, &knobs, variant))
            .open()
            .await
            .with_context(|| format!("cannot open a quicklite registry on {}", cell.dir))?;
        let mut dbs = Vec::with_capacity(databases);
        for first in (0..databases).step_by(OPENING_AT_ONCE) {
            let opening: Vec<_> = (first..databases.min(first + OPENING_AT_ONCE))
                .map(|db| {
                    let registry = registry.clone();
                    let name = workload.database_name(db);
                    tokio::spawn(async move {
                        registry.get(&name).await.with_context(|| {
                            format!("cannot open database `{name}` in quicklite's registry")
                        })
                    })
                })
                .collect();
            for task in opening {
                dbs.push(task.await.context("opening a database panicked")??);
            }
        }
        let metrics = registry.metrics();
        eprintln!(
            "quicklite registry: {} databases on {} pool threads, at most {} open (open-file limit {limit})",
            metrics.known_databases, metrics.threads, metrics.max_open
        );
        Ok(Self {
            dbs,
            registry: Some(registry),
            variant,
        })
    }

    fn db(&self, db: usize) -> Result<&Database> {
        self.dbs
            .get(db)
            .with_context(|| format!("no database {db}"))
    }

    /// Logs the library's counters on standard error, for whoever reads the runner's log: a single database's
    /// batches, or the registry's databases.
    pub fn log_metrics(self: &Arc<Self>) {
        match (&self.registry, self.dbs.first()) {
            (Some(registry), _) => {
                let m = registry.metrics();
                eprintln!(
                    "quicklite registry at the end: {} open of {} (cap {}), {} reader connections, {} opens, \
                     {} evictions, {} idle closes, {} tasks queued; write threads {} (peak {}, {} added, {} \
                     retired)",
                    m.open_databases,
                    m.known_databases,
                    m.max_open,
                    m.reader_connections,
                    m.opens,
                    m.evictions,
                    m.idle_closes,
                    m.queued_tasks,
                    m.write_threads,
                    m.write_threads_peak,
                    m.write_threads_added,
                    m.write_threads_retired,
                );
                let (mut queue_wait, mut transaction, mut commit) = (0.0, 0.0, 0.0);
                let mut writes = 0u64;
                for db in &self.dbs {
                    let d = db.metrics();
                    queue_wait += d.write_queue_wait_us.sum as f64;
                    transaction += d.write_transaction_us.sum as f64;
                    commit += d.commit_us.sum as f64;
                    writes += d.write_queue_wait_us.count;
                }
                let per_write = |sum: f64| sum / writes.max(1) as f64;
                eprintln!(
                    "quicklite registry's writes (warm-up included): {writes}, mean queue wait {:.0} µs, \
                     transaction {:.0} µs, commit {:.0} µs",
                    per_write(queue_wait),
                    per_write(transaction),
                    per_write(commit),
                );
            }
            (None, Some(db)) => {
                let m = db.metrics();
                eprintln!(
                    "quicklite at the end (warm-up included): {} reads in {} read transactions (batch mean \
                     {:.1}, max {}; {} on callers' threads, {} long, {} handing the runtime's worker away), {} \
                     writes in {} commits (group mean {:.1}, max {}; {} on callers' threads; the writer on its second \
                     connection {} times)",
                    m.reads,
                    m.read_transactions,
                    m.read_batch.mean(),
                    m.read_batch.max,
                    m.inline_reads,
                    m.long_reads,
                    m.runtime_hand_offs,
                    m.writes,
                    m.commits,
                    m.write_batch.mean(),
                    m.write_batch.max,
                    m.inline_writes,
                    m.writer_switches,
                );
                eprintln!(
                    "quicklite's writer (warm-up included): longest wait in the queue {} µs, longest transaction {} \
                     µs; {} checkpoints, longest {} µs, {} gave up waiting for readers",
                    m.write_queue_wait_us.max,
                    m.write_transaction_us.max,
                    m.checkpoints,
                    m.checkpoint_us.max,
                    m.checkpoint_reader_waits_given_up,
                );
            }
            (None, None) => {}
        }
    }
}

impl Approach for Quicklite {
    // A one-statement read goes through `query_row`, quicklite's API for it (as one-statement writes go through
    // `execute`): alone in the queue, it runs without a read transaction around it.
    async fn point_read(&self, id: i64) -> Result<()> {
        let (_id, _name, _value, _payload): (i64, String, i64, String) = self
            .db(0)?
            .query_row(sql::POINT_READ, [id], |r| {
                Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?))
            })
            .await?;
        Ok(())
    }

    // The workload's reads go through `query_row` as the point reads do: one SQL text and one closure, so one call
    // site whatever the count, as a service's query whose cost follows its parameters.
    async fn counted_read(&self, id: i64, count: i64) -> Result<()> {
        let _value: i64 = self
            .db(0)?
            .query_row(sql::COUNTED_READ, (id, count), |r| r.get(0))
            .await?;
        Ok(())
    }

    // A `read` closure of its own: another call site, so the calibration's long runs are not the workload site's.
    async fn time_counted_read(&self, id: i64, count: i64) -> Result<Duration> {
        Ok(self
            .db(0)?
            .read(move |c| ops::time_counted_read(c, id, count))
            .await?)
    }

    // One-statement writes (insert, update, publish, ack) go through `execute`, quicklite's API for them: a
    // statement is atomic by itself, so it joins the group commit without the savepoint a `write` closure gets.
    async fn insert(&self, item: NewItem) -> Result<()> {
        self.db(0)?
            .execute(sql::INSERT_ITEM, (item.name, item.value, item.payload))
            .await?;
        Ok(())
    }

    async fn update(&self, id: i64, delta: i64) -> Result<()> {
        self.db(0)?.execute(sql::UPDATE_ITEM, (id, delta)).await?;
        Ok(())
    }

    async fn join_read(&self, db: usize, account: i64) -> Result<()> {
        Ok(self
            .db(db)?
            .read(move |c| ops::join_read(c, account))
            .await?)
    }

    async fn paced_write(&self, db: usize, block: Block, delay: Duration) -> Result<()> {
        // The library's write transaction replaces the BEGIN/COMMIT of the other approaches; the delay (blocking
        // write mode) is spent inside it, on the writer's thread — a pool thread for a registry — like theirs.
        Ok(self
            .db(db)?
            .write(move |c| ops::append_block(c, &block, delay))
            .await?)
    }

    async fn insert_batch(&self, items: Vec<NewItem>, think: Duration) -> Result<()> {
        // Inside the writer's transaction, as multi-db's blocks: group commit may share one commit between many
        // tasks' batches, while a batch's think time holds the writer for everyone.
        Ok(self
            .db(0)?
            .write(move |c| ops::insert_rows(c, &items, think))
            .await?)
    }

    async fn count_items(&self) -> Result<u64> {
        Ok(self.db(0)?.read(ops::count_items).await?)
    }

    async fn held_transaction(&self, id: i64, delta: i64, think: Duration) -> Result<()> {
        let db = self.db(0)?;
        if self.variant == Variant::Closure {
            // The same transaction as one closure on the writer's thread, the think blocking that thread: the writer
            // is held as long as `begin()` holds it, with one round trip instead of one per statement, and the
            // transaction may share its commit with the others queued behind it.
            return Ok(db
                .write(move |c| held_transaction(c, id, delta, think))
                .await?);
        }
        // `begin()`: a `BEGIN IMMEDIATE` on the writer's connection, each statement a round trip to the writer's
        // thread, the think awaited with the transaction open (as long as the closure's blocking one: see
        // `await_think`) — the writer serves no other write meanwhile.
        let mut tx = db.begin().await?;
        let old: i64 = tx
            .query_row(sql::POINT_READ, [id], |r| {
                let (_id, _name, value, _payload): (i64, String, i64, String) =
                    (r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?);
                Ok(value)
            })
            .await?;
        await_think(think).await;
        let new = old + delta;
        tx.execute(sql::SET_ITEM_VALUE, (id, new)).await?;
        tx.execute(sql::LOG_ITEM_CHANGE, (id, old, new)).await?;
        tx.commit().await?;
        Ok(())
    }

    async fn check_item_log(&self) -> Result<(u64, u64)> {
        Ok(self.db(0)?.read(check_item_log).await?)
    }

    async fn publish(&self, job: NewJob) -> Result<()> {
        self.db(0)?
            .execute(sql::PUBLISH, (job.payload, job.created_at))
            .await?;
        Ok(())
    }

    // The claim returns the job it marked (`UPDATE … RETURNING`): `execute_returning`, quicklite's API for a
    // statement that returns rows, maps it as `ops::claim` does.
    async fn claim(&self, owner: i64, now_ms: i64) -> Result<Option<i64>> {
        let claimed = self
            .db(0)?
            .execute_returning(sql::CLAIM, (owner, now_ms), |r| {
                let id: i64 = r.get(0)?;
                let _payload: String = r.get(1)?;
                Ok(id)
            })
            .await?;
        Ok(claimed.into_iter().next())
    }

    async fn ack(&self, id: i64, owner: i64) -> Result<()> {
        match self.db(0)?.execute(sql::ACK, (id, owner)).await? {
            1 => Ok(()),
            n => Err(rusqlite::Error::StatementChangedRows(n).into()),
        }
    }

    async fn custom(&self, writes: bool, statements: Vec<Bound>) -> Result<()> {
        // quicklite owns the transactions: a read runs in one reader's snapshot, a write inside the writer's
        // transaction (all or nothing, as its own savepoint).
        let db = self.db(0)?;
        if writes {
            db.write(move |c| ops::custom_statements(c, &statements))
                .await?;
        } else {
            db.read(move |c| ops::custom_statements(c, &statements))
                .await?;
        }
        Ok(())
    }

    async fn orm(&self, op: OrmOp, key: i64, _txn: bool) -> Result<()> {
        // quicklite owns the transactions: a read runs in a reader's snapshot, a write inside the writer's
        // transaction, with or without the suite's wrapping transaction (both rows measure the same thing).
        let db = self.db(0)?;
        if op.is_read() {
            Ok(db.read(move |c| ops::orm(c, op, key, false)).await?)
        } else {
            Ok(db.write(move |c| ops::orm(c, op, key, false)).await?)
        }
    }

    fn open_databases(&self) -> Option<u64> {
        Some(match &self.registry {
            Some(registry) => registry.metrics().open_databases as u64,
            None => self.dbs.len() as u64,
        })
    }

    fn database_opens(&self) -> Option<u64> {
        Some(match &self.registry {
            Some(registry) => registry.metrics().opens,
            None => self.dbs.len() as u64,
        })
    }
}

/// `held-tx`'s transaction as one closure, inside the writer's transaction (`quicklite-closure`): the row read (every
/// column, as the point reads), `think` spent blocking the writer's thread, the row written back with `delta` added
/// and the change logged.
fn held_transaction(
    conn: &rusqlite::Connection,
    id: i64,
    delta: i64,
    think: Duration,
) -> rusqlite::Result<()> {
    let old: i64 = conn.prepare_cached(sql::POINT_READ)?.query_row([id], |r| {
        let (_id, _name, value, _payload): (i64, String, i64, String) =
            (r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?);
        Ok(value)
    })?;
    if !think.is_zero() {
        std::thread::sleep(think);
    }
    let new = old + delta;
    conn.prepare_cached(sql::SET_ITEM_VALUE)?
        .execute((id, new))?;
    conn.prepare_cached(sql::LOG_ITEM_CHANGE)?
        .execute((id, old, new))?;
    Ok(())
}

/// `held-tx`'s check: the log's rows and the lost updates ([`sql::CHECK_ITEM_LOG`]).
fn check_item_log(conn: &rusqlite::Connection) -> rusqlite::Result<(u64, u64)> {
    conn.query_row(sql::CHECK_ITEM_LOG, [], |r| {
        Ok((r.get::<_, i64>(0)? as u64, r.get::<_, i64>(1)? as u64))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_database_opens_if_the_file_limit_allows_else_a_few_at_a_time() {
        assert_eq!(caps(1, 1024), (1, 1));
        assert_eq!(caps(100, 1024), (100, 100));
        // 1024 - 256 reserved = 768 files: 1,000 databases of 3 do not fit; 128 of them, 192 files left for
        // readers (one each).
        assert_eq!(caps(1_000, 1024), (128, 128));
        // 19,744 files: 5,000 databases of 3 fit, 4,744 files left for 2,372 readers.
        assert_eq!(caps(5_000, 20_000), (5_000, 2_372));
        assert_eq!(caps(10_000, 20_000), (128, 128));
        assert_eq!(caps(10_000, 1_048_576), (10_000, 10_000));
        assert_eq!(caps(10, 0), (1, 0));
        assert_eq!(caps(10, 300), (10, 7));
    }

    #[test]
    fn each_variant_has_its_settings() {
        assert_eq!(Variant::of(ApproachName::Quicklite), Variant::Defaults);
        assert_eq!(
            Variant::of(ApproachName::QuickliteTimeouts),
            Variant::Timeouts
        );
        assert_eq!(
            Variant::of(ApproachName::QuickliteWritesFirst),
            Variant::WritesFirst
        );
        assert_eq!(
            Variant::of(ApproachName::QuickliteNoInline),
            Variant::NoInline
        );
        assert_eq!(
            Variant::of(ApproachName::QuickliteSubscribed).subscribers(),
            1
        );
        assert_eq!(
            Variant::of(ApproachName::QuickliteSubscribed100).subscribers(),
            100
        );
        assert_eq!(
            Variant::of(ApproachName::QuickliteClosure),
            Variant::Closure
        );
        assert_eq!(Variant::of(ApproachName::QuickliteFeed), Variant::Feed);
        assert_eq!(feed_tables(Workload::Insert), ["items"]);
        assert_eq!(feed_tables(Workload::HeldTx), ["items", "item_log"]);
        assert_eq!(Variant::of(ApproachName::Quicklite).read_thread_nice(), 0);
        assert_eq!(
            Variant::of(ApproachName::QuickliteTimeouts).read_thread_nice(),
            0
        );
        assert_eq!(
            Variant::of(ApproachName::QuickliteWritesFirst).read_thread_nice(),
            WRITES_FIRST_NICE
        );
    }
}
