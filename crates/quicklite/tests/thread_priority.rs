//! Read threads run below the write threads' CPU priority by as many nice steps as they are told, in a registry and
//! in a standalone database. In a test binary of its own: it looks at every thread of the process by name.
#![cfg(target_os = "linux")]

mod common;

use quicklite::RegistryBuilder;

/// The nice values of this process's threads whose kernel name starts with `prefix`.
fn nice_values(prefix: &str) -> Vec<i32> {
    common::threads()
        .into_iter()
        .filter(|(name, _)| name.starts_with(prefix))
        .map(|(_, nice)| nice)
        .collect()
}

/// The nice values of the threads named `write` and `read`, once there are `writes` and `reads` of them: a thread
/// carries the name of the thread that started it until it has set its own (a writer's checkpoint thread, at its
/// start, is listed as a writer).
async fn settled(write: &str, writes: usize, read: &str, reads: usize) -> (Vec<i32>, Vec<i32>) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let (w, r) = (nice_values(write), nice_values(read));
        if (w.len(), r.len()) == (writes, reads) {
            return (w, r);
        }
        assert!(
            std::time::Instant::now() < deadline,
            "{} `{write}` and {} `{read}` threads",
            w.len(),
            r.len()
        );
        tokio::time::sleep(std::time::Duration::from_millis(1)).await;
    }
}

/// Waits until no thread of a closed database or registry is listed: a joined thread stays in /proc until the kernel
/// reaps it, and the next look must see only the next one's threads.
async fn wait_for_threads_to_go() {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while !nice_values("quicklite-").is_empty() {
        assert!(
            std::time::Instant::now() < deadline,
            "threads outlived their database"
        );
        tokio::time::sleep(std::time::Duration::from_millis(1)).await;
    }
}

/// Opens a registry of one write and one read thread with `nice` (the default if `None`), reads once (so the read
/// thread has started and set its priority), and returns the write and read threads' nice values.
async fn nice_of_lanes(nice: Option<u8>) -> (Vec<i32>, Vec<i32>) {
    let mut builder = RegistryBuilder::temporary().threads(2);
    if let Some(nice) = nice {
        builder = builder.read_thread_nice(nice);
    }
    let registry = builder.open().await.unwrap();
    let db = registry.get("db").await.unwrap();
    db.execute_batch("CREATE TABLE t (x INTEGER); INSERT INTO t VALUES (1)")
        .await
        .unwrap();
    let x: i64 = db
        .query_row("SELECT x FROM t", (), |r| r.get(0))
        .await
        .unwrap();
    assert_eq!(x, 1);
    let lanes = settled("quicklite-write", 1, "quicklite-read", 1).await;
    drop(db);
    registry.close().await.unwrap();
    wait_for_threads_to_go().await;
    lanes
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn read_threads_run_below_the_write_threads_priority_when_told_to_in_both_backends() {
    let (write, read) = nice_of_lanes(None).await;
    assert_eq!(read, write, "by default");

    let (write, read) = nice_of_lanes(Some(3)).await;
    assert_eq!(
        read,
        vec![(write[0] + 3).min(19)],
        "with read_thread_nice(3)"
    );

    let (write, read) = nice_of_lanes(Some(7)).await;
    assert_eq!(read, vec![(write[0] + 7).min(19)]);

    // Past the lowest priority there is, the lowest.
    let (write, read) = nice_of_lanes(Some(u8::MAX)).await;
    assert_eq!(read, vec![19.max(write[0])]);

    // A standalone database, after the registries: the kernel shows its writer (`quicklite-writer`) by the first 15
    // bytes, as a registry's write threads (`quicklite-write-N`).
    for nice in [0, 3] {
        let db = quicklite::Builder::temporary()
            .readers(2)
            .read_thread_nice(nice)
            .open()
            .await
            .unwrap();
        // The reader threads have started (and set their priority) once the database is open.
        let (writer, readers) = settled("quicklite-write", 1, "quicklite-reade", 2).await;
        assert_eq!(
            readers,
            vec![(writer[0] + i32::from(nice)).min(19); 2],
            "read_thread_nice({nice})"
        );
        db.close().await.unwrap();
        wait_for_threads_to_go().await;
    }
}
