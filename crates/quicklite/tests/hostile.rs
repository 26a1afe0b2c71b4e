//! Hostile input, in-process fuzz loops over the public API's inputs: SQL text, parameters, PRAGMA overrides,
//! tenant names and corrupted database files. Every call must return (`Ok` or a clear `Err`), never panic or
//! hang, and the handle must serve on afterwards with an intact database.
//!
//! The loops are seeded (a failure replays); `QUICKLITE_FUZZ_ITERATIONS` runs them longer.

mod common;

use std::time::Duration;

use common::{both_backends, temp_db};
use quicklite::{Error, Registry, rusqlite};

/// A small xorshift generator: deterministic, no dependency.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
    fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len() as u64) as usize]
    }
}

/// Resident memory of this process, in bytes (Linux; 0 elsewhere).
fn rss_bytes() -> u64 {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap_or_default();
    let pages: u64 = statm
        .split_whitespace()
        .nth(1)
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    pages * 4096
}

fn iterations(default: u64) -> u64 {
    std::env::var("QUICKLITE_FUZZ_ITERATIONS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// Fragments SQL is made of, valid and not. `ATTACH` is left out: on the writer's connection it would create files
/// wherever the test runs.
const TOKENS: &[&str] = &[
    "SELECT",
    "INSERT",
    "INTO",
    "UPDATE",
    "DELETE",
    "FROM",
    "WHERE",
    "VALUES",
    "SET",
    "CREATE",
    "TABLE",
    "DROP",
    "INDEX",
    "ON",
    "t",
    "u",
    "x",
    "y",
    "id",
    "(",
    ")",
    ",",
    ";",
    "*",
    "=",
    "+",
    "-",
    "/",
    "%",
    "||",
    "'",
    "\"",
    "'a''b'",
    "1",
    "-9223372036854775808",
    "9223372036854775807",
    "1e308",
    "NULL",
    "?",
    "?1",
    "?999999",
    ":p",
    "@x",
    "$y",
    "zeroblob(1000000000)",
    "randomblob(-1)",
    "printf('%.*c', 1000000, 'x')",
    "WITH RECURSIVE",
    "c(n) AS (SELECT 1 UNION ALL SELECT n+1 FROM c WHERE n < 100)",
    "PRAGMA",
    "journal_mode",
    "=",
    "OFF",
    "BEGIN",
    "COMMIT",
    "ROLLBACK",
    "SAVEPOINT",
    "RELEASE",
    "quicklite_write",
    "VACUUM",
    "\0",
    "é",
    "--",
    "/*",
    "*/",
    "CAST(",
    "AS",
    "BLOB",
    "TEXT",
    "INTEGER",
    "REAL",
    "GROUP BY",
    "ORDER BY",
    "LIMIT",
    "OFFSET",
    "JOIN",
    "sqlite_schema",
    "load_extension('x')",
    "readfile('/etc/passwd')",
    "char(0)",
];

/// Well-formed statements, run with random values (and sometimes the wrong number of them).
const TEMPLATES: &[&str] = &[
    "SELECT ?1",
    "SELECT typeof(?1), length(?1), hex(?1)",
    "INSERT INTO t (x, y) VALUES (?1, ?2)",
    "UPDATE t SET x = ?1 WHERE id = ?2",
    "SELECT * FROM t WHERE x = ?1 ORDER BY y LIMIT ?2",
    "DELETE FROM t WHERE id = ?1",
    "SELECT count(*) FROM t JOIN keep ON keep.v = ?1",
    "INSERT INTO t (x) SELECT ?1 FROM t LIMIT 10",
];

fn random_sql(rng: &mut Rng) -> String {
    if rng.below(2) == 0 {
        return rng.pick(TEMPLATES).to_string();
    }
    let n = 1 + rng.below(12);
    let mut sql = String::new();
    for _ in 0..n {
        if rng.below(20) == 0 {
            // Raw bytes, made text.
            let bytes: Vec<u8> = (0..rng.below(8)).map(|_| rng.next() as u8).collect();
            sql.push_str(&String::from_utf8_lossy(&bytes));
        } else {
            let token: &&str = rng.pick(TOKENS);
            sql.push_str(token);
        }
        sql.push(' ');
    }
    sql
}

fn random_value(rng: &mut Rng) -> rusqlite::types::Value {
    use rusqlite::types::Value;
    match rng.below(5) {
        0 => Value::Null,
        1 => Value::Integer(rng.next() as i64),
        2 => Value::Real(f64::from_bits(rng.next())),
        3 => Value::Text(random_sql(rng)),
        _ => Value::Blob((0..rng.below(64)).map(|_| rng.next() as u8).collect()),
    }
}

both_backends! {
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn random_sql_and_parameters_never_panic_and_leave_the_database_intact(backend) {
        let db = common::open(backend, |b| b.busy_timeout(Duration::from_millis(100))).await;
        db.execute_batch(
            "CREATE TABLE t (id INTEGER PRIMARY KEY, x, y); CREATE TABLE keep (v INTEGER NOT NULL);
             INSERT INTO keep VALUES (42);",
        )
        .await
        .unwrap();
        // Registry: the neighbour keeps closing the database's connections between (and during) the statements.
        let churn = db.churn();
        let mut rng = Rng(0x5eed_0001);
        let n = iterations(1500);
        let (mut ok, mut err) = (0_u64, 0_u64);
        let mut rss_early = 0;
        for i in 0..n {
            if i == n / 10 {
                rss_early = rss_bytes();
            }
            let sql = random_sql(&mut rng);
            let params: Vec<rusqlite::types::Value> =
                (0..rng.below(4)).map(|_| random_value(&mut rng)).collect();
            let outcome = match rng.below(4) {
                0 => db
                    .execute(sql, rusqlite::params_from_iter(params))
                    .await
                    .map(|_| ()),
                1 => db.execute_batch(sql).await,
                2 => db
                    .query_all(sql, rusqlite::params_from_iter(params), |r| {
                        r.get::<_, rusqlite::types::Value>(0)
                    })
                    .await
                    .map(|_| ()),
                _ => {
                    db.read(move |c| {
                        let mut stmt = c.prepare(&sql)?;
                        let mut rows = stmt.query(rusqlite::params_from_iter(params))?;
                        while rows.next()?.is_some() {}
                        Ok(())
                    })
                    .await
                }
            };
            match outcome {
                Ok(()) => ok += 1,
                Err(e) => {
                    // Every failure is an error value with a message, never a panic or a poisoned handle.
                    assert!(!e.to_string().is_empty());
                    assert!(!matches!(e, Error::Panic { .. } | Error::Closed), "{e}");
                    err += 1;
                }
            }
        }
        churn.stop().await;
        println!(
            "{n} random statements: {ok} ran, {err} refused with an error; resident memory {:.1} MiB after a tenth, \
             {:.1} MiB at the end",
            rss_early as f64 / 1048576.0,
            rss_bytes() as f64 / 1048576.0
        );
        // The handle serves on; the database is intact. (`keep` may have been dropped by a random DROP TABLE, which
        // is the SQL doing what it says; integrity is what must hold.)
        let integrity: String = db
            .query_row("PRAGMA integrity_check", [], |r| r.get(0))
            .await
            .unwrap();
        assert_eq!(integrity, "ok");
        db.execute_batch("CREATE TABLE IF NOT EXISTS after (v)")
            .await
            .unwrap();
        db.execute("INSERT INTO after VALUES (1)", ())
            .await
            .unwrap();
        assert_eq!(db.metrics().panics, 0);
        db.close().await;
    }
}

both_backends! {
    #[tokio::test]
    async fn random_pragma_overrides_are_applied_or_refused_never_injected(backend) {
        let mut rng = Rng(0x5eed_0002);
        let names = [
            "cache_size",
            "synchronous",
            "journal_mode",
            "x; DROP TABLE t",
            "",
            "mmap_size",
            "a.b.c",
        ];
        let values = [
            "-64000",
            "FULL",
            "WAL",
            "1; DROP TABLE t",
            "'x'",
            "",
            "9999999999999999999999",
            "OFF",
        ];
        for _ in 0..iterations(60) {
            let dir = tempfile::tempdir().unwrap();
            let (name, value) = (*rng.pick(&names), *rng.pick(&values));
            match common::try_open_in(backend, dir.path(), move |b| b.pragma(name, value)).await {
                Ok(db) => {
                    db.execute_batch("CREATE TABLE t (x)").await.unwrap();
                    db.close().await;
                }
                Err(e) => assert!(
                    matches!(e, Error::InvalidConfig(_) | Error::Sqlite(_)),
                    "{name}={value}: {e}"
                ),
            }
        }
    }
}

/// The writer's setting `name`, as its connection reports it.
async fn writer_setting(db: &quicklite::Database, name: &'static str) -> rusqlite::types::Value {
    db.with_write_connection(move |c| c.query_row(&format!("PRAGMA {name}"), [], |r| r.get(0)))
        .await
        .unwrap()
}

both_backends! {
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_write_cannot_change_the_writers_connection(backend) {
        let db = common::open(backend, |b| b).await;
        db.execute_batch("CREATE TABLE t (x)").await.unwrap();
        // Some of these SQLite applies as the statement is prepared (`busy_timeout`, `wal_autocheckpoint`), some
        // only in autocommit mode (`synchronous`, `foreign_keys`), and `query_only` would leave every later write
        // failing; and a second connection of the writer, or a registry's database reopened, would not have them.
        for (sql, name) in [
            ("PRAGMA synchronous = FULL", "synchronous"),
            ("PRAGMA synchronous = OFF", "synchronous"),
            ("PRAGMA busy_timeout = 60000", "busy_timeout"),
            ("PRAGMA wal_autocheckpoint = 10", "wal_autocheckpoint"),
            ("PRAGMA query_only = ON", "query_only"),
            ("PRAGMA locking_mode = EXCLUSIVE", "locking_mode"),
            ("PRAGMA journal_mode = DELETE", "journal_mode"),
            ("pragma main.Synchronous=0", "synchronous"),
            ("PRAGMA foreign_keys = OFF", "foreign_keys"),
            ("PRAGMA cache_size = 10", "cache_size"),
        ] {
            let before = writer_setting(&db, name).await;
            // One statement (in autocommit mode, on the writer or its caller's thread), a closure in a group, a
            // transaction of its own.
            let outcomes = [
                db.execute(sql, ()).await.map(drop),
                db.write(move |c| c.execute_batch(sql)).await,
                db.transaction(move |c| c.execute_batch(sql)).await,
            ];
            for outcome in outcomes {
                let e = outcome.expect_err(sql);
                assert_eq!(
                    e.sqlite_code(),
                    Some(rusqlite::ErrorCode::AuthorizationForStatementDenied),
                    "{sql}: {e}"
                );
                assert!(e.to_string().contains(name), "{sql}: {e}");
            }
            assert_eq!(writer_setting(&db, name).await, before, "{sql}");
            db.execute("INSERT INTO t VALUES (1)", ()).await.expect(sql);
        }
        // Nor checkpoint: the writer runs its checkpoints.
        for sql in ["PRAGMA wal_checkpoint", "PRAGMA wal_checkpoint(TRUNCATE)"] {
            let e = db
                .write(move |c| c.query_row(sql, [], |r| r.get::<_, i64>(0)))
                .await
                .expect_err(sql);
            assert_eq!(e.sqlite_code(), Some(rusqlite::ErrorCode::AuthorizationForStatementDenied), "{e}");
        }
        // What reports them, and what sets the database's own header values or the transaction's, stay a write's.
        db.write(|c| {
            c.query_row("PRAGMA synchronous", [], |r| r.get::<_, i64>(0))?;
            c.execute_batch("PRAGMA user_version = 3; PRAGMA defer_foreign_keys = ON; PRAGMA journal_mode = WAL")
        })
        .await
        .unwrap();
        assert_eq!(writer_setting(&db, "user_version").await, rusqlite::types::Value::Integer(3));
        assert_eq!(common::count(&db, "t").await, 10);
        db.close().await;
    }
}

/// What `execute(sql)` returns when another write is queued with it (the writer held meanwhile, so that both are
/// taken together), and what the other write returns.
async fn executed_with_another_queued(
    db: &quicklite::Database,
    sql: &'static str,
) -> (quicklite::Result<usize>, quicklite::Result<usize>) {
    let (release, blocker) = common::hold_writer(db).await;
    let first = tokio::spawn({
        let db = db.clone();
        async move { db.execute(sql, ()).await }
    });
    common::until_write_queue_holds(db, 1).await;
    let second = tokio::spawn({
        let db = db.clone();
        async move { db.execute("INSERT INTO t VALUES ('beside')", ()).await }
    });
    common::until_write_queue_holds(db, 2).await;
    release.send(()).unwrap();
    blocker.await.unwrap();
    (first.await.unwrap(), second.await.unwrap())
}

both_backends! {
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_statement_sqlite_runs_only_outside_a_transaction_does_the_same_alone_or_with_others_queued(backend) {
        let db = common::open(backend, |b| b).await;
        db.execute_batch("CREATE TABLE t (x)").await.unwrap();
        // `VACUUM` runs, alone, either way.
        db.execute("VACUUM", ()).await.unwrap();
        let (vacuum, beside) = executed_with_another_queued(&db, "/* compact */ vacuum").await;
        vacuum.unwrap();
        beside.unwrap();
        // `ATTACH` and `DETACH` are refused either way: a database attached to the writer alone would be missing
        // from the reads (the set-up hook attaches on every connection).
        let attach: &'static str = Box::leak(
            format!("ATTACH '{}' AS other", db.path().with_file_name("other.db").display()).into_boxed_str(),
        );
        for sql in [attach, "DETACH main"] {
            let alone = db.execute(sql, ()).await;
            let (grouped, beside) = executed_with_another_queued(&db, sql).await;
            beside.unwrap();
            for outcome in [alone, grouped] {
                let e = outcome.expect_err(sql);
                assert_eq!(e.sqlite_code(), Some(rusqlite::ErrorCode::AuthorizationForStatementDenied), "{sql}: {e}");
                assert!(e.to_string().contains("Builder::on_connection"), "{e}");
            }
        }
        assert!(!db.path().with_file_name("other.db").exists(), "nothing was attached");
        assert_eq!(common::count(&db, "t").await, 3);
        db.close().await;
    }
}

both_backends! {
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_write_that_replaces_the_busy_handler_leaves_the_next_writes_waiting_for_the_lock(backend) {
        let db = common::open(backend, |b| b.write_lock_wait(Duration::from_secs(10))).await;
        db.execute_batch("CREATE TABLE t (x)").await.unwrap();
        // Through rusqlite's API the authorizer sees nothing: a busy handler that gives up at once.
        db.write(|c| c.busy_timeout(Duration::ZERO)).await.unwrap();
        let other = rusqlite::Connection::open(db.path()).unwrap();
        other
            .execute_batch("BEGIN IMMEDIATE; INSERT INTO t VALUES ('theirs')")
            .unwrap();
        let commit_later = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(200));
            other.execute_batch("COMMIT").unwrap();
        });
        // Both kinds of write wait for the lock, up to `write_lock_wait`, as before.
        let (statement, closure) = tokio::join!(
            db.execute("INSERT INTO t VALUES ('ours')", ()),
            db.write(|c| c.execute("INSERT INTO t VALUES ('ours too')", [])),
        );
        commit_later.join().unwrap();
        statement.unwrap();
        closure.unwrap();
        assert_eq!(common::count(&db, "t").await, 3);
        db.close().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn random_tenant_names_never_reach_outside_the_registry() {
    let outer = tempfile::tempdir().unwrap();
    let dir = outer.path().join("tenants");
    let registry = Registry::builder(&dir).max_open(8).open().await.unwrap();
    let mut rng = Rng(0x5eed_0003);
    let alphabet: Vec<char> = "aZ09_-./\\\0 :~*?é\n".chars().collect();
    let mut created = 0;
    for _ in 0..iterations(600) {
        let name: String = (0..rng.below(12)).map(|_| *rng.pick(&alphabet)).collect();
        match registry.get(&name).await {
            Ok(db) => {
                db.execute_batch("CREATE TABLE IF NOT EXISTS t (x)")
                    .await
                    .unwrap();
                created += 1;
            }
            Err(Error::InvalidName { .. }) => {}
            Err(e) => panic!("{name:?}: unexpected {e}"),
        }
    }
    registry.close().await.unwrap();
    // Nothing outside the directory but the directory itself; inside, only `<valid name>.db` and companions.
    let outside: Vec<_> = std::fs::read_dir(outer.path()).unwrap().collect();
    assert_eq!(outside.len(), 1);
    for entry in std::fs::read_dir(&dir).unwrap() {
        let file = entry.unwrap().file_name().to_string_lossy().into_owned();
        let stem = file
            .trim_end_matches("-wal")
            .trim_end_matches("-shm")
            .trim_end_matches("-journal");
        let name = stem
            .strip_suffix(".db")
            .unwrap_or_else(|| panic!("stray file {file}"));
        assert!(
            name.chars()
                .all(|c| c.is_ascii_alphanumeric() || "_-.".contains(c)),
            "{file}"
        );
    }
    assert!(created > 0);
}

