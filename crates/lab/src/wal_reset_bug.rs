//! SQLite's WAL-reset bug in the reports: which of the SQLite versions the runners reported have it.
//!
//! The bug (<https://sqlite.org/wal.html#walresetbug>) is a data race between a checkpoint and a commit that resets
//! the WAL, which can corrupt a database that several connections write and checkpoint in WAL mode — the set-up of
//! every approach the lab measures. An approach whose SQLite has it is marked [`MARK`] in the reports' tables and
//! named in a note, so that its figures are not read as those of a safe set-up.
//!
//! The rule is the library's, `quicklite::setup::has_wal_reset_bug`; the lab has no SQLite dependency (nor the
//! library's), so it keeps the same rule here, and the command line's tests (`crates/cli/tests/wal_reset_bug.rs`) check
//! that the two agree on every version around the boundaries.

/// The mark of a row whose SQLite has the bug.
pub const MARK: &str = "⚠";

/// The bug's description, on sqlite.org.
pub const DESCRIPTION: &str = "https://sqlite.org/wal.html#walresetbug";

/// The first SQLite with WAL mode, and with the bug: 3.7.0.
const FIRST_AFFECTED: i32 = 3_007_000;

/// The first release of the main line that fixes the bug: 3.51.3.
const FIXED: i32 = 3_051_003;

/// The older release lines the fix was backported to: the line (its `.0` release) and its first fixed release.
const BACKPORTS: [(i32, i32); 2] = [(3_044_000, 3_044_006), (3_050_000, 3_050_007)];

/// Whether SQLite `version_number` (`sqlite3_libversion_number()`, 3051003 for 3.51.3) has the bug: 3.7.0 up to
/// 3.51.2, except 3.44.6 and later of 3.44 and 3.50.7 and later of 3.50. The same rule as the library's
/// `quicklite::setup::has_wal_reset_bug`.
pub fn has_wal_reset_bug(version_number: i32) -> bool {
    let backported = BACKPORTS.iter().any(|&(line, fixed)| {
        (line..line + 1000).contains(&version_number) && version_number >= fixed
    });
    (FIRST_AFFECTED..FIXED).contains(&version_number) && !backported
}

/// The number SQLite gives version `text` (`3.49.2` → 3049002; a fourth part, as in SQLite 3.8.0.2, counts for
/// nothing), or `None` for what is not a SQLite 3 version (a PostgreSQL server's, an empty one).
pub fn version_number(text: &str) -> Option<i32> {
    let parts: Vec<i32> = text
        .trim()
        .split('.')
        .map(|part| part.parse().ok().filter(|n| (0..1000).contains(n)))
        .collect::<Option<_>>()?;
    match parts[..] {
        [3, minor, patch] | [3, minor, patch, _] => Some(3_000_000 + minor * 1000 + patch),
        _ => None,
    }
}

/// Whether the SQLite a runner reported as `version` (`sqlite_version()`) has the bug.
pub fn affected(version: &str) -> bool {
    version_number(version).is_some_and(has_wal_reset_bug)
}

/// `version`, followed by the mark and the bug's name when it has the bug: `3.49.2 ⚠ WAL-reset bug`.
pub fn version_text(version: &str) -> String {
    if affected(version) {
        format!("{version} {MARK} WAL-reset bug")
    } else {
        version.to_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn affected_from_3_7_0_until_3_51_3_except_the_backports_to_3_44_and_3_50() {
        for version in [
            "3.7.0", "3.44.5", "3.45.0", "3.49.2", "3.50.6", "3.51.0", "3.51.2",
        ] {
            assert!(affected(version), "{version} is affected");
        }
        for version in [
            "3.6.23", "3.44.6", "3.50.7", "3.51.3", "3.53.2", "3.53.4", "3.54.1",
        ] {
            assert!(!affected(version), "{version} is not affected");
        }
    }

    #[test]
    fn what_is_not_a_sqlite_version_is_not_marked() {
        for text in ["", "PostgreSQL 17.2", "3.49", "3.x.1", "4.0.0"] {
            assert!(!affected(text), "{text:?}");
        }
        assert_eq!(version_number(" 3.49.2 "), Some(3_049_002));
        assert_eq!(version_number("3.8.0.2"), Some(3_008_000));
    }

    #[test]
    fn a_version_with_the_bug_is_written_with_the_mark() {
        assert_eq!(version_text("3.49.2"), "3.49.2 ⚠ WAL-reset bug");
        assert_eq!(version_text("3.54.1"), "3.54.1");
    }
}
