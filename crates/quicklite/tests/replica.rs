//! A read replica on another "machine": a child process writes through quicklite to its own directory while the real
//! Litestream replicates the file to an S3-compatible server (moto) on loopback; a second child reads the replica
//! through Litestream's VFS, with no copy of the file, told by this process what the primary did. Every write shows up on the replica, in order; writes to the
//! replica are refused; a read that waits for the position the primary's Litestream reached after a write sees
//! that write.
//!
//! Needs `litestream`, moto's server and Litestream's VFS (`scripts/install-litestream.sh`,
//! `scripts/install-litestream-vfs.sh`); without them the test says what is missing and passes, unless
//! `QUICKLITE_LITESTREAM_REQUIRED=1` (as `scripts/test.sh` sets it).

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use quicklite::Database;
use quicklite::litestream::{Litestream, Position, Replica};

mod common;

use common::litestream::{
    BUCKET, Process, Tools, config_entry, replica_url, start_s3_logging, until_listening,
};

/// Set in the children's environment: the primary's directory; the replica's directory, VFS and URL.
const CHILD_DIR: &str = "QUICKLITE_REPLICA_CHILD_DIR";
const CHILD_VFS: &str = "QUICKLITE_REPLICA_CHILD_VFS";
const CHILD_URL: &str = "QUICKLITE_REPLICA_CHILD_URL";

/// Set (to anything) to measure: a thousand writes instead of a few hundred, the lag in each tenth of them, and the
/// replica's reads per second at 64 tasks against the primary's file read locally.
const MEASURE: &str = "QUICKLITE_REPLICA_MEASURE";

/// Set to a number of writes to make instead (a longer run: 50,000 take about ten minutes).
const WRITES: &str = "QUICKLITE_REPLICA_WRITES";

/// The writes the primary makes, one every [`WRITE_EVERY`]; every [`SYNC_EVERY`]th is followed by a sync.
fn writes() -> i64 {
    if let Some(n) = std::env::var(WRITES).ok().and_then(|n| n.parse().ok()) {
        return n;
    }
    if std::env::var_os(MEASURE).is_some() {
        1000
    } else {
        400
    }
}
const WRITE_EVERY: Duration = Duration::from_millis(10);
const SYNC_EVERY: i64 = 40;

/// How often the replica's connection polls object storage.
const POLL: Duration = Duration::from_millis(100);

fn micros_now() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_micros()
}

