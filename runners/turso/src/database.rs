//! One Turso `Database` per cell: opened once, in WAL or MVCC mode, seeded through itself, configured with the
//! cell's PRAGMAs on every connection, and described into the result.
//!
//! Turso keeps the state of a database file in its `Database` object (its WAL index, or its MVCC store), so the
//! runner opens the file once and seeds, measures and checkpoints through that one object: a second `Database` on the
//! same file in one process is what Turso's multi-process WAL (experimental, off by default) would be for.
//!
//! Turso answers the PRAGMAs it knows and silently ignores the others, as SQLite does with unknown names; the
//! result records which of the cell's PRAGMAs it did not take (`mmap_size`, `journal_size_limit`: Turso has neither).
//! Where a setting it lacks would change what the cell measures (`synchronous=EXTRA`, which Turso would run as
//! FULL; the serialized mutex mode, memory statistics), the cell is refused with the reason before anything runs.

use std::collections::BTreeMap;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use quicklite_lab_core::{
    Cell, Environment, Knobs, MutexMode, Param, Pragma, REPORTED_PRAGMAS, Workload, sql,
};
use turso::{Builder, Connection, Database, Value};

include!(concat!(env!("OUT_DIR"), "/crate_versions.rs"));

/// What `Environment::memstatus` says for every Turso cell.
pub const MEMSTATUS: &str =
    "off (not applicable: Turso has no SQLITE_CONFIG_MEMSTATUS, its allocations are Rust's)";

/// How the database runs its transactions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// `journal_mode = WAL`: one writer at a time, as SQLite; writes that find the lock taken wait in Turso's busy
    /// handler (the profile's `busy_timeout`).
    Wal,
    /// `journal_mode = mvcc` (Turso's MVCC, a logical log beside the database file): write transactions open with
    /// `BEGIN CONCURRENT`, run side by side and conflict only on the same rows, at commit.
    Mvcc,
}

impl Mode {
    /// The `journal_mode` the database file is given when seeded.
    fn journal_mode(self) -> &'static str {
        match self {
            Self::Wal => "WAL",
            Self::Mvcc => "mvcc",
        }
    }
}

/// Refuses, with the reason, a cell asking for what Turso cannot do, before anything is created.
pub fn refuse_unsupported(cell: &Cell, workload: Workload, knobs: &Knobs) -> Result<()> {
    let turso = turso_version();
    if knobs.synchronous.as_deref() == Some("EXTRA") {
        bail!(
            "unsupported: turso {turso} has synchronous OFF, NORMAL and FULL only (it would run EXTRA as FULL)"
        );
    }
    if knobs.mutex == MutexMode::FullMutex {
        bail!(
            "unsupported: turso {turso} has no serialized mutex mode (a connection is used by one task at a time)"
        );
    }
    if knobs.memstatus {
        bail!("unsupported: turso {turso} has no memory statistics (SQLITE_CONFIG_MEMSTATUS)");
    }
    if !matches!(
        workload,
        Workload::PointRead
            | Workload::Insert
            | Workload::Mixed
            | Workload::WriteRead
            | Workload::Queue
            | Workload::Throughput
            | Workload::Custom
    ) {
        bail!(
            "unsupported: the turso runner implements point-read, insert, mixed, write-read, queue, throughput and \
             custom workloads, not {}",
            cell.workload
        );
    }
    Ok(())
}

/// Opens the cell's database (its directory created), gives the file its journal mode, and seeds it in one
/// transaction through Turso.
pub async fn open_and_seed(
    cell: &Cell,
    workload: Workload,
    knobs: &Knobs,
    mode: Mode,
) -> Result<Database> {
    std::fs::create_dir_all(&cell.dir)
        .with_context(|| format!("cannot create the cell directory {}", cell.dir))?;
    let path = workload.database_path(cell, 0);
    let path_text = path
        .to_str()
        .with_context(|| format!("{} is not UTF-8", path.display()))?;
    let db = Builder::new_local(path_text)
        .build()
        .await
        .with_context(|| format!("turso cannot open {}", path.display()))?;
    let conn = db.connect()?;
    // The file-level setting first: the journal mode of the approach, whatever the profile says (Turso has WAL and
    // MVCC only; SQLite's default, `delete`, it does not have).
    step_all(
        &conn,
        &format!("PRAGMA journal_mode = {}", mode.journal_mode()),
    )
    .await
    .with_context(|| format!("cannot set journal_mode = {}", mode.journal_mode()))?;
    apply(&conn, &connection_pragmas(knobs)).await?;
    seed(&conn, cell, workload)
        .await
        .with_context(|| format!("turso cannot seed {}", path.display()))?;
    Ok(db)
}

