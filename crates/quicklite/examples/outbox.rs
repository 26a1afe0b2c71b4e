//! An outbox: every change of the `orders` table relayed to an HTTP endpoint at least once, in commit order, from
//! where the relay left off — across restarts, and across a SIGKILL of the relay or of the writer.
//!
//! The relay reads the database's change feed ([`Database::changes_since`]) and posts each change as JSON; it stores
//! its cursor in the database only once the endpoint acknowledged the change (any 2xx answer). Killed between the
//! two, it posts that change again when it restarts: at least once, never skipped (an endpoint that must see each
//! change once keeps the greatest `cursor` it applied). The feed's triggers record each change in the transaction
//! that makes it, so a writer killed at any moment leaves no committed row without its change.
//!
//! Run `cargo run -p quicklite --example outbox` for a demo in one process (a receiver, a writer, the relay), or
//! `cargo run -p quicklite --example outbox -- relay <database> <url>` to relay a database's orders to `url` (the
//! writer may be another process: its commits are recorded by the triggers, and the relay notices them).
//! `tests/outbox.rs` kills this relay with SIGKILL in the middle of its work and checks that nothing was lost.

// The integration test includes this file as a module, for `open` and `relay`.
#![allow(dead_code)]

use std::path::Path;
use std::time::Duration;

use anyhow::{Context, bail};
use axum::http::{Method, Request, header};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use quicklite::{Change, Cursor, Database, Error};

/// The application's table, and where the relay keeps its cursor.
pub const SCHEMA: &str = "
    CREATE TABLE IF NOT EXISTS orders (id INTEGER PRIMARY KEY, item TEXT NOT NULL, qty INTEGER NOT NULL);
    CREATE TABLE IF NOT EXISTS relay_state (id INTEGER PRIMARY KEY CHECK (id = 1), cursor INTEGER NOT NULL);";

/// The longest pause between two tries of a change the endpoint did not acknowledge.
const MAX_BACKOFF: Duration = Duration::from_secs(5);

/// Opens the database at `path` as both the writer and the relay do: the schema, and the feed of `orders`.
pub async fn open(path: &Path) -> quicklite::Result<Database> {
    Database::builder(path)
        .migrate(|c| c.execute_batch(SCHEMA))
        .change_feed(["orders"])
        // How soon the relay hears of another process's commits.
        .notice_external_commits(Duration::from_millis(50))
        .open()
        .await
}

/// The cursor stored after the last change the endpoint acknowledged.
async fn stored_cursor(db: &Database) -> quicklite::Result<Cursor> {
    let stored: Option<i64> = db
        .query_all("SELECT cursor FROM relay_state WHERE id = 1", (), |r| {
            r.get(0)
        })
        .await?
        .pop();
    Ok(stored.map_or(Cursor::BEGINNING, |c| Cursor::new(c.max(0) as u64)))
}

/// Relays every change after the stored cursor to `endpoint`, then every change as it is committed, until the
/// database closes. Each change is posted until acknowledged, then its cursor stored.
pub async fn relay(db: &Database, endpoint: &str) -> anyhow::Result<()> {
    let client: Client<HttpConnector, String> = Client::builder(TokioExecutor::new()).build_http();
    let mut changes = db.changes_since(stored_cursor(db).await?);
    while let Some(change) = changes.next().await {
        let change = match change {
            Ok(change) => change,
            Err(Error::CursorPruned { .. }) => {
                bail!(
                    "the relay was away longer than the feed keeps changes: resend the orders afresh"
                )
            }
            Err(e) => return Err(e).context("reading the change feed"),
        };
        deliver(&client, endpoint, body(&change)).await;
        db.execute(
            "INSERT INTO relay_state (id, cursor) VALUES (1, ?1)
             ON CONFLICT (id) DO UPDATE SET cursor = excluded.cursor",
            (i64::try_from(change.cursor.get())?,),
        )
        .await
        .context("storing the cursor")?;
    }
    Ok(())
}

/// The JSON the endpoint receives for `change`.
fn body(change: &Change) -> String {
    serde_json::json!({
        "cursor": change.cursor.get(),
        "table": change.table,
        "rowid": change.rowid,
        "op": format!("{:?}", change.op).to_lowercase(),
        "before": change.before,
        "after": change.after,
    })
    .to_string()
}

/// Posts `body` to `endpoint` until it answers with a 2xx status, pausing longer after each failure.
async fn deliver(client: &Client<HttpConnector, String>, endpoint: &str, body: String) {
    let mut backoff = Duration::from_millis(10);
    loop {
        let request = Request::builder()
            .method(Method::POST)
            .uri(endpoint)
            .header(header::CONTENT_TYPE, "application/json")
            .body(body.clone())
            .expect("a valid request");
        match client.request(request).await {
            Ok(response) if response.status().is_success() => return,
            Ok(response) => eprintln!("the endpoint answered {}: trying again", response.status()),
            Err(e) => eprintln!("could not reach the endpoint ({e}): trying again"),
        }
        tokio::time::sleep(backoff).await;
        backoff = (backoff * 2).min(MAX_BACKOFF);
    }
}

/// A receiver, a writer and the relay in one process.
async fn demo() -> anyhow::Result<()> {
    use axum::routing::post;

    let (received_tx, mut received) = tokio::sync::mpsc::channel::<String>(64);
    let app = axum::Router::new().route(
        "/changes",
        post(move |body: String| {
            let received_tx = received_tx.clone();
            async move {
                let _ = received_tx.send(body).await;
                "ok"
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let endpoint = format!("http://{}/changes", listener.local_addr()?);
    tokio::spawn(async move { axum::serve(listener, app).await });

    let dir = tempfile::tempdir()?;
    let db = open(&dir.path().join("shop.db")).await?;
    db.execute("INSERT INTO orders (item, qty) VALUES ('tea', 2)", ())
        .await?;
    db.execute("INSERT INTO orders (item, qty) VALUES ('cups', 6)", ())
        .await?;
    db.execute("UPDATE orders SET qty = 3 WHERE item = 'tea'", ())
        .await?;
    db.execute("DELETE FROM orders WHERE item = 'cups'", ())
        .await?;

    let relay = tokio::spawn({
        let (db, endpoint) = (db.clone(), endpoint.clone());
        async move { relay(&db, &endpoint).await }
    });
    for _ in 0..4 {
        let body = received.recv().await.context("the receiver stopped")?;
        println!("received {body}");
    }
    relay.abort();
    db.close().await?;
    Ok(())
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.as_slice() {
        [] => demo().await,
        [command, path, endpoint] if command == "relay" => {
            let db = open(Path::new(path)).await?;
            relay(&db, endpoint).await
        }
        _ => bail!("usage: outbox [relay <database> <url>]"),
    }
}
