//! The SQLite linked into this binary: version, threading mode, compile options, memory statistics, and whether it
//! has the WAL-reset bug.
//!
//! This is the SQLite every program built from this workspace links (rusqlite's bundled copy, with the compile
//! options of `.cargo/config.toml`); another program may link another build, so it reports on itself.

use quicklite::setup::SqliteInfo;
use serde::Serialize;

use super::finding::{Finding, Severity};

const DOC_MEMSTATUS_COMPILE: &str = "https://www.sqlite.org/compile.html#default_memstatus";
const DOC_MEMSTATUS_CONFIG: &str =
    "https://www.sqlite.org/c3ref/c_config_covering_index_scan.html#sqliteconfigmemstatus";
const DOC_THREADSAFE: &str = "https://www.sqlite.org/threadsafe.html";
const DOC_OPEN: &str = "https://www.sqlite.org/c3ref/open.html";
const DOC_WAL_RESET_BUG: &str = "https://www.sqlite.org/wal.html#walresetbug";

/// The SQLite section of the report.
#[derive(Debug, Serialize)]
pub struct SqliteSection {
    /// `sqlite_version()`, e.g. `3.51.1`.
    pub version: String,
    /// `sqlite_source_id()`: the exact check-in.
    pub source_id: String,
    /// `sqlite3_threadsafe()`: 0 single-thread, 1 serialized, 2 multi-thread.
    pub threadsafe: i32,
    /// The name of that threading mode.
    pub threading_mode: &'static str,
    /// `PRAGMA compile_options`.
    pub compile_options: Vec<String>,
    /// Whether `SQLITE_DEFAULT_MEMSTATUS=0` is compiled in, so every program starts with statistics off.
    pub default_memstatus_0: bool,
    /// Whether memory statistics are off in this process after quicklite's set-up, as measured.
    pub memory_statistics_off: bool,
    /// What quicklite's process set-up did, in a sentence.
    pub setup: String,
    /// Findings about this SQLite.
    pub findings: Vec<Finding>,
}

/// The section, with its findings, from quicklite's report on the linked SQLite.
pub fn section(info: &SqliteInfo) -> SqliteSection {
    let default_memstatus_0 = compile_option(info, "DEFAULT_MEMSTATUS") == Some("0");
    let findings = vec![
        memory_statistics(info, default_memstatus_0),
        threading(info.threadsafe),
        wal_reset_bug(info),
    ];
    SqliteSection {
        version: info.version.clone(),
        source_id: info.source_id.clone(),
        threadsafe: info.threadsafe,
        threading_mode: threading_mode(info.threadsafe),
        compile_options: info.compile_options.clone(),
        default_memstatus_0,
        memory_statistics_off: info.setup.memory_statistics_off,
        setup: info.setup.detail.clone(),
        findings,
    }
}

/// The value of compile option `name` (`DEFAULT_MEMSTATUS=0` → `Some("0")`; a flag without value → `Some("")`).
pub fn compile_option<'a>(info: &'a SqliteInfo, name: &str) -> Option<&'a str> {
    info.compile_options.iter().find_map(|option| {
        let rest = option.strip_prefix(name)?;
        if rest.is_empty() {
            Some("")
        } else {
            rest.strip_prefix('=')
        }
    })
}

fn threading_mode(threadsafe: i32) -> &'static str {
    match threadsafe {
        0 => "single-thread",
        1 => "serialized",
        2 => "multi-thread",
        _ => "unknown",
    }
}

