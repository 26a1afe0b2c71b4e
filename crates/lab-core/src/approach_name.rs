//! The approaches the lab measures, by name: [`ApproachName`], one variant per approach, with what the lab needs to
//! know of each — its runner program, whether it is a variant of another, needs a server, and which workloads it
//! implements — as `match`es on the enum, so that a new approach is one variant and a decision in each of them.
//!
//! A [`Cell`](crate::Cell) keeps the name as a string: it is the wire format every runner reads (those of other
//! languages too) and the record results keep, and a runner told an approach it does not know answers with a failed
//! result rather than refusing its input. The command line, the lab and the Rust runners parse it into this enum at
//! their edges; [`ApproachName`] compares equal to its name, so a cell's approach is checked against a variant, not
//! a string literal.

use std::fmt;
use std::str::FromStr;

use crate::runner_program::RunnerProgram;
use crate::workload::Workload;

/// An approach the lab measures, by the name cells, results and the command line give it.
///
/// Named `ApproachName`, not `Approach`: [`crate::Approach`] is the trait through which the driver runs an
/// approach's operations; this names which approach a cell, a flag or a runner means.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ApproachName {
    /// `ceiling`: the reference row — the workload's statements on one plain connection per core, synchronous, reads
    /// in a snapshot kept until a commit and writes grouped per commit, what the machine allows with no async
    /// hand-off.
    /// Tables show every approach as a share of it. Only for single-row operations on one database
    /// ([`ApproachName::implements`]).
    Ceiling,
    /// `direct-blocking`: rusqlite called directly inside async tasks, on the tokio worker threads.
    DirectBlocking,
    /// `spawn-blocking`: shared rusqlite connections, each call moved to tokio's blocking thread pool.
    SpawnBlocking,
    /// `per-request`: a connection opened, configured, used once and closed for every operation.
    PerRequest,
    /// `tokio-rusqlite`: the tokio-rusqlite crate, one background thread per connection.
    TokioRusqlite,
    /// `deadpool-sqlite`: the deadpool-sqlite crate's pool, each operation run on tokio's blocking pool.
    DeadpoolSqlite,
    /// `async-sqlite`: the async-sqlite crate's pool, one thread per connection.
    AsyncSqlite,
    /// `sqlx`: sqlx's `SqlitePool`.
    Sqlx,
    /// `trailbase-sqlite`: TrailBase's async SQLite connection, a writer thread and reader threads.
    TrailbaseSqlite,
    /// `turso`: the turso crate (Turso, a rewrite of SQLite in Rust), its native async connections in WAL mode.
    Turso,
    /// `quicklite`: this project's library.
    Quicklite,
    /// `go-mattn`: Go's `database/sql` over mattn/go-sqlite3 (cgo).
    GoMattn,
    /// `go-modernc`: Go's `database/sql` over modernc.org/sqlite (pure Go, seed 002's baseline).
    GoModernc,
    /// `go-zombiezen`: zombiezen.com/go/sqlite's pool.
    GoZombiezen,
    /// `node-better-sqlite3`: Node's better-sqlite3.
    NodeBetterSqlite3,
    /// `node-sqlite`: Node's `node:sqlite`, when the installed Node has it (seed 001).
    NodeSqlite,
    /// `quicklite-timeouts`: quicklite with a read and a write timeout on every request (`Builder::read_timeout`,
    /// `Builder::write_timeout`), none of them met: what keeping deadlines costs.
    QuickliteTimeouts,
    /// `quicklite-writes-first`: quicklite with its read threads three nice steps below its write threads
    /// (`read_thread_nice(3)`).
    QuickliteWritesFirst,
    /// `quicklite-no-inline`: quicklite with every read handed to its reader threads and every write to its writer
    /// thread (`inline_reads(false)`): what requests on their callers' threads are worth.
    QuickliteNoInline,
    /// `quicklite-subscribed`: quicklite with one subscriber to its change notices: what notifications cost.
    QuickliteSubscribed,
    /// `quicklite-subscribed-100`: quicklite with a hundred subscribers to its change notices.
    QuickliteSubscribed100,
    /// `quicklite-closure`: quicklite's `held-tx` transaction written as one `write` closure, its think time a
    /// blocking sleep inside it on the writer's thread, instead of `begin()`'s statements awaited one by one: the
    /// same time holding the writer, without a round trip per statement. Only for `held-tx`.
    QuickliteClosure,
    /// `quicklite-feed`: quicklite with its change feed on the tables the workload writes (`Builder::change_feed`):
    /// what recording every change in the same transaction costs the writes. Only for the workloads that write the
    /// `items` table.
    QuickliteFeed,
    /// `turso-mvcc`: `turso` in Turso's MVCC mode, every write transaction opened with `BEGIN CONCURRENT`.
    TursoMvcc,
    /// `ceiling-async`: the ceiling's statements — a plain connection per runtime worker, reads in a snapshot kept
    /// until a commit, one write at a time — called on the worker in the lab's client loop, one request at a time:
    /// what a request through the async runtime can reach at most, with no hand-off and nothing of a library. A
    /// variant of the ceiling, for its single-row workloads but the queue.
    CeilingAsync,
    /// `postgres`: the `orm` suite on a PostgreSQL server the run provides (`--with-postgres`, `--postgres-url`).
    Postgres,
}

