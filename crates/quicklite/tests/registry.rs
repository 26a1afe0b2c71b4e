//! The registry: tenant names cannot escape its directory, thousands of databases run on a fixed pool with exact
//! contents, eviction under load loses and duplicates nothing, close with work in flight answers everyone.

mod common;

use std::collections::BTreeSet;
use std::time::Duration;

use common::entries;
use quicklite::{Error, Registry, rusqlite};

/// Threads of this process, from the kernel.
fn os_threads() -> usize {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("Threads:"))
        .unwrap()
        .trim()
        .parse()
        .unwrap()
}

#[tokio::test]
async fn names_that_would_escape_the_directory_are_refused_and_nothing_is_created() {
    let outer = tempfile::tempdir().unwrap();
    let dir = outer.path().join("tenants");
    let registry = Registry::open(&dir).await.unwrap();
    let secret = outer.path().join("secret.db");
    std::fs::write(&secret, b"not yours").unwrap();

    let long = "a".repeat(quicklite::Registry::MAX_NAME_LEN + 1);
    let attempts = [
        "",
        ".",
        "..",
        "../secret",
        "../../etc/passwd",
        "/etc/passwd",
        "sub/dir",
        "..\\secret",
        "nul\0byte",
        ".hidden",
        "a..b",
        "with space",
        long.as_str(),
    ];
    for name in attempts {
        match registry.get(name).await {
            Err(Error::InvalidName { reason, .. }) => assert!(!reason.is_empty()),
            other => panic!("{name:?} was not refused: {other:?}"),
        }
    }

    // Symbolic links planted in the directory, for the database or for a file SQLite would write next to it.
    std::os::unix::fs::symlink(&secret, dir.join("evil.db")).unwrap();
    std::fs::write(dir.join("sneaky.db"), b"").unwrap();
    std::os::unix::fs::symlink(
        outer.path().join("elsewhere-wal"),
        dir.join("sneaky.db-wal"),
    )
    .unwrap();
    for name in ["evil", "sneaky"] {
        let err = registry.get(name).await.unwrap_err();
        assert!(matches!(err, Error::InvalidName { .. }), "{name}: {err}");
        assert!(err.to_string().contains("symbolic link"), "{err}");
    }

    assert_eq!(std::fs::read(&secret).unwrap(), b"not yours");
    assert_eq!(
        entries(outer.path()),
        ["secret.db", "tenants"].map(String::from).into()
    );
    assert_eq!(
        entries(&dir),
        ["evil.db", "sneaky.db", "sneaky.db-wal"]
            .map(String::from)
            .into()
    );
    // A good name works, and lands inside.
    let ok = registry.get("acme").await.unwrap();
    ok.execute_batch("CREATE TABLE t (x)").await.unwrap();
    assert!(dir.join("acme.db").exists());
    registry.close().await.unwrap();
}

