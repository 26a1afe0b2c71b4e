//! The gate against a stand-in for Litestream's control socket, whose answers each test decides.

use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::net::UnixListener;
use std::sync::atomic::AtomicUsize;

use rusqlite::Connection;

use super::*;
use crate::reply::Answer;
use crate::request::{Job, Ran};

/// How the stand-in answers `/sync`.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Litestream {
    /// After `delay`, that every transaction is uploaded, as transaction number (its count of requests).
    Uploads { delay: Duration },
    /// An error, at once.
    Fails,
    /// Not at all (object storage stopped): the connection stays open until the gate gives up.
    Hangs,
}

struct StandIn {
    socket: PathBuf,
    mode: Arc<Mutex<Litestream>>,
    requests: Arc<AtomicUsize>,
    _dir: tempfile::TempDir,
}

impl StandIn {
    fn start(mode: Litestream) -> StandIn {
        let dir = tempfile::tempdir().unwrap();
        let socket = dir.path().join("litestream.sock");
        let listener = UnixListener::bind(&socket).unwrap();
        let mode = Arc::new(Mutex::new(mode));
        let requests = Arc::new(AtomicUsize::new(0));
        let (m, r) = (mode.clone(), requests.clone());
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(mut stream) = stream else { return };
                let (m, r) = (m.clone(), r.clone());
                std::thread::spawn(move || {
                    let mut reader = BufReader::new(stream.try_clone().unwrap());
                    let mut length = 0;
                    loop {
                        let mut line = String::new();
                        reader.read_line(&mut line).unwrap();
                        if let Some(n) = line.strip_prefix("Content-Length: ") {
                            length = n.trim().parse().unwrap();
                        }
                        if line == "\r\n" {
                            break;
                        }
                    }
                    let mut body = vec![0; length];
                    reader.read_exact(&mut body).unwrap();
                    let n = r.fetch_add(1, Ordering::SeqCst) + 1;
                    let mode = *m.lock().unwrap();
                    let answer = match mode {
                        Litestream::Uploads { delay } => {
                            std::thread::sleep(delay);
                            let body = format!(
                                "{{\"status\":\"synced\",\"txid\":{n},\"replicated_txid\":{n}}}"
                            );
                            format!(
                                "HTTP/1.0 200 OK\r\nContent-Length: {}\r\n\r\n{body}",
                                body.len()
                            )
                        }
                        Litestream::Fails => {
                            let body = "{\"error\":\"sync database: upload failed\"}";
                            format!(
                                "HTTP/1.0 500 Internal Server Error\r\nContent-Length: {}\r\n\r\n{body}",
                                body.len()
                            )
                        }
                        Litestream::Hangs => {
                            std::thread::sleep(Duration::from_secs(30));
                            return;
                        }
                    };
                    let _ = stream.write_all(answer.as_bytes());
                });
            }
        });
        StandIn {
            socket,
            mode,
            requests,
            _dir: dir,
        }
    }

    fn set(&self, mode: Litestream) {
        *self.mode.lock().unwrap() = mode;
    }
}

type Rx = oneshot::Receiver<Answer<i64>>;

/// A write that ran and succeeded, answering `value`, held until `deadline` at most.
fn committed(value: i64, deadline: Option<Duration>) -> (Held, Rx) {
    let conn = Connection::open_in_memory().unwrap();
    let (mut job, rx) = Job::new(move |_: &Connection| Ok(value));
    assert_eq!(WriteJob::run(job.as_mut(), &conn), Ran::Ok);
    assert!(!job.resolve(None));
    let deadline = deadline.and_then(|d| Deadline::shortest([Some(d)]));
    (
        Held {
            job,
            deadline,
            permit: None,
        },
        rx,
    )
}

fn gated(stand_in: &StandIn) -> (Gate, Arc<Gated>) {
    let gate = Gate::start(stand_in.socket.clone(), 1).unwrap();
    let gated = gate.track(8);
    gated.opened(PathBuf::from("/data/db.db"));
    (gate, gated)
}

