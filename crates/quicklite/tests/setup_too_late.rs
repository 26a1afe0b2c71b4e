//! When something else in the process initializes SQLite first, the set-up cannot act, and says so.

#[test]
fn set_up_after_initialization_reports_that_it_could_not_act() {
    // A plain rusqlite connection initializes SQLite before quicklite had a chance.
    let conn = quicklite::rusqlite::Connection::open_in_memory().unwrap();
    drop(conn);
    let report = quicklite::setup::sqlite_setup();
    assert!(!report.applied, "{report:?}");
    assert!(report.detail.contains("already initialized"), "{report:?}");
    // In this workspace's build the compile-time default is off, so statistics are still off, and the report
    // tells the two apart.
    assert!(report.memory_statistics_off, "{report:?}");
}