#[tokio::test]
async fn a_file_that_is_not_a_database_is_reported_by_get_and_left_alone() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("junk.db"),
        b"this is not an SQLite database, just text",
    )
    .unwrap();
    let registry = Registry::open(dir.path()).await.unwrap();
    let err = registry.get("junk").await.unwrap_err();
    assert_eq!(
        err.sqlite_code(),
        Some(rusqlite::ErrorCode::NotADatabase),
        "{err}"
    );
    assert_eq!(
        std::fs::read(dir.path().join("junk.db")).unwrap(),
        b"this is not an SQLite database, just text"
    );
    // The registry serves other databases on.
    let db = registry.get("fine").await.unwrap();
    db.execute_batch("CREATE TABLE t (x)").await.unwrap();
    registry.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn thousands_of_databases_on_a_fixed_pool_with_exact_contents() {
    const DATABASES: usize = 2000;
    const WRITES: i64 = 5;
    let dir = tempfile::tempdir().unwrap();
    // The write lane may not grow either: on a loaded machine, closing databases to make room can wait for the
    // disk long enough to count as blocked, and this test is about the fixed pool.
    let registry = Registry::builder(dir.path())
        .threads(4)
        .max_write_threads(2)
        .max_open(64)
        .open()
        .await
        .unwrap();

    // A few databases first: the thread count then must not grow with thousands more.
    for i in 0..10 {
        let db = registry.get(&format!("warm-{i}")).await.unwrap();
        db.execute_batch("CREATE TABLE t (k INTEGER PRIMARY KEY, v INTEGER NOT NULL)")
            .await
            .unwrap();
    }
    let threads_with_ten = os_threads();

    let mut tasks = Vec::new();
    for d in 0..DATABASES {
        let registry = registry.clone();
        tasks.push(tokio::spawn(async move {
            let db = registry.get(&format!("tenant-{d}")).await?;
            db.execute_batch("CREATE TABLE t (k INTEGER PRIMARY KEY, v INTEGER NOT NULL)")
                .await?;
            // Concurrent writes to one database: grouped, serialized.
            let writes: Vec<_> = (0..WRITES)
                .map(|k| {
                    let db = db.clone();
                    tokio::spawn(async move {
                        db.execute("INSERT INTO t VALUES (?1, ?2)", (k, d as i64 * 100 + k))
                            .await
                    })
                })
                .collect();
            for w in writes {
                w.await.expect("write task")?;
            }
            // Read back through the registry: read-your-writes holds on pooled databases too.
            let sum: i64 = db
                .query_row("SELECT sum(v) FROM t", [], |r| r.get(0))
                .await?;
            assert_eq!(sum, (0..WRITES).map(|k| d as i64 * 100 + k).sum::<i64>());
            Ok::<(), Error>(())
        }));
    }
    for t in tasks {
        t.await.unwrap().unwrap();
    }
    let threads_with_thousands = os_threads();
    let m = registry.metrics();
    assert_eq!(m.threads, 4);
    assert!(
        threads_with_thousands <= threads_with_ten,
        "{threads_with_ten} threads with 10 databases, {threads_with_thousands} with {DATABASES}"
    );
    assert!(m.evictions > 0, "{m:?}");
    println!("{DATABASES} databases: {threads_with_thousands} OS threads; {m:?}");
    registry.close().await.unwrap();

    // The files, read directly: every database holds exactly its writes.
    for d in (0..DATABASES).step_by(97) {
        let conn = rusqlite::Connection::open(dir.path().join(format!("tenant-{d}.db"))).unwrap();
        let rows: Vec<(i64, i64)> = conn
            .prepare("SELECT k, v FROM t ORDER BY k")
            .unwrap()
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
            .unwrap()
            .collect::<rusqlite::Result<_>>()
            .unwrap();
        let expected: Vec<(i64, i64)> = (0..WRITES).map(|k| (k, d as i64 * 100 + k)).collect();
        assert_eq!(rows, expected, "tenant-{d}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn eviction_under_load_loses_and_duplicates_nothing() {
    const DATABASES: usize = 40;
    const WRITES: i64 = 150;
    let dir = tempfile::tempdir().unwrap();
    let registry = Registry::builder(dir.path())
        .threads(3)
        .max_open(4)
        .idle_timeout(Duration::from_millis(20))
        .open()
        .await
        .unwrap();
    let mut tasks = Vec::new();
    for d in 0..DATABASES {
        let registry = registry.clone();
        tasks.push(tokio::spawn(async move {
            let name = format!("busy-{d}");
            registry
                .get(&name)
                .await?
                .execute_batch("CREATE TABLE t (id INTEGER PRIMARY KEY)")
                .await?;
            for id in 0..WRITES {
                // A fresh `get` each time, as a request handler would; the primary key makes any duplicate
                // an error.
                registry
                    .get(&name)
                    .await?
                    .execute("INSERT INTO t VALUES (?1)", (id,))
                    .await?;
                if id % 50 == 0 {
                    tokio::time::sleep(Duration::from_millis(30)).await;
                }
            }
            Ok::<(), Error>(())
        }));
    }
    for t in tasks {
        t.await.unwrap().unwrap();
    }
    let m = registry.metrics();
    assert!(m.evictions + m.idle_closes > 0, "{m:?}");
    assert!(
        m.opens > DATABASES as u64,
        "databases reopened after being closed: {m:?}"
    );
    for d in 0..DATABASES {
        let db = registry.get(&format!("busy-{d}")).await.unwrap();
        let (n, lo, hi): (i64, i64, i64) = db
            .query_row("SELECT count(*), min(id), max(id) FROM t", [], |r| {
                Ok((r.get(0)?, r.get(1)?, r.get(2)?))
            })
            .await
            .unwrap();
        assert_eq!((n, lo, hi), (WRITES, 0, WRITES - 1), "busy-{d}");
    }
    println!("{m:?}");
    registry.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn close_with_work_in_flight_answers_everyone() {
    let dir = tempfile::tempdir().unwrap();
    let registry = Registry::builder(dir.path())
        .threads(2)
        .open()
        .await
        .unwrap();
    let mut writes = Vec::new();
    for d in 0..8 {
        let db = registry.get(&format!("db-{d}")).await.unwrap();
        db.execute_batch("CREATE TABLE t (id INTEGER PRIMARY KEY)")
            .await
            .unwrap();
        for id in 0..200_i64 {
            let db = db.clone();
            writes.push(tokio::spawn(async move {
                (d, id, db.execute("INSERT INTO t VALUES (?1)", (id,)).await)
            }));
        }
    }
    tokio::task::yield_now().await;
    registry.close().await.unwrap();

    let mut acknowledged = vec![BTreeSet::new(); 8];
    for w in writes {
        let (d, id, result) = tokio::time::timeout(Duration::from_secs(60), w)
            .await
            .expect("every write is answered")
            .unwrap();
        match result {
            Ok(1) => {
                acknowledged[d].insert(id);
            }
            Err(Error::Closed) => {}
            other => panic!("db-{d} write {id}: {other:?}"),
        }
    }
    assert!(matches!(registry.get("db-0").await, Err(Error::Closed)));
    for (d, acked) in acknowledged.iter().enumerate() {
        let conn = rusqlite::Connection::open(dir.path().join(format!("db-{d}.db"))).unwrap();
        let stored = common::ids(&conn, "t");
        assert!(
            acked.is_subset(&stored),
            "db-{d}: acknowledged writes missing"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_handle_outliving_its_dropped_registry_gets_closed_not_a_hang() {
    let dir = tempfile::tempdir().unwrap();
    let registry = Registry::open(dir.path()).await.unwrap();
    let db = registry.get("kept").await.unwrap();
    db.execute_batch("CREATE TABLE t (x)").await.unwrap();
    db.execute("INSERT INTO t VALUES (1)", ()).await.unwrap();
    drop(registry);
    let late = tokio::time::timeout(
        Duration::from_secs(30),
        db.execute("INSERT INTO t VALUES (2)", ()),
    )
    .await
    .expect("answered, not left waiting");
    assert!(matches!(late, Err(Error::Closed)), "{late:?}");
    // What was acknowledged before is in the file once the background close has run.
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        let conn = rusqlite::Connection::open(dir.path().join("kept.db")).unwrap();
        if let Ok(n) = conn.query_row("SELECT count(*) FROM t", [], |r| r.get::<_, i64>(0)) {
            assert_eq!(n, 1);
            break;
        }
        assert!(std::time::Instant::now() < deadline);
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[cfg(feature = "prometheus")]
#[tokio::test]
async fn prometheus_text_covers_the_registry_and_its_databases() {
    let dir = tempfile::tempdir().unwrap();
    let registry = Registry::builder(dir.path())
        .threads(3)
        .open()
        .await
        .unwrap();
    for name in ["a", "b"] {
        let db = registry.get(name).await.unwrap();
        db.execute_batch("CREATE TABLE t (x)").await.unwrap();
    }
    let text = quicklite::prometheus::render_registry(&registry);
    assert!(text.contains("quicklite_registry_threads 3"), "{text}");
    assert!(
        text.contains("quicklite_registry_open_databases 2"),
        "{text}"
    );
    assert!(
        text.contains("quicklite_commits_total{database=\"a\"} 1"),
        "{text}"
    );
    assert!(
        text.contains("quicklite_commits_total{database=\"b\"} 1"),
        "{text}"
    );
    registry.close().await.unwrap();
}

/// File descriptors of this process open on `path`.
fn descriptors_on(path: &std::path::Path) -> usize {
    let path = std::fs::canonicalize(path).unwrap();
    std::fs::read_dir("/proc/self/fd")
        .unwrap()
        .filter_map(|fd| std::fs::read_link(fd.ok()?.path()).ok())
        .filter(|target| *target == path)
        .count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_database_read_while_its_writer_is_free_reads_on_the_writer_connection_read_only() {
    let dir = tempfile::tempdir().unwrap();
    // No reader connection may open: every read is served on the writer's. (Without the budget, a read that
    // arrives while the write task before it is still winding down opens one.)
    let registry = Registry::builder(dir.path())
        .max_reader_connections(0)
        .open()
        .await
        .unwrap();
    let db = registry.get("cold").await.unwrap();
    db.execute_batch("CREATE TABLE t (k INTEGER PRIMARY KEY, v INTEGER NOT NULL)")
        .await
        .unwrap();
    db.execute("INSERT INTO t VALUES (1, 10)", ())
        .await
        .unwrap();
    let v: i64 = db
        .query_row("SELECT v FROM t WHERE k = 1", [], |r| r.get(0))
        .await
        .unwrap();
    assert_eq!(v, 10, "the read sees the acknowledged write");
    // One connection: the writer's. A reader connection would hold a second descriptor on the file.
    assert_eq!(descriptors_on(&dir.path().join("cold.db")), 1);

    // Read-only there as on a reader connection.
    let e = db
        .read(|c| c.execute("INSERT INTO t VALUES (2, 20)", []))
        .await
        .unwrap_err();
    assert_eq!(e.extended_code(), Some(rusqlite::ffi::SQLITE_READONLY));
    // And writable again for writes.
    db.execute("INSERT INTO t VALUES (3, 30)", ())
        .await
        .unwrap();
    let keys: Vec<i64> = db
        .query_all("SELECT k FROM t ORDER BY k", [], |r| r.get(0))
        .await
        .unwrap();
    assert_eq!(keys, [1, 3]);
    registry.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_while_the_writer_is_busy_opens_a_reader_connection_only_within_the_budget() {
    for budget in [None, Some(0)] {
        let dir = tempfile::tempdir().unwrap();
        let mut builder = Registry::builder(dir.path());
        if let Some(n) = budget {
            builder = builder.max_reader_connections(n);
        }
        let registry = builder.open().await.unwrap();
        let db = registry.get("busy").await.unwrap();
        db.execute_batch("CREATE TABLE t (k INTEGER PRIMARY KEY)")
            .await
            .unwrap();
        let (release, blocker) = common::hold_writer(&db).await;
        let read = {
            let db = db.clone();
            tokio::spawn(async move {
                db.query_row("SELECT count(*) FROM t", [], |r| r.get::<_, i64>(0))
                    .await
            })
        };
        if budget.is_none() {
            // Served on a reader connection of its own while the writer is still held.
            assert_eq!(read.await.unwrap().unwrap(), 0);
            assert_eq!(registry.metrics().reader_connections, 1);
            assert_eq!(descriptors_on(&dir.path().join("busy.db")), 2);
            release.send(()).unwrap();
            blocker.await.unwrap();
        } else {
            // No reader connection to open: the read is served once the writer's turn ends.
            release.send(()).unwrap();
            blocker.await.unwrap();
            let count = tokio::time::timeout(Duration::from_secs(30), read)
                .await
                .expect("the read waiting for the writer is served when its turn ends");
            assert_eq!(count.unwrap().unwrap(), 0);
            assert_eq!(registry.metrics().reader_connections, 0);
            assert_eq!(descriptors_on(&dir.path().join("busy.db")), 1);
        }
        registry.close().await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_database_read_often_gets_a_reader_connection_of_its_own() {
    let dir = tempfile::tempdir().unwrap();
    // No connections for reads on the callers' threads: a read known to be short would run on one of them (each a
    // descriptor of its own on the file), and how soon a read counts as short depends on the machine's speed.
    let registry = Registry::builder(dir.path())
        .inline_connections(0)
        .open()
        .await
        .unwrap();
    let db = registry.get("warm").await.unwrap();
    db.execute_batch("CREATE TABLE t (k INTEGER PRIMARY KEY)")
        .await
        .unwrap();
    // One read at a time, nothing written meanwhile: the first ones run on the writer's connection (unless one
    // comes while the write task before it is still winding down), the later ones on a reader connection.
    for _ in 0..20 {
        db.query_row("SELECT count(*) FROM t", [], |r| r.get::<_, i64>(0))
            .await
            .unwrap();
    }
    assert_eq!(registry.metrics().reader_connections, 1);
    assert_eq!(descriptors_on(&dir.path().join("warm.db")), 2);
    registry.close().await.unwrap();
    assert_eq!(
        registry.metrics().reader_connections,
        0,
        "closed with the database"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_closed_database_takes_its_turn_when_every_open_one_has_work_queued() {
    // One write thread, which stays alone while it is held (the lane would otherwise grow past a write thread
    // asleep in a closure, and serve the writes queued here out of the order under test); three databases open, the
    // fourth (`c`) closed.
    let dir = tempfile::tempdir().unwrap();
    let registry = Registry::builder(dir.path())
        .threads(2)
        .max_write_threads(1)
        .max_open(3)
        .open()
        .await
        .unwrap();
    let mut dbs = std::collections::BTreeMap::new();
    for name in ["c", "d", "a", "b"] {
        let db = registry.get(name).await.unwrap();
        db.execute_batch("CREATE TABLE t (k TEXT)").await.unwrap();
        dbs.insert(name, db);
    }
    assert_eq!(registry.metrics().open_databases, 3);
    let order = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let write = |name: &'static str, key: &'static str| {
        let (db, order) = (dbs[name].clone(), order.clone());
        tokio::spawn(async move {
            // A transaction of its own: a write task serves one, then goes to the back of the run queue.
            db.transaction(move |c| {
                order.lock().unwrap().push(key);
                c.execute("INSERT INTO t VALUES (?1)", (key,))
            })
            .await
        })
    };
    // The write thread is held on `d`; behind it, `a` and `b` queue two writes each, `d` one more, then `c` one.
    let (release, blocker) = common::hold_writer(&dbs["d"]).await;
    let mut pending = Vec::new();
    for (name, key) in [
        ("a", "a1"),
        ("a", "a2"),
        ("b", "b1"),
        ("b", "b2"),
        ("d", "d2"),
        ("c", "c1"),
    ] {
        let queued = dbs[name].metrics().write_queue_depth;
        pending.push(write(name, key));
        common::until_write_queue_holds(&dbs[name], queued + 1).await;
    }
    release.send(()).unwrap();
    blocker.await.unwrap();
    for p in pending {
        assert_eq!(p.await.unwrap().unwrap(), 1);
    }
    // Run queue after the held write: a, b, c, then d, a, b again (each had more queued). When `c`'s turn comes,
    // every open database has a write queued and none is running: one of them is closed for `c` (and reopens
    // for its own next turn) instead of `c` waiting until one of them has nothing left.
    assert_eq!(*order.lock().unwrap(), ["a1", "b1", "c1", "d2", "a2", "b2"]);
    for (name, keys) in [("a", ["a1", "a2"]), ("b", ["b1", "b2"])] {
        let rows = dbs[name]
            .query_all("SELECT k FROM t ORDER BY k", [], |r| r.get::<_, String>(0))
            .await
            .unwrap();
        assert_eq!(rows, keys, "{name}");
    }
    assert!(registry.metrics().open_databases <= 3);
    registry.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_database_closed_to_make_room_keeps_a_short_wal_and_checkpoints_a_long_one() {
    let dir = tempfile::tempdir().unwrap();
    let registry = Registry::builder(dir.path())
        .max_open(1)
        .open()
        .await
        .unwrap();
    let wal = |name: &str| dir.path().join(format!("{name}.db-wal"));
    // `short`: a few frames. `long`: a transaction of about 2 MiB, under the managed policy's first checkpoint
    // (1000 frames) but over what a reopen should read again.
    let short = registry.get("short").await.unwrap();
    short
        .execute_batch("CREATE TABLE t (b BLOB); INSERT INTO t VALUES (zeroblob(100))")
        .await
        .unwrap();
    let long = registry.get("long").await.unwrap(); // closes `short`
    assert!(
        wal("short").exists(),
        "a short WAL is left for the next open"
    );
    long.execute_batch(
        "CREATE TABLE t (b BLOB); \
         WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 500) \
         INSERT INTO t SELECT randomblob(4000) FROM n",
    )
    .await
    .unwrap();
    assert!(std::fs::metadata(wal("long")).unwrap().len() > 256 * 4096);
    let count = |db: quicklite::Database| async move {
        db.query_row("SELECT count(*) FROM t", [], |r| r.get::<_, i64>(0))
            .await
            .unwrap()
    };
    assert_eq!(count(short.clone()).await, 1); // closes `long`
    assert!(!wal("long").exists(), "a long WAL is checkpointed at close");
    assert_eq!(count(long).await, 500);
    registry.close().await.unwrap();
}
