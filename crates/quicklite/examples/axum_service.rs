//! A small HTTP service on quicklite, laid out as an application would be: one shared `Database` in axum's state,
//! schema migrations that run before the service takes requests, a SQL function registered on every connection,
//! the application's own error type, and tests on a temporary database.
//!
//! ```text
//! cargo run --release -p quicklite --example axum_service -- [DB_PATH] [ADDR]
//! curl -X PUT localhost:3000/notes/1 -d 'hello there'
//! curl localhost:3000/notes/1
//! curl 'localhost:3000/notes?min_words=2'
//! curl localhost:3000/stats
//! curl localhost:3000/metrics
//! curl -N localhost:3000/events        # server-sent events: one per commit, with the notes it changed
//! cargo test -p quicklite --example axum_service
//! ```
//!
//! A full write queue answers 503 (the database is built with `QueueFull::Fail`) instead of letting requests pile
//! up; a missing note answers 404; any other database error answers 500 with its message.

use std::convert::Infallible;

use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use futures::{Stream, StreamExt};
use quicklite::rusqlite::functions::FunctionFlags;
use quicklite::rusqlite::{self, Connection, OptionalExtension};
use quicklite::{Builder, ConnectionRole, Database, Notice, QueueFull};

/// The schema, one step per version; `PRAGMA user_version` records how many have run.
const MIGRATIONS: &[&str] = &[
    "CREATE TABLE note (id INTEGER PRIMARY KEY, body TEXT NOT NULL)",
    "ALTER TABLE note ADD COLUMN updated_at TEXT NOT NULL DEFAULT '1970-01-01 00:00:00'",
];

/// Brings the schema up to date, all or nothing: runs on the writer before the database takes any request.
fn migrate(conn: &mut Connection) -> rusqlite::Result<()> {
    let tx = conn.transaction()?;
    let done: i64 = tx.query_row("PRAGMA user_version", [], |r| r.get(0))?;
    for step in MIGRATIONS.iter().skip(usize::try_from(done).unwrap_or(0)) {
        tx.execute_batch(step)?;
    }
    tx.pragma_update(None, "user_version", MIGRATIONS.len() as i64)?;
    tx.commit()
}

/// `word_count(text)`, on every connection: the readers use it in queries as well as the writer.
fn register_functions(conn: &mut Connection, _: ConnectionRole) -> rusqlite::Result<()> {
    conn.create_scalar_function(
        "word_count",
        1,
        FunctionFlags::SQLITE_UTF8 | FunctionFlags::SQLITE_DETERMINISTIC,
        |ctx| Ok(ctx.get::<String>(0)?.split_whitespace().count() as i64),
    )
}

/// The service's options, for the real database and the tests' temporary one alike.
fn configure(builder: Builder) -> Builder {
    builder
        .on_full(QueueFull::Fail)
        .on_connection(register_functions)
        .migrate(migrate)
}