impl ApproachName {
    /// Every approach, in the order the matrix runs them and messages list them: the ceiling, the Rust approaches
    /// (the blocking patterns, the crates, Turso, quicklite), the other languages', the variants (quicklite's, Turso's,
    /// then the ceiling's), then the one that needs a server.
    pub const ALL: [ApproachName; 26] = [
        Self::Ceiling,
        Self::DirectBlocking,
        Self::SpawnBlocking,
        Self::PerRequest,
        Self::TokioRusqlite,
        Self::DeadpoolSqlite,
        Self::AsyncSqlite,
        Self::Sqlx,
        Self::TrailbaseSqlite,
        Self::Turso,
        Self::Quicklite,
        Self::GoMattn,
        Self::GoModernc,
        Self::GoZombiezen,
        Self::NodeBetterSqlite3,
        Self::NodeSqlite,
        Self::QuickliteTimeouts,
        Self::QuickliteWritesFirst,
        Self::QuickliteNoInline,
        Self::QuickliteSubscribed,
        Self::QuickliteSubscribed100,
        Self::QuickliteClosure,
        Self::QuickliteFeed,
        Self::TursoMvcc,
        Self::CeilingAsync,
        Self::Postgres,
    ];

    /// The name used in cells, results, reports and on the command line.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Ceiling => "ceiling",
            Self::CeilingAsync => "ceiling-async",
            Self::DirectBlocking => "direct-blocking",
            Self::SpawnBlocking => "spawn-blocking",
            Self::PerRequest => "per-request",
            Self::TokioRusqlite => "tokio-rusqlite",
            Self::DeadpoolSqlite => "deadpool-sqlite",
            Self::AsyncSqlite => "async-sqlite",
            Self::Sqlx => "sqlx",
            Self::TrailbaseSqlite => "trailbase-sqlite",
            Self::Turso => "turso",
            Self::Quicklite => "quicklite",
            Self::GoMattn => "go-mattn",
            Self::GoModernc => "go-modernc",
            Self::GoZombiezen => "go-zombiezen",
            Self::NodeBetterSqlite3 => "node-better-sqlite3",
            Self::NodeSqlite => "node-sqlite",
            Self::QuickliteTimeouts => "quicklite-timeouts",
            Self::QuickliteWritesFirst => "quicklite-writes-first",
            Self::QuickliteNoInline => "quicklite-no-inline",
            Self::QuickliteSubscribed => "quicklite-subscribed",
            Self::QuickliteSubscribed100 => "quicklite-subscribed-100",
            Self::QuickliteClosure => "quicklite-closure",
            Self::QuickliteFeed => "quicklite-feed",
            Self::TursoMvcc => "turso-mvcc",
            Self::Postgres => "postgres",
        }
    }

    /// The program that measures it.
    pub fn runner(self) -> RunnerProgram {
        match self {
            Self::Ceiling
            | Self::CeilingAsync
            | Self::DirectBlocking
            | Self::SpawnBlocking
            | Self::PerRequest
            | Self::AsyncSqlite
            | Self::Quicklite
            | Self::QuickliteTimeouts
            | Self::QuickliteWritesFirst
            | Self::QuickliteNoInline
            | Self::QuickliteSubscribed
            | Self::QuickliteSubscribed100
            | Self::QuickliteClosure
            | Self::QuickliteFeed
            | Self::Postgres => RunnerProgram::Quicklite,
            Self::TokioRusqlite | Self::DeadpoolSqlite => RunnerProgram::Rusqlite040,
            Self::Sqlx => RunnerProgram::Sqlx,
            Self::TrailbaseSqlite => RunnerProgram::Trailbase,
            Self::Turso | Self::TursoMvcc => RunnerProgram::Turso,
            Self::GoMattn | Self::GoModernc | Self::GoZombiezen => RunnerProgram::Go,
            Self::NodeBetterSqlite3 | Self::NodeSqlite => RunnerProgram::Node,
        }
    }

    /// Whether a runner in another language (Go, Node) measures it.
    pub fn is_other_language(self) -> bool {
        self.runner().is_other_language()
    }

    /// The approach this one is a variant of — quicklite for its variants, which change one setting of it, turso for
    /// its MVCC mode, the ceiling for its run through the async runtime — or the approach itself.
    pub fn base(self) -> ApproachName {
        match self {
            Self::QuickliteTimeouts
            | Self::QuickliteWritesFirst
            | Self::QuickliteNoInline
            | Self::QuickliteSubscribed
            | Self::QuickliteSubscribed100
            | Self::QuickliteClosure
            | Self::QuickliteFeed => Self::Quicklite,
            Self::TursoMvcc => Self::Turso,
            Self::CeilingAsync => Self::Ceiling,
            other => other,
        }
    }

    /// Whether it is a variant of another approach ([`ApproachName::base`]), measured only when named.
    pub fn is_variant(self) -> bool {
        self.base() != self
    }

    /// Whether it needs a server the run provides (`--with-postgres` or `--postgres-url`): it is never in the
    /// default list, and it has no SQLite knobs.
    pub fn needs_server(self) -> bool {
        self == Self::Postgres
    }

    /// Whether a run measures it when not told which approaches to measure: all but the variants and those that
    /// need a server.
    pub fn runs_by_default(self) -> bool {
        !self.is_variant() && !self.needs_server()
    }

    /// Whether it runs custom workloads (`--workload-file`): every approach on SQLite in Rust, whose runner takes any
    /// SQL with its values. The Go and Node runners implement the built-in workloads only, and PostgreSQL speaks
    /// another SQL.
    pub fn runs_custom(self) -> bool {
        self.implements(Workload::Custom)
    }

    /// Whether it implements `workload`; the matrix leaves it out of that workload's cells otherwise.
    pub fn implements(self, workload: Workload) -> bool {
        use Workload::{
            Custom, HeldTx, Http, Insert, LongRead, Mixed, MultiDb, Orm, PointRead, Queue,
            Throughput, WriteRead,
        };
        match self {
            // Single-row operations on one database: a batch of them is one transaction on a plain connection.
            Self::Ceiling => matches!(
                workload,
                PointRead | Insert | Mixed | WriteRead | Queue | Custom
            ),
            // The runners of sqlx and trailbase-sqlite have no queue operations, no HTTP service, no ORM suite, no
            // batched write transaction and no counted reads.
            Self::Sqlx => !matches!(workload, Queue | Http | Orm | Throughput | LongRead),
            // Nor a transaction held across `.await`: trailbase-sqlite 0.3 has no `OwnedTx` (it came later), only
            // closures run on its writer thread and a write lock whose guard borrows the connection.
            Self::TrailbaseSqlite => !matches!(
                workload,
                Queue | Http | Orm | Throughput | LongRead | HeldTx
            ),
            Self::GoMattn | Self::GoModernc | Self::GoZombiezen => {
                matches!(workload, PointRead | Insert | Queue | MultiDb)
            }
            Self::NodeBetterSqlite3 | Self::NodeSqlite => {
                matches!(workload, PointRead | Insert | Queue)
            }
            Self::Postgres => workload == Orm,
            Self::CeilingAsync => matches!(workload, PointRead | Insert | Mixed | WriteRead),
            // Turso's runner has no HTTP service, no ORM suite, no multi-db, no counted reads (a recursive CTE) and
            // no held transaction.
            Self::Turso | Self::TursoMvcc => {
                !matches!(workload, Http | Orm | MultiDb | LongRead | HeldTx)
            }
            // A transaction held across `.await` is measured where the library offers one (quicklite's `begin()`,
            // sqlx's `begin()`); the other Rust approaches run closures or calls, with nothing to hold.
            Self::DirectBlocking
            | Self::SpawnBlocking
            | Self::PerRequest
            | Self::TokioRusqlite
            | Self::DeadpoolSqlite
            | Self::AsyncSqlite => workload != HeldTx,
            Self::QuickliteClosure => workload == HeldTx,
            Self::QuickliteFeed => {
                matches!(workload, Insert | Mixed | WriteRead | Throughput | HeldTx)
            }
            Self::Quicklite
            | Self::QuickliteTimeouts
            | Self::QuickliteWritesFirst
            | Self::QuickliteNoInline
            | Self::QuickliteSubscribed
            | Self::QuickliteSubscribed100 => true,
        }
    }
}