/// The primary: writes row after row, printing `ack <id> <µs since the epoch>` once each write returned, and after
/// every `SYNC_EVERY`th `synced <id> <txid>`, the position Litestream reports object storage has. Prints `ready
/// <txid>` once the table reached object storage, starts writing once the file `go` exists in its directory, and
/// prints `done` at the end; then waits to be killed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "the primary of `a_replica_follows_its_primary_through_litestream`, which runs it"]
async fn replica_primary_child() {
    let dir = PathBuf::from(std::env::var(CHILD_DIR).expect("run by the replica test"));
    let db = Database::open(dir.join("app.db")).await.unwrap();
    let litestream = Litestream::socket(dir.join("litestream.sock"));
    let sync = async || {
        litestream
            .sync(db.file(), Duration::from_secs(30))
            .await
            .unwrap()
    };
    println!("ready {}", sync().await.txid());
    // The replica is watching once `go` exists.
    while !dir.join("go").exists() {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    for id in 1..=writes() {
        db.execute(
            "INSERT INTO t(id, v) VALUES (?1, ?2)",
            (id, format!("row {id}")),
        )
        .await
        .unwrap();
        println!("ack {id} {}", micros_now());
        if id % SYNC_EVERY == 0 {
            println!("synced {id} {}", sync().await.txid());
        }
        tokio::time::sleep(WRITE_EVERY).await;
    }
    println!("done");
    std::future::pending::<()>().await;
}

/// Litestream's configuration for the primary's database, with its control socket, and level 0 kept short: the
/// VFS lists every file of level 0 at every poll (Litestream's S3 client lists the whole level and skips what
/// precedes the position itself), and by default Litestream keeps them until five minutes after level 1 took them
/// in, 30 s of compaction later — 3,300 files or more at ten syncs a second, each listed every poll. Compacted
/// into level 1 every 10 s and deleted 5 s after, level 0 holds about 20 s of files at most.
fn config(dir: &Path, endpoint: &str) -> PathBuf {
    let yaml = format!(
        "socket:\n  enabled: true\n  path: {socket}\n{LEVEL_ZERO_KEPT_SHORT}dbs:\n{entry}",
        socket = dir.join("litestream.sock").display(),
        entry = config_entry(&dir.join("app.db"), "app", endpoint),
    );
    let path = dir.join("litestream.yml");
    std::fs::write(&path, yaml).unwrap();
    path
}

/// The top-level settings of Litestream's configuration that keep level 0 short ([`config`]).
const LEVEL_ZERO_KEPT_SHORT: &str = "levels:\n  - interval: 10s\n  - interval: 5m\n  - interval: 1h\n\
    l0-retention: 5s\nl0-retention-check-interval: 2s\n";

/// Starts the ignored test `test` of this binary as a child with `envs` (and without `AWS_CA_BUNDLE`: the VFS's S3
/// client fails with it, and Go reads the environment the process started with). Its output goes to the returned
/// channel, a line at a time.
fn start_child(
    test: &str,
    envs: &[(&str, &std::ffi::OsStr)],
    stdin: Stdio,
) -> (Process, std::sync::mpsc::Receiver<String>) {
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            test,
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .envs(envs.iter().copied())
        .env_remove("AWS_CA_BUNDLE")
        .stdin(stdin)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in std::io::BufRead::lines(std::io::BufReader::new(stdout)) {
            let Ok(line) = line else { break };
            // The test harness's `test <name> ... ` shares the child's first line.
            let line = match line.rsplit_once(" ... ") {
                Some((_, printed)) => printed.to_owned(),
                None => line,
            };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    (Process(child), rx)
}

/// The words of the next line from `lines`, waiting up to a minute.
fn next_line(lines: &std::sync::mpsc::Receiver<String>) -> Vec<String> {
    lines
        .recv_timeout(Duration::from_secs(60))
        .expect("the child goes on")
        .split_whitespace()
        .map(str::to_owned)
        .collect()
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

/// The replica: opens the database through Litestream's VFS and checks it against the primary's lines, which it
/// reads from its standard input (`ready`, `ack`, `synced`, `done`); prints `watching` once it follows the replica,
/// `lag …` and `replica ok` at the end.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "the replica of `a_replica_follows_its_primary_through_litestream`, which runs it"]
async fn replica_reader_child() {
    let dir = PathBuf::from(std::env::var(CHILD_DIR).expect("run by the replica test"));
    let vfs = PathBuf::from(std::env::var(CHILD_VFS).unwrap());
    let url = std::env::var(CHILD_URL).unwrap();
    let (tx, primary) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in std::io::stdin().lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let first = next_line(&primary);
    assert_eq!(first[0], "ready", "{first:?}");
    let first = Position::from_txid(first[1].parse().unwrap());

    let replica = Database::builder(dir.join("app.db"))
        .replica(Replica::litestream(vfs, url).poll_interval(POLL))
        .open()
        .await
        .unwrap();
    let status = replica.replica_status().await.unwrap();
    assert!(status.position >= first, "{status:?}");

    // Writes are refused.
    for refused in [
        replica
            .execute("INSERT INTO t(id, v) VALUES (0, 'x')", [])
            .await
            .map(|_| ()),
        replica.write(|c| c.execute_batch("DELETE FROM t")).await,
        replica
            .with_write_connection(|c| c.execute_batch("VACUUM"))
            .await,
    ] {
        match refused {
            Err(quicklite::Error::ReadOnlyReplica { url }) => assert!(url.starts_with("s3://")),
            other => panic!("a write to the replica: {other:?}"),
        }
    }

    // Every write shows up, in order; when each first did is its lag. A read that waits for a synced position sees
    // the write before it.
    let watch = {
        let replica = replica.clone();
        tokio::spawn(async move {
            let mut seen = BTreeMap::new();
            let mut last = 0_i64;
            while last < writes() {
                // One snapshot, which holds the rows up to the last it has.
                let (max, count): (i64, i64) = replica
                    .query_row("SELECT coalesce(max(id), 0), count(*) FROM t", [], |r| {
                        Ok((r.get(0)?, r.get(1)?))
                    })
                    .await
                    .unwrap();
                assert_eq!(count, max, "rows missing below {max}");
                if max <= last {
                    tokio::time::sleep(Duration::from_millis(2)).await;
                    continue;
                }
                let now = micros_now();
                for id in last + 1..=max {
                    seen.insert(id, now);
                }
                last = max;
            }
            seen
        })
    };
    let mut notices = replica.subscribe();
    println!("watching");
    let mut acked = BTreeMap::new();
    let mut waits = Vec::new();
    loop {
        match next_line(&primary)
            .iter()
            .map(String::as_str)
            .collect::<Vec<_>>()
            .as_slice()
        {
            ["ack", id, at] => {
                acked.insert(id.parse::<i64>().unwrap(), at.parse::<u128>().unwrap());
            }
            ["synced", id, txid] => {
                let id: i64 = id.parse().unwrap();
                let position = Position::from_txid(txid.parse().unwrap());
                let started = Instant::now();
                let found: i64 = replica
                    .read_at_least(position, Duration::from_secs(10), move |c| {
                        c.query_row("SELECT count(*) FROM t WHERE id = ?1", [id], |r| r.get(0))
                    })
                    .await
                    .unwrap();
                assert_eq!(
                    found, 1,
                    "write {id}, synced as {position}, not on the replica"
                );
                waits.push(started.elapsed());
            }
            ["done"] => break,
            _ => {}
        }
    }
    let seen = tokio::time::timeout(Duration::from_secs(60), watch)
        .await
        .expect("the replica caught up")
        .unwrap();
    assert_eq!(acked.len() as i64, writes());
    let mut lags: Vec<Duration> = acked
        .iter()
        .map(|(id, at)| Duration::from_micros(seen[id].saturating_sub(*at) as u64))
        .collect();
    // The median lag of the first and the last tenth of the writes: whether it grows with the replica's files.
    let tenth = lags.len() / 10;
    let median_of = |part: &[Duration]| {
        let mut part = part.to_vec();
        part.sort();
        percentile(&part, 0.5)
    };
    let (early, late) = (
        median_of(&lags[..tenth]),
        median_of(&lags[lags.len() - tenth..]),
    );
    // Each tenth's median and p99, in milliseconds.
    let tenths: Vec<String> = lags
        .chunks(tenth.max(1))
        .take(10)
        .map(|part| {
            let mut part = part.to_vec();
            part.sort();
            format!(
                "{}/{}",
                percentile(&part, 0.5).as_millis(),
                percentile(&part, 0.99).as_millis()
            )
        })
        .collect();
    lags.sort();
    waits.sort();
    // A position beyond any the primary reached is not waited for past the deadline.
    let ahead = Position::from_txid(u64::MAX >> 1);
    match replica
        .read_at_least(ahead, Duration::from_millis(300), |_| Ok(()))
        .await
    {
        Err(quicklite::Error::ReplicaBehind {
            wanted, reached, ..
        }) => {
            assert_eq!(wanted, ahead);
            assert!(reached < ahead);
        }
        other => panic!("a position never reached: {other:?}"),
    }
    let status = replica.replica_status().await.unwrap();
    assert!(status.since_poll.is_some(), "{status:?}");
    // The replica's writer followed it: its metrics have a position past the first, and subscribers were told.
    let metrics = replica.metrics();
    assert!(
        metrics.replica_position.is_some_and(|p| p > first),
        "{:?}",
        metrics.replica_position
    );
    assert!(metrics.external_commits > 0);
    #[cfg(feature = "prometheus")]
    assert_exposed(&metrics);
    let notice = tokio::time::timeout(Duration::from_secs(10), notices.next())
        .await
        .expect("a notice of the replica's new transactions");
    // Told of the replica's new transactions: a notice, or (a long run, whose notices nobody drained) that it missed
    // some.
    assert!(
        matches!(
            notice,
            Some(quicklite::Notice::External | quicklite::Notice::Lagged { .. })
        ),
        "{notice:?}"
    );
    println!(
        "lag: {} writes, one every {WRITE_EVERY:?}; Litestream syncs every 100 ms, the VFS polls every \
         {POLL:?}: lag p50 {:?}, p99 {:?}, max {:?}; reads waiting for a synced position waited p50 {:?}, max {:?}; \
         the replica at {}; median lag of the first tenth {early:?}, of the last {late:?}; each tenth's p50/p99 in \
         ms: {}",
        writes(),
        percentile(&lags, 0.5),
        percentile(&lags, 0.99),
        lags.last().unwrap(),
        percentile(&waits, 0.5),
        waits.last().unwrap(),
        status.position,
        tenths.join(" "),
    );
    if std::env::var_os(MEASURE).is_some() {
        let primary = dir.parent().unwrap().join("primary/app.db");
        let local = Database::open(&primary).await.unwrap();
        // Taking turns, three times: the machine's other work moves both rates from one second to the next.
        let mut pairs = Vec::new();
        for _ in 0..3 {
            let replica = point_reads(&replica).await;
            let local = point_reads(&local).await;
            pairs.push(format!(
                "{:.0}k/{:.0}k ({:.0}%)",
                replica / 1e3,
                local / 1e3,
                100.0 * replica / local
            ));
        }
        println!(
            "reads: point reads by 64 tasks for 2 s, the replica then the primary's file read locally, three times: {}",
            pairs.join(", ")
        );
    }
    println!("replica ok");
}

/// The replica's position and poll age are exposed to Prometheus; a database that is not a replica has neither.
#[cfg(feature = "prometheus")]
fn assert_exposed(metrics: &quicklite::MetricsSnapshot) {
    let exposed = quicklite::prometheus::render(&[("replica", metrics)]);
    let txid = metrics.replica_position.unwrap().txid();
    assert!(
        exposed.contains(&format!(
            "quicklite_replica_txid{{database=\"replica\"}} {txid}"
        )),
        "{exposed}"
    );
    assert!(exposed.contains("quicklite_replica_since_poll_seconds{database=\"replica\"}"));
    let local = quicklite::prometheus::render(&[("local", &quicklite::MetricsSnapshot::default())]);
    assert!(!local.contains("quicklite_replica_txid{"));
}

/// Point reads per second by 64 tasks over 2 s, on rows the primary wrote.
async fn point_reads(db: &Database) -> f64 {
    let time = Duration::from_secs(2);
    let started = Instant::now();
    let tasks: Vec<_> = (0..64_i64)
        .map(|task| {
            let db = db.clone();
            tokio::spawn(async move {
                let mut reads = 0_u64;
                let mut id = task;
                while started.elapsed() < time {
                    id = (id * 7919 + 13) % writes() + 1;
                    let v: String = db
                        .query_row("SELECT v FROM t WHERE id = ?1", [id], |r| r.get(0))
                        .await
                        .unwrap();
                    assert_eq!(v, format!("row {id}"));
                    reads += 1;
                }
                reads
            })
        })
        .collect();
    let mut reads = 0;
    for task in tasks {
        reads += task.await.unwrap();
    }
    reads as f64 / started.elapsed().as_secs_f64()
}

/// A request of our own to the S3 server, which its log shows between the replica's: `GET` of a listing under
/// `prefix`; returns the keys listed.
fn list(endpoint: &str, prefix: &str) -> usize {
    let address = endpoint.trim_start_matches("http://");
    let mut stream = std::net::TcpStream::connect(address).unwrap();
    write!(
        stream,
        "GET /{BUCKET}?list-type=2&prefix={prefix} HTTP/1.1\r\nHost: {address}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut answer = String::new();
    std::io::Read::read_to_string(&mut stream, &mut answer).unwrap();
    answer.matches("<Key>").count()
}

/// What the S3 server's log says of the requests made between two marks ([`list`] of `mark` as the prefix).
#[derive(Debug, Default)]
struct Requests {
    /// Listings of the replica's level 0 and level 1 (the VFS's polls; the primary's Litestream lists them too,
    /// when it compacts and enforces retention).
    level0_lists: usize,
    level1_lists: usize,
    /// Reads of LTX files (the VFS's page indexes, headers and pages; Litestream's compactions).
    gets: usize,
    /// Uploads (Litestream's).
    puts: usize,
}

impl Requests {
    /// The requests logged in `log` after the first mark and before the second.
    fn between_marks(log: &Path, mark: &str) -> Requests {
        let log = std::fs::read_to_string(log).unwrap();
        let mut requests = Requests::default();
        let mut marks = 0;
        for line in log.lines() {
            let Some((_, request)) = line.split_once('"') else {
                continue;
            };
            let request = request.replace("%2F", "/");
            if request.contains(&format!("prefix={mark}")) {
                marks += 1;
                continue;
            }
            if marks != 1 {
                continue;
            }
            if request.contains("list-type=2") && request.contains("app/0000/") {
                requests.level0_lists += 1;
            } else if request.contains("list-type=2") && request.contains("app/0001/") {
                requests.level1_lists += 1;
            } else if request.starts_with("GET ") {
                requests.gets += 1;
            } else if request.starts_with("PUT ") {
                requests.puts += 1;
            }
        }
        assert_eq!(marks, 2, "both marks are in the S3 server's log");
        requests
    }
}

/// Lists the replica's level 0 every half second until `stop` is set: how many files a poll lists, and how long
/// the S3 server takes to answer, over the run. Returns (seconds since start, files, how long the listing took).
fn probe_listings(
    endpoint: String,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
) -> std::thread::JoinHandle<Vec<(f64, usize, Duration)>> {
    std::thread::spawn(move || {
        let started = Instant::now();
        let mut probes = Vec::new();
        while !stop.load(std::sync::atomic::Ordering::Relaxed) {
            let at = Instant::now();
            let files = list(&endpoint, "app/0000/");
            probes.push((started.elapsed().as_secs_f64(), files, at.elapsed()));
            std::thread::sleep(Duration::from_millis(500));
        }
        probes
    })
}

/// The replica polled object storage once per poll interval, not once per connection: the VFS opened the replica
/// once (each file it opens polls on its own), and its polls, over the time between the first and the last, came
/// no more often than one poller's would (a ticker of [`POLL`], which drops ticks rather than bunching them).
fn one_poller(log: &str) {
    let opens = log
        .lines()
        .filter(|l| l.contains("msg=\"opening file\"") && l.contains("vfs=true"))
        .count();
    assert_eq!(
        opens, 1,
        "the replica opened one file through the VFS, so one poller"
    );
    // `time=2026-11-28T04:58:27.734Z` in seconds of the day, for each poll.
    let polls: Vec<f64> = log
        .lines()
        .filter(|l| l.contains("msg=\"polling replica client\""))
        .filter_map(|l| {
            let (_, time) = l
                .split_whitespace()
                .next()?
                .strip_prefix("time=")?
                .split_once('T')?;
            let mut parts = time.trim_end_matches('Z').split(':');
            let (h, m, s) = (parts.next()?, parts.next()?, parts.next()?);
            Some(
                h.parse::<f64>().ok()? * 3600.0
                    + m.parse::<f64>().ok()? * 60.0
                    + s.parse::<f64>().ok()?,
            )
        })
        .collect();
    let (first, last) = (polls[0], polls[polls.len() - 1]);
    // Past midnight, the day's seconds start again.
    let window = if last >= first {
        last - first
    } else {
        last + 86_400.0 - first
    };
    let ticks = window / POLL.as_secs_f64() + 1.0;
    assert!(
        (polls.len() as f64) < ticks * 1.5,
        "{} polls in {window:.1} s: more than one poller's {ticks:.0}",
        polls.len()
    );
}

#[test]
fn a_replica_follows_its_primary_through_litestream() {
    let Some(tools) = Tools::require(true) else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let primary_dir = tmp.path().join("primary");
    let replica_dir = tmp.path().join("replica");
    std::fs::create_dir_all(&primary_dir).unwrap();
    std::fs::create_dir_all(&replica_dir).unwrap();
    {
        let conn = rusqlite::Connection::open(primary_dir.join("app.db")).unwrap();
        conn.execute_batch(
            "PRAGMA journal_mode = WAL; CREATE TABLE t(id INTEGER PRIMARY KEY, v TEXT NOT NULL)",
        )
        .unwrap();
    }
    let s3_log = tmp.path().join("s3.log");
    let (_s3, endpoint) = start_s3_logging(Some(&s3_log));
    let config = config(&primary_dir, &endpoint);
    let _replicating = tools.replicate(&config);
    // The control socket answers once Litestream runs.
    let socket = primary_dir.join("litestream.sock");
    until_listening(&socket);
    let (_primary, primary_lines) = start_child(
        "replica_primary_child",
        &[(CHILD_DIR, primary_dir.as_os_str())],
        Stdio::null(),
    );
    let url = replica_url("app", &endpoint);
    let log = replica_dir.join("vfs.log");
    let measure = std::env::var_os(MEASURE).is_some();
    // The VFS logs each file it opens and each poll at DEBUG (and each page read: not while measuring).
    let log_level = if measure { "INFO" } else { "DEBUG" };
    let (mut replica, replica_lines) = start_child(
        "replica_reader_child",
        &[
            (CHILD_DIR, replica_dir.as_os_str()),
            (CHILD_VFS, tools.vfs.as_ref().unwrap().as_os_str()),
            (CHILD_URL, url.as_ref()),
            ("AWS_ACCESS_KEY_ID", "test".as_ref()),
            ("AWS_SECRET_ACCESS_KEY", "test".as_ref()),
            ("LITESTREAM_LOG_FILE", log.as_os_str()),
            ("LITESTREAM_LOG_LEVEL", log_level.as_ref()),
        ],
        Stdio::piped(),
    );
    // The primary's lines go to the replica as they come; the primary starts writing once the replica watches.
    let mut to_replica = replica.0.stdin.take().unwrap();
    let ready = loop {
        let line = primary_lines
            .recv_timeout(Duration::from_secs(60))
            .expect("the primary gets ready");
        if line.starts_with("ready") {
            break line;
        }
    };
    writeln!(to_replica, "{ready}").unwrap();
    loop {
        let line = replica_lines
            .recv_timeout(Duration::from_secs(60))
            .expect("the replica starts watching");
        assert!(!line.contains("panicked"), "the replica failed: {line}");
        if line == "watching" {
            break;
        }
    }
    list(&endpoint, "mark/");
    let writing = Instant::now();
    let stop_probes = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let probes = measure.then(|| probe_listings(endpoint.clone(), stop_probes.clone()));
    std::fs::write(primary_dir.join("go"), "").unwrap();
    loop {
        let line = primary_lines
            .recv_timeout(Duration::from_secs(60))
            .expect("the primary goes on");
        let done = line == "done";
        if ["ready", "ack", "synced", "done"]
            .iter()
            .any(|w| line.starts_with(w))
        {
            writeln!(to_replica, "{line}").unwrap();
        }
        if done {
            break;
        }
    }
    list(&endpoint, "mark/");
    let written = writing.elapsed();
    stop_probes.store(true, std::sync::atomic::Ordering::Relaxed);
    let requests = Requests::between_marks(&s3_log, "mark/");
    println!(
        "s3: over the {written:.1?} of writes: {requests:?} ({:.1} level-0 listings per poll interval)",
        requests.level0_lists as f64 / (written.as_secs_f64() / POLL.as_secs_f64())
    );
    if let Some(probes) = probes {
        let probes = probes.join().unwrap();
        let tenth = (probes.len() / 10).max(1);
        let show = |part: &[(f64, usize, Duration)]| {
            let (at, files, took) = part[part.len() / 2];
            format!("{files} files at {at:.1} s, listed in {took:.1?}")
        };
        println!(
            "listings of level 0, every 0.5 s: the first tenth's median {}, the last tenth's {}",
            show(&probes[..tenth]),
            show(&probes[probes.len() - tenth..])
        );
    }
    let (mut lag, mut reads) = (None, None);
    loop {
        let line = replica_lines
            .recv_timeout(Duration::from_secs(120))
            .expect("the replica finishes");
        if line.starts_with("lag:") {
            lag = Some(line);
        } else if line.starts_with("reads:") {
            reads = Some(line);
        } else if line == "replica ok" {
            break;
        } else if line.contains("FAILED") || line.contains("panicked") {
            panic!("the replica failed: {line}");
        }
    }
    println!("{}", lag.expect("the replica measured its lag"));
    if !measure {
        one_poller(&std::fs::read_to_string(&log).unwrap());
    }
    if let Some(reads) = reads {
        println!("{reads}");
    }
    assert!(
        std::fs::read_dir(&replica_dir)
            .unwrap()
            .all(|e| e.unwrap().file_name() == "vfs.log"),
        "the replica wrote nothing but the VFS's log to its directory"
    );
}
