//! `quicklite doctor`: reports on healthy and unhealthy databases, exits 0 / 1 / 2 as its `--help` says, and never
//! changes the database or creates files next to it — except the one `-shm` SQLite must create to read a `-wal`
//! that has none (see `crates/cli/src/doctor/open.rs`), which the last test pins.
//!
//! Every test compares the bytes of every file in the database's directory before and after doctor ran.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use assert_cmd::Command;
use predicates::prelude::*;
use quicklite::rusqlite::Connection;
use serde_json::Value;

fn doctor() -> Command {
    let mut cmd =
        Command::cargo_bin("quicklite").expect("the quicklite binary is built for its tests");
    cmd.arg("doctor").timeout(Duration::from_secs(120));
    cmd
}

/// Every entry in `dir` with its bytes (a directory: its name with a `/` and no bytes): equal snapshots mean
/// nothing was created, removed or changed.
fn files(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|entry| {
            let entry = entry.unwrap();
            let name = entry.file_name().to_string_lossy().into_owned();
            if entry.file_type().unwrap().is_dir() {
                (format!("{name}/"), Vec::new())
            } else {
                (name, std::fs::read(entry.path()).unwrap())
            }
        })
        .collect()
}

fn names(files: &BTreeMap<String, Vec<u8>>) -> Vec<&str> {
    files.keys().map(String::as_str).collect()
}

/// A database in SQLite's default rollback-journal mode with `rows` rows and an index.
fn rollback_db(path: &Path, rows: i64) {
    let conn = Connection::open(path).unwrap();
    fill(&conn, rows);
}

/// Creates the test table and its index and inserts `rows` rows, in one transaction.
fn fill(conn: &Connection, rows: i64) {
    conn.execute_batch("BEGIN").unwrap();
    create_and_insert(conn, rows).unwrap();
    conn.execute_batch("COMMIT").unwrap();
}

fn create_and_insert(conn: &Connection, rows: i64) -> quicklite::rusqlite::Result<()> {
    conn.execute_batch(
        "CREATE TABLE t (id INTEGER PRIMARY KEY, name TEXT NOT NULL);
         CREATE INDEX t_name ON t (name);",
    )?;
    let mut insert = conn.prepare("INSERT INTO t (name) VALUES (?1)")?;
    for i in 0..rows {
        insert.execute([format!("row {i} of the doctor's test table")])?;
    }
    Ok(())
}

/// A WAL database left open by a writer that has committed `rows` rows to the `-wal` and never checkpointed.
fn live_wal_db(path: &Path, rows: i64) -> Connection {
    let conn = Connection::open(path).unwrap();
    let mode: String = conn
        .query_row("PRAGMA journal_mode=WAL", [], |r| r.get(0))
        .unwrap();
    assert_eq!(mode, "wal");
    conn.execute_batch("PRAGMA wal_autocheckpoint=0").unwrap();
    fill(&conn, rows);
    conn
}

fn json(output: &[u8]) -> Value {
    serde_json::from_slice(output).expect("doctor --json prints one JSON document")
}

/// The finding named `check` in a section of the JSON report.
/// Runs `doctor --json` on `path`, expects exit status `code`, and parses the report.
fn json_report(path: &Path, code: i32) -> Value {
    let out = doctor()
        .arg("--json")
        .arg(path)
        .assert()
        .code(code)
        .get_output()
        .clone();
    json(&out.stdout)
}

fn finding<'a>(section: &'a Value, check: &str) -> &'a Value {
    section["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["check"] == check)
        .unwrap_or_else(|| panic!("no {check} finding in {section:#}"))
}

#[test]
fn a_healthy_wal_database_made_with_the_server_profile_is_ok() {
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("app.db");
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    runtime.block_on(async {
        let db = quicklite::Database::open(&path).await.unwrap();
        db.transaction(|conn| create_and_insert(conn, 3000))
            .await
            .unwrap();
        db.close().await.unwrap();
    });
    let before = files(tmp.path());
    assert_eq!(
        names(&before),
        ["app.db"],
        "close() checkpoints and removes the -wal and -shm"
    );

    let out = doctor().arg(&path).assert().success().get_output().clone();
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert!(
        predicate::str::is_match(r"ok +journal_mode +wal\n")
            .unwrap()
            .eval(&stdout),
        "{stdout}"
    );
    assert!(
        stdout.contains("ok       quick_check          ok"),
        "{stdout}"
    );
    assert!(
        stdout.contains("mode=ro&immutable=1"),
        "no -wal: opened immutable, creating nothing: {stdout}"
    );
    assert!(
        !stdout.contains("WARNING") && !stdout.contains("ERROR"),
        "{stdout}"
    );
    assert!(stdout.contains("0 warnings, 0 errors"), "{stdout}");
    assert_eq!(
        files(tmp.path()),
        before,
        "doctor changed or created a file"
    );
}

