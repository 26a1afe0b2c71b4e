//! The workloads, defined once: names, database layout, schema and seed data.
//!
//! The operations themselves are chosen by [`crate::driver`]; an approach only knows how to run each kind
//! of operation ([`crate::Approach`]).

use std::fmt;
use std::path::PathBuf;
use std::str::FromStr;

use anyhow::{Context, Result, bail};

use crate::cell::{Cell, DEFAULT_WRITE_PPM, LongReads, MultiDb, PPM, WriteMode};
use crate::custom::CustomWorkload;
use crate::data::{self, Statement};
use crate::rng::Rng;
use crate::sql;

/// Rows each `throughput` transaction inserts (as Turso's write-throughput harness).
pub const THROUGHPUT_ROWS_PER_TRANSACTION: usize = 100;

/// The period of the `long-read` workload's writer: one insert due every millisecond, from one task — a low,
/// steady rate beside the reads, so that the report can show how long the slowest write waited.
pub const LONG_READ_WRITE_PERIOD: std::time::Duration = std::time::Duration::from_millis(1);

/// A workload: what the client tasks do, on which data.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Workload {
    /// Select one row by primary key from the `items` table (`Cell::rows` rows, 10k by default).
    PointRead,
    /// Single-row inserts, one logical write (one transaction for approaches without batching) per operation.
    Insert,
    /// Point reads and updates by primary key, the updates [`Cell::write_ppm`] of the operations (10% unless the
    /// cell says otherwise).
    Mixed,
    /// Read after write: each operation updates one row by primary key, then reads that row back (the save-then-
    /// load of a web request). The write and the read are timed apart; every approach reads its own writes.
    WriteRead,
    /// Seed 004: N ledger databases; per database one writer appending a block every `write_delay_ms`
    /// (the delay blocking inside the write, or an async pause between writes: [`crate::WriteMode`]), and readers
    /// running the account-history JOIN in a loop (R per database, or a fixed total over all databases).
    MultiDb,
    /// Seed 002: a durable job queue. Every client task runs full cycles — publish a job, claim the oldest
    /// unclaimed one (usually another task's), acknowledge (delete) it — so producers and consumers run
    /// concurrently; each operation and the cycle are timed, and heap allocations counted.
    Queue,
    /// Seed 000: an axum service with a single-row endpoint (`GET /items/{id}`, the `point-read` statement) under
    /// `concurrency` keep-alive connections from a load generator in another process.
    Http,
    /// Seed 003: the operations of an ORM benchmark (create, select, eager and lazy loading, JSON), written in SQL,
    /// each run alone, with and without a wrapping transaction.
    Orm,
    /// Write throughput after Turso's harness: `concurrency` writers, each transaction inserting
    /// [`THROUGHPUT_ROWS_PER_TRANSACTION`] rows and blocking its thread for the cell's think time before its
    /// commit, a `PASSIVE` checkpoint every second from another connection, and the table's row count checked
    /// against the acknowledged transactions at the end.
    Throughput,
    /// Point reads through one call site whose cost a parameter sets ([`crate::sql::COUNTED_READ`]): short ones
    /// through the warm-up, then one in [`crate::LongReads::every`] of the window long (calibrated to take the cell's
    /// [`Cell::long_reads`] time), beside one task inserting a row every [`LONG_READ_WRITE_PERIOD`] on a fixed
    /// schedule. What a long run of a call site known to be short does to the runtime (the ticker's lateness) and to
    /// the writes (how long the slowest waited).
    LongRead,
    /// A write transaction that thinks between its statements, after the shape of code written for sqlx's
    /// `pool.begin()`: read one row by primary key, await an async pause of the cell's think time with the
    /// transaction open (a call to another service), set the row's value to the value read plus a delta, log the
    /// change in `item_log`, commit. `concurrency` tasks back to back; at the end, the log must hold a row per
    /// acknowledged transaction and no lost update ([`crate::sql::CHECK_ITEM_LOG`]). How each approach holds the
    /// transaction open is its own ([`crate::Approach::held_transaction`]).
    HeldTx,
    /// A workload from the user's file (`--workload-file`), carried in [`Cell::custom`]: its own schema, seed
    /// rows and weighted transactions, each a read or a write.
    Custom,
}