fn memory_statistics(info: &SqliteInfo, default_memstatus_0: bool) -> Finding {
    let why = "With memory statistics on, every allocation and free inside SQLite updates the status counters \
               under one process-wide mutex, so SQLite work on all threads queues on it. SQLite lists \
               SQLITE_DEFAULT_MEMSTATUS=0 among its recommended compile-time options: it makes sqlite3_malloc() run \
               much faster, and with it the whole library. At run time, sqlite3_config(SQLITE_CONFIG_MEMSTATUS, 0) \
               does the same, but only before SQLite initializes.";
    let docs = [DOC_MEMSTATUS_COMPILE, DOC_MEMSTATUS_CONFIG];
    let build = "build SQLite with -DSQLITE_DEFAULT_MEMSTATUS=0 (for rusqlite's bundled copy: LIBSQLITE3_FLAGS, as \
                 this workspace's .cargo/config.toml does) so every program linking it starts with them off";
    let finding = if !info.setup.memory_statistics_off {
        Finding::new(
            "memory statistics",
            Severity::Warning,
            format!("on: {}", info.setup.detail),
        )
        .fix(format!(
            "call quicklite::setup::sqlite_setup() before anything in the process opens a connection, or {build}"
        ))
    } else if default_memstatus_0 {
        Finding::new(
            "memory statistics",
            Severity::Ok,
            "off (SQLITE_DEFAULT_MEMSTATUS=0 is compiled in)",
        )
        .fix("nothing to do: every program linking this SQLite starts with memory statistics off")
    } else {
        Finding::new(
            "memory statistics",
            Severity::Info,
            "off in this process (quicklite's run-time set-up); SQLITE_DEFAULT_MEMSTATUS=0 is not compiled in",
        )
        .fix(format!(
            "programs linking this SQLite keep statistics on unless they call quicklite::setup::sqlite_setup() (which \
             Database::open does) before their first connection; to make off the default, {build}"
        ))
    };
    finding.why(why, &docs)
}

fn threading(threadsafe: i32) -> Finding {
    let why = "In serialized mode every connection has a mutex, taken on each call, so any thread may use any \
               connection; in multi-thread mode connections have no mutex, which is safe as long as no connection \
               is used by two threads at once, and SQLITE_OPEN_NOMUTEX selects that mode per connection. \
               Single-thread mode leaves out all mutexes: SQLite is then unsafe to use from more than one thread.";
    let docs = [DOC_THREADSAFE, DOC_OPEN];
    let value = format!(
        "{} (sqlite3_threadsafe() = {threadsafe})",
        threading_mode(threadsafe)
    );
    let finding = match threadsafe {
        1 => Finding::new("threading mode", Severity::Info, value).fix(
            "nothing to do for quicklite, which opens every connection with SQLITE_OPEN_NOMUTEX (each belongs to \
             one thread); other code takes a mutex on every call unless it opens connections the same way",
        ),
        2 => Finding::new("threading mode", Severity::Ok, value)
            .fix("nothing to do: connections have no mutex of their own; keep each one on one thread at a time"),
        _ => Finding::new("threading mode", Severity::Warning, value).fix(
            "rebuild SQLite with SQLITE_THREADSAFE=1 or 2: quicklite runs a writer thread and reader threads",
        ),
    };
    finding.why(why, &docs)
}