impl fmt::Display for ApproachName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(self.as_str())
    }
}

impl FromStr for ApproachName {
    type Err = UnknownApproach;

    fn from_str(name: &str) -> Result<Self, Self::Err> {
        Self::ALL
            .into_iter()
            .find(|approach| approach.as_str() == name)
            .ok_or_else(|| UnknownApproach {
                name: name.to_owned(),
            })
    }
}

/// A cell's approach (a name) is the approach `other` when it is `other`'s name.
impl PartialEq<ApproachName> for str {
    fn eq(&self, other: &ApproachName) -> bool {
        self == other.as_str()
    }
}

/// See `PartialEq<ApproachName> for str`.
impl PartialEq<ApproachName> for String {
    fn eq(&self, other: &ApproachName) -> bool {
        self.as_str() == other.as_str()
    }
}

/// See `PartialEq<ApproachName> for str`.
impl PartialEq<str> for ApproachName {
    fn eq(&self, other: &str) -> bool {
        self.as_str() == other
    }
}

/// See `PartialEq<ApproachName> for str`.
impl PartialEq<String> for ApproachName {
    fn eq(&self, other: &String) -> bool {
        self.as_str() == other
    }
}

impl RunnerProgram {
    /// The approaches this program measures ([`ApproachName::runner`]), in [`ApproachName::ALL`]'s order.
    pub fn approaches(self) -> Vec<ApproachName> {
        ApproachName::ALL
            .into_iter()
            .filter(|approach| approach.runner() == self)
            .collect()
    }
}