#[test]
fn a_rollback_journal_database_gets_a_warning_that_recommends_wal() {
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("legacy.db");
    rollback_db(&path, 1000);
    let before = files(tmp.path());

    doctor()
        .arg(&path)
        .assert()
        .code(0)
        .stdout(
            predicate::str::is_match(r"WARNING +journal_mode +delete \(rollback journal\)")
                .unwrap(),
        )
        .stdout(predicate::str::contains("PRAGMA journal_mode=WAL"))
        .stdout(predicate::str::contains("https://www.sqlite.org/wal.html"))
        .stdout(predicate::str::contains("mode=ro (rollback journal"));
    assert_eq!(files(tmp.path()), before);
}

#[test]
fn json_carries_every_field_and_finding() {
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("sparse.db");
    rollback_db(&path, 3000);
    {
        let conn = Connection::open(&path).unwrap();
        conn.execute_batch("DELETE FROM t WHERE id > 300; PRAGMA user_version = 7;")
            .unwrap();
    }
    let before = files(tmp.path());

    let report = json_report(&path, 0);

    let sqlite = &report["sqlite"];
    assert!(sqlite["version"].as_str().unwrap().starts_with("3."));
    assert!(!sqlite["source_id"].as_str().unwrap().is_empty());
    assert!(matches!(sqlite["threadsafe"].as_i64(), Some(0..=2)));
    assert!(!sqlite["compile_options"].as_array().unwrap().is_empty());
    assert!(sqlite["default_memstatus_0"].is_boolean());
    assert_eq!(
        sqlite["memory_statistics_off"], true,
        "doctor runs quicklite's set-up before its first connection"
    );
    assert!(finding(sqlite, "memory statistics")["severity"].is_string());
    assert!(finding(sqlite, "threading mode")["value"].is_string());
    let wal_reset = finding(sqlite, "WAL-reset bug");
    assert_eq!(
        wal_reset["severity"], "ok",
        "the bundled SQLite fixes the WAL-reset bug: {wal_reset:#}"
    );
    assert_eq!(
        wal_reset["docs"],
        serde_json::json!(["https://www.sqlite.org/wal.html#walresetbug"])
    );

    let db = &report["database"];
    assert_eq!(db["path"], path.display().to_string());
    assert_eq!(db["journal_mode"], "delete");
    assert_eq!(
        db["synchronous"], 2,
        "a fresh connection in rollback mode: FULL"
    );
    assert_eq!(db["page_size"], 4096);
    let pages = db["page_count"].as_i64().unwrap();
    let free = db["freelist_count"].as_i64().unwrap();
    assert_eq!(db["size_bytes"].as_i64().unwrap(), pages * 4096);
    assert!(db["free_fraction"].as_f64().unwrap() > 0.25, "{db:#}");
    assert!((db["free_fraction"].as_f64().unwrap() - free as f64 / pages as f64).abs() < 1e-9);
    assert!(db["cache_size"].is_i64() && db["mmap_size"].is_i64());
    assert!(db["foreign_keys"].is_boolean());
    assert_eq!(db["busy_timeout_ms"], 0);
    assert_eq!(db["auto_vacuum"], "none");
    assert_eq!(db["wal_size_bytes"], Value::Null);
    assert_eq!(db["wal_frames"], Value::Null);
    assert_eq!(db["journal_size_limit"], -1);
    assert_eq!(db["user_version"], 7);
    assert_eq!(db["quick_check"], serde_json::json!(["ok"]));
    assert_eq!(db["created_files"], serde_json::json!([]));

    for f in db["findings"]
        .as_array()
        .unwrap()
        .iter()
        .chain(sqlite["findings"].as_array().unwrap())
    {
        assert!(
            ["ok", "info", "warning", "error"].contains(&f["severity"].as_str().unwrap()),
            "{f:#}"
        );
        assert!(!f["value"].as_str().unwrap().is_empty(), "{f:#}");
        assert!(!f["recommendation"].as_str().unwrap().is_empty(), "{f:#}");
        assert!(!f["why"].as_str().unwrap().is_empty(), "{f:#}");
        assert!(f["per_connection"].is_boolean(), "{f:#}");
        let docs = f["docs"].as_array().unwrap();
        assert!(!docs.is_empty(), "{f:#}");
        assert!(
            docs.iter()
                .all(|d| d.as_str().unwrap().starts_with("https://www.sqlite.org/")),
            "{f:#}"
        );
    }
    assert_eq!(finding(db, "journal_mode")["severity"], "warning");
    let free_pages = finding(db, "free pages");
    assert_eq!(free_pages["severity"], "info");
    assert!(
        free_pages["recommendation"]
            .as_str()
            .unwrap()
            .contains("VACUUM")
    );
    let sync = finding(db, "synchronous");
    assert_eq!(sync["per_connection"], true);
    assert!(
        sync["recommendation"]
            .as_str()
            .unwrap()
            .contains("when opening each connection")
    );
    assert_eq!(finding(db, "quick_check")["severity"], "ok");

    let summary = &report["summary"];
    assert_eq!(summary["exit_status"], 0);
    assert!(summary["warning"].as_u64().unwrap() >= 1);
    assert_eq!(summary["error"], 0);
    assert_eq!(files(tmp.path()), before);
}

