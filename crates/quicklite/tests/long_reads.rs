//! A read whose call site ran short runs on its caller's thread; when one of its reads turns long (a query whose cost
//! depends on its parameters), it must hold neither the async runtime's worker nor, on the writer's connection lent
//! to it, the writes behind it. And a read closure that is correct on a reader thread stays correct wherever it
//! runs. Every test runs on both backends.
//!
//! The long reads here wait for a gate that only the runtime, or a write, can open: on a runtime whose workers
//! were held, or behind a writer that waited for them, the gate would stay shut until its deadline, 20 s later.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use common::{Backend, both_backends};
use quicklite::rusqlite::functions::FunctionFlags;
use quicklite::rusqlite::{self, Connection};

/// How long a gate waits for its opener before it gives up.
const GATE_DEADLINE: Duration = Duration::from_secs(20);

/// Counts while `gate(?1, x)` holds: one row when `?1` is 0 (a point read's cost), else until the gate opens.
const GATED: &str = "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE gate(?1, x)) \
                     SELECT count(*) FROM c";

/// What the SQL function `gate(n, x)` sees: shut, it keeps a read with `n` other than 0 running (one recursion step
/// at a time, so SQLite's progress handler runs in between) until it opens or its deadline passes.
#[derive(Default)]
struct Gate {
    open: AtomicBool,
    /// Reads held at the gate so far.
    waiting: AtomicUsize,
    deadline: std::sync::OnceLock<Instant>,
    /// Whether a read gave up at the deadline.
    timed_out: AtomicBool,
}

impl Gate {
    fn holds(&self, n: i64, x: i64) -> bool {
        if n == 0 {
            return false;
        }
        if x == 1 {
            self.waiting.fetch_add(1, Ordering::SeqCst);
        }
        if self.open.load(Ordering::SeqCst) {
            return false;
        }
        let deadline = *self.deadline.get_or_init(|| Instant::now() + GATE_DEADLINE);
        if Instant::now() >= deadline {
            self.timed_out.store(true, Ordering::SeqCst);
            return false;
        }
        true
    }

    /// Waits (on the runtime) until `n` reads are held at the gate.
    async fn until_waiting(&self, n: usize) {
        while self.waiting.load(Ordering::SeqCst) < n {
            assert!(
                !self.timed_out.load(Ordering::SeqCst),
                "the gate's deadline passed first"
            );
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    }
}

/// A database whose connections have `gate`, and whose reads may run inline if they took up to 50 ms (unoptimized
/// builds of SQLite run a point read in tens of microseconds, past the default bound; and a read of a few
/// milliseconds at the gate, as in a loaded debug build, must not keep the site off callers' threads).
async fn gated(backend: Backend, gate: &Arc<Gate>) -> common::TestDb {
    let gate = gate.clone();
    let db = common::open(backend, move |b| {
        let gate = gate.clone();
        b.inline_read_max(Duration::from_millis(50))
            .on_connection(move |c: &mut Connection, _| {
                let gate = gate.clone();
                c.create_scalar_function("gate", 2, FunctionFlags::SQLITE_UTF8, move |ctx| {
                    Ok(gate.holds(ctx.get(0)?, ctx.get(1)?))
                })
            })
    })
    .await;
    db.execute_batch("CREATE TABLE t (v INTEGER NOT NULL); INSERT INTO t VALUES (0);")
        .await
        .unwrap();
    db
}

/// One read of the gated call site.
async fn gated_read(db: &quicklite::Database, n: i64) -> quicklite::Result<i64> {
    db.query_row(GATED, [n], |r| r.get(0)).await
}

/// Reads the gated site short until twenty more of its reads ran on callers' threads.
async fn until_short_and_inline(db: &quicklite::Database) {
    let start = Instant::now();
    let inline = db.metrics().inline_reads;
    while db.metrics().inline_reads < inline + 20 {
        assert_eq!(gated_read(db, 0).await.unwrap(), 1);
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "no read ran on its caller's thread in 10 s"
        );
    }
}

