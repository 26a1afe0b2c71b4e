//! Tenants that move: a child process (machine A) writes to a registry's tenants while the real Litestream
//! replicates them to an S3-compatible server (moto) on loopback; object storage stops answering for a second (A's
//! Litestream records transactions it cannot upload), then A and its Litestream are killed with SIGKILL at once, as a
//! machine dies; then a registry in another, empty directory (machine B) restores each tenant from its replica on
//! first open and takes writes. Every write Litestream reported synced before the kill is there; the writes
//! acknowledged after the last sync are counted (the window a dead machine loses, here including the second object
//! storage was out of reach). Machine A coming back is refused its old copy of a tenant: first when B's replica
//! holds other transactions under the numbers A recorded, then when it is past them; and B reopens its own.
//!
//! Needs `litestream` and moto's server (`scripts/install-litestream.sh`); without them the test says what is
//! missing and passes, unless `QUICKLITE_LITESTREAM_REQUIRED=1` (as `scripts/test.sh` sets it).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::{Duration, Instant};

use quicklite::Registry;
use quicklite::litestream::{Litestream, Position, Restore};

mod common;

use common::litestream::{BUCKET, Process, Tools, config_entry, signal, start_s3, until_listening};

/// Set in the child's environment: machine A's directory.
const CHILD_DIR: &str = "QUICKLITE_TAKEOVER_CHILD_DIR";

/// Set in the environment of the child that runs the takeover test itself (see the test).
const IN_CHILD: &str = "QUICKLITE_TAKEOVER_IN_CHILD";

const TENANTS: [&str; 3] = ["t0", "t1", "t2"];

/// Machine A: one writer per tenant inserting ids 1, 2, … and printing `ack <tenant> <id>` once each returned; one
/// task per tenant asking Litestream to sync, printing `synced <tenant> <id>` once object storage held every write
/// acknowledged before it asked (up to `id`). Prints `ready` first.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "machine A of `a_dead_machine_s_tenants_are_restored_and_written_elsewhere`, which runs it"]
async fn takeover_machine_a_child() {
    let dir = PathBuf::from(std::env::var(CHILD_DIR).expect("run by the takeover test"));
    let registry = Registry::open(&dir).await.unwrap();
    let litestream = Litestream::socket(dir.join("litestream.sock"));
    println!("ready");
    let mut tasks = Vec::new();
    for tenant in TENANTS {
        let db = registry.get(tenant).await.unwrap();
        let acked = Arc::new(AtomicI64::new(0));
        tasks.push(tokio::spawn({
            let (db, acked) = (db.clone(), acked.clone());
            async move {
                for id in 1.. {
                    db.execute("INSERT INTO t(id) VALUES (?1)", [id])
                        .await
                        .unwrap();
                    acked.store(id, Ordering::Release);
                    println!("ack {tenant} {id}");
                }
            }
        }));
        let litestream = litestream.clone();
        tasks.push(tokio::spawn(async move {
            loop {
                let upto = acked.load(Ordering::Acquire);
                litestream
                    .sync(db.file(), Duration::from_secs(30))
                    .await
                    .unwrap();
                println!("synced {tenant} {upto}");
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }));
    }
    for task in tasks {
        task.await.unwrap();
    }
}

/// The highest transaction Litestream's local state beside `db` names (`.<file>-litestream/ltx/<level>/<min>-<max>.ltx`).
fn recorded_txid(db: &Path) -> Option<u64> {
    let state = db.with_file_name(format!(".{}-litestream/ltx", db.file_name()?.to_str()?));
    std::fs::read_dir(state)
        .ok()?
        .flatten()
        .flat_map(|level| {
            std::fs::read_dir(level.path())
                .into_iter()
                .flatten()
                .flatten()
        })
        .filter_map(|file| {
            let name = file.file_name().into_string().ok()?;
            let (_, last) = name.strip_suffix(".ltx")?.split_once('-')?;
            u64::from_str_radix(last, 16).ok()
        })
        .max()
}

/// What machine A printed, per tenant: the acknowledged ids, and the highest id known synced.
#[derive(Default, Debug)]
struct Seen {
    acked: BTreeSet<i64>,
    synced: i64,
}

/// Runs machine A for `time` after it is ready; then object storage stops answering (`s3` is stopped) for `cut`,
/// while A writes on and its Litestream records transactions it cannot upload; then A and its Litestream are killed
/// with SIGKILL, Litestream first, and object storage goes on.
fn run_machine_a(
    dir: &Path,
    mut litestream: Process,
    s3: &Process,
    time: Duration,
    cut: Duration,
) -> BTreeMap<String, Seen> {
    let s3 = s3.0.id();
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "takeover_machine_a_child",
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD_DIR, dir)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let (ready_tx, ready_rx) = std::sync::mpsc::channel::<()>();
    let killer = std::thread::spawn(move || {
        ready_rx
            .recv_timeout(Duration::from_secs(60))
            .expect("machine A got ready");
        std::thread::sleep(time);
        signal(s3, "STOP");
        std::thread::sleep(cut);
        // `Child::kill` sends SIGKILL.
        litestream.0.kill().unwrap();
        child.kill().unwrap();
        let status = child.wait().unwrap();
        signal(s3, "CONT");
        status
    });
    let mut ready = Some(ready_tx);
    let mut seen: BTreeMap<String, Seen> = BTreeMap::new();
    for line in std::io::BufRead::lines(std::io::BufReader::new(stdout)) {
        let Ok(line) = line else { break };
        if line.contains("ready")
            && let Some(tx) = ready.take()
        {
            tx.send(()).unwrap();
        }
        match line.split_whitespace().collect::<Vec<_>>().as_slice() {
            ["ack", tenant, id] => {
                seen.entry(tenant.to_string())
                    .or_default()
                    .acked
                    .insert(id.parse().unwrap());
            }
            ["synced", tenant, id] => {
                let seen = seen.entry(tenant.to_string()).or_default();
                seen.synced = seen.synced.max(id.parse().unwrap());
            }
            _ => {}
        }
    }
    let status = killer.join().unwrap();
    assert!(!status.success(), "machine A was killed: {status:?}");
    seen
}

