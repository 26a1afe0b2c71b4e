//! `quicklite doctor [DB] [--replica URL --vfs PATH] [--json]`: what the linked SQLite is, how a database file is set
//! up, and where a read replica stands. Each finding has a severity, the value observed, a recommendation, and why —
//! from SQLite's own documentation, linked.
//!
//! The database is opened read-only and never written; [`open`] explains how doctor avoids creating or changing
//! files next to it too, and the one case where SQLite must create a `-shm`. Settings SQLite keeps per connection
//! rather than in the file (`synchronous`, `busy_timeout`, `foreign_keys`, `cache_size`, `mmap_size`,
//! `journal_size_limit`) are reported as a fresh connection gets them, and marked so: an application sets them
//! when it opens its connections, as quicklite's Server profile does.
//!
//! Exit status: 0 report without error findings, 1 an error finding (corruption, or a linked SQLite with the
//! WAL-reset bug), 2 nothing to report on (the file is missing, a directory, not a database, locked, unreadable).

mod database;
mod finding;
mod human;
mod observed;
mod open;
mod replica;
mod rules;
mod sqlite;

use std::path::Path;
use std::process::ExitCode;

use anyhow::Context;
use serde::Serialize;

use crate::cli::DoctorArgs;
use database::DatabaseSection;
use finding::Summary;
use replica::ReplicaSection;
use sqlite::SqliteSection;

/// Exit status when the input cannot be inspected at all.
const EXIT_CANNOT_INSPECT: u8 = 2;

/// Everything doctor found; `--json` prints exactly this.
#[derive(Debug, Serialize)]
pub struct Report {
    /// The SQLite linked into this binary.
    pub sqlite: SqliteSection,
    /// The database file, when one was given.
    pub database: Option<DatabaseSection>,
    /// The read replica, when one was given.
    pub replica: Option<ReplicaSection>,
    /// The findings of both sections, counted by severity, and the exit status.
    pub summary: Summary,
}

/// Prints the report (or, when there is nothing to report on, a one-line reason on stderr) and returns the exit
/// status.
pub fn run(args: &DoctorArgs) -> anyhow::Result<ExitCode> {
    let replica = args.replica.as_deref().zip(args.vfs.as_deref());
    let report = match inspect(args.db.as_deref(), replica) {
        Ok(report) => report,
        Err(err) => {
            eprintln!("error: {err:#}");
            return Ok(ExitCode::from(EXIT_CANNOT_INSPECT));
        }
    };
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        println!("{}", human::render(&report));
    }
    Ok(ExitCode::from(report.summary.exit_status))
}

fn inspect(db: Option<&Path>, replica: Option<(&str, &Path)>) -> anyhow::Result<Report> {
    // quicklite's process set-up runs first, before any connection (ours included) initializes SQLite: only then
    // can it turn memory statistics off, and report on it.
    let info = quicklite::setup::sqlite_info()
        .context("cannot read the linked SQLite's version and options")?;
    let sqlite = sqlite::section(&info);
    let database = db
        .map(|path| {
            database::inspect(path, &info)
                .with_context(|| format!("cannot inspect {}", path.display()))
        })
        .transpose()?;
    let replica = replica
        .map(|(url, vfs)| replica::inspect(url, vfs))
        .transpose()?;
    let summary = Summary::of(
        sqlite
            .findings
            .iter()
            .chain(database.iter().flat_map(|d| &d.findings))
            .chain(replica.iter().flat_map(|r| &r.findings)),
    );
    Ok(Report {
        sqlite,
        database,
        replica,
        summary,
    })
}