both_backends! {
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn corrupted_database_files_give_errors_not_panics(backend) {
        let mut rng = Rng(0x5eed_0004);
        // A real database to damage.
        let template = temp_db();
        {
            let conn = rusqlite::Connection::open(&template.path).unwrap();
            conn.execute_batch(
                "CREATE TABLE t (id INTEGER PRIMARY KEY, body TEXT); CREATE INDEX t_body ON t (body);
                 WITH RECURSIVE c(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM c WHERE n < 3000)
                 INSERT INTO t SELECT n, printf('row %d %s', n, hex(randomblob(20))) FROM c;",
            )
            .unwrap();
        }
        let original = std::fs::read(&template.path).unwrap();
        let (mut opened, mut refused) = (0, 0);
        for _ in 0..iterations(40) {
            let mut bytes = original.clone();
            for _ in 0..1 + rng.below(20) {
                // A third of the damage in the 100-byte header, the rest anywhere.
                let span = if rng.below(3) == 0 {
                    100
                } else {
                    bytes.len() as u64
                };
                let at = rng.below(span) as usize;
                bytes[at] = rng.next() as u8;
            }
            let dir = tempfile::tempdir().unwrap();
            std::fs::write(dir.path().join(format!("{}.db", common::NAME)), &bytes).unwrap();
            let db = match common::try_open_in(backend, dir.path(), |b| b).await {
                Ok(db) => db,
                Err(e) => {
                    assert!(!matches!(e, Error::Panic { .. }), "{e}");
                    refused += 1;
                    continue;
                }
            };
            opened += 1;
            // Reads, writes and the integrity check each answer, whatever the damage.
            let _ = db
                .query_row("SELECT count(*), sum(length(body)) FROM t", [], |r| {
                    r.get::<_, i64>(0)
                })
                .await;
            let _ = db
                .query_row("SELECT body FROM t WHERE body > 'row 5'", [], |r| {
                    r.get::<_, String>(0)
                })
                .await;
            let _ = db.execute("INSERT INTO t (body) VALUES ('new')", ()).await;
            let _ = db
                .query_all("PRAGMA integrity_check", [], |r| r.get::<_, String>(0))
                .await;
            assert_eq!(db.metrics().panics, 0);
            db.close().await;
        }
        println!("corrupted files: {opened} opened (errors or data on use), {refused} refused at open");
    }
}