/// What a request can fail with, as an HTTP response.
#[derive(Debug, thiserror::Error)]
enum AppError {
    #[error("no such note")]
    NotFound,
    #[error(transparent)]
    Db(#[from] quicklite::Error),
}

impl From<rusqlite::Error> for AppError {
    fn from(e: rusqlite::Error) -> Self {
        AppError::Db(e.into())
    }
}

impl IntoResponse for AppError {
    fn into_response(self) -> Response {
        let status = match &self {
            AppError::NotFound => StatusCode::NOT_FOUND,
            AppError::Db(quicklite::Error::Overloaded { .. }) => StatusCode::SERVICE_UNAVAILABLE,
            AppError::Db(_) => StatusCode::INTERNAL_SERVER_ERROR,
        };
        (status, self.to_string()).into_response()
    }
}

async fn get_note(State(db): State<Database>, Path(id): Path<i64>) -> Result<String, AppError> {
    db.read_and_then(move |c| {
        c.prepare_cached("SELECT body FROM note WHERE id = ?1")?
            .query_row((id,), |r| r.get(0))
            .optional()?
            .ok_or(AppError::NotFound)
    })
    .await
}

async fn put_note(
    State(db): State<Database>,
    Path(id): Path<i64>,
    body: String,
) -> Result<StatusCode, AppError> {
    db.execute(
        "INSERT INTO note (id, body, updated_at) VALUES (?1, ?2, datetime('now'))
         ON CONFLICT (id) DO UPDATE SET body = excluded.body, updated_at = excluded.updated_at",
        (id, body),
    )
    .await?;
    Ok(StatusCode::NO_CONTENT)
}

#[derive(serde::Deserialize)]
struct Search {
    min_words: i64,
}

/// The ids of the notes of at least `min_words` words, found with the function registered on every connection.
async fn find_notes(
    State(db): State<Database>,
    Query(search): Query<Search>,
) -> Result<Json<Vec<i64>>, AppError> {
    let ids = db
        .query_all(
            "SELECT id FROM note WHERE word_count(body) >= ?1 ORDER BY id",
            (search.min_words,),
            |r| r.get(0),
        )
        .await?;
    Ok(Json(ids))
}

async fn stats(State(db): State<Database>) -> Json<api::Stats> {
    let m = db.metrics();
    Json(api::Stats {
        reads: m.reads,
        writes: m.writes,
        commits: m.commits,
        reads_per_snapshot: m.read_batch.mean(),
        writes_per_commit: m.write_batch.mean(),
    })
}

/// Prometheus scrapes this: every metric of the database, labelled `database="notes"`.
async fn metrics(State(db): State<Database>) -> impl IntoResponse {
    (
        [(
            axum::http::header::CONTENT_TYPE,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        quicklite::prometheus::render(&[("notes", &db.metrics())]),
    )
}

/// Server-sent events, one per committed write group: `commit` with the notes it changed, `lagged` when this client
/// fell behind, or `changed` when something else changed the file (with `Builder::notice_external_commits`); after
/// the last two the client should read what it shows afresh. A live page keeps in step without polling.
async fn events(State(db): State<Database>) -> Sse<impl Stream<Item = Result<Event, Infallible>>> {
    let events = db.subscribe().map(|notice| {
        Ok(match notice {
            Notice::Committed(commit) => Event::default()
                .event("commit")
                .json_data(api::Change::from(&*commit))
                .expect("a change serializes"),
            Notice::Lagged { missed } => Event::default().event("lagged").data(missed.to_string()),
            _ => Event::default().event("changed"),
        })
    });
    Sse::new(events).keep_alive(KeepAlive::default())
}

/// The `/stats` and `/events` bodies.
mod api {
    use std::collections::BTreeMap;

    /// A commit, as `/events` tells it: its sequence number, and per table the rowids it changed (`null`: too many
    /// to list).
    #[derive(serde::Serialize)]
    pub struct Change {
        pub seq: u64,
        pub tables: BTreeMap<String, Option<Vec<i64>>>,
    }

    impl From<&quicklite::Commit> for Change {
        fn from(commit: &quicklite::Commit) -> Change {
            Change {
                seq: commit.seq,
                tables: commit
                    .tables
                    .iter()
                    .map(|t| (t.table.clone(), t.rowids.clone()))
                    .collect(),
            }
        }
    }

    /// Counters served at `/stats`.
    #[derive(serde::Serialize)]
    pub struct Stats {
        pub reads: u64,
        pub writes: u64,
        pub commits: u64,
        pub reads_per_snapshot: f64,
        pub writes_per_commit: f64,
    }
}

/// The service's routes on `db`.
fn app(db: Database) -> Router {
    Router::new()
        .route("/notes", get(find_notes))
        .route("/notes/{id}", get(get_note).put(put_note))
        .route("/stats", get(stats))
        .route("/metrics", get(metrics))
        .route("/events", get(events))
        .with_state(db)
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let mut args = std::env::args().skip(1);
    let path = args.next().unwrap_or_else(|| "notes.db".into());
    let addr = args.next().unwrap_or_else(|| "127.0.0.1:3000".into());
    let db = configure(Database::builder(&path)).open().await?;
    let listener = tokio::net::TcpListener::bind(&addr).await?;
    println!("serving {path} on http://{addr}");
    axum::serve(listener, app(db.clone()))
        .with_graceful_shutdown(async {
            let _ = tokio::signal::ctrl_c().await;
        })
        .await?;
    // Drain queued writes and checkpoint before exiting.
    db.close().await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use axum::body::Body;
    use axum::http::{Method, Request};
    use tower::ServiceExt;

    use super::*;

    /// The service on a temporary database, migrated and with its functions, as in production.
    async fn service() -> (Router, Database) {
        let db = configure(Builder::temporary()).open().await.unwrap();
        (app(db.clone()), db)
    }

    async fn call(app: &Router, method: Method, uri: &str, body: &str) -> (StatusCode, String) {
        let request = Request::builder()
            .method(method)
            .uri(uri)
            .body(Body::from(body.to_string()))
            .unwrap();
        let response = app.clone().oneshot(request).await.unwrap();
        let status = response.status();
        let bytes = axum::body::to_bytes(response.into_body(), 1 << 20)
            .await
            .unwrap();
        (status, String::from_utf8(bytes.to_vec()).unwrap())
    }

    #[tokio::test]
    async fn a_note_written_is_read_back() {
        let (app, db) = service().await;
        assert_eq!(
            call(&app, Method::PUT, "/notes/1", "hello there").await.0,
            StatusCode::NO_CONTENT
        );
        assert_eq!(
            call(&app, Method::GET, "/notes/1", "").await,
            (StatusCode::OK, "hello there".into())
        );
        db.close().await.unwrap();
    }

    #[tokio::test]
    async fn a_missing_note_is_not_found() {
        let (app, db) = service().await;
        assert_eq!(
            call(&app, Method::GET, "/notes/7", "").await.0,
            StatusCode::NOT_FOUND
        );
        db.close().await.unwrap();
    }

    #[tokio::test]
    async fn notes_are_found_by_their_word_count() {
        let (app, db) = service().await;
        for (id, body) in [(1, "one"), (2, "two words"), (3, "three whole words")] {
            call(&app, Method::PUT, &format!("/notes/{id}"), body).await;
        }
        assert_eq!(
            call(&app, Method::GET, "/notes?min_words=2", "").await,
            (StatusCode::OK, "[2,3]".into())
        );
        db.close().await.unwrap();
    }

    /// A client connected to `/events` over HTTP is told of a note written after it connected.
    #[tokio::test]
    async fn a_client_of_the_event_stream_is_told_of_each_write() {
        use http_body_util::{BodyExt, Empty};
        use hyper_util::client::legacy::Client;
        use hyper_util::rt::TokioExecutor;

        let (app, db) = service().await;
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let server = tokio::spawn(async move { axum::serve(listener, app).await });
        let client = Client::builder(TokioExecutor::new()).build_http::<Empty<bytes::Bytes>>();
        let response = client
            .get(format!("http://{addr}/events").parse().unwrap())
            .await
            .unwrap();
        assert_eq!(response.status(), StatusCode::OK);
        assert_eq!(response.headers()["content-type"], "text/event-stream");
        // The subscription is made once the response has begun: the write comes after it.
        let put = Client::builder(TokioExecutor::new()).build_http::<String>();
        let request = Request::builder()
            .method(Method::PUT)
            .uri(format!("http://{addr}/notes/7"))
            .body("seen live".to_string())
            .unwrap();
        assert_eq!(
            put.request(request).await.unwrap().status(),
            StatusCode::NO_CONTENT
        );
        let mut body = response.into_body();
        let mut received = String::new();
        let told = tokio::time::timeout(std::time::Duration::from_secs(30), async {
            while !received.contains("\n\n") {
                let frame = body.frame().await.expect("the stream stays open").unwrap();
                if let Ok(data) = frame.into_data() {
                    received.push_str(std::str::from_utf8(&data).unwrap());
                }
            }
        })
        .await;
        assert!(told.is_ok(), "no event within 30 s: {received:?}");
        assert!(received.starts_with("event: commit\n"), "{received:?}");
        assert!(
            received.contains(r#""tables":{"note":[7]}"#),
            "{received:?}"
        );
        server.abort();
        db.close().await.unwrap();
    }

    #[tokio::test]
    async fn the_schema_is_migrated_to_the_last_version() {
        let (_, db) = service().await;
        let version: i64 = db
            .query_row("PRAGMA user_version", [], |r| r.get(0))
            .await
            .unwrap();
        assert_eq!(version, MIGRATIONS.len() as i64);
        db.close().await.unwrap();
    }
}