/// Schema and rows, in one transaction.
async fn seed(conn: &Connection, cell: &Cell, workload: Workload) -> Result<()> {
    if !workload.schema().is_empty() {
        conn.execute_batch(workload.schema()).await?;
    }
    conn.execute("BEGIN", ()).await?;
    for statement in workload.seed_rows(cell) {
        let mut stmt = conn
            .prepare_cached(&*statement.sql)
            .await
            .with_context(|| format!("cannot prepare `{}`", statement.sql))?;
        stmt.execute(values(&statement.params))
            .await
            .with_context(|| format!("cannot run `{}`", statement.sql))?;
    }
    conn.execute("COMMIT", ()).await?;
    Ok(())
}

/// The per-connection PRAGMAs of the cell's profile and overrides.
pub fn connection_pragmas(knobs: &Knobs) -> Vec<Pragma> {
    knobs.connection_pragmas()
}

/// Opens a connection of `db` with the cell's per-connection PRAGMAs.
pub async fn connect(db: &Database, pragmas: &[Pragma]) -> Result<Connection> {
    let conn = db.connect().context("turso cannot open a connection")?;
    apply(&conn, pragmas).await?;
    Ok(conn)
}

/// Runs `PRAGMA name = value` for each of `pragmas`, each stepped to the end (some answer with a row).
async fn apply(conn: &Connection, pragmas: &[Pragma]) -> Result<()> {
    for pragma in pragmas {
        step_all(conn, &pragma.sql())
            .await
            .with_context(|| format!("cannot set `{}`", pragma.sql()))?;
    }
    Ok(())
}

/// Runs `sql`, reading every row it returns.
async fn step_all(conn: &Connection, sql: &str) -> Result<()> {
    let mut rows = conn.query(sql, ()).await?;
    while rows.next().await?.is_some() {}
    Ok(())
}

/// What Turso says about itself on one connection.
pub struct Facts {
    /// `sqlite_version()`, the SQLite version Turso is compatible with, and Turso's own version.
    version: String,
    /// The reported PRAGMAs as read back, or why not.
    pragmas: BTreeMap<String, String>,
}

impl Facts {
    /// Copies the facts, and this runner's crate versions, into `env`. Turso has no `PRAGMA compile_options` (it is
    /// not built from SQLite's C sources): the list stays empty.
    pub fn fill(self, env: &mut Environment) {
        env.sqlite_version = self.version;
        env.compile_options = Vec::new();
        env.pragmas = self.pragmas;
        env.crate_versions = crate_versions();
    }
}

/// Reads the facts on a fresh connection of `db` set up as the approach's are, and checks that the durability asked
/// for is the one in effect.
pub async fn facts(db: &Database, knobs: &Knobs, mode: Mode) -> Result<Facts> {
    let conn = connect(db, &connection_pragmas(knobs)).await?;
    let sqlite_version = match query_one(&conn, "SELECT sqlite_version()").await? {
        Some(Value::Text(v)) => v,
        other => bail!("sqlite_version() answered {other:?}"),
    };
    let mut pragmas = BTreeMap::new();
    for name in REPORTED_PRAGMAS {
        let text = match query_one(&conn, &format!("PRAGMA {name}")).await? {
            Some(value) => text(value),
            // Turso ignores a PRAGMA it does not know, and answers nothing when asked for it.
            None => "unsupported by turso".to_owned(),
        };
        pragmas.insert((*name).to_owned(), text);
    }
    let expected_journal = mode.journal_mode().to_ascii_lowercase();
    if pragmas.get("journal_mode") != Some(&expected_journal) {
        bail!(
            "journal_mode is {:?}, not {expected_journal}",
            pragmas.get("journal_mode")
        );
    }
    if let Some(asked) = knobs
        .pragmas()
        .iter()
        .find(|p| p.name == "synchronous")
        .map(|p| synchronous_level(&p.value))
    {
        let read = pragmas.get("synchronous").cloned().unwrap_or_default();
        if Some(read.as_str()) != asked {
            bail!("synchronous reads back as {read}, not the cell's {asked:?}");
        }
    }
    Ok(Facts {
        version: format!("{sqlite_version} (turso {})", turso_version()),
        pragmas,
    })
}

