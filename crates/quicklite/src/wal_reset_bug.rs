//! SQLite's WAL-reset bug: which SQLite versions have it.
//!
//! A data race in SQLite's WAL code, described at <https://sqlite.org/wal.html#walresetbug>: a checkpoint that
//! starts while another connection's commit resets the WAL (starts writing it again from its beginning) can miss
//! the reset and leave a wrong field in the wal-index header; a later checkpoint may then skip part of a
//! transaction, which corrupts the database or loses committed writes. It needs WAL mode, two or more connections
//! to one database and checkpoints — quicklite's very set-up: a writer, readers and checkpoints on connections of
//! their own. SQLite 3.7.0 (which brought WAL) through 3.51.2 have it; 3.51.3 fixes it, and so do the backports
//! 3.50.7 and 3.44.6.
//!
//! [`Builder::open`](crate::Builder::open) refuses to open a database on such a SQLite unless told to
//! ([`Builder::allow_wal_reset_bug`](crate::Builder::allow_wal_reset_bug)); `quicklite doctor` fails on one.

/// The first SQLite with WAL mode, and with the bug: 3.7.0.
const FIRST_AFFECTED: i32 = 3_007_000;

/// The first release of the main line that fixes the bug: 3.51.3.
const FIXED: i32 = 3_051_003;

/// The older release lines the fix was backported to: the line (its `.0` release) and its first fixed release.
const BACKPORTS: [(i32, i32); 2] = [(3_044_000, 3_044_006), (3_050_000, 3_050_007)];

/// Whether the SQLite whose version number is `version_number` has the
/// [WAL-reset bug](https://sqlite.org/wal.html#walresetbug), a data race that can corrupt a database written and
/// checkpointed by several connections in WAL mode.
///
/// `version_number` is SQLite's `sqlite3_libversion_number()` (`rusqlite::version_number()`): 3051003 for
/// 3.51.3. Affected: 3.7.0 up to 3.51.2, except 3.44.6 and later releases of 3.44 and 3.50.7 and later releases of
/// 3.50, to which the fix was backported. SQLite before 3.7.0 has no WAL mode, hence not the bug.
///
/// ```
/// assert!(quicklite::setup::has_wal_reset_bug(3_049_002)); // 3.49.2
/// assert!(!quicklite::setup::has_wal_reset_bug(3_050_007)); // 3.50.7, a backport of the fix
/// assert!(!quicklite::setup::has_wal_reset_bug(quicklite::rusqlite::version_number())); // the bundled SQLite
/// ```
pub fn has_wal_reset_bug(version_number: i32) -> bool {
    let backported = BACKPORTS.iter().any(|&(line, fixed)| {
        (line..line + 1000).contains(&version_number) && version_number >= fixed
    });
    (FIRST_AFFECTED..FIXED).contains(&version_number) && !backported
}

/// `3.51.3` for 3051003.
pub(crate) fn version_text(version_number: i32) -> String {
    format!(
        "{}.{}.{}",
        version_number / 1_000_000,
        version_number / 1000 % 1000,
        version_number % 1000
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `3.51.3` as SQLite numbers it: 3051003.
    fn number(version: &str) -> i32 {
        let parts: Vec<i32> = version.split('.').map(|p| p.parse().unwrap()).collect();
        parts[0] * 1_000_000 + parts[1] * 1000 + parts[2]
    }

    #[test]
    fn affected_from_3_7_0_until_3_51_3_except_the_backports_to_3_44_and_3_50() {
        let affected = [
            "3.7.0", "3.44.0", "3.44.5", "3.45.0", "3.49.2", "3.50.0", "3.50.6", "3.51.0", "3.51.2",
        ];
        let fixed = [
            "3.6.23", "3.44.6", "3.44.7", "3.50.7", "3.50.8", "3.51.3", "3.52.0", "3.53.4",
            "3.54.1", "4.0.0",
        ];
        for version in affected {
            assert!(has_wal_reset_bug(number(version)), "{version} is affected");
        }
        for version in fixed {
            assert!(
                !has_wal_reset_bug(number(version)),
                "{version} is not affected"
            );
        }
    }

    #[test]
    fn the_linked_sqlite_is_not_affected() {
        assert!(!has_wal_reset_bug(rusqlite::version_number()));
    }

    #[test]
    fn a_version_number_reads_as_sqlite_writes_it() {
        assert_eq!(version_text(3_051_003), "3.51.3");
        assert_eq!(version_text(3_006_023), "3.6.23");
        assert_eq!(
            version_text(rusqlite::version_number()),
            rusqlite::version()
        );
    }
}
