//! The WAL-reset bug has one rule and two copies: the library's `quicklite::setup::has_wal_reset_bug`, which refuses to
//! open a database on an affected SQLite, and the lab's, which marks the approaches whose SQLite is affected (the lab
//! has no SQLite dependency, so it cannot call the library). The command line links both: here they must agree.

use quicklite_lab::wal_reset_bug;

#[test]
fn the_lab_marks_exactly_the_sqlite_versions_the_library_refuses() {
    for minor in 0..=70 {
        for patch in 0..=20 {
            let number = 3_000_000 + minor * 1000 + patch;
            assert_eq!(
                wal_reset_bug::has_wal_reset_bug(number),
                quicklite::setup::has_wal_reset_bug(number),
                "SQLite 3.{minor}.{patch}"
            );
            assert_eq!(
                wal_reset_bug::affected(&format!("3.{minor}.{patch}")),
                quicklite::setup::has_wal_reset_bug(number),
                "SQLite 3.{minor}.{patch}, as a runner reports it"
            );
        }
    }
}

#[test]
fn the_lab_reads_the_linked_sqlite_s_version_as_sqlite_numbers_it() {
    assert_eq!(
        wal_reset_bug::version_number(quicklite::rusqlite::version()),
        Some(quicklite::rusqlite::version_number())
    );
}