/// The number SQLite reads back for a `synchronous` value, as Turso answers it.
fn synchronous_level(value: &str) -> Option<&'static str> {
    match value.to_ascii_uppercase().as_str() {
        "OFF" | "0" => Some("0"),
        "NORMAL" | "1" => Some("1"),
        "FULL" | "2" => Some("2"),
        _ => None,
    }
}

/// The first column of the first row `sql` returns, if any.
async fn query_one(conn: &Connection, sql: &str) -> Result<Option<Value>> {
    let mut rows = conn
        .query(sql, ())
        .await
        .with_context(|| format!("cannot run `{sql}`"))?;
    let first = match rows.next().await? {
        Some(row) => Some(row.get_value(0)?),
        None => None,
    };
    while rows.next().await?.is_some() {}
    Ok(first)
}

fn text(value: Value) -> String {
    match value {
        Value::Null => "null".to_owned(),
        Value::Integer(i) => i.to_string(),
        Value::Real(f) => f.to_string(),
        Value::Text(t) => t,
        Value::Blob(b) => format!("<{} bytes>", b.len()),
    }
}

/// Prepares every statement the cell will run, so that SQL Turso cannot run fails the cell before the warm-up with
/// the statement and Turso's reason rather than as errors counted in the window.
pub async fn check_statements(db: &Database, cell: &Cell, workload: Workload) -> Result<()> {
    let statements: Vec<String> = match workload {
        Workload::PointRead => vec![sql::POINT_READ.into()],
        Workload::Insert | Workload::Throughput => {
            vec![sql::INSERT_ITEM.into(), "SELECT count(*) FROM items".into()]
        }
        Workload::Mixed | Workload::WriteRead => {
            vec![sql::POINT_READ.into(), sql::UPDATE_ITEM.into()]
        }
        Workload::Queue => vec![sql::PUBLISH.into(), sql::CLAIM.into(), sql::ACK.into()],
        Workload::Custom => cell
            .custom
            .iter()
            .flat_map(|c| &c.transactions)
            .flat_map(|t| &t.statements)
            .map(|s| s.sql.clone())
            .collect(),
        _ => Vec::new(),
    };
    let conn = db.connect()?;
    for statement in statements {
        if let Err(e) = conn.prepare(&statement).await {
            bail!(
                "unsupported: turso {} cannot prepare `{statement}`: {e}",
                turso_version()
            );
        }
    }
    Ok(())
}

/// Starts a thread that runs `PRAGMA wal_checkpoint(PASSIVE)` every second on a connection of its own, for as long as
/// the runner lives — `throughput`'s checkpointer, as beside the other approaches. A checkpoint that fails (in MVCC
/// mode a passive checkpoint may be refused) is tried again a second later.
pub fn start_checkpointer(db: Database) -> Result<()> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .context("cannot build the checkpointer's runtime")?;
    std::thread::Builder::new()
        .name("lab-checkpointer".into())
        .spawn(move || {
            runtime.block_on(async move {
                let Ok(conn) = db.connect() else { return };
                loop {
                    tokio::time::sleep(Duration::from_secs(1)).await;
                    let _ = step_all(&conn, "PRAGMA wal_checkpoint(PASSIVE)").await;
                }
            });
        })
        .context("cannot start the checkpointer thread")?;
    Ok(())
}

/// Lab-core parameters as Turso values, bound to parameters `1..=n`.
pub fn values(params: &[Param]) -> Vec<Value> {
    params
        .iter()
        .map(|p| match p {
            Param::Int(v) => Value::Integer(*v),
            Param::Text(v) => Value::Text(v.clone()),
            Param::Blob(v) => Value::Blob(v.clone()),
        })
        .collect()
}

/// The `turso` crate's version, as locked when this runner was built.
fn turso_version() -> &'static str {
    CRATE_VERSIONS
        .iter()
        .find(|(name, _)| *name == "turso")
        .map_or("(unknown version)", |(_, version)| version)
}

/// Versions of the crates under test, as locked when this runner was built.
fn crate_versions() -> BTreeMap<String, String> {
    CRATE_VERSIONS
        .iter()
        .map(|(name, version)| ((*name).to_owned(), (*version).to_owned()))
        .collect()
}