/// A registry in `dir` that restores missing tenants from the replicas at `url`, and compares the copies here with
/// them through Litestream's VFS if `through_vfs`, else by restoring them.
async fn restoring(tools: &Tools, dir: &Path, url: &str, through_vfs: bool) -> Registry {
    let mut restore = Restore::litestream(&tools.litestream, url);
    if through_vfs {
        restore = restore.vfs(tools.vfs.as_ref().expect("the VFS was required"));
    }
    Registry::builder(dir)
        .restore_missing(restore)
        .open()
        .await
        .unwrap()
}

/// Machine A comes back with the copies in `dir_a`: a registry there refuses each tenant, with positions that pass
/// `positions` (Litestream's last transaction here, the replica's) — comparing content by restoring the replicas,
/// and again through Litestream's VFS.
async fn machine_a_is_refused(
    dir_a: &Path,
    url: &str,
    tools: &Tools,
    positions: impl Fn(Position, Position) -> bool,
) {
    for through_vfs in [false, true] {
        machine_a_is_refused_comparing(dir_a, url, tools, &positions, through_vfs).await;
    }
}

/// [`machine_a_is_refused`], comparing through the VFS or not.
async fn machine_a_is_refused_comparing(
    dir_a: &Path,
    url: &str,
    tools: &Tools,
    positions: impl Fn(Position, Position) -> bool,
    through_vfs: bool,
) {
    let back = restoring(tools, dir_a, url, through_vfs).await;
    for tenant in TENANTS {
        let started = Instant::now();
        match back.get(tenant).await {
            Err(quicklite::Error::TenantMoved {
                name,
                local,
                replica,
            }) => {
                assert_eq!(name, tenant);
                assert!(positions(local, replica), "{tenant}: {local} {replica}");
                println!(
                    "{tenant}: A's copy (last transaction {local}) refused against the replica at {replica} in {:?} \
                     (through the VFS: {through_vfs})",
                    started.elapsed()
                );
            }
            other => panic!("{tenant}: machine A's stale copy opened: {other:?}"),
        }
    }
    back.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_machine_s_tenants_are_restored_and_written_elsewhere() {
    let Some(tools) = Tools::require(true) else {
        return;
    };
    // Litestream's VFS, which compares content in this process, reads the environment the process started with:
    // the credentials for the S3 server must be there from the start. This test runs again in a child given them.
    if std::env::var_os(IN_CHILD).is_none() {
        let status = Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                "a_dead_machine_s_tenants_are_restored_and_written_elsewhere",
                "--nocapture",
                "--test-threads=1",
            ])
            .env(IN_CHILD, "1")
            .env("AWS_ACCESS_KEY_ID", "test")
            .env("AWS_SECRET_ACCESS_KEY", "test")
            .env_remove("AWS_CA_BUNDLE")
            .status()
            .unwrap();
        assert!(status.success(), "the test, run in a child: {status:?}");
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let (dir_a, dir_b) = (tmp.path().join("a"), tmp.path().join("b"));
    std::fs::create_dir_all(&dir_a).unwrap();
    for tenant in TENANTS {
        let conn = rusqlite::Connection::open(dir_a.join(format!("{tenant}.db"))).unwrap();
        conn.execute_batch("PRAGMA journal_mode = WAL; CREATE TABLE t(id INTEGER PRIMARY KEY)")
            .unwrap();
    }
    let (s3, endpoint) = start_s3();
    let mut yaml = format!(
        "socket:\n  enabled: true\n  path: {}\ndbs:\n",
        dir_a.join("litestream.sock").display()
    );
    for tenant in TENANTS {
        yaml.push_str(&config_entry(
            &dir_a.join(format!("{tenant}.db")),
            &format!("tenants/{tenant}"),
            &endpoint,
        ));
    }
    let config = dir_a.join("litestream.yml");
    std::fs::write(&config, yaml).unwrap();
    let litestream = tools.replicate(&config);
    until_listening(&dir_a.join("litestream.sock"));

    let seen = run_machine_a(
        &dir_a,
        litestream,
        &s3,
        Duration::from_secs(3),
        Duration::from_secs(1),
    );

    let url = format!(
        "s3://{BUCKET}/tenants/{{name}}?endpoint={endpoint}&region=us-east-1&force-path-style=true"
    );
    let refused = Registry::builder(&dir_b)
        .restore_missing(Restore::litestream(
            &tools.litestream,
            "s3://elsewhere/tenants",
        ))
        .open()
        .await;
    assert!(
        matches!(refused, Err(quicklite::Error::InvalidConfig(_))),
        "a restore URL without {{name}}: {refused:?}"
    );
    let registry = restoring(&tools, &dir_b, &url, false).await;
    for tenant in TENANTS {
        let seen = &seen[tenant];
        assert!(
            seen.synced > 0,
            "{tenant}: nothing synced before the kill: {seen:?}"
        );
        let started = Instant::now();
        let db = registry.get(tenant).await.unwrap();
        let took = started.elapsed();
        let restored: BTreeSet<i64> = db
            .query_all("SELECT id FROM t", [], |r| r.get(0))
            .await
            .unwrap()
            .into_iter()
            .collect();
        let synced: BTreeSet<i64> = (1..=seen.synced).collect();
        let missing: Vec<_> = synced.difference(&restored).collect();
        assert!(
            missing.is_empty(),
            "{tenant}: synced writes missing: {missing:?}"
        );
        // Nothing but acknowledged writes, and the one in flight at the kill.
        let in_flight = seen.acked.last().copied().unwrap_or(0) + 1;
        assert!(
            restored
                .iter()
                .all(|id| seen.acked.contains(id) || *id == in_flight),
            "{tenant}: a write nobody made"
        );
        let lost = seen.acked.difference(&restored).count();
        println!(
            "{tenant}: {} writes acknowledged, {} reported synced, {} restored (opened in {took:?}); {lost} \
             acknowledged but not synced before the kill",
            seen.acked.len(),
            seen.synced,
            restored.len(),
        );
        // Machine B takes the tenant's writes.
        db.execute("INSERT INTO t(id) VALUES (?1)", [1_000_000_000_i64])
            .await
            .unwrap();
        assert_eq!(
            db.query_row("SELECT max(id) FROM t", [], |r| r.get::<_, i64>(0))
                .await
                .unwrap(),
            1_000_000_000
        );
    }
    // B replicates the tenants with Litestream of its own, to the same replicas.
    let mut yaml = format!(
        "socket:\n  enabled: true\n  path: {}\ndbs:\n",
        dir_b.join("litestream.sock").display()
    );
    for tenant in TENANTS {
        yaml.push_str(&config_entry(
            &dir_b.join(format!("{tenant}.db")),
            &format!("tenants/{tenant}"),
            &endpoint,
        ));
    }
    std::fs::write(dir_b.join("litestream.yml"), yaml).unwrap();
    let _replicating_b = tools.replicate(&dir_b.join("litestream.yml"));
    until_listening(&dir_b.join("litestream.sock"));
    let litestream_b = Litestream::socket(dir_b.join("litestream.sock"));
    // B's replicas now hold B's first write, under a number A's Litestream gave one of the transactions it recorded
    // while object storage was out of reach: A's copies are refused for their content.
    for tenant in TENANTS {
        let db = registry.get(tenant).await.unwrap();
        let position = litestream_b
            .sync(db.file(), Duration::from_secs(30))
            .await
            .unwrap();
        let a_recorded =
            recorded_txid(&dir_a.join(format!("{tenant}.db"))).expect("A's Litestream state");
        assert!(
            position.txid() <= a_recorded,
            "{tenant}: B's replica at {position} is past A's last transaction ({a_recorded:x}): A recorded none \
             it could not upload"
        );
    }
    machine_a_is_refused(&dir_a, &url, &tools, |local, replica| local >= replica).await;
    // B writes until its replica has gone past every transaction A's Litestream recorded: A's copies are refused
    // for their number.
    for tenant in TENANTS {
        let db = registry.get(tenant).await.unwrap();
        let a_recorded =
            recorded_txid(&dir_a.join(format!("{tenant}.db"))).expect("A's Litestream state");
        let deadline = Instant::now() + Duration::from_secs(60);
        for id in 1_000_000_001_i64.. {
            db.execute("INSERT INTO t(id) VALUES (?1)", [id])
                .await
                .unwrap();
            let position = litestream_b
                .sync(db.file(), Duration::from_secs(30))
                .await
                .unwrap();
            if position.txid() > a_recorded {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "{tenant}: B's replica stayed at {position}"
            );
        }
    }
    registry.close().await.unwrap();
    machine_a_is_refused(&dir_a, &url, &tools, |local, replica| local < replica).await;
    // B, restarted, opens its own copies: its Litestream recorded the replicas' last transactions. Once comparing
    // through the VFS (its registry closed before the next opens the same files), then by restoring.
    let registry = restoring(&tools, &dir_b, &url, true).await;
    for tenant in TENANTS {
        let started = Instant::now();
        registry.get(tenant).await.unwrap();
        println!(
            "{tenant}: B's own copy compared with its replica through the VFS and opened in {:?}",
            started.elapsed()
        );
    }
    registry.close().await.unwrap();
    let registry = restoring(&tools, &dir_b, &url, false).await;
    for tenant in TENANTS {
        let started = Instant::now();
        let db = registry.get(tenant).await.unwrap();
        println!(
            "{tenant}: B's own copy compared with its replica and opened in {:?}",
            started.elapsed()
        );
        assert_eq!(
            db.query_row("SELECT min(id) FROM t WHERE id > 1000000000", [], |r| {
                r.get::<_, i64>(0)
            })
            .await
            .unwrap(),
            1_000_000_001
        );
    }
    // A tenant no machine replicated is created empty.
    let fresh = registry.get("fresh").await.unwrap();
    assert_eq!(
        fresh
            .query_row("SELECT count(*) FROM sqlite_schema", [], |r| r
                .get::<_, i64>(0))
            .await
            .unwrap(),
        0
    );
    registry.close().await.unwrap();
}

