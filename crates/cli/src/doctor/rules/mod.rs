//! What a database's readings mean: one finding per setting, each with a recommendation and SQLite's documentation.
//!
//! Recommendations quote quicklite's [`Profile::Server`] values, so they follow the library.

use quicklite::Profile;

use super::finding::{Finding, Severity};
use super::observed::{Observed, Reading};

pub use connection::FRESH_BUSY_TIMEOUT_MS;
use connection::{
    busy_timeout, cache_size, foreign_keys, journal_size_limit, mmap_size, synchronous,
};
use file::{
    auto_vacuum, free_pages, journal_mode, litestream, page_size, quick_check, user_version,
    wal_file,
};
pub use file::{auto_vacuum_name, created_files};

mod connection;
mod file;

const DOC_JOURNAL_SIZE_LIMIT: &str = "https://www.sqlite.org/pragma.html#pragma_journal_size_limit";
const DOC_QUICK_CHECK: &str = "https://www.sqlite.org/pragma.html#pragma_quick_check";
const DOC_CORRUPT: &str = "https://www.sqlite.org/howtocorrupt.html";

/// Every finding about the database, in the order of the report.
pub fn findings(o: &Observed) -> Vec<Finding> {
    let page_size = o.page_size.clone().unwrap_or(4096);
    let mut out = vec![
        with("journal_mode", &o.journal_mode, |m| journal_mode(m)),
        with("synchronous", &o.synchronous, |&s| synchronous(s, o.wal)),
        busy_timeout(),
        with("foreign_keys", &o.foreign_keys, |&on| foreign_keys(on)),
        with("cache_size", &o.cache_size, |&c| cache_size(c, page_size)),
        with("mmap_size", &o.mmap_size, |&m| mmap_size(m)),
        with("page_size", &o.page_size, |&p| self::page_size(p)),
        with("auto_vacuum", &o.auto_vacuum, |&a| auto_vacuum(a)),
        match (&o.freelist_count, &o.page_count, &o.auto_vacuum) {
            (Ok(free), Ok(pages), av) => free_pages(*free, *pages, av.clone().unwrap_or(0)),
            (Err(e), _, _) | (_, Err(e), _) => unreadable("free pages", e),
        },
    ];
    if o.wal {
        let limit = o.journal_size_limit.clone().unwrap_or(-1);
        out.push(wal_file(o.wal_size, o.wal_frames, limit));
    }
    if o.litestream == Ok(true) {
        out.push(litestream());
    }
    out.push(with("journal_size_limit", &o.journal_size_limit, |&l| {
        journal_size_limit(l)
    }));
    out.push(with("user_version", &o.user_version, |&v| user_version(v)));
    out.push(quick_check(&o.quick_check));
    out
}

/// quicklite's Server profile value for `pragma`.
fn server(pragma: &str) -> &'static str {
    Profile::Server
        .pragmas()
        .into_iter()
        .find(|(name, _)| *name == pragma)
        .map_or("?", |(_, value)| value)
}

/// The finding `judge` makes of a value, or an error finding if corruption kept it from being read.
fn with<T>(
    check: &'static str,
    reading: &Reading<T>,
    judge: impl FnOnce(&T) -> Finding,
) -> Finding {
    match reading {
        Ok(value) => judge(value),
        Err(message) => unreadable(check, message),
    }
}

fn unreadable(check: &'static str, message: &str) -> Finding {
    Finding::new(check, Severity::Error, format!("unreadable: {message}"))
        .fix("see quick_check below: the database is damaged")
        .why(
            "SQLite reported corruption (SQLITE_CORRUPT) while reading this value.",
            &[DOC_QUICK_CHECK, DOC_CORRUPT],
        )
}