both_backends! {
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_short_call_site_that_turns_long_on_every_worker_leaves_the_runtime_running(backend) {
        let gate = Arc::new(Gate::default());
        let db = gated(backend, &gate).await;
        until_short_and_inline(&db).await;
        // Four long reads of the known-short site on two workers; the task that opens the gate needs a worker too.
        let opener = tokio::spawn({
            let gate = gate.clone();
            async move {
                gate.until_waiting(2).await;
                gate.open.store(true, Ordering::SeqCst);
            }
        });
        let reads: Vec<_> = (0..4)
            .map(|_| {
                let db = db.db.clone();
                tokio::spawn(async move { gated_read(&db, 1).await })
            })
            .collect();
        for read in reads {
            assert!(read.await.unwrap().unwrap() >= 1);
        }
        opener.await.unwrap();
        assert!(!gate.timed_out.load(Ordering::SeqCst), "the reads held the runtime's workers");
        assert!(db.metrics().inline_reads >= 21, "the long reads ran on their callers' threads");
    }
}

both_backends! {
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_write_does_not_wait_behind_a_read_that_turned_long_on_the_writers_connection(backend) {
        let gate = Arc::new(Gate::default());
        let db = gated(backend, &gate).await;
        until_short_and_inline(&db).await;
        // Until the long read lands on the writer's connection (a standalone database's statement reads go there
        // after a commit, while the writer waits for work): the write made while it runs must not wait for it.
        for attempt in 1.. {
            until_short_and_inline(&db).await;
            db.execute("UPDATE t SET v = v + 1", ()).await.unwrap();
            let on_writer = db.metrics().inline_reads_on_writer;
            gate.open.store(false, Ordering::SeqCst);
            let waiting = gate.waiting.load(Ordering::SeqCst);
            let read = tokio::spawn({
                let db = db.db.clone();
                async move { gated_read(&db, 1).await }
            });
            gate.until_waiting(waiting + 1).await;
            // Two writes: the writer goes idle between them, with the first connection still held by the read.
            db.execute("INSERT INTO t VALUES (?1)", (attempt,)).await.unwrap();
            db.execute("INSERT INTO t VALUES (?1)", (-attempt,)).await.unwrap();
            gate.open.store(true, Ordering::SeqCst);
            read.await.unwrap().unwrap();
            assert!(!gate.timed_out.load(Ordering::SeqCst), "the write waited for the read");
            if backend == Backend::Registry || db.metrics().inline_reads_on_writer > on_writer {
                break;
            }
            assert!(attempt < 200, "no long read ran on the writer's connection");
        }
        if backend == Backend::Standalone {
            assert!(db.metrics().writer_switches >= 1, "{:?}", db.metrics());
        }
        // Both connections write on: every write is there, and the writer lends its connection again.
        let rows = common::count(&db, "t").await;
        for i in 0..50 {
            db.execute("INSERT INTO t VALUES (?1)", (1_000_000 + i,)).await.unwrap();
            assert_eq!(gated_read(&db, 0).await.unwrap(), 1);
        }
        assert_eq!(common::count(&db, "t").await, rows + 50);
    }
}

both_backends! {
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_read_closure_that_blocks_on_the_runtime_works_wherever_it_runs(backend) {
        let db = common::open(backend, |b| b.inline_read_max(Duration::from_millis(10))).await;
        db.execute_batch("CREATE TABLE t (v INTEGER NOT NULL); INSERT INTO t VALUES (7);")
            .await
            .unwrap();
        let (tx, mut rx) = tokio::sync::mpsc::channel(1);
        for i in 0..200 {
            let tx = tx.clone();
            let read = db.read(move |c| {
                let v: i64 = c.query_row("SELECT v FROM t", [], |r| r.get(0))?;
                // Correct on a reader thread; on an async runtime's worker tokio refuses it with a panic.
                tx.blocking_send(v).map_err(|e| rusqlite::Error::UserFunctionError(e.into()))?;
                Ok(v)
            });
            let (read, sent) = tokio::join!(read, rx.recv());
            assert_eq!((read.unwrap(), sent), (7, Some(7)), "read {i}");
        }
        assert_eq!(db.metrics().inline_reads, 0, "by default read closures run on the reader threads");
    }
}
