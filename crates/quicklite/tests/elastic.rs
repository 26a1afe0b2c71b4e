//! A registry's write threads grow while writes wait behind blocked ones, and retire when idle. In a test binary of its
//! own: the registry tests count the process's threads, which this one changes on purpose.

use std::time::Duration;

use quicklite::RegistryBuilder;

/// A gate that blocking closures wait on until the test opens it.
#[derive(Clone, Default)]
struct Gate(std::sync::Arc<(std::sync::Mutex<bool>, std::sync::Condvar)>);

impl Gate {
    fn wait(&self) {
        let (open, changed) = &*self.0;
        let mut open = open.lock().unwrap();
        while !*open {
            open = changed.wait(open).unwrap();
        }
    }

    fn open(&self) {
        let (open, changed) = &*self.0;
        *open.lock().unwrap() = true;
        changed.notify_all();
    }
}

/// Creates databases `slow-0` … `slow-{n-1}` and starts a write on each that inserts a row and then blocks inside its
/// transaction until `gate` opens.
async fn write_behind(
    registry: &quicklite::Registry,
    n: usize,
    gate: &Gate,
) -> Vec<tokio::task::JoinHandle<quicklite::Result<()>>> {
    let mut slow = Vec::new();
    for i in 0..n {
        let db = registry.get(&format!("slow-{i}")).await.unwrap();
        db.execute_batch("CREATE TABLE t (x INTEGER)")
            .await
            .unwrap();
        let gate = gate.clone();
        slow.push(tokio::spawn(async move {
            db.write(move |conn| {
                conn.execute("INSERT INTO t VALUES (1)", [])?;
                gate.wait();
                Ok(())
            })
            .await
        }));
    }
    slow
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writes_that_block_every_write_thread_do_not_starve_the_other_databases() {
    // One write thread (and one read thread) at the base.
    let registry = RegistryBuilder::temporary()
        .threads(2)
        .max_write_threads(8)
        .open()
        .await
        .unwrap();
    let base = registry.metrics().write_threads;
    assert_eq!(base, 1);
    // Three databases whose writes block inside their transaction until the gate opens: they occupy the base
    // thread, and would occupy any fixed number of them.
    let gate = Gate::default();
    let slow = write_behind(&registry, 3, &gate).await;
    // Another database's writes complete while the gate is still shut.
    let fast = registry.get("fast").await.unwrap();
    let done = tokio::time::timeout(Duration::from_secs(30), async {
        fast.execute_batch("CREATE TABLE t (x INTEGER)").await?;
        for x in 0..20 {
            fast.execute("INSERT INTO t VALUES (?1)", (x,)).await?;
        }
        fast.query_row("SELECT count(*) FROM t", (), |r| r.get::<_, i64>(0))
            .await
    })
    .await
    .expect("the fast database's writes waited behind the blocked ones");
    assert_eq!(done.unwrap(), 20);
    let grown = registry.metrics();
    assert!(grown.write_threads > base, "{grown:?}");
    assert!(grown.write_threads_added >= 1 && grown.write_threads_peak > base);
    assert!(slow.iter().all(|t| !t.is_finished()), "the gate is shut");
    gate.open();
    for task in slow {
        task.await.unwrap().unwrap();
    }
    // Idle again: the added threads retire, one by one, back to the base.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        let m = registry.metrics();
        if m.write_threads == base {
            assert_eq!(m.write_threads_retired, m.write_threads_added, "{m:?}");
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "extra write threads never retired: {m:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    for i in 0..3 {
        let db = registry.get(&format!("slow-{i}")).await.unwrap();
        let n: i64 = db
            .query_row("SELECT count(*) FROM t", (), |r| r.get(0))
            .await
            .unwrap();
        assert_eq!(n, 1, "slow-{i}");
    }
    registry.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn added_threads_retire_while_short_writes_go_on() {
    let registry = RegistryBuilder::temporary()
        .threads(2)
        .max_write_threads(16)
        .open()
        .await
        .unwrap();
    // Eight databases whose writes block until the gate opens: the lane grows for them.
    let gate = Gate::default();
    let slow = write_behind(&registry, 8, &gate).await;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while registry.metrics().write_threads < 6 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the lane did not grow: {:?}",
            registry.metrics()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    gate.open();
    for task in slow {
        task.await.unwrap().unwrap();
    }
    // One database written one short write after another: at some look a write is queued, at another every thread
    // may be busy, and on average about one thread is. The threads added for the long writes retire all the same.
    let fast = registry.get("fast").await.unwrap();
    fast.execute_batch("CREATE TABLE t (x INTEGER)")
        .await
        .unwrap();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    let mut written = 0_i64;
    let shrunk = loop {
        fast.execute("INSERT INTO t VALUES (?1)", (written,))
            .await
            .unwrap();
        written += 1;
        let m = registry.metrics();
        if m.write_threads <= 3 {
            break m;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "added write threads never retired while writes went on: {m:?}"
        );
    };
    assert!(shrunk.write_threads_peak >= 6, "{shrunk:?}");
    assert!(
        shrunk.write_threads_retired + 3 >= shrunk.write_threads_added,
        "{shrunk:?}"
    );
    let n: i64 = fast
        .query_row("SELECT count(*) FROM t", (), |r| r.get(0))
        .await
        .unwrap();
    assert_eq!(n, written);
    registry.close().await.unwrap();
}
