//! `quicklite`: the project's library — per database one writer thread with group commit and a pool of reader
//! threads with read batching, opened with the cell's profile, PRAGMAs and open flags.

use std::time::Duration;

use anyhow::{Context, Result};
use quicklite::Database;
use quicklite_lab_core::{
    Approach, Block, Cell, Environment, Knobs, NewItem, Profile, REPORTED_PRAGMAS, Workload,
};

use crate::sqlite::report::crate_versions;
use crate::sqlite::{connect, ops};

/// One [`Database`] per database of the cell.
pub struct Quicklite {
    /// Indexed by database.
    dbs: Vec<Database>,
}

/// Process set-up through the library, as an application would do it (instead of the runner's own
/// `sqlite3_config` call): must run before the first connection in the process. Returns the text for
/// `Environment::memstatus`.
pub fn configure(knobs: &Knobs) -> String {
    let report = quicklite::configure(quicklite::Setup {
        memory_statistics: knobs.memstatus,
    });
    format!(
        "{} (requested {} through quicklite::configure: {})",
        if report.memory_statistics_off {
            "off"
        } else {
            "on"
        },
        if knobs.memstatus { "on" } else { "off" },
        report.detail
    )
}

impl Quicklite {
    /// Opens every database with the cell's knobs and describes database 0 into `env`.
    pub async fn open(
        cell: &Cell,
        workload: Workload,
        knobs: &Knobs,
        env: &mut Environment,
    ) -> Result<Self> {
        let mut dbs = Vec::new();
        for db in 0..workload.databases(cell) {
            let path = workload.database_path(cell, db);
            let mut builder = Database::builder(&path)
                .profile(match knobs.profile {
                    Profile::Server => quicklite::Profile::Server,
                    Profile::SqliteDefault => quicklite::Profile::SqliteDefault,
                })
                .open_flags(connect::open_flags(knobs.mutex));
            // The library's profile has the same values; setting them explicitly keeps every approach on
            // exactly the cell's PRAGMAs (and applies the `synchronous` override).
            for pragma in knobs.connection_pragmas() {
                builder = builder.pragma(pragma.name, pragma.value.to_string());
            }
            let database = builder
                .open()
                .await
                .with_context(|| format!("cannot open {} with quicklite", path.display()))?;
            dbs.push(database);
        }
        let info =
            quicklite::sqlite_info().context("cannot read SQLite's version and compile options")?;
        env.sqlite_version = info.version;
        env.compile_options = info.compile_options;
        let pragmas = dbs[0].pragmas();
        env.pragmas = REPORTED_PRAGMAS
            .iter()
            .filter_map(|name| pragmas.get(*name).map(|v| ((*name).to_string(), v.clone())))
            .collect();
        env.crate_versions = crate_versions();
        Ok(Self { dbs })
    }

    fn db(&self, db: usize) -> Result<&Database> {
        self.dbs
            .get(db)
            .with_context(|| format!("no database {db}"))
    }
}

impl Approach for Quicklite {
    async fn point_read(&self, id: i64) -> Result<()> {
        Ok(self.db(0)?.read(move |c| ops::point_read(c, id)).await?)
    }

    async fn insert(&self, item: NewItem) -> Result<()> {
        Ok(self.db(0)?.write(move |c| ops::insert(c, &item)).await?)
    }

    async fn update(&self, id: i64, delta: i64) -> Result<()> {
        Ok(self
            .db(0)?
            .write(move |c| ops::update(c, id, delta))
            .await?)
    }

    async fn join_read(&self, db: usize, account: i64) -> Result<()> {
        Ok(self
            .db(db)?
            .read(move |c| ops::join_read(c, account))
            .await?)
    }

    async fn paced_write(&self, db: usize, block: Block, delay: Duration) -> Result<()> {
        // The library's write transaction replaces the BEGIN/COMMIT of the other approaches; the delay is
        // spent inside it, on the writer thread, like theirs.
        Ok(self
            .db(db)?
            .write(move |c| ops::append_block(c, &block, delay))
            .await?)
    }
}
