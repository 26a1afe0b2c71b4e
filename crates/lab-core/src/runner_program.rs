//! The runner programs: [`RunnerProgram`].
//!
//! Cargo allows one `links = "sqlite3"` crate per workspace, so the Rust approaches live in four programs, each
//! built against the SQLite binding its crates pin; the drivers of other languages have programs of their own.
//! Which program measures an approach is decided with the approach, in
//! [`ApproachName::runner`](crate::ApproachName::runner), and listed per program by [`RunnerProgram::approaches`].

/// A runner program: one process per cell, speaking the runner protocol ([`crate::run_runner_main`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RunnerProgram {
    /// `quicklite-runner` (crates/runner): the approaches on this workspace's rusqlite, the ceiling and PostgreSQL.
    Quicklite,
    /// `runner-rusqlite040` (runners/rusqlite040): tokio-rusqlite and deadpool-sqlite, on rusqlite 0.40.
    Rusqlite040,
    /// `runner-sqlx` (runners/sqlx): sqlx's `SqlitePool`, on its own libsqlite3-sys.
    Sqlx,
    /// `runner-trailbase` (runners/trailbase): trailbase-sqlite, on rusqlite 0.36 with `preupdate_hook`.
    Trailbase,
    /// `runner-go` (runners/go): the Go drivers.
    Go,
    /// `runner-node` (runners/node): the Node drivers.
    Node,
}

impl RunnerProgram {
    /// Whether the program is written in another language than Rust (its driver links its own SQLite, set up by
    /// that driver: the process knobs of a Rust runner do not reach it).
    pub fn is_other_language(self) -> bool {
        matches!(self, Self::Go | Self::Node)
    }

    /// Whether building the program needs more than the Rust toolchain: trailbase-sqlite turns on rusqlite's
    /// `preupdate_hook`, whose bindings bindgen generates at build time, which needs libclang
    /// (`scripts/install-test-deps.sh` installs it). The runners of other languages need their own toolchains,
    /// which this does not count.
    pub fn needs_more_than_rust(self) -> bool {
        self == Self::Trailbase
    }
}