/// `512 B`, `32.0 KiB`, `1.5 MiB`, `2.0 GiB`.
pub fn bytes(n: u64) -> String {
    const UNITS: [&str; 4] = ["KiB", "MiB", "GiB", "TiB"];
    if n < 1024 {
        return format!("{n} B");
    }
    let mut value = n as f64 / 1024.0;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    format!("{value:.1} {}", UNITS[unit])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn healthy() -> Observed {
        Observed {
            journal_mode: Ok("wal".into()),
            synchronous: Ok(1),
            page_size: Ok(4096),
            page_count: Ok(100),
            freelist_count: Ok(5),
            cache_size: Ok(-2000),
            mmap_size: Ok(0),
            foreign_keys: Ok(false),
            auto_vacuum: Ok(0),
            journal_size_limit: Ok(-1),
            user_version: Ok(3),
            litestream: Ok(false),
            wal: true,
            wal_size: Some(4096),
            wal_frames: Some(1),
            quick_check: Ok(vec!["ok".into()]),
        }
    }

    fn finding<'a>(findings: &'a [Finding], check: &str) -> &'a Finding {
        findings
            .iter()
            .find(|f| f.check == check)
            .unwrap_or_else(|| panic!("no {check} finding"))
    }

    #[test]
    fn a_healthy_wal_database_has_no_warning_and_cites_the_docs() {
        let findings = findings(&healthy());
        assert!(
            findings.iter().all(|f| f.severity <= Severity::Info),
            "{findings:#?}"
        );
        assert!(
            findings
                .iter()
                .all(|f| !f.recommendation.is_empty() && !f.why.is_empty())
        );
        assert!(findings.iter().all(|f| {
            f.docs
                .iter()
                .all(|d| d.starts_with("https://www.sqlite.org/"))
                && !f.docs.is_empty()
        }));
        assert_eq!(finding(&findings, "journal_mode").severity, Severity::Ok);
        let sync = finding(&findings, "synchronous");
        assert!(sync.per_connection && sync.why.contains("power loss"));
    }

    #[test]
    fn a_rollback_journal_is_a_warning_that_recommends_wal() {
        let mut o = healthy();
        o.journal_mode = Ok("delete".into());
        o.wal = false;
        let findings = findings(&o);
        let f = finding(&findings, "journal_mode");
        assert_eq!(f.severity, Severity::Warning);
        assert!(f.recommendation.contains("PRAGMA journal_mode=WAL"));
        assert!(findings.iter().all(|f| f.check != "wal file"));
    }

    #[test]
    fn more_than_a_quarter_of_free_pages_suggests_vacuum() {
        let mut o = healthy();
        o.freelist_count = Ok(25);
        assert_eq!(finding(&findings(&o), "free pages").severity, Severity::Ok);
        o.freelist_count = Ok(26);
        let f = findings(&o);
        let free = finding(&f, "free pages");
        assert_eq!(free.severity, Severity::Info);
        assert!(
            free.recommendation.contains("VACUUM") && free.recommendation.contains("INCREMENTAL")
        );
        assert_eq!(free.value, "26 of 100 pages free (26.0%)");
    }

    #[test]
    fn a_wal_beyond_64_mib_or_its_limit_warns_of_checkpoint_starvation() {
        let mut o = healthy();
        o.wal_size = Some(file::WAL_WARNING_BYTES + 1);
        let f = findings(&o);
        let wal = finding(&f, "wal file");
        assert_eq!(wal.severity, Severity::Warning);
        assert!(wal.why.contains("checkpoint starvation"));
        o.wal_size = Some(2 << 20);
        o.journal_size_limit = Ok(1 << 20);
        assert_eq!(
            finding(&findings(&o), "wal file").severity,
            Severity::Warning
        );
        o.journal_size_limit = Ok(-1);
        assert_eq!(finding(&findings(&o), "wal file").severity, Severity::Ok);
    }

    #[test]
    fn the_warning_threshold_is_the_server_profiles_journal_size_limit() {
        assert_eq!(
            server("journal_size_limit"),
            file::WAL_WARNING_BYTES.to_string()
        );
    }

    #[test]
    fn corruption_is_an_error_with_the_messages() {
        let mut o = healthy();
        o.quick_check = Ok(vec![
            "Tree 2 page 7: btreeInitPage() returns error code 11".into(),
        ]);
        o.page_size = Err("database disk image is malformed".into());
        let f = findings(&o);
        let qc = finding(&f, "quick_check");
        assert_eq!(qc.severity, Severity::Error);
        assert!(qc.value.contains("Tree 2 page 7"));
        assert_eq!(finding(&f, "page_size").severity, Severity::Error);
    }

    #[test]
    fn per_connection_settings_are_marked() {
        let f = findings(&healthy());
        for check in [
            "synchronous",
            "busy_timeout",
            "foreign_keys",
            "cache_size",
            "mmap_size",
            "journal_size_limit",
        ] {
            assert!(finding(&f, check).per_connection, "{check}");
        }
        for check in ["journal_mode", "page_size", "auto_vacuum", "user_version"] {
            assert!(!finding(&f, check).per_connection, "{check}");
        }
    }

    #[test]
    fn sizes_are_readable() {
        assert_eq!(bytes(512), "512 B");
        assert_eq!(bytes(32 * 1024), "32.0 KiB");
        assert_eq!(bytes(64 * 1024 * 1024), "64.0 MiB");
    }

    #[test]
    fn litestream_s_tables_bring_the_advice_to_leave_checkpoints_to_it() {
        assert!(
            !findings(&healthy())
                .iter()
                .any(|f| f.check == "replication")
        );
        let replicated = Observed {
            litestream: Ok(true),
            ..healthy()
        };
        let findings = findings(&replicated);
        let f = finding(&findings, "replication");
        assert_eq!(f.severity, Severity::Info);
        assert!(f.value.contains("Litestream"), "{}", f.value);
        assert!(
            f.recommendation.contains("Checkpointing::External"),
            "{}",
            f.recommendation
        );
    }
}
