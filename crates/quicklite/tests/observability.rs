//! Metrics, checkpoints and backups: the counts match the work done, the WAL stays bounded under continuous reads
//! and writes, and a backup taken under concurrent writes is complete and sound.

mod common;

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::{both_backends, count};
use quicklite::{Checkpointing, Database, Error, rusqlite};

both_backends! {
    #[tokio::test]
    async fn metrics_count_the_work_done(backend) {
        let db = common::open(backend, |b| b.readers(2)).await;
        db.execute_batch("CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT NOT NULL)")
            .await
            .unwrap();
        // Awaited one by one, each write is a group of its own: one commit each.
        for i in 0..10 {
            db.execute("INSERT INTO t VALUES (?1, 'x')", (i,))
                .await
                .unwrap();
        }
        let duplicate = db.execute("INSERT INTO t VALUES (1, 'again')", ()).await;
        assert!(duplicate.is_err());
        // Registry: the counts outlive the connections.
        db.evict().await;
        for i in 0..7 {
            let v: String = db
                .query_row("SELECT v FROM t WHERE id = ?1", (i,), |r| r.get(0))
                .await
                .unwrap();
            assert_eq!(v, "x");
        }
        // Every request is counted before its caller is answered: the snapshot matches exactly at once.
        let m = db.metrics();
        assert_eq!(m.writes, 12, "{m:#?}");
        assert_eq!(m.commits, 11, "{m:#?}");
        assert_eq!(m.write_errors, 1, "{m:#?}");
        assert_eq!(m.rollbacks, 1, "{m:#?}");
        assert_eq!(m.reads, 7, "{m:#?}");
        assert_eq!(m.write_transaction_us.count, 11, "one per commit; {m:#?}");
        assert_eq!(m.write_batch.sum, 11, "{m:#?}");
        assert_eq!((m.busy_retries, m.busy_timeouts), (0, 0), "{m:#?}");
        assert!(
            m.wal_frames > 0,
            "the WAL hook reports the WAL's size; {m:#?}"
        );
        assert!(m.wal_bytes > 0, "{m:#?}");
        db.close().await;
    }
}

both_backends! {
    #[tokio::test]
    async fn wal_frames_are_counted_under_sqlites_own_checkpoints_too(backend) {
        // SQLite keeps its WAL hook for its automatic checkpoint: the writer reads the WAL's frames after each
        // commit with a no-op checkpoint instead.
        let db = common::open(backend, |b| b.checkpointing(Checkpointing::Sqlite)).await;
        db.execute_batch("CREATE TABLE t (x BLOB)").await.unwrap();
        let mut last = db.metrics().wal_frames;
        assert!(last > 0, "{:#?}", db.metrics());
        for _ in 0..3 {
            db.execute("INSERT INTO t VALUES (zeroblob(10000))", ()).await.unwrap();
            let now = db.metrics().wal_frames;
            assert!(now > last, "{now} frames after {last}");
            last = now;
        }
        db.with_write_connection(|c| c.execute_batch("PRAGMA wal_checkpoint(TRUNCATE)"))
            .await
            .unwrap();
        assert_eq!(db.metrics().wal_frames, 0, "{:#?}", db.metrics());
        db.close().await;
    }
}

