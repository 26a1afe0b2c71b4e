//! The `http` workload (seed 000): an axum service with a single-row endpoint, under load from another process.
//!
//! `GET /items/{id}` reads the row through the approach (every column, exactly the `point-read` statement) and
//! answers `{"id":…}`. The runner serves it on a loopback port with the cell's tokio worker threads and starts
//! its own executable again as the load generator ([`crate::http_load`]), with `Cell::concurrency` keep-alive
//! connections. Requests per second and latency are the load generator's; CPU time, threads and memory are the
//! service's.

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use axum::Router;
use axum::extract::{Path, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;

use crate::approach::Approach;
use crate::cell::Cell;
use crate::http_load::{LoadReport, LoadSpec};
use crate::measurement::Measurement;
use crate::ticker::Ticker;
use crate::timekeeper::spawn_timekeeper;

/// The environment variable naming a load generator to use instead of this runner's own `--http-load` mode.
pub const LOAD_PROGRAM: &str = "QUICKLITE_LAB_HTTP_LOAD";

/// The endpoint: one row by primary key.
async fn item<A: Approach>(State(approach): State<Arc<A>>, Path(id): Path<i64>) -> Response {
    match approach.point_read(id).await {
        Ok(()) => (
            [(header::CONTENT_TYPE, "application/json")],
            format!("{{\"id\":{id}}}"),
        )
            .into_response(),
        Err(e) => (StatusCode::INTERNAL_SERVER_ERROR, format!("{e:#}")).into_response(),
    }
}

/// Serves `approach` over HTTP, runs the load generator against it, and returns what was measured.
pub(super) async fn drive<A: Approach>(cell: &Cell, approach: Arc<A>) -> Result<Measurement> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .context("cannot listen on a loopback port")?;
    let addr = listener
        .local_addr()
        .context("cannot read the service's address")?;
    let app = Router::new()
        .route("/items/{id}", get(item::<A>))
        .with_state(approach);
    tokio::spawn(async move {
        if let Err(e) = axum::serve(listener, app).await {
            eprintln!("http service: {e}");
        }
    });

    let spec = LoadSpec {
        addr: addr.to_string(),
        connections: cell.concurrency,
        warmup_ms: cell.warmup_ms,
        duration_ms: cell.duration_ms,
        rows: cell.rows,
        seed: cell.seed,
    };
    // Another load generator may stand in for the built-in one, to check it against a tool users know
    // (`scripts/http-load-wrk.sh`): the same spec on its stdin, the same report on its stdout.
    let (program, args) = match std::env::var_os(LOAD_PROGRAM) {
        Some(program) => (std::path::PathBuf::from(program), Vec::new()),
        None => (
            std::env::current_exe().context("cannot find this runner's executable")?,
            vec!["--http-load"],
        ),
    };
    let mut child = std::process::Command::new(&program)
        .args(args)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .with_context(|| format!("cannot start the load generator {}", program.display()))?;
    // The load generator's window starts when it does; the service's CPU is sampled over the same span.
    let start = Instant::now();
    let measure_start = start + Duration::from_millis(cell.warmup_ms);
    let end = measure_start + Duration::from_millis(cell.duration_ms);
    let edges = spawn_timekeeper(measure_start, end)?;
    // The service's runtime is the one under test: how late it wakes a task while it serves the load.
    let ticker = Ticker::spawn(measure_start, end);
    let input = serde_json::to_vec(&spec)?;
    let report = tokio::task::spawn_blocking(move || -> Result<LoadReport> {
        use std::io::Write;
        if let Some(mut stdin) = child.stdin.take() {
            stdin
                .write_all(&input)
                .context("cannot send the load spec")?;
        }
        let output = child
            .wait_with_output()
            .context("waiting for the load generator")?;
        if !output.status.success() {
            bail!(
                "the load generator exited with {}: {}",
                output.status,
                String::from_utf8_lossy(&output.stderr).trim()
            );
        }
        serde_json::from_slice(&output.stdout).context("the load generator printed no report")
    })
    .await
    .context("the load generator's waiting task failed")??;
    let edges = edges.await.context("the timekeeper thread stopped early")?;
    let lateness = ticker.finish().await;
    Ok(Measurement {
        reads: report.requests,
        errors: report.errors,
        error_samples: report.error_samples,
        wall_secs: end.duration_since(measure_start).as_secs_f64(),
        cpu_secs: edges.cpu_secs,
        threads: edges.threads,
        rss_bytes: edges.rss_bytes,
        lateness,
        ..Measurement::default()
    })
}
