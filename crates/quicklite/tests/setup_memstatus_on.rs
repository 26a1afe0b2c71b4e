//! The run-time switch really works: asked before SQLite initializes, it turns memory statistics *on* even in a
//! build whose compile-time default is off (this workspace builds with SQLITE_DEFAULT_MEMSTATUS=0), which shows
//! that the default set-up's "off" is the library's doing, not only the build's.
//!
//! Each file under tests/ is its own process, so this one's process-wide set-up does not leak into the others.

use quicklite::Database;
use quicklite::setup::{Setup, configure};

#[tokio::test]
async fn memory_statistics_can_be_kept_on_when_asked_first() {
    let report = configure(Setup {
        memory_statistics: true,
    });
    assert!(report.applied, "{}", report.detail);
    assert!(!report.memory_statistics_off, "{}", report.detail);
    // Later calls, including the one inside Database::open, report the first call's outcome.
    let dir = tempfile::tempdir().unwrap();
    let db = Database::open(dir.path().join("m.db")).await.unwrap();
    db.execute_batch("CREATE TABLE t (a)").await.unwrap();
    assert_eq!(quicklite::setup::sqlite_setup(), report);
    // SAFETY: sqlite3_memory_used only reads SQLite's counter.
    assert!(unsafe { quicklite::rusqlite::ffi::sqlite3_memory_used() } > 0);
}
