//! The outbox of `examples/outbox.rs` under SIGKILL (issue 49): its relay killed in the middle of its work and
//! started again, and a writer killed in the middle of its inserts while the relay follows them from another
//! process; every change reaches the endpoint at least once, in commit order, none skipped.

mod common;

use std::time::Duration;

/// The relay of `examples/outbox.rs`.
#[path = "../examples/outbox.rs"]
mod outbox;

/// The outbox's endpoint: it acknowledges each change after a moment, and records its cursor and rowid.
struct Endpoint {
    url: String,
    /// The cursor and rowid of every change received, in the order received.
    received: std::sync::Arc<std::sync::Mutex<Vec<(u64, i64)>>>,
    /// Notified at each change received.
    arrived: std::sync::Arc<tokio::sync::Notify>,
}

async fn endpoint() -> Endpoint {
    use axum::routing::post;

    let received = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let arrived = std::sync::Arc::new(tokio::sync::Notify::new());
    let app = axum::Router::new().route(
        "/changes",
        post({
            let (received, arrived) = (received.clone(), arrived.clone());
            move |body: String| async move {
                let change: serde_json::Value = serde_json::from_str(&body).unwrap();
                assert_eq!(change["op"], "insert");
                let seen = (
                    change["cursor"].as_u64().unwrap(),
                    change["rowid"].as_i64().unwrap(),
                );
                received.lock().unwrap().push(seen);
                arrived.notify_one();
                // A slow endpoint: the relay is in the middle of its work when it is killed.
                tokio::time::sleep(Duration::from_millis(1)).await;
                "ok"
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/changes", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });
    Endpoint {
        url,
        received,
        arrived,
    }
}

/// Waits until the endpoint has received a change of each of `rowids` (and of no other row).
async fn until_received(
    received: &std::sync::Mutex<Vec<(u64, i64)>>,
    arrived: &tokio::sync::Notify,
    rowids: &std::collections::BTreeSet<i64>,
) {
    tokio::time::timeout(Duration::from_secs(60), async {
        loop {
            let notified = arrived.notified();
            let seen: std::collections::BTreeSet<i64> =
                received.lock().unwrap().iter().map(|&(_, id)| id).collect();
            if &seen == rowids {
                break;
            }
            notified.await;
        }
    })
    .await
    .unwrap_or_else(|_| panic!("not every order arrived: {:?}", received.lock().unwrap()));
}

/// The relay of `examples/outbox.rs` in a process of its own, killed by
/// [`the_outbox_relays_every_change_at_least_once_across_a_sigkill_of_the_relay`]: relays the orders of the database
/// at `OUTBOX_DB` to `OUTBOX_URL`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a child process of the outbox test"]
async fn outbox_relay_child() {
    let path = std::env::var("OUTBOX_DB").unwrap();
    let url = std::env::var("OUTBOX_URL").unwrap();
    let db = outbox::open(path.as_ref()).await.unwrap();
    println!("ready");
    outbox::relay(&db, &url).await.unwrap();
}

/// The outbox's relay killed with SIGKILL in the middle of its work, then started again: every order reaches the
/// endpoint, in commit order, none skipped; only the changes posted and not yet stored as acknowledged come twice.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_outbox_relays_every_change_at_least_once_across_a_sigkill_of_the_relay() {
    const ORDERS: i64 = 300;
    let Endpoint {
        url,
        received,
        arrived,
    } = endpoint().await;

    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("shop.db");
    let db = outbox::open(&path).await.unwrap();
    let insert = |db: &quicklite::Database, id: i64| {
        let db = db.clone();
        async move {
            db.execute(
                "INSERT INTO orders (id, item, qty) VALUES (?1, 'tea', 1)",
                (id,),
            )
            .await
            .unwrap()
        }
    };
    for id in 1..=ORDERS / 2 {
        insert(&db, id).await;
    }
    let envs = [
        ("OUTBOX_DB", path.display().to_string()),
        ("OUTBOX_URL", url.clone()),
    ];
    tokio::task::spawn_blocking(move || {
        common::run_child_until_killed(
            "outbox_relay_child",
            &envs,
            Duration::from_millis(100),
            |_| {},
        )
    })
    .await
    .unwrap();
    let before_restart = received.lock().unwrap().len();

    // Started again (here), it resumes from the cursor the killed one stored, and follows the new orders live.
    let relay = tokio::spawn({
        let (db, url) = (db.clone(), url.clone());
        async move { outbox::relay(&db, &url).await }
    });
    for id in ORDERS / 2 + 1..=ORDERS {
        insert(&db, id).await;
    }
    until_received(&received, &arrived, &(1..=ORDERS).collect()).await;
    relay.abort();

    let received = received.lock().unwrap().clone();
    // In commit order, never past a change not sent yet: each cursor at most one past the one before (the same or
    // lower only where the relay restarted and sent again what it had not stored).
    for pair in received.windows(2) {
        assert!(
            pair[1].0 <= pair[0].0 + 1,
            "skipped from {:?} to {:?}",
            pair[0],
            pair[1]
        );
    }
    let repeated = received.len() - ORDERS as usize;
    assert!(
        repeated <= 1,
        "only the change posted when the relay was killed may come twice, {repeated} did \
         ({before_restart} arrived before the restart)"
    );
    db.close().await.unwrap();
}

/// A writer of orders in a process of its own, killed by
/// [`the_outbox_relays_every_committed_order_across_a_sigkill_of_the_writer`]: inserts orders into the database at
/// `OUTBOX_DB` one after another, printing each id once its insert returned.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a child process of the outbox test"]
async fn outbox_writer_child() {
    let path = std::env::var("OUTBOX_DB").unwrap();
    let db = outbox::open(path.as_ref()).await.unwrap();
    println!("ready");
    for id in 1.. {
        db.execute(
            "INSERT INTO orders (id, item, qty) VALUES (?1, 'tea', 1)",
            (id,),
        )
        .await
        .unwrap();
        println!("{id}");
    }
}

/// The writer killed with SIGKILL in the middle of its inserts, while the relay follows them from another process:
/// every order the file holds afterwards — each one whose insert returned, and perhaps the one under way — reaches
/// the endpoint.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_outbox_relays_every_committed_order_across_a_sigkill_of_the_writer() {
    let Endpoint {
        url,
        received,
        arrived,
    } = endpoint().await;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("shop.db");
    let db = outbox::open(&path).await.unwrap();
    let relay = tokio::spawn({
        let (db, url) = (db.clone(), url.clone());
        async move { outbox::relay(&db, &url).await }
    });
    let envs = [("OUTBOX_DB", path.display().to_string())];
    let acknowledged = tokio::task::spawn_blocking(move || {
        let mut acknowledged = std::collections::BTreeSet::new();
        common::run_child_until_killed(
            "outbox_writer_child",
            &envs,
            Duration::from_millis(100),
            |line| acknowledged.extend(line.parse::<i64>()),
        );
        acknowledged
    })
    .await
    .unwrap();
    let stored: std::collections::BTreeSet<i64> = db
        .query_all("SELECT id FROM orders", (), |r| r.get(0))
        .await
        .unwrap()
        .into_iter()
        .collect();
    assert!(!acknowledged.is_empty());
    assert!(
        acknowledged.is_subset(&stored),
        "an acknowledged order was lost"
    );
    until_received(&received, &arrived, &stored).await;
    relay.abort();
    for pair in received.lock().unwrap().windows(2) {
        assert!(
            pair[1].0 <= pair[0].0 + 1,
            "skipped from {:?} to {:?}",
            pair[0],
            pair[1]
        );
    }
    db.close().await.unwrap();
}