impl Workload {
    /// Every workload, in report order.
    pub const ALL: [Workload; 11] = [
        Self::PointRead,
        Self::Insert,
        Self::Mixed,
        Self::WriteRead,
        Self::MultiDb,
        Self::Queue,
        Self::Http,
        Self::Orm,
        Self::Throughput,
        Self::LongRead,
        Self::HeldTx,
    ];

    /// The workloads with an open-loop driver ([`Cell::rate`]): those whose request is one operation.
    pub const OPEN_LOOP: [Workload; 3] = [Self::PointRead, Self::Insert, Self::Mixed];

    /// Whether the workload can be driven open loop, at a fixed rate of requests ([`Workload::OPEN_LOOP`]).
    pub fn runs_open_loop(self) -> bool {
        Self::OPEN_LOOP.contains(&self) || self == Self::Custom
    }

    /// The name used in cells, results and on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Self::PointRead => "point-read",
            Self::Insert => "insert",
            Self::Mixed => "mixed",
            Self::WriteRead => "write-read",
            Self::MultiDb => "multi-db",
            Self::Queue => "queue",
            Self::Http => "http",
            Self::Orm => "orm",
            Self::Throughput => "throughput",
            Self::LongRead => "long-read",
            Self::HeldTx => "held-tx",
            Self::Custom => "custom",
        }
    }

    /// Parses a workload name, with an error listing the valid names.
    pub fn parse(name: &str) -> Result<Self> {
        match Self::ALL.iter().find(|w| w.name() == name) {
            Some(w) => Ok(*w),
            None => {
                let names: Vec<_> = Self::ALL.iter().map(|w| w.name()).collect();
                bail!(
                    "unknown workload `{name}` (expected one of: {})",
                    names.join(", ")
                )
            }
        }
    }

    /// The workload of `cell`, checked against the cell's settings (e.g. `multi-db` needs `multi_db`).
    pub fn of_cell(cell: &Cell) -> Result<Self> {
        let workload = match &cell.custom {
            Some(custom) => {
                check_custom(cell, custom)?;
                Self::Custom
            }
            None => Self::parse(&cell.workload)?,
        };
        match workload {
            Self::MultiDb => {
                let m = multi_db_settings(cell)?;
                if m.num_databases == 0 {
                    bail!("multi-db needs at least one database (num_databases = 0)");
                }
                if m.write_mode == WriteMode::Paced && m.write_delay_ms == 0 {
                    bail!("paced writes need a period (write_delay_ms = 0)");
                }
            }
            Self::PointRead
            | Self::Mixed
            | Self::WriteRead
            | Self::Http
            | Self::LongRead
            | Self::HeldTx
                if cell.rows == 0 =>
            {
                bail!("{} needs rows to read (rows = 0)", workload.name());
            }
            _ => {}
        }
        match (&cell.long_reads, workload) {
            (Some(long_reads), Self::LongRead) => long_reads.check()?,
            (None, Self::LongRead) => {
                long_read_settings(cell)?;
            }
            (Some(_), _) => bail!("only the long-read workload has long reads"),
            (None, _) => {}
        }
        if cell.think_us > 0 && !workload.thinks() {
            bail!("only the throughput and held-tx workloads have a think time");
        }
        if cell.write_ppm != DEFAULT_WRITE_PPM && workload != Self::Mixed {
            bail!("only the mixed workload has a share of writes");
        }
        if cell.write_ppm > PPM {
            bail!(
                "a share of writes is at most {PPM} parts per million (write_ppm = {})",
                cell.write_ppm
            );
        }
        if cell.concurrency == 0 && !matches!(workload, Self::MultiDb | Self::Orm) {
            bail!("concurrency must be at least 1");
        }
        check_rate(cell, workload)?;
        Ok(workload)
    }

    /// Whether its transactions think ([`Cell::think_us`]): `throughput` before its commit, blocking its thread;
    /// `held-tx` between its statements, awaiting.
    pub fn thinks(self) -> bool {
        matches!(self, Self::Throughput | Self::HeldTx)
    }

    /// Number of database files the workload uses.
    pub fn databases(self, cell: &Cell) -> usize {
        match (self, &cell.multi_db) {
            (Self::MultiDb, Some(m)) => m.num_databases as usize,
            _ => 1,
        }
    }

    /// Name of database `db` (in `0..databases`): its file name without `.db`, e.g. `ledger-0042`. Names are
    /// valid `quicklite::Registry` names, so a registry over the cell's directory serves the same files.
    pub fn database_name(self, db: usize) -> String {
        match self {
            Self::MultiDb => format!("ledger-{db:04}"),
            Self::Queue => "queue".to_string(),
            Self::Orm => "orm".to_string(),
            Self::Custom => "custom".to_string(),
            _ => "items".to_string(),
        }
    }

    /// Path of database `db` (in `0..databases`) inside the cell's directory: `<dir>/<name>.db`.
    pub fn database_path(self, cell: &Cell, db: usize) -> PathBuf {
        PathBuf::from(&cell.dir).join(format!("{}.db", self.database_name(db)))
    }

    /// Schema of each database, as one batch of statements.
    pub fn schema(self) -> &'static str {
        match self {
            Self::MultiDb => sql::LEDGER_SCHEMA,
            Self::Queue => sql::QUEUE_SCHEMA,
            Self::Orm => sql::ORM_SCHEMA,
            // Its schema comes first among its seed rows.
            Self::Custom => "",
            Self::HeldTx => sql::HELD_TX_SCHEMA,
            _ => sql::ITEMS_SCHEMA,
        }
    }

    /// The rows seeded before the warm-up (to run in one transaction, not measured). Runners seed database 0
    /// with them and copy its file to the other databases ([`Workload::copy_seeded_database`]), so every
    /// database starts with the same ledger.
    pub fn seed_rows(self, cell: &Cell) -> Box<dyn Iterator<Item = Statement>> {
        match self {
            Self::MultiDb => Box::new(data::ledger_seed(cell.seed, 0)),
            // The backlog: claims search an index over `rows` waiting jobs, not an empty table.
            Self::Queue => Box::new(data::job_seed(cell.rows, cell.seed)),
            Self::Orm => Box::new(crate::orm::orm_seed()),
            Self::Custom => match &cell.custom {
                Some(custom) => Box::new(custom.seed_statements(cell.seed)),
                None => Box::new(std::iter::empty()),
            },
            _ => Box::new(data::item_seed(cell.rows, cell.seed)),
        }
    }

    /// Copies database 0's file, seeded and closed, to every other database of the cell.
    ///
    /// Seeding 10,000 ledgers statement by statement takes minutes; copying one takes a fraction of a
    /// millisecond. The file carries its own settings (WAL mode, page size), so the copies are what seeding each
    /// would have made. Database 0 must have been closed: its WAL folded back and removed, or the copies would
    /// miss its rows.
    pub fn copy_seeded_database(self, cell: &Cell) -> Result<()> {
        let databases = self.databases(cell);
        if databases < 2 {
            return Ok(());
        }
        let template = self.database_path(cell, 0);
        let mut wal = template.clone().into_os_string();
        wal.push("-wal");
        let wal = PathBuf::from(wal);
        if std::fs::metadata(&wal).is_ok_and(|m| m.len() > 0) {
            bail!(
                "{} still has a write-ahead log: close every connection to it before copying",
                template.display()
            );
        }
        for db in 1..databases {
            let path = self.database_path(cell, db);
            std::fs::copy(&template, &path).with_context(|| {
                format!(
                    "cannot copy the seeded {} to {}",
                    template.display(),
                    path.display()
                )
            })?;
        }
        Ok(())
    }
}

