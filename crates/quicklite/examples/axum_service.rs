//! A small HTTP service on quicklite: one shared `Database` handle in axum's state.
//!
//! ```text
//! cargo run --release -p quicklite --example axum_service -- [DB_PATH] [ADDR]
//! curl -X PUT localhost:3000/notes/1 -d 'hello'
//! curl localhost:3000/notes/1
//! curl localhost:3000/stats
//! curl localhost:3000/metrics
//! ```
//!
//! A full write queue answers 503 (the database is built with `QueueFull::Fail`) instead of letting requests pile
//! up; a missing row answers 404; any other database error answers 500 with its message.

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use quicklite::rusqlite::OptionalExtension;
use quicklite::{Database, QueueFull};

/// A database error as an HTTP response.
struct AppError(quicklite::Error);

impl IntoResponse for AppError {
    fn into_response(self) -> Response {
        let status = match self.0 {
            quicklite::Error::Overloaded { .. } => StatusCode::SERVICE_UNAVAILABLE,
            _ => StatusCode::INTERNAL_SERVER_ERROR,
        };
        (status, self.0.to_string()).into_response()
    }
}

impl From<quicklite::Error> for AppError {
    fn from(e: quicklite::Error) -> Self {
        AppError(e)
    }
}

async fn get_note(State(db): State<Database>, Path(id): Path<i64>) -> Result<Response, AppError> {
    let body: Option<String> = db
        .read(move |c| {
            c.prepare_cached("SELECT body FROM note WHERE id = ?1")?
                .query_row((id,), |r| r.get(0))
                .optional()
        })
        .await?;
    Ok(match body {
        Some(body) => body.into_response(),
        None => StatusCode::NOT_FOUND.into_response(),
    })
}

async fn put_note(
    State(db): State<Database>,
    Path(id): Path<i64>,
    body: String,
) -> Result<StatusCode, AppError> {
    db.execute(
        "INSERT INTO note (id, body) VALUES (?1, ?2) ON CONFLICT (id) DO UPDATE SET body = excluded.body",
        (id, body),
    )
    .await?;
    Ok(StatusCode::NO_CONTENT)
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

/// The `/stats` body.
mod api {
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

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let mut args = std::env::args().skip(1);
    let path = args.next().unwrap_or_else(|| "notes.db".into());
    let addr = args.next().unwrap_or_else(|| "127.0.0.1:3000".into());
    let db = Database::builder(&path)
        .on_full(QueueFull::Fail)
        .open()
        .await?;
    db.execute_batch(
        "CREATE TABLE IF NOT EXISTS note (id INTEGER PRIMARY KEY, body TEXT NOT NULL)",
    )
    .await?;
    let app = Router::new()
        .route("/notes/{id}", get(get_note).put(put_note))
        .route("/stats", get(stats))
        .route("/metrics", get(metrics))
        .with_state(db.clone());
    let listener = tokio::net::TcpListener::bind(&addr).await?;
    println!("serving {path} on http://{addr}");
    axum::serve(listener, app)
        .with_graceful_shutdown(async {
            let _ = tokio::signal::ctrl_c().await;
        })
        .await?;
    // Drain queued writes and checkpoint before exiting.
    db.close().await?;
    Ok(())
}