/// `--approaches` and `--baseline` take the names of [`ApproachName::as_str`]: `--help` lists them, and clap
/// refuses any other name with the list. Written out rather than derived so that each name is spelled once, in
/// `as_str`, for the command line, cells and reports alike.
#[cfg(feature = "clap")]
impl clap::ValueEnum for ApproachName {
    fn value_variants<'a>() -> &'a [Self] {
        &Self::ALL
    }

    fn to_possible_value(&self) -> Option<clap::builder::PossibleValue> {
        Some(clap::builder::PossibleValue::new(self.as_str()))
    }
}

/// A name that is not an approach's, with the valid ones in its message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnknownApproach {
    /// The name as given.
    pub name: String,
}

impl fmt::Display for UnknownApproach {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let valid: Vec<&str> = ApproachName::ALL.map(ApproachName::as_str).to_vec();
        write!(
            f,
            "unknown approach `{}` (valid approaches: {})",
            self.name,
            valid.join(", ")
        )
    }
}

impl std::error::Error for UnknownApproach {}

#[cfg(test)]
mod tests {
    use super::*;
    use ApproachName::*;

    /// The approaches that have `property`, in [`ApproachName::ALL`]'s order.
    fn having(property: fn(ApproachName) -> bool) -> Vec<ApproachName> {
        ApproachName::ALL
            .into_iter()
            .filter(|a| property(*a))
            .collect()
    }