impl fmt::Display for Workload {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Workload {
    type Err = anyhow::Error;

    fn from_str(s: &str) -> Result<Self> {
        Self::parse(s)
    }
}

/// Refuses a custom workload that names another, or that has nothing to draw.
fn check_custom(cell: &Cell, custom: &CustomWorkload) -> Result<()> {
    if cell.workload != custom.name {
        bail!(
            "the cell's workload `{}` is not its custom workload `{}`",
            cell.workload,
            custom.name
        );
    }
    if custom.transactions.iter().all(|t| t.weight == 0) {
        bail!(
            "the custom workload `{}` has no transaction with a weight",
            custom.name
        );
    }
    Ok(())
}

/// Refuses a rate for a workload without an open-loop driver, and a rate of zero.
fn check_rate(cell: &Cell, workload: Workload) -> Result<()> {
    match cell.rate {
        Some(_) if !workload.runs_open_loop() => {
            let names: Vec<_> = Workload::OPEN_LOOP.iter().map(|w| w.name()).collect();
            bail!(
                "{} has no open-loop driver (rate); open-loop workloads: {}",
                workload.name(),
                names.join(", ")
            )
        }
        Some(0) => bail!("a rate is at least one request per second (rate = 0)"),
        _ => Ok(()),
    }
}

/// Whether `mixed`'s next operation is a write (else a point read), drawn from `rng` with a share of `write_ppm`
/// parts per million.
///
/// Drawn as a read with probability `1 − share`, the way the mix was drawn when it was a fixed 90/10: at the
/// default share the same seed draws the same operations as before the share was a knob.
pub(crate) fn mixed_draws_write(rng: &mut Rng, write_ppm: u32) -> bool {
    !rng.per_million(u64::from(PPM.saturating_sub(write_ppm)))
}

/// The `long-read` settings of a cell, or an error saying they are missing.
pub fn long_read_settings(cell: &Cell) -> Result<&LongReads> {
    cell.long_reads
        .as_ref()
        .context("the long-read workload needs `long_reads` settings (every, min_ms, max_ms)")
}

/// The `multi-db` settings of a cell, or an error saying they are missing.
pub fn multi_db_settings(cell: &Cell) -> Result<&MultiDb> {
    cell.multi_db.as_ref().context(
        "the multi-db workload needs `multi_db` settings (num_databases, readers, write_delay_ms, write_mode, \
         total_readers)",
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::sample_cell;

    #[test]
    fn names_round_trip() {
        for w in Workload::ALL {
            assert_eq!(Workload::parse(w.name()).unwrap(), w);
            assert_eq!(w.to_string().parse::<Workload>().unwrap(), w);
        }
    }

    #[test]
    fn unknown_workload_lists_the_valid_names() {
        let err = Workload::parse("point-reads").unwrap_err().to_string();
        assert!(err.contains("`point-reads`"), "{err}");
        assert!(
            err.contains(
                "point-read, insert, mixed, write-read, multi-db, queue, http, orm, throughput, long-read, held-tx"
            ),
            "{err}"
        );
    }

    #[test]
    fn multi_db_without_settings_is_rejected() {
        let mut cell = sample_cell("multi-db", "x");
        assert_eq!(Workload::of_cell(&cell).unwrap(), Workload::MultiDb);
        cell.multi_db = None;
        assert!(
            Workload::of_cell(&cell)
                .unwrap_err()
                .to_string()
                .contains("multi_db")
        );
    }

    #[test]
    fn layout_and_seed() {
        let cell = sample_cell("multi-db", "x");
        let w = Workload::MultiDb;
        assert_eq!(w.databases(&cell), 3);
        assert_ne!(w.database_path(&cell, 0), w.database_path(&cell, 1));
        assert!(w.schema().contains("CREATE TABLE IF NOT EXISTS blocks"));

        assert_eq!(w.database_name(7), "ledger-0007");
        assert_eq!(
            w.database_path(&cell, 12_345),
            PathBuf::from("/nonexistent/ledger-12345.db")
        );

        let cell = sample_cell("point-read", "x");
        assert_eq!(Workload::PointRead.databases(&cell), 1);
        assert_eq!(Workload::PointRead.seed_rows(&cell).count(), 200);

        let cell = sample_cell("queue", "x");
        assert_eq!(Workload::of_cell(&cell).unwrap(), Workload::Queue);
        assert_eq!(Workload::Queue.databases(&cell), 1);
        assert_eq!(
            Workload::Queue.database_path(&cell, 0),
            PathBuf::from("/nonexistent/queue.db")
        );
        assert!(Workload::Queue.schema().contains("jobs_unclaimed"));
        let backlog: Vec<_> = Workload::Queue.seed_rows(&cell).collect();
        assert_eq!(backlog.len(), 200);
        assert!(backlog.iter().all(|s| s.sql == sql::SEED_JOB));
    }

    #[test]
    fn the_share_of_writes_is_mixed_s_and_at_most_a_whole() {
        let mut cell = sample_cell("mixed", "x");
        cell.write_ppm = 0;
        assert_eq!(Workload::of_cell(&cell).unwrap(), Workload::Mixed);
        cell.write_ppm = PPM + 1;
        let err = Workload::of_cell(&cell).unwrap_err().to_string();
        assert!(err.contains("at most 1000000"), "{err}");
        let mut cell = sample_cell("point-read", "x");
        cell.write_ppm = 1_000;
        let err = Workload::of_cell(&cell).unwrap_err().to_string();
        assert!(err.contains("only the mixed workload"), "{err}");
    }

    #[test]
    fn only_single_operation_workloads_take_a_rate_and_it_is_not_zero() {
        for workload in Workload::OPEN_LOOP {
            let mut cell = sample_cell(workload.name(), "x");
            cell.rate = Some(1_000);
            assert_eq!(Workload::of_cell(&cell).unwrap(), workload);
            cell.rate = Some(0);
            let err = Workload::of_cell(&cell).unwrap_err().to_string();
            assert!(err.contains("at least one request per second"), "{err}");
        }
        let mut cell = sample_cell("queue", "x");
        cell.rate = Some(1_000);
        let err = Workload::of_cell(&cell).unwrap_err().to_string();
        assert!(
            err.contains("queue has no open-loop driver")
                && err.contains("point-read, insert, mixed"),
            "{err}"
        );
    }

    #[test]
    fn mixed_draws_its_share_of_writes() {
        // A million operations from a fixed seed: the writes come within a few standard deviations of the share
        // (the count is exact for a given seed; the bounds only say it is the share's, not another's).
        for (ppm, low, high) in [
            (0, 0, 0),
            (100, 60, 140),
            (1_000, 900, 1_100),
            (10_000, 9_700, 10_300),
            (DEFAULT_WRITE_PPM, 99_000, 101_000),
            (PPM, 1_000_000, 1_000_000),
        ] {
            let mut rng = Rng::derive(4, 0);
            let writes = (0..1_000_000)
                .filter(|_| mixed_draws_write(&mut rng, ppm))
                .count();
            assert!(
                (low..=high).contains(&writes),
                "{writes} writes at {ppm} ppm"
            );
        }
    }

    #[test]
    fn the_default_share_draws_the_old_90_10_mix() {
        let (mut old, mut new) = (Rng::derive(4, 7), Rng::derive(4, 7));
        for _ in 0..100_000 {
            assert_eq!(
                !old.percent(90),
                mixed_draws_write(&mut new, DEFAULT_WRITE_PPM)
            );
        }
    }

    #[test]
    fn long_reads_belong_to_their_workload_and_are_checked() {
        let mut cell = sample_cell("long-read", "x");
        assert_eq!(Workload::of_cell(&cell).unwrap(), Workload::LongRead);
        cell.long_reads.as_mut().unwrap().every = 1;
        let err = Workload::of_cell(&cell).unwrap_err().to_string();
        assert!(err.contains("no short read"), "{err}");
        cell.long_reads = None;
        let err = Workload::of_cell(&cell).unwrap_err().to_string();
        assert!(err.contains("needs `long_reads` settings"), "{err}");
        let mut reads = sample_cell("point-read", "x");
        reads.long_reads = sample_cell("long-read", "x").long_reads;
        let err = Workload::of_cell(&reads).unwrap_err().to_string();
        assert!(err.contains("only the long-read workload"), "{err}");
        let mut cell = sample_cell("long-read", "x");
        cell.rate = Some(1_000);
        let err = Workload::of_cell(&cell).unwrap_err().to_string();
        assert!(err.contains("long-read has no open-loop driver"), "{err}");
    }

    #[test]
    fn held_tx_thinks_reads_seeded_rows_and_logs_its_changes() {
        let mut cell = sample_cell("held-tx", "x");
        cell.think_us = 1_000;
        assert_eq!(Workload::of_cell(&cell).unwrap(), Workload::HeldTx);
        assert!(
            Workload::HeldTx
                .schema()
                .contains("CREATE TABLE IF NOT EXISTS items")
        );
        assert!(
            Workload::HeldTx
                .schema()
                .contains("CREATE TABLE IF NOT EXISTS item_log")
        );
        assert_eq!(Workload::HeldTx.seed_rows(&cell).count(), 200);
        assert_eq!(Workload::HeldTx.database_name(0), "items");
        cell.rows = 0;
        let err = Workload::of_cell(&cell).unwrap_err().to_string();
        assert!(err.contains("held-tx needs rows to read"), "{err}");
        let mut cell = sample_cell("held-tx", "x");
        cell.rate = Some(100);
        let err = Workload::of_cell(&cell).unwrap_err().to_string();
        assert!(err.contains("held-tx has no open-loop driver"), "{err}");
        let mut cell = sample_cell("insert", "x");
        cell.think_us = 1_000;
        let err = Workload::of_cell(&cell).unwrap_err().to_string();
        assert!(
            err.contains("only the throughput and held-tx workloads have a think time"),
            "{err}"
        );
    }

    #[test]
    fn paced_writes_need_a_period() {
        let mut cell = sample_cell("multi-db", "x");
        let m = cell.multi_db.as_mut().unwrap();
        m.write_mode = WriteMode::Paced;
        m.write_delay_ms = 0;
        let err = Workload::of_cell(&cell).unwrap_err().to_string();
        assert!(err.contains("period"), "{err}");
    }

    #[test]
    fn the_seeded_file_is_copied_to_every_database() {
        let dir = std::env::temp_dir().join(format!("lab-core-copy-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let mut cell = sample_cell("multi-db", "x");
        cell.dir = dir.to_string_lossy().into_owned();
        let w = Workload::MultiDb;
        std::fs::write(w.database_path(&cell, 0), b"seeded").unwrap();
        w.copy_seeded_database(&cell).unwrap();
        for db in 0..3 {
            assert_eq!(
                std::fs::read(w.database_path(&cell, db)).unwrap(),
                b"seeded"
            );
        }
        // A template with a live WAL would give copies without its last rows: refused.
        std::fs::write(dir.join("ledger-0000.db-wal"), b"frames").unwrap();
        let err = w.copy_seeded_database(&cell).unwrap_err().to_string();
        assert!(err.contains("write-ahead log"), "{err}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