#[test]
fn without_a_database_only_the_sqlite_section_is_reported() {
    doctor()
        .assert()
        .code(0)
        .stdout(predicate::str::starts_with("SQLite 3."))
        .stdout(predicate::str::contains("memory statistics"))
        .stdout(predicate::str::contains("compile options"))
        .stdout(predicate::str::contains("Database").not())
        .stdout(predicate::str::contains("journal_mode").not());

    let out = doctor().arg("--json").assert().code(0).get_output().clone();
    let report = json(&out.stdout);
    assert_eq!(report["database"], Value::Null);
    assert_eq!(report["sqlite"]["findings"].as_array().unwrap().len(), 3);
}

#[test]
fn help_documents_the_exit_statuses() {
    doctor()
        .arg("--help")
        .assert()
        .success()
        .stdout(predicate::str::contains("Exit status:"))
        .stdout(predicate::str::contains(
            "0  the report was produced and no finding is an error",
        ))
        .stdout(predicate::str::contains(
            "1  the report was produced and a finding is an error",
        ))
        .stdout(predicate::str::contains(
            "2  the database cannot be inspected at all",
        ));
}

/// Runs doctor on `path` and checks that it exits 2 with `message` on one line of stderr, prints nothing on
/// stdout, and leaves the directory `dir` as it was.
fn cannot_inspect(dir: &Path, path: &Path, message: &str) {
    let before = files(dir);
    let out = doctor()
        .arg(path)
        .assert()
        .code(2)
        .stdout("")
        .stderr(predicate::str::contains(message))
        .get_output()
        .clone();
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert_eq!(
        stderr.lines().count(),
        1,
        "one line, no backtrace: {stderr}"
    );
    assert!(stderr.starts_with("error: cannot inspect "), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert_eq!(files(dir), before, "{}", path.display());
}

#[test]
fn a_missing_file_exits_2_and_is_not_created() {
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("missing.db");
    cannot_inspect(tmp.path(), &path, "missing.db: no such file");
    assert!(!path.exists());
}

#[test]
fn a_directory_exits_2() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("data");
    std::fs::create_dir(&dir).unwrap();
    cannot_inspect(tmp.path(), &dir, "is a directory, not a database file");
}

#[test]
fn a_text_file_exits_2_and_is_left_untouched() {
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("notes.txt");
    std::fs::write(&path, "not a database, just some text\n".repeat(50)).unwrap();
    cannot_inspect(tmp.path(), &path, "not an SQLite database");
}

#[test]
fn an_empty_file_exits_2() {
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("empty.db");
    std::fs::write(&path, "").unwrap();
    cannot_inspect(tmp.path(), &path, "the file is empty (0 bytes)");
}