fn answer(rx: &mut Rx, within: Duration) -> Option<crate::Result<i64>> {
    let until = Instant::now() + within;
    loop {
        if let Ok(answer) = rx.try_recv() {
            return Some(answer.result);
        }
        if Instant::now() > until {
            return None;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
}

#[test]
fn a_committed_write_is_answered_once_its_upload_is_confirmed_not_before() {
    let stand_in = StandIn::start(Litestream::Uploads {
        delay: Duration::from_millis(300),
    });
    let (_gate, gated) = gated(&stand_in);
    let (held, mut rx) = committed(7, None);
    gated.hold(1, [held]);
    assert!(
        answer(&mut rx, Duration::from_millis(150)).is_none(),
        "answered before its upload"
    );
    assert_eq!(answer(&mut rx, Duration::from_secs(2)).unwrap().unwrap(), 7);
    assert_eq!(gated.metrics.syncs.load(Ordering::Relaxed), 1);
    assert_eq!(gated.metrics.wait_us.snapshot().count, 1);
}

#[test]
fn commits_made_during_an_upload_share_the_next_one() {
    let stand_in = StandIn::start(Litestream::Uploads {
        delay: Duration::from_millis(100),
    });
    let (_gate, gated) = gated(&stand_in);
    let mut receivers = Vec::new();
    for seq in 1..=50 {
        let (held, rx) = committed(seq as i64, None);
        gated.hold(seq, [held]);
        receivers.push(rx);
        std::thread::sleep(Duration::from_millis(4));
    }
    for (i, rx) in receivers.iter_mut().enumerate() {
        assert_eq!(
            answer(rx, Duration::from_secs(3)).unwrap().unwrap(),
            i as i64 + 1
        );
    }
    // 50 commits over about 200 ms, uploads of 100 ms, one at a time: a few uploads serve them all.
    let uploads = stand_in.requests.load(Ordering::SeqCst);
    assert!(uploads <= 5, "{uploads} uploads for 50 commits");
}

#[test]
fn a_write_past_its_deadline_is_told_it_committed_but_is_not_replicated() {
    let stand_in = StandIn::start(Litestream::Hangs);
    let (_gate, gated) = gated(&stand_in);
    let (held, mut rx) = committed(1, Some(Duration::from_millis(200)));
    let (patient, mut patient_rx) = committed(2, None);
    let started = Instant::now();
    gated.hold(1, [held, patient]);
    match answer(&mut rx, Duration::from_secs(2)) {
        Some(Err(Error::NotReplicated { waited, reason })) => {
            assert!(waited >= Duration::from_millis(150), "{waited:?}");
            assert!(reason.contains("under way"), "{reason}");
        }
        other => panic!("{other:?}"),
    }
    assert!(
        started.elapsed() < Duration::from_millis(1_000),
        "its deadline, not the upload's timeout"
    );
    assert_eq!(gated.metrics.not_replicated.load(Ordering::Relaxed), 1);
    // A write without a deadline waits on.
    assert!(answer(&mut patient_rx, Duration::from_millis(200)).is_none());
}

#[test]
fn failed_uploads_are_asked_again_until_one_succeeds_and_their_reason_is_told() {
    let stand_in = StandIn::start(Litestream::Fails);
    let (_gate, gated) = gated(&stand_in);
    let (held, mut rx) = committed(1, None);
    let (late, mut late_rx) = committed(2, Some(Duration::from_millis(400)));
    gated.hold(1, [held, late]);
    match answer(&mut late_rx, Duration::from_secs(2)) {
        Some(Err(Error::NotReplicated { reason, .. })) => {
            assert!(reason.contains("upload failed"), "{reason}")
        }
        other => panic!("{other:?}"),
    }
    assert!(gated.metrics.sync_failures.load(Ordering::Relaxed) >= 2);
    assert!(answer(&mut rx, Duration::from_millis(10)).is_none());
    stand_in.set(Litestream::Uploads {
        delay: Duration::ZERO,
    });
    assert_eq!(answer(&mut rx, Duration::from_secs(2)).unwrap().unwrap(), 1);
}

#[test]
fn a_caller_waiting_for_replication_gets_the_position_object_storage_reached() {
    let stand_in = StandIn::start(Litestream::Uploads {
        delay: Duration::from_millis(20),
    });
    let (_gate, gated) = gated(&stand_in);
    let mut rx = gated.wait_for(3, None);
    let until = Instant::now() + Duration::from_secs(2);
    let position = loop {
        if let Ok(answer) = rx.try_recv() {
            break answer.unwrap();
        }
        assert!(Instant::now() < until, "never answered");
        std::thread::sleep(Duration::from_millis(1));
    };
    assert_eq!(position, Position::from_txid(1));
    // Already replicated: answered at once, with the same position.
    let mut rx = gated.wait_for(2, None);
    assert_eq!(rx.try_recv().unwrap().unwrap(), Position::from_txid(1));
}

#[test]
fn what_waits_when_its_gate_goes_is_still_answered() {
    let stand_in = StandIn::start(Litestream::Uploads {
        delay: Duration::from_millis(100),
    });
    let (gate, gated) = gated(&stand_in);
    let (held, mut rx) = committed(5, None);
    gated.hold(1, [held]);
    drop(gated);
    drop(gate);
    assert_eq!(answer(&mut rx, Duration::from_secs(2)).unwrap().unwrap(), 5);
}

#[test]
fn each_database_counts_only_its_own_writes_past_their_deadline() {
    let stand_in = StandIn::start(Litestream::Hangs);
    let gate = Gate::start(stand_in.socket.clone(), 1).unwrap();
    let (one, two) = (gate.track(8), gate.track(8));
    one.opened(PathBuf::from("/data/one.db"));
    two.opened(PathBuf::from("/data/two.db"));
    let deadline = Some(Duration::from_millis(100));
    let (a, mut a_rx) = committed(1, deadline);
    let (b, mut b_rx) = committed(2, deadline);
    let (c, mut c_rx) = committed(3, deadline);
    one.hold(1, [a]);
    two.hold(1, [b, c]);
    for rx in [&mut a_rx, &mut b_rx, &mut c_rx] {
        assert!(matches!(
            answer(rx, Duration::from_secs(2)),
            Some(Err(Error::NotReplicated { .. }))
        ));
    }
    assert_eq!(one.metrics.not_replicated.load(Ordering::Relaxed), 1);
    assert_eq!(two.metrics.not_replicated.load(Ordering::Relaxed), 2);
}
