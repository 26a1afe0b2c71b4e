//! The runner programs: [`RunnerProgram`].
//!
//! Cargo allows one `links = "sqlite3"` crate per workspace, so the Rust approaches live in four programs, each
//! built against the SQLite binding its crates pin, and a fifth for Turso (its own engine, with a large dependency
//! tree); the drivers of other languages have programs of their own.
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
    /// `runner-turso` (runners/turso): the turso crate, Turso's own engine in Rust (no C SQLite).
    Turso,
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

    /// Whether `--quick` measures its approaches: not when building the program needs more than the Rust toolchain
    /// ([`RunnerProgram::needs_more_than_rust`]), takes minutes (the runners of other languages; Turso, whose engine
    /// takes several minutes to compile in release on a 2-core machine), or both.
    pub fn in_quick_run(self) -> bool {
        !self.needs_more_than_rust() && !self.is_other_language() && self != Self::Turso
    }

    /// Whether the process knobs of the Rust runners — memory statistics, the mutex mode, SQLite build profiles —
    /// reach the program's database: not for the runners of other languages (their drivers link and set up their own
    /// SQLite), nor for Turso (no C SQLite at all). The matrix runs their approaches at the first value of those axes.
    pub fn takes_process_knobs(self) -> bool {
        !self.is_other_language() && self != Self::Turso
    }
}