#[test]
fn a_header_sqlite_cannot_read_exits_2() {
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("bad-header.db");
    rollback_db(&path, 100);
    // Bytes 16-17 hold the page size; 3 is not a power of two between 512 and 65536.
    overwrite(&path, 16, &[0, 3]);
    cannot_inspect(tmp.path(), &path, "file is not a database");
}

/// Writes `bytes` at `offset` in the file.
fn overwrite(path: &Path, offset: u64, bytes: &[u8]) {
    use std::io::{Seek, SeekFrom, Write};
    let mut file = std::fs::OpenOptions::new().write(true).open(path).unwrap();
    file.seek(SeekFrom::Start(offset)).unwrap();
    file.write_all(bytes).unwrap();
}

#[test]
fn a_corrupted_page_is_reported_as_an_error_finding_with_exit_1() {
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("corrupt.db");
    rollback_db(&path, 5000);
    let pages = std::fs::metadata(&path).unwrap().len() / 4096;
    assert!(pages > 20, "{pages} pages");
    // Garbage over the cell pointers and content of two b-tree pages in the middle of the file.
    let garbage = [0xde, 0xad, 0xbe, 0xef].repeat(200);
    for page in [pages / 2, pages / 2 + 3] {
        overwrite(&path, page * 4096 + 10, &garbage);
    }
    let before = files(tmp.path());

    doctor()
        .arg(&path)
        .assert()
        .code(1)
        .stderr("")
        .stdout(predicate::str::is_match(r"ERROR +quick_check +\d+ (or more )?problems").unwrap())
        .stdout(predicate::str::contains(".recover"))
        .stdout(predicate::str::contains("1 error"));
    let report = json_report(&path, 1);
    let problems = report["database"]["quick_check"].as_array().unwrap();
    assert!(!problems.is_empty() && problems[0] != "ok", "{problems:?}");
    assert!(
        problems
            .iter()
            .any(|p| p.as_str().unwrap().contains("page")),
        "{problems:?}"
    );
    assert_eq!(
        finding(&report["database"], "quick_check")["severity"],
        "error"
    );
    assert_eq!(report["summary"]["exit_status"], 1);
    assert_eq!(files(tmp.path()), before);
}

#[test]
fn a_database_locked_by_another_process_exits_2_and_says_so() {
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("busy.db");
    rollback_db(&path, 100);
    let db_before = std::fs::read(&path).unwrap();

    // This process holds an EXCLUSIVE lock (POSIX advisory locks: doctor runs as another process, so they apply).
    let holder = Connection::open(&path).unwrap();
    holder
        .execute_batch(
            "PRAGMA locking_mode=EXCLUSIVE;
             BEGIN EXCLUSIVE;
             INSERT INTO t (name) VALUES ('held');",
        )
        .unwrap();
    let out = doctor()
        .arg(&path)
        .assert()
        .code(2)
        .stdout("")
        .stderr(predicate::str::contains("locked by another process"))
        .get_output()
        .clone();
    assert_eq!(String::from_utf8(out.stderr).unwrap().lines().count(), 1);
    let during = files(tmp.path());
    assert!(
        during
            .keys()
            .all(|name| !name.ends_with("-wal") && !name.ends_with("-shm")),
        "{:?}",
        names(&during)
    );
    holder.execute_batch("ROLLBACK").unwrap();
    drop(holder);
    assert_eq!(std::fs::read(&path).unwrap(), db_before);
}

#[test]
fn a_hot_journal_left_by_a_crash_exits_2_and_is_not_rolled_back() {
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("writer.db");
    rollback_db(&path, 3000);
    // A writer whose cache is too small for its transaction writes the journal and then the database file
    // before it commits; copying both mid-transaction gives what a crash at that moment leaves behind.
    let writer = Connection::open(&path).unwrap();
    writer
        .execute_batch("PRAGMA cache_size=10; BEGIN; UPDATE t SET name = upper(name);")
        .unwrap();
    let crashed = tmp.path().join("crashed");
    std::fs::create_dir(&crashed).unwrap();
    std::fs::copy(&path, crashed.join("crashed.db")).unwrap();
    std::fs::copy(
        tmp.path().join("writer.db-journal"),
        crashed.join("crashed.db-journal"),
    )
    .unwrap();
    writer.execute_batch("ROLLBACK").unwrap();
    drop(writer);

    cannot_inspect(&crashed, &crashed.join("crashed.db"), "hot journal");
}