/// How large a tenant [`a_large_tenant_is_compared_by_its_pages`] makes, in MiB (`QUICKLITE_COMPARE_MIB`; 1,024 by
/// default).
const COMPARE_MIB: &str = "QUICKLITE_COMPARE_MIB";

/// A tenant of a gibibyte, replicated, its first transaction (the whole tenant) compacted in the replica and gone
/// from here; then twice a few transactions more, after which a registry opens the copy here: first comparing it
/// with its replica by restoring the replica, then through Litestream's VFS. Both open it; the times are printed.
/// A measurement (minutes), run by hand: `AWS_ACCESS_KEY_ID=test AWS_SECRET_ACCESS_KEY=test env -u AWS_CA_BUNDLE
/// QUICKLITE_LITESTREAM_REQUIRED=1 cargo test --release --test takeover -- --ignored --nocapture a_large_tenant`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a measurement, run by hand"]
async fn a_large_tenant_is_compared_by_its_pages() {
    let Some(tools) = Tools::require(true) else {
        return;
    };
    assert!(
        std::env::var_os("AWS_ACCESS_KEY_ID").is_some()
            && std::env::var_os("AWS_CA_BUNDLE").is_none(),
        "run with AWS_ACCESS_KEY_ID=test AWS_SECRET_ACCESS_KEY=test and without AWS_CA_BUNDLE: Litestream's VFS reads \
         the environment the process started with"
    );
    let mib: u64 = std::env::var(COMPARE_MIB).map_or(1024, |v| v.parse().unwrap());
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("here");
    std::fs::create_dir_all(&dir).unwrap();
    let db = dir.join("big.db");
    let started = Instant::now();
    {
        let conn = rusqlite::Connection::open(&db).unwrap();
        conn.execute_batch(
            "PRAGMA journal_mode = WAL; PRAGMA synchronous = OFF; \
             CREATE TABLE t(id INTEGER PRIMARY KEY, body BLOB)",
        )
        .unwrap();
        // Rows of 4,000 random bytes: a page each, incompressible.
        let rows = (mib * 1024 * 1024 / 4096) as i64;
        for chunk in 0..(rows + 9_999) / 10_000 {
            let tx = conn.unchecked_transaction().unwrap();
            for id in chunk * 10_000..((chunk + 1) * 10_000).min(rows) {
                tx.execute("INSERT INTO t VALUES (?1, randomblob(4000))", [id])
                    .unwrap();
            }
            tx.commit().unwrap();
        }
        conn.execute_batch("PRAGMA wal_checkpoint(TRUNCATE)")
            .unwrap();
    }
    let size = std::fs::metadata(&db).unwrap().len();
    println!(
        "a tenant of {} MiB made in {:?}",
        size >> 20,
        started.elapsed()
    );
    let (_s3, endpoint) = start_s3();
    // Level 0 compacted every 10 s and kept here 5 s after (as the replica test's configuration).
    let yaml = format!(
        "socket:\n  enabled: true\n  path: {}\nlevels:\n  - interval: 10s\n  - interval: 5m\n  - interval: 1h\n\
         l0-retention: 5s\nl0-retention-check-interval: 2s\ndbs:\n{}",
        dir.join("litestream.sock").display(),
        config_entry(&db, "tenants/big", &endpoint)
    );
    std::fs::write(dir.join("litestream.yml"), yaml).unwrap();
    let started = Instant::now();
    let _replicating = tools.replicate(&dir.join("litestream.yml"));
    until_listening(&dir.join("litestream.sock"));
    let litestream = Litestream::socket(dir.join("litestream.sock"));
    let position = litestream
        .sync(&db, Duration::from_secs(600))
        .await
        .unwrap();
    println!("replicated (to {position}) in {:?}", started.elapsed());
    let level0 = dir.join(".big.db-litestream/ltx/0");
    let first = level0.join("0000000000000001-0000000000000001.ltx");
    let deadline = Instant::now() + Duration::from_secs(300);
    while first.exists() {
        assert!(
            Instant::now() < deadline,
            "the first transaction stayed in level 0 here"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    println!(
        "the first transaction compacted in the replica and gone from here after {:?}",
        started.elapsed()
    );
    let url = format!(
        "s3://{BUCKET}/tenants/{{name}}?endpoint={endpoint}&region=us-east-1&force-path-style=true"
    );
    let conn = rusqlite::Connection::open(&db).unwrap();
    for (round, through_vfs) in [(0_i64, false), (1, true)] {
        // Twenty transactions, a page each, which Litestream here keeps in level 0 for a few seconds.
        for n in 0..20_i64 {
            conn.execute(
                "UPDATE t SET body = randomblob(4000) WHERE id = ?1",
                [round * 100_000 + n * 1000],
            )
            .unwrap();
            litestream.sync(&db, Duration::from_secs(60)).await.unwrap();
        }
        let files = std::fs::read_dir(&level0).unwrap().count();
        let registry = restoring(&tools, &dir, &url, through_vfs).await;
        let started = Instant::now();
        let opened = registry.get("big").await.unwrap();
        println!(
            "compared with its replica ({}; {files} files in level 0 here) and opened in {:?}",
            if through_vfs {
                "through the VFS"
            } else {
                "restored beside it"
            },
            started.elapsed()
        );
        drop(opened);
        registry.close().await.unwrap();
    }
}
