//! The workloads, defined once: names, database layout, schema and seed data.
//!
//! The operations themselves are chosen by [`crate::driver`]; an approach only knows how to run each kind
//! of operation ([`crate::Approach`]).

use std::fmt;
use std::path::PathBuf;
use std::str::FromStr;

use anyhow::{Context, Result, bail};

use crate::data::{self, Statement};
use crate::{Cell, MultiDb, sql};

/// Share of reads in the `mixed` workload, in percent; the rest are updates by primary key.
pub const MIXED_READ_PERCENT: u64 = 90;

/// A workload: what the client tasks do, on which data.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Workload {
    /// Select one row by primary key from the `items` table (`Cell::rows` rows, 10k by default).
    PointRead,
    /// Single-row inserts, one logical write (one transaction for approaches without batching) per operation.
    Insert,
    /// 90% point reads, 10% updates by primary key.
    Mixed,
    /// Seed 004: N ledger databases; per database one writer appending a block every `write_delay_ms`
    /// (the delay blocks inside the write) and R readers running the account-history JOIN in a loop.
    MultiDb,
}

impl Workload {
    /// Every workload, in report order.
    pub const ALL: [Workload; 4] = [Self::PointRead, Self::Insert, Self::Mixed, Self::MultiDb];

    /// The name used in cells, results and on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Self::PointRead => "point-read",
            Self::Insert => "insert",
            Self::Mixed => "mixed",
            Self::MultiDb => "multi-db",
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
        let workload = Self::parse(&cell.workload)?;
        match workload {
            Self::MultiDb => {
                let m = multi_db_settings(cell)?;
                if m.num_databases == 0 {
                    bail!("multi-db needs at least one database (num_databases = 0)");
                }
            }
            Self::PointRead | Self::Mixed if cell.rows == 0 => {
                bail!("{} needs rows to read (rows = 0)", workload.name());
            }
            _ => {}
        }
        if cell.concurrency == 0 && workload != Self::MultiDb {
            bail!("concurrency must be at least 1");
        }
        Ok(workload)
    }

    /// Number of database files the workload uses.
    pub fn databases(self, cell: &Cell) -> usize {
        match (self, &cell.multi_db) {
            (Self::MultiDb, Some(m)) => m.num_databases as usize,
            _ => 1,
        }
    }

    /// Path of database `db` (in `0..databases`) inside the cell's directory.
    pub fn database_path(self, cell: &Cell, db: usize) -> PathBuf {
        let name = match self {
            Self::MultiDb => format!("ledger-{db:04}.db"),
            _ => "items.db".to_string(),
        };
        PathBuf::from(&cell.dir).join(name)
    }

    /// Schema of each database, as one batch of statements.
    pub fn schema(self) -> &'static str {
        match self {
            Self::MultiDb => sql::LEDGER_SCHEMA,
            _ => sql::ITEMS_SCHEMA,
        }
    }

    /// The rows seeded into database `db` before the warm-up (to run in one transaction, not measured).
    pub fn seed_rows(self, cell: &Cell, db: usize) -> Box<dyn Iterator<Item = Statement>> {
        match self {
            Self::MultiDb => Box::new(data::ledger_seed(cell.seed, db)),
            _ => Box::new(data::item_seed(cell.rows, cell.seed)),
        }
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

/// The `multi-db` settings of a cell, or an error saying they are missing.
pub fn multi_db_settings(cell: &Cell) -> Result<&MultiDb> {
    cell.multi_db.as_ref().context(
        "the multi-db workload needs `multi_db` settings (num_databases, readers, write_delay_ms)",
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
        assert!(err.contains("point-read, insert, mixed, multi-db"), "{err}");
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

        let cell = sample_cell("point-read", "x");
        assert_eq!(Workload::PointRead.databases(&cell), 1);
        assert_eq!(Workload::PointRead.seed_rows(&cell, 0).count(), 200);
    }
}