#[test]
fn a_live_wal_database_is_read_through_its_shm_without_changing_any_file() {
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("live.db");
    let writer = live_wal_db(&path, 2000);
    let before = files(tmp.path());
    assert_eq!(names(&before), ["live.db", "live.db-shm", "live.db-wal"]);
    let main_pages = before["live.db"].len() as i64 / 4096;

    let report = json_report(&path, 0);
    let db = &report["database"];
    assert!(
        db["opened_as"].as_str().unwrap().contains("readonly_shm=1"),
        "{db:#}"
    );
    assert_eq!(db["journal_mode"], "wal");
    assert_eq!(db["wal_size_bytes"], before["live.db-wal"].len());
    // SQLite runs no checkpoint, not even a no-op one, through a WAL index it may only read.
    assert_eq!(db["wal_frames"], Value::Null, "{db:#}");
    assert!(
        db["page_count"].as_i64().unwrap() > main_pages,
        "the pages committed to the -wal are read too: {db:#}"
    );
    assert_eq!(finding(db, "wal file")["severity"], "ok");
    assert_eq!(db["created_files"], serde_json::json!([]));
    assert_eq!(
        files(tmp.path()),
        before,
        "the database, its -wal and its -shm are untouched"
    );
    drop(writer);
}

#[test]
fn a_wal_beyond_64_mib_warns_of_checkpoint_starvation() {
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("big.db");
    let writer = live_wal_db(&path, 10);
    writer
        .execute_batch(
            "CREATE TABLE blobs (b BLOB); INSERT INTO blobs VALUES (zeroblob(65 * 1024 * 1024));",
        )
        .unwrap();
    let wal = std::fs::metadata(tmp.path().join("big.db-wal"))
        .unwrap()
        .len();
    assert!(wal > 64 << 20, "{wal}");
    let before = files(tmp.path());

    doctor()
        .arg(&path)
        .assert()
        .code(0)
        .stdout(predicate::str::is_match(r"WARNING +wal file +6\d\.\d MiB").unwrap())
        // (Words may wrap onto the next line in the human report.)
        .stdout(predicate::str::contains("starvation"))
        .stdout(predicate::str::contains("wal_checkpoint(TRUNCATE)"));
    assert_eq!(files(tmp.path()), before);
    drop(writer);
}

/// The one file doctor cannot avoid: a `-wal` without its `-shm` (copied without it, say) can only be read
/// through a wal-index, and SQLite creates `<db>-shm` for it even on a read-only connection; `readonly_shm=1`
/// needs an existing one, and `immutable=1` would ignore the `-wal`'s pages. The database and the `-wal` stay
/// byte-for-byte the same, and the report says what was created.
#[test]
fn a_wal_without_its_shm_is_the_one_case_where_sqlite_creates_a_file() {
    let tmp = tempfile::tempdir().unwrap();
    let live = tmp.path().join("live.db");
    let writer = live_wal_db(&live, 2000);
    let copy_dir: PathBuf = tmp.path().join("copy");
    std::fs::create_dir(&copy_dir).unwrap();
    let copy = copy_dir.join("copy.db");
    std::fs::copy(&live, &copy).unwrap();
    std::fs::copy(tmp.path().join("live.db-wal"), copy_dir.join("copy.db-wal")).unwrap();
    let frames = quicklite::wal_frames(&writer).unwrap();
    drop(writer);
    let before = files(&copy_dir);
    assert_eq!(names(&before), ["copy.db", "copy.db-wal"]);

    let report = json_report(&copy, 0);
    let db = &report["database"];
    assert_eq!(db["created_files"], serde_json::json!(["copy.db-shm"]));
    assert_eq!(finding(db, "created files")["severity"], "info");
    // The frames the copied WAL holds, counted through the index SQLite built for it as the writer counted them.
    assert_eq!(db["wal_frames"], frames, "{db:#}");
    assert!(
        finding(db, "wal file")["value"]
            .as_str()
            .unwrap()
            .ends_with(&format!(", {frames} frames in use")),
        "{db:#}"
    );
    assert_eq!(db["quick_check"], serde_json::json!(["ok"]));
    let after = files(&copy_dir);
    assert_eq!(names(&after), ["copy.db", "copy.db-shm", "copy.db-wal"]);
    assert_eq!(after["copy.db"], before["copy.db"]);
    assert_eq!(after["copy.db-wal"], before["copy.db-wal"]);
}