both_backends! {
    #[tokio::test]
    async fn busy_waits_are_counted_and_the_timeout_still_holds(backend) {
        let db = common::open(backend, |b| {
            b.busy_timeout(Duration::from_millis(200))
                .write_lock_wait(Duration::from_millis(200))
        })
        .await;
        db.execute_batch("CREATE TABLE t (x)").await.unwrap();

        // Another connection (as another process would) holds the write lock.
        let other = rusqlite::Connection::open(db.path()).unwrap();
        other.execute_batch("BEGIN IMMEDIATE").unwrap();
        let started = Instant::now();
        let refused = db.execute("INSERT INTO t VALUES (1)", ()).await;
        let waited = started.elapsed();
        assert_eq!(
            refused.unwrap_err().sqlite_code(),
            Some(rusqlite::ErrorCode::DatabaseBusy)
        );
        assert!(
            waited >= Duration::from_millis(200),
            "gave up after {waited:?}"
        );
        let m = db.metrics();
        assert_eq!(m.busy_timeouts, 1, "{m:#?}");
        assert!(m.busy_retries > 0, "{m:#?}");

        // A lock released while the writer waits: the write goes through after some retries.
        let retries_before = m.busy_retries;
        let write = tokio::spawn({
            let db = db.clone();
            async move { db.execute("INSERT INTO t VALUES (2)", ()).await }
        });
        let deadline = Instant::now() + Duration::from_secs(30);
        while db.metrics().busy_retries == retries_before {
            assert!(Instant::now() < deadline, "the writer never waited");
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        other.execute_batch("COMMIT").unwrap();
        write.await.unwrap().unwrap();
        assert_eq!(count(&db, "t").await, 1);
        assert_eq!(db.metrics().busy_timeouts, 1);
        assert_eq!(db.pragmas()["busy_timeout"], "200");
        db.close().await;
    }
}

/// Small checkpoint thresholds, so that a test of a few seconds crosses them many times.
fn small_checkpoints() -> Checkpointing {
    Checkpointing::Managed {
        passive_at_frames: 50,
        restart_at_frames: 200,
        // Generous, so that a reader descheduled on a busy machine is still waited for.
        reader_wait: Duration::from_secs(2),
        truncate_when_idle: Some(Duration::from_millis(200)),
    }
}

/// Runs 8 writer tasks (`writes` single-row inserts in all) against 4 reader tasks reading without pause, while
/// sampling the WAL's size; returns the largest size seen. The reads stay short (one index lookup): a long read
/// holds the WAL for as long as it runs, and checkpoints do not wait for it.
async fn write_and_read(db: &Database, writes: usize) -> u64 {
    db.execute_batch("CREATE TABLE IF NOT EXISTS log (id INTEGER PRIMARY KEY, body BLOB NOT NULL)")
        .await
        .unwrap();
    let done = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let mut readers = Vec::new();
    for _ in 0..4 {
        let (db, done) = (db.clone(), done.clone());
        readers.push(tokio::spawn(async move {
            let mut n = 0_u64;
            while !done.load(std::sync::atomic::Ordering::Relaxed) {
                db.query_row("SELECT max(id) FROM log", [], |r| {
                    r.get::<_, Option<i64>>(0)
                })
                .await
                .unwrap();
                n += 1;
            }
            n
        }));
    }
    let sampler = tokio::spawn({
        let (db, done) = (db.clone(), done.clone());
        async move {
            let mut max = 0;
            while !done.load(std::sync::atomic::Ordering::Relaxed) {
                max = max.max(db.metrics().wal_bytes);
                tokio::time::sleep(Duration::from_millis(2)).await;
            }
            max
        }
    });
    let mut writers = Vec::new();
    for w in 0..8 {
        let db = db.clone();
        writers.push(tokio::spawn(async move {
            for _ in 0..writes / 8 {
                db.execute("INSERT INTO log (body) VALUES (randomblob(300))", ())
                    .await
                    .unwrap();
            }
            w
        }));
    }
    for w in writers {
        w.await.unwrap();
    }
    done.store(true, std::sync::atomic::Ordering::Relaxed);
    for r in readers {
        assert!(r.await.unwrap() > 0, "readers kept reading");
    }
    sampler.await.unwrap()
}

both_backends! {
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_wal_stays_bounded_under_continuous_reads(backend) {
        // Reads on the reader threads, then reads on their callers' threads (allowed up to 10 ms each, so that an
        // unoptimized build runs them there too), whose snapshots are kept between reads.
        let mut bound = 0;
        for inline in [false, true] {
            let db = common::open(backend, move |b| {
                let b = b.readers(2).write_batch_max(16).checkpointing(small_checkpoints());
                if inline { b.inline_read_max(Duration::from_millis(10)) } else { b.inline_reads(false) }
            })
            .await;
            let page: i64 = db
                .query_row("PRAGMA page_size", [], |r| r.get(0))
                .await
                .unwrap();
            let frame = page as u64 + 24;
            // The RESTART threshold, plus what the groups committed meanwhile can add (at most 16 small rows each, a
            // few pages), plus the WAL header.
            bound = (200 + 100) * frame + 32;
            let max = write_and_read(&db, 8000).await;
            let m = db.metrics();
            println!(
                "managed, {} inline reads: largest WAL {max} bytes (bound {bound}), {} checkpoints ({} incomplete)",
                m.inline_reads, m.checkpoints, m.checkpoints_incomplete
            );
            assert!(
                max <= bound,
                "WAL reached {max} bytes, bound {bound}; {m:#?}"
            );
            assert!(m.checkpoints > 0, "{m:#?}");
            assert_eq!(m.checkpoint_errors, 0, "{m:#?}");
            assert_eq!(inline, m.inline_reads > 0, "{m:#?}");
            assert_eq!(count(&db, "log").await, 8000);
            db.close().await;
        }

        // The same work with checkpoints left to another tool: nothing bounds the WAL, which is what the managed
        // policy prevents (and what shows this test can fail).
        let db = common::open(backend, |b| b.readers(2).write_batch_max(16).checkpointing(Checkpointing::External)).await;
        let max = write_and_read(&db, 8000).await;
        println!("external: largest WAL {max} bytes");
        assert!(
            max > bound,
            "without checkpoints the WAL grew to {max} bytes only"
        );
        let m = db.metrics();
        assert_eq!(m.checkpoints, 0, "{m:#?}");
        db.close().await;
        // Not even at close: the WAL is left for the external tool.
        let mut wal = db.path().to_path_buf().into_os_string();
        wal.push("-wal");
        assert!(std::fs::metadata(&wal).map(|m| m.len()).unwrap_or(0) > 0);
    }
}

both_backends! {
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_wal_is_truncated_when_idle(backend) {
        let db = common::open(backend, |b| b.checkpointing(small_checkpoints())).await;
        db.execute_batch("CREATE TABLE log (id INTEGER PRIMARY KEY, body BLOB NOT NULL)")
            .await
            .unwrap();
        for _ in 0..20 {
            db.execute("INSERT INTO log (body) VALUES (randomblob(300))", ())
                .await
                .unwrap();
        }
        assert!(db.metrics().wal_bytes > 0);
        // Idle: the writer truncates the WAL to nothing (polled; the deadline only turns a hang into a failure).
        let deadline = Instant::now() + Duration::from_secs(30);
        while db.metrics().wal_bytes > 0 {
            assert!(Instant::now() < deadline, "the WAL was never truncated");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert_eq!(count(&db, "log").await, 20);
        db.close().await;
    }
}

both_backends! {
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_short_wal_is_kept_when_idle_and_the_next_write_appends_to_it(backend) {
        let checkpointing = Checkpointing::Managed {
            passive_at_frames: 400,
            restart_at_frames: 4000,
            reader_wait: Duration::from_secs(2),
            truncate_when_idle: Some(Duration::from_millis(50)),
        };
        let db = common::open(backend, move |b| b.checkpointing(checkpointing)).await;
        db.execute_batch("CREATE TABLE log (id INTEGER PRIMARY KEY, body BLOB NOT NULL)")
            .await
            .unwrap();
        for _ in 0..3 {
            db.execute("INSERT INTO log (body) VALUES (randomblob(300))", ())
                .await
                .unwrap();
        }
        let short = db.metrics().wal_bytes;
        assert!(short > 0);
        // Idle for many times `truncate_when_idle` (and a registry's housekeeping tick): a few frames stay, so the
        // next write appends to them instead of starting the WAL over (and syncing its header).
        tokio::time::sleep(Duration::from_millis(1500)).await;
        let m = db.metrics();
        assert_eq!((m.wal_bytes, m.checkpoints), (short, 0), "{m:#?}");
        db.execute("INSERT INTO log (body) VALUES (randomblob(300))", ())
            .await
            .unwrap();
        assert!(db.metrics().wal_bytes > short);

        // A quarter of the PASSIVE threshold and more: truncated once idle, as before (which shows the wait above
        // was long enough to see it happen).
        for _ in 0..40 {
            db.execute("INSERT INTO log (body) VALUES (randomblob(3000))", ())
                .await
                .unwrap();
        }
        let deadline = Instant::now() + Duration::from_secs(30);
        while db.metrics().wal_bytes > 0 {
            assert!(Instant::now() < deadline, "the WAL was never truncated");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert_eq!(count(&db, "log").await, 44);
        db.close().await;
    }
}

/// Inserts increasing ids from 4 tasks until told to stop; every id whose insert was acknowledged goes into
/// `acked`.
fn spawn_writers(
    db: &Database,
    acked: &Arc<Mutex<BTreeSet<i64>>>,
    stop: &Arc<std::sync::atomic::AtomicBool>,
) -> Vec<tokio::task::JoinHandle<()>> {
    (0..4)
        .map(|w| {
            let (db, acked, stop) = (db.clone(), acked.clone(), stop.clone());
            tokio::spawn(async move {
                let mut id = w;
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    db.execute(
                        "INSERT INTO t (id, body) VALUES (?1, randomblob(200))",
                        (id,),
                    )
                    .await
                    .unwrap();
                    acked.lock().unwrap().insert(id);
                    id += 4;
                }
            })
        })
        .collect()
}

/// Opens a copy and checks it: `integrity_check` passes and every id in `expected` is there.
fn check_copy(path: &std::path::Path, expected: &BTreeSet<i64>) {
    let copy = rusqlite::Connection::open(path).unwrap();
    let integrity: String = copy
        .query_row("PRAGMA integrity_check", [], |r| r.get(0))
        .unwrap();
    assert_eq!(integrity, "ok");
    let ids = common::ids(&copy, "t");
    let missing: Vec<_> = expected.difference(&ids).take(10).collect();
    assert!(
        missing.is_empty(),
        "acknowledged before the backup, missing from it: {missing:?}"
    );
}

both_backends! {
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_backup_under_concurrent_writes_holds_every_acknowledged_write(backend) {
        let db = common::open(backend, |b| b).await;
        db.execute_batch("CREATE TABLE t (id INTEGER PRIMARY KEY, body BLOB NOT NULL)")
            .await
            .unwrap();
        let acked = Arc::new(Mutex::new(BTreeSet::new()));
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let writers = spawn_writers(&db, &acked, &stop);
        // Registry: the neighbour keeps closing the database's connections, during the copies too.
        let churn = db.churn();
        // Let a few thousand pages of data build up first, so the backup takes several steps.
        while acked.lock().unwrap().len() < 20_000 {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }

        let before_backup = acked.lock().unwrap().clone();
        let backup_path = db.env.dir.join("backup.db");
        let report = db.backup(&backup_path).await.unwrap();
        let during_backup = acked.lock().unwrap().len() - before_backup.len();

        let before_vacuum = acked.lock().unwrap().clone();
        let vacuum_path = db.env.dir.join("vacuumed.db");
        let vacuumed = db.vacuum_into(&vacuum_path).await.unwrap();

        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        for w in writers {
            w.await.unwrap();
        }
        churn.stop().await;
        assert!(report.steps > 1, "{report:?}");
        assert!(report.pages > 1024, "{report:?}");
        assert!(vacuumed.pages > 0, "{vacuumed:?}");
        check_copy(&backup_path, &before_backup);
        check_copy(&vacuum_path, &before_vacuum);
        // Writers were not stopped by the copies (reported, not asserted: it depends on the machine's speed).
        println!("writes acknowledged during the backup: {during_backup}; {report:?}");
        // No temporary files are left behind.
        let names = common::entries(&db.env.dir);
        assert!(!names.iter().any(|n| n.contains("partial")), "{names:?}");
        db.close().await;
    }
}

both_backends! {
    #[tokio::test]
    async fn a_copy_is_one_rollback_journal_file_that_a_read_only_open_leaves_alone(backend) {
        let db = common::open(backend, |b| b).await;
        db.execute_batch("CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT); INSERT INTO t VALUES (1, 'one')")
            .await
            .unwrap();
        for (name, copy) in [("backup", "copies/backup.db"), ("vacuum_into", "copies/vacuumed.db")] {
            let dir = db.env.dir.join("copies");
            std::fs::create_dir_all(&dir).unwrap();
            let path = db.env.dir.join(copy);
            if name == "backup" {
                db.backup(&path).await.unwrap();
            } else {
                db.vacuum_into(&path).await.unwrap();
            }
            // The header's read and write versions: 1 is rollback journal, 2 is WAL.
            let header = std::fs::read(&path).unwrap();
            assert_eq!((header[18], header[19]), (1, 1), "{name}");
            // Python's sqlite3, read-only, as another program would open the copy.
            let out = std::process::Command::new("python3")
                .args([
                    "-c",
                    "import sqlite3, sys; c = sqlite3.connect('file:' + sys.argv[1] + '?mode=ro', uri=True); \
                     print(c.execute('SELECT v FROM t').fetchone()[0]); c.close()",
                ])
                .arg(&path)
                .output()
                .expect("python3 (scripts/install-test-deps.sh installs it)");
            assert!(out.status.success(), "{name}: {}", String::from_utf8_lossy(&out.stderr));
            assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "one");
            let left = common::entries(&dir);
            let expected: std::collections::BTreeSet<String> =
                [path.file_name().unwrap().to_string_lossy().into_owned()].into();
            assert_eq!(left, expected, "{name}: nothing beside the copy");
            std::fs::remove_file(&path).unwrap();
        }
        // The source is still in WAL mode.
        assert_eq!(db.pragmas()["journal_mode"], "wal");
        db.close().await;
    }
}

both_backends! {
    #[tokio::test]
    async fn a_backup_that_cannot_be_written_fails_clearly_and_leaves_the_source_alone(backend) {
        let db = common::open(backend, |b| b).await;
        db.execute_batch("CREATE TABLE t (id INTEGER PRIMARY KEY, body BLOB NOT NULL)")
            .await
            .unwrap();
        db.execute_many(
            "INSERT INTO t (id, body) VALUES (?1, randomblob(100))",
            (0..100_i64).map(|i| (i,)),
        )
        .await
        .unwrap();

        let a_file = db.env.dir.join("plain-file");
        std::fs::write(&a_file, b"not a directory").unwrap();
        let existing = db.env.dir.join("existing.db");
        std::fs::write(&existing, b"keep me").unwrap();
        let bad = [
            // The parent is a file, not a directory.
            a_file.join("backup.db"),
            // The parent does not exist.
            db.env.dir.join("no/such/dir/backup.db"),
            // A file system that accepts no new files (writable by nobody, root included).
            std::path::PathBuf::from("/proc/quicklite-backup.db"),
            // Never overwritten.
            existing.clone(),
        ];
        for dest in bad {
            for result in [
                db.backup(&dest).await.map(|_| ()),
                db.vacuum_into(&dest).await.map(|_| ()),
            ] {
                match result {
                    Err(Error::Backup { dest: d, reason }) => {
                        assert_eq!(d, dest);
                        assert!(!reason.is_empty());
                    }
                    other => panic!("backup to {}: {other:?}", dest.display()),
                }
            }
        }
        assert_eq!(std::fs::read(&existing).unwrap(), b"keep me");
        assert_eq!(std::fs::read(&a_file).unwrap(), b"not a directory");
        // The source serves on, whole.
        assert_eq!(count(&db, "t").await, 100);
        let integrity: String = db
            .query_row("PRAGMA integrity_check", [], |r| r.get(0))
            .await
            .unwrap();
        assert_eq!(integrity, "ok");
        let names = common::entries(&db.env.dir);
        assert!(!names.iter().any(|n| n.contains("partial")), "{names:?}");
        db.close().await;
    }
}

both_backends! {
    #[cfg(feature = "prometheus")]
    #[tokio::test]
    async fn prometheus_text_carries_the_counts(backend) {
        let db = common::open(backend, |b| b).await;
        db.execute_batch("CREATE TABLE t (x)").await.unwrap();
        db.execute("INSERT INTO t VALUES (1)", ()).await.unwrap();
        let text = quicklite::prometheus::render(&[("main", &db.metrics())]);
        assert!(
            text.contains("quicklite_commits_total{database=\"main\"} 2"),
            "{text}"
        );
        assert!(
            text.contains("quicklite_writes_total{database=\"main\"} 2"),
            "{text}"
        );
        assert!(
            text.contains("# TYPE quicklite_commit_duration_seconds histogram"),
            "{text}"
        );
        db.close().await;
    }
}

both_backends! {
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_checkpoint_that_stops_waiting_for_a_reader_is_counted_apart_from_busy_timeouts(backend) {
        let db = common::open(backend, |b| {
            b.checkpointing(Checkpointing::Managed {
                passive_at_frames: 20,
                restart_at_frames: 50,
                reader_wait: Duration::from_millis(20),
                truncate_when_idle: None,
            })
        })
        .await;
        db.execute_batch("CREATE TABLE log (x)").await.unwrap();
        // A reader of another program (a replicator, a backup) holding a snapshot: RESTART cannot finish.
        let foreign = rusqlite::Connection::open(db.path()).unwrap();
        foreign.execute_batch("BEGIN").unwrap();
        let _: i64 = foreign.query_row("SELECT count(*) FROM log", [], |r| r.get(0)).unwrap();
        for i in 0..200_i64 {
            db.execute("INSERT INTO log VALUES (?1)", (i,)).await.unwrap();
        }
        let m = db.metrics();
        assert!(m.checkpoint_reader_waits_given_up > 0, "{m:#?}");
        assert_eq!(m.busy_timeouts, 0, "no request gave up: {m:#?}");
        foreign.execute_batch("COMMIT").unwrap();
        assert_eq!(count(&db, "log").await, 200);
        db.close().await;
    }
}