/// An error on a SQLite with the WAL-reset bug (`quicklite::setup::has_wal_reset_bug`), which quicklite refuses to open
/// databases on: doctor then exits 1.
fn wal_reset_bug(info: &SqliteInfo) -> Finding {
    let why = "A data race in SQLite's WAL code: a checkpoint that starts while another connection's commit resets \
               the WAL can miss the reset and leave a wrong field in the wal-index header, and a later checkpoint \
               may then skip part of a transaction, corrupting the database or losing committed writes. It needs \
               WAL mode, two or more connections to one database and checkpoints, which is how quicklite runs \
               every database. SQLite 3.7.0 to 3.51.2 have it; 3.51.3 fixes it, and the backports 3.50.7 and \
               3.44.6.";
    let finding = if quicklite::setup::has_wal_reset_bug(info.version_number) {
        Finding::new(
            "WAL-reset bug",
            Severity::Error,
            format!(
                "SQLite {} has it (fixed in 3.51.3, 3.50.7 and 3.44.6)",
                info.version
            ),
        )
        .fix(
            "link a SQLite that fixes it: 3.51.3 or later, or 3.50.7 or 3.44.6 and later in those release lines \
             (rusqlite's bundled feature brings a fixed one); until then quicklite refuses to open a database on \
             this SQLite unless told to (Builder::allow_wal_reset_bug(true))",
        )
    } else {
        Finding::new(
            "WAL-reset bug",
            Severity::Ok,
            format!(
                "not in SQLite {} (fixed in 3.51.3, 3.50.7 and 3.44.6)",
                info.version
            ),
        )
        .fix("nothing to do: keep a SQLite of 3.51.3 or later (or 3.50.7, 3.44.6 and later in those lines)")
    };
    finding.why(why, &[DOC_WAL_RESET_BUG])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::doctor::finding::Summary;

    fn info(options: &[&str], off: bool) -> SqliteInfo {
        SqliteInfo {
            version: "3.54.1".into(),
            version_number: 3_054_001,
            source_id: "id".into(),
            compile_options: options.iter().map(|s| s.to_string()).collect(),
            threadsafe: 1,
            setup: quicklite::setup::SetupReport {
                requested: quicklite::setup::Setup::default(),
                applied: true,
                memory_statistics_off: off,
                detail: "what happened".into(),
            },
        }
    }

    #[test]
    fn compile_options_are_matched_by_whole_name() {
        let i = info(
            &[
                "DEFAULT_MEMSTATUS=0",
                "DEFAULT_WAL_SYNCHRONOUS=1",
                "OMIT_DEPRECATED",
            ],
            true,
        );
        assert_eq!(compile_option(&i, "DEFAULT_MEMSTATUS"), Some("0"));
        assert_eq!(compile_option(&i, "DEFAULT_WAL_SYNCHRONOUS"), Some("1"));
        assert_eq!(compile_option(&i, "DEFAULT_SYNCHRONOUS"), None);
        assert_eq!(compile_option(&i, "OMIT_DEPRECATED"), Some(""));
        assert_eq!(compile_option(&i, "OMIT"), None);
    }

    #[test]
    fn memory_statistics_severity_follows_the_build_and_the_set_up() {
        let compiled = section(&info(&["DEFAULT_MEMSTATUS=0"], true));
        assert!(compiled.default_memstatus_0);
        assert_eq!(compiled.findings[0].severity, Severity::Ok);
        let runtime_only = section(&info(&[], true));
        assert_eq!(runtime_only.findings[0].severity, Severity::Info);
        let on = section(&info(&[], false));
        assert_eq!(on.findings[0].severity, Severity::Warning);
        assert!(on.findings[0].value.contains("what happened"));
    }

    /// The SQLite section's finding on the WAL-reset bug for SQLite `version`, numbered `number`.
    fn wal_reset_finding(version: &str, number: i32) -> Finding {
        let mut linked = info(&[], true);
        linked.version = version.into();
        linked.version_number = number;
        section(&linked)
            .findings
            .into_iter()
            .find(|f| f.check == "WAL-reset bug")
            .expect("a finding on the WAL-reset bug")
    }

    #[test]
    fn a_sqlite_with_the_wal_reset_bug_is_an_error_that_fails_doctor() {
        let affected = wal_reset_finding("3.49.2", 3_049_002);
        assert_eq!(affected.severity, Severity::Error);
        assert!(
            affected.value.contains("SQLite 3.49.2 has it"),
            "{}",
            affected.value
        );
        for fixed in ["3.51.3", "3.50.7", "3.44.6", "allow_wal_reset_bug"] {
            assert!(
                affected.recommendation.contains(fixed),
                "{fixed} in {}",
                affected.recommendation
            );
        }
        assert!(
            affected.why.contains("corrupting the database"),
            "{}",
            affected.why
        );
        assert_eq!(affected.docs, [DOC_WAL_RESET_BUG]);
        assert_eq!(Summary::of([&affected]).exit_status, 1);
    }

    #[test]
    fn a_sqlite_that_fixes_the_wal_reset_bug_is_ok_including_the_backports() {
        for (version, number) in [
            ("3.54.1", 3_054_001),
            ("3.51.3", 3_051_003),
            ("3.50.7", 3_050_007),
            ("3.44.6", 3_044_006),
        ] {
            let fixed = wal_reset_finding(version, number);
            assert_eq!(fixed.severity, Severity::Ok, "{version}");
            assert!(fixed.value.contains(version), "{}", fixed.value);
        }
        assert_eq!(
            wal_reset_finding("3.50.6", 3_050_006).severity,
            Severity::Error
        );
    }
}