    #[test]
    fn every_name_round_trips_through_from_str_and_display() {
        for approach in ApproachName::ALL {
            assert_eq!(approach.to_string().parse(), Ok(approach));
            assert_eq!(approach.to_string(), approach.as_str());
            // A cell's name compares equal to its approach, both ways.
            let in_a_cell: String = approach.to_string();
            assert!(in_a_cell == approach && *in_a_cell == approach);
            assert!(approach == in_a_cell && approach == *in_a_cell);
        }
        let mut names: Vec<&str> = ApproachName::ALL.map(ApproachName::as_str).to_vec();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), ApproachName::ALL.len(), "names are distinct");
    }

    #[test]
    fn an_unknown_name_is_refused_with_every_valid_one() {
        let err = "tokio-sqlite".parse::<ApproachName>().unwrap_err();
        assert_eq!(
            err.to_string(),
            "unknown approach `tokio-sqlite` (valid approaches: ceiling, direct-blocking, spawn-blocking, \
             per-request, tokio-rusqlite, deadpool-sqlite, async-sqlite, sqlx, trailbase-sqlite, turso, quicklite, \
             go-mattn, go-modernc, go-zombiezen, node-better-sqlite3, node-sqlite, quicklite-timeouts, \
             quicklite-writes-first, quicklite-no-inline, quicklite-subscribed, quicklite-subscribed-100, \
             quicklite-closure, quicklite-feed, turso-mvcc, ceiling-async, postgres)"
        );
        assert!("Quicklite".parse::<ApproachName>().is_err());
        assert!("".parse::<ApproachName>().is_err());
    }

    #[test]
    fn go_and_node_are_other_languages_and_run_no_custom_workload() {
        assert_eq!(
            having(ApproachName::is_other_language),
            [
                GoMattn,
                GoModernc,
                GoZombiezen,
                NodeBetterSqlite3,
                NodeSqlite
            ]
        );
        for approach in ApproachName::ALL {
            // quicklite's variants for one question each run only its workloads.
            let one_question = matches!(approach, QuickliteClosure | QuickliteFeed | CeilingAsync);
            assert_eq!(
                approach.runs_custom(),
                !approach.is_other_language() && !approach.needs_server() && !one_question,
                "{approach}"
            );
        }
        assert!(Sqlx.runs_custom() && TokioRusqlite.runs_custom() && Ceiling.runs_custom());
        assert!(!Postgres.runs_custom() && !GoMattn.runs_custom() && !NodeSqlite.runs_custom());
    }

    #[test]
    fn postgres_needs_a_server_and_runs_the_orm_suite_only() {
        assert_eq!(having(ApproachName::needs_server), [Postgres]);
        let workloads: Vec<Workload> = Workload::ALL
            .into_iter()
            .filter(|w| Postgres.implements(*w))
            .collect();
        assert_eq!(workloads, [Workload::Orm]);
    }

    #[test]
    fn the_variants_are_quicklite_s_turso_s_and_the_ceiling_s_and_measured_only_when_named() {
        let variants = having(ApproachName::is_variant);
        assert_eq!(
            variants,
            [
                QuickliteTimeouts,
                QuickliteWritesFirst,
                QuickliteNoInline,
                QuickliteSubscribed,
                QuickliteSubscribed100,
                QuickliteClosure,
                QuickliteFeed,
                TursoMvcc,
                CeilingAsync
            ]
        );
        assert!(
            variants
                .iter()
                .all(|v| [Quicklite, Turso, Ceiling].contains(&v.base()))
        );
        assert!(variants.iter().all(|v| v.runner() == v.base().runner()));
        let default: Vec<&str> = having(ApproachName::runs_by_default)
            .into_iter()
            .map(ApproachName::as_str)
            .collect();
        assert_eq!(
            default.join(","),
            "ceiling,direct-blocking,spawn-blocking,per-request,tokio-rusqlite,deadpool-sqlite,async-sqlite,\
             sqlx,trailbase-sqlite,turso,quicklite,go-mattn,go-modernc,go-zombiezen,node-better-sqlite3,node-sqlite"
        );
    }

    #[test]
    fn every_approach_has_one_program_and_each_program_some_approach() {
        let programs = [
            RunnerProgram::Quicklite,
            RunnerProgram::Rusqlite040,
            RunnerProgram::Sqlx,
            RunnerProgram::Trailbase,
            RunnerProgram::Turso,
            RunnerProgram::Go,
            RunnerProgram::Node,
        ];
        let mut measured: Vec<ApproachName> =
            programs.iter().flat_map(|p| p.approaches()).collect();
        assert!(programs.iter().all(|p| !p.approaches().is_empty()));
        measured.sort();
        assert_eq!(measured, ApproachName::ALL);
        assert_eq!(
            RunnerProgram::Rusqlite040.approaches(),
            [TokioRusqlite, DeadpoolSqlite]
        );
    }

    #[test]
    fn the_workloads_each_approach_implements() {
        let implemented = |approach: ApproachName| -> String {
            Workload::ALL
                .into_iter()
                .filter(|w| approach.implements(*w))
                .map(Workload::name)
                .collect::<Vec<_>>()
                .join(",")
        };
        let all = "point-read,insert,mixed,write-read,multi-db,queue,http,orm,throughput,long-read";
        for approach in [DirectBlocking, TokioRusqlite] {
            assert_eq!(implemented(approach), all, "{approach}");
        }
        for approach in [Quicklite, QuickliteNoInline] {
            assert_eq!(
                implemented(approach),
                format!("{all},held-tx"),
                "{approach}"
            );
        }
        assert_eq!(implemented(QuickliteClosure), "held-tx");
        assert_eq!(
            implemented(QuickliteFeed),
            "insert,mixed,write-read,throughput,held-tx"
        );
        assert_eq!(
            implemented(Ceiling),
            "point-read,insert,mixed,write-read,queue"
        );
        assert_eq!(
            implemented(CeilingAsync),
            "point-read,insert,mixed,write-read"
        );
        assert_eq!(
            implemented(Sqlx),
            "point-read,insert,mixed,write-read,multi-db,held-tx"
        );
        assert_eq!(
            implemented(TrailbaseSqlite),
            "point-read,insert,mixed,write-read,multi-db"
        );
        assert_eq!(
            implemented(Turso),
            "point-read,insert,mixed,write-read,queue,throughput"
        );
        assert_eq!(implemented(TursoMvcc), implemented(Turso));
        assert!(Turso.runs_custom() && TursoMvcc.runs_custom());
        assert_eq!(RunnerProgram::Turso.approaches(), [Turso, TursoMvcc]);
        assert_eq!(implemented(GoModernc), "point-read,insert,multi-db,queue");
        assert_eq!(implemented(NodeBetterSqlite3), "point-read,insert,queue");
        assert_eq!(implemented(Postgres), "orm");
    }
}
