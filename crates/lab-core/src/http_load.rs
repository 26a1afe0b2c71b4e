//! The `http` workload's load generator: closed-loop HTTP/1.1 clients in a process of their own.
//!
//! Seed 000 measured an axum service under 50 concurrent users with a load tool in another process; the lab does
//! the same. A runner serving the `http` workload starts its own executable again with `--http-load`, writes a
//! [`LoadSpec`] on its standard input and reads a [`LoadReport`] from its standard output, so the load's CPU
//! time is not the server's. The client is deliberately small: keep-alive connections, one request in flight per
//! connection, `GET /items/{id}` with a random seeded id, responses read to the end of their `Content-Length`.
//! It runs on one thread, so on a small machine it takes at most one core from the server.

use std::io::{Read, Write};
use std::process::ExitCode;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use serde::{Deserialize, Serialize};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::result::OpStats;
use crate::rng::Rng;
use crate::stats::{OpKind, TaskStats};

/// What the load generator is asked to do.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LoadSpec {
    /// `host:port` of the service.
    pub addr: String,
    /// Concurrent connections, each with one request in flight.
    pub connections: u32,
    /// Requests before this are not counted.
    pub warmup_ms: u64,
    /// Requests completing in this window after the warm-up are counted.
    pub duration_ms: u64,
    /// Item ids are drawn from `1..=rows`.
    pub rows: u64,
    /// Seed of the id sequence.
    pub seed: u64,
}

/// What the load generator measured.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct LoadReport {
    /// Successful (200) requests in the window: throughput and latency.
    pub requests: OpStats,
    /// Requests in the window that failed: another status, a broken connection.
    pub errors: u64,
    /// The first distinct error messages.
    pub error_samples: Vec<String>,
}

/// The `--http-load` mode of a runner: a [`LoadSpec`] on standard input, a [`LoadReport`] on standard output.
pub fn run_load_main() -> ExitCode {
    let outcome = (|| -> Result<LoadReport> {
        let mut input = String::new();
        std::io::stdin()
            .read_to_string(&mut input)
            .context("cannot read the load spec from standard input")?;
        let spec: LoadSpec =
            serde_json::from_str(&input).context("standard input is not a valid load spec")?;
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .context("cannot build the load generator's runtime")?;
        runtime.block_on(load(&spec))
    })();
    match outcome {
        Ok(report) => {
            let mut out = std::io::stdout().lock();
            match serde_json::to_writer(&mut out, &report).map(|()| writeln!(out)) {
                Ok(_) => ExitCode::SUCCESS,
                Err(e) => {
                    eprintln!("http load: cannot write the report: {e}");
                    ExitCode::FAILURE
                }
            }
        }
        Err(e) => {
            eprintln!("http load: {e:#}");
            ExitCode::FAILURE
        }
    }
}

/// Runs the load: every connection's loop until the window ends, then the merged statistics.
pub async fn load(spec: &LoadSpec) -> Result<LoadReport> {
    if spec.connections == 0 {
        bail!("the load needs at least one connection");
    }
    if spec.rows == 0 {
        bail!("the load needs rows to ask for (rows = 0)");
    }
    let start = Instant::now();
    let measure_start = start + Duration::from_millis(spec.warmup_ms);
    let end = measure_start + Duration::from_millis(spec.duration_ms);
    let stats = Arc::new(Mutex::new(TaskStats::new()));
    let mut tasks = Vec::new();
    for connection in 0..spec.connections {
        let rng = Rng::derive(spec.seed, u64::from(connection));
        tasks.push(tokio::spawn(connection_loop(
            spec.addr.clone(),
            spec.rows,
            rng,
            (measure_start, end),
            stats.clone(),
        )));
    }
    for task in tasks {
        task.await.context("a load connection panicked")?;
    }
    let total = stats.lock().unwrap_or_else(PoisonError::into_inner);
    let wall_secs = end.duration_since(measure_start).as_secs_f64();
    Ok(LoadReport {
        requests: total.op_stats(OpKind::Read, wall_secs),
        errors: total.errors(),
        error_samples: total.error_samples().to_vec(),
    })
}

/// One connection: requests back to back until `window.1`, reconnecting after a failure.
async fn connection_loop(
    addr: String,
    rows: u64,
    mut rng: Rng,
    window: (Instant, Instant),
    stats: Arc<Mutex<TaskStats>>,
) {
    let mut conn: Option<Connection> = None;
    loop {
        let started = Instant::now();
        if started >= window.1 {
            return;
        }
        let id = rng.between(1, rows as i64);
        let outcome = async {
            if conn.is_none() {
                conn = Some(Connection::open(&addr).await?);
            }
            match conn.as_mut() {
                Some(c) => c.get_item(id).await,
                None => bail!("no connection"),
            }
        }
        .await;
        if outcome.is_err() {
            // A broken connection is not reused.
            conn = None;
        }
        let done = Instant::now();
        if done >= window.0 && done < window.1 {
            let mut stats = stats.lock().unwrap_or_else(PoisonError::into_inner);
            match outcome {
                Ok(()) => stats.record(OpKind::Read, (done - started).as_nanos() as u64),
                Err(e) => stats.record_error(format!("{e:#}")),
            }
        } else if outcome.is_err() {
            // Outside the window (the service still starting, or shutting down): back off a little.
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }
}

/// A keep-alive HTTP/1.1 connection with its buffers.
struct Connection {
    /// The socket.
    stream: TcpStream,
    /// Bytes received and not yet consumed.
    buffer: Vec<u8>,
    /// The request being written.
    request: Vec<u8>,
}

impl Connection {
    async fn open(addr: &str) -> Result<Self> {
        let stream = TcpStream::connect(addr)
            .await
            .with_context(|| format!("cannot connect to {addr}"))?;
        stream.set_nodelay(true)?;
        Ok(Self {
            stream,
            buffer: Vec::with_capacity(4096),
            request: Vec::with_capacity(128),
        })
    }

    /// `GET /items/{id}`; an error unless the answer is `200` with its whole body.
    async fn get_item(&mut self, id: i64) -> Result<()> {
        self.request.clear();
        write!(
            self.request,
            "GET /items/{id} HTTP/1.1\r\nHost: lab\r\n\r\n"
        )?;
        self.stream.write_all(&self.request).await?;
        self.buffer.clear();
        let (status, body_start, length) = loop {
            if let Some(head) = parse_head(&self.buffer)? {
                break head;
            }
            self.read_more().await?;
        };
        while self.buffer.len() < body_start + length {
            self.read_more().await?;
        }
        if status != 200 {
            let body = String::from_utf8_lossy(&self.buffer[body_start..body_start + length]);
            bail!("HTTP {status}: {}", body.lines().next().unwrap_or(""));
        }
        Ok(())
    }

    async fn read_more(&mut self) -> Result<()> {
        let mut chunk = [0u8; 4096];
        let n = self.stream.read(&mut chunk).await?;
        if n == 0 {
            bail!("the service closed the connection");
        }
        self.buffer.extend_from_slice(&chunk[..n]);
        Ok(())
    }
}

/// `(status, body offset, Content-Length)` once `buffer` holds a whole response head; `None` before.
fn parse_head(buffer: &[u8]) -> Result<Option<(u16, usize, usize)>> {
    let Some(end) = buffer.windows(4).position(|w| w == b"\r\n\r\n") else {
        return Ok(None);
    };
    let head = std::str::from_utf8(&buffer[..end]).context("the response head is not UTF-8")?;
    let mut lines = head.split("\r\n");
    let status_line = lines.next().unwrap_or("");
    let status: u16 = status_line
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .with_context(|| format!("not an HTTP status line: {status_line:?}"))?;
    let mut length = None;
    for line in lines {
        if let Some((name, value)) = line.split_once(':')
            && name.eq_ignore_ascii_case("content-length")
        {
            length = Some(
                value
                    .trim()
                    .parse()
                    .with_context(|| format!("bad Content-Length {value:?}"))?,
            );
        }
    }
    let length = length.context("the response has no Content-Length")?;
    Ok(Some((status, end + 4, length)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn heads_are_parsed_once_complete() {
        assert_eq!(parse_head(b"HTTP/1.1 200 OK\r\ncontent-le").unwrap(), None);
        let response = b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 9\r\n\r\n{\"id\":12}";
        assert_eq!(
            parse_head(response).unwrap(),
            Some((200, response.len() - 9, 9))
        );
        assert!(parse_head(b"garbage\r\n\r\n").is_err());
        assert!(parse_head(b"HTTP/1.1 200 OK\r\n\r\n").is_err(), "no length");
    }

    /// A tiny service that answers every request on one connection, then the load against it.
    #[tokio::test(flavor = "current_thread")]
    async fn the_load_counts_answers_and_errors() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        tokio::spawn(async move {
            loop {
                let Ok((mut socket, _)) = listener.accept().await else {
                    return;
                };
                tokio::spawn(async move {
                    let mut buf = vec![0u8; 1024];
                    let mut pending = Vec::new();
                    loop {
                        let Ok(n) = socket.read(&mut buf).await else {
                            return;
                        };
                        if n == 0 {
                            return;
                        }
                        pending.extend_from_slice(&buf[..n]);
                        while let Some(end) = pending.windows(4).position(|w| w == b"\r\n\r\n") {
                            let head = String::from_utf8_lossy(&pending[..end]).into_owned();
                            pending.drain(..end + 4);
                            // Even ids are found, odd ones are not.
                            let id: i64 = head
                                .split(' ')
                                .nth(1)
                                .and_then(|p| p.strip_prefix("/items/"))
                                .and_then(|i| i.parse().ok())
                                .unwrap();
                            let reply = if id % 2 == 0 {
                                "HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok".to_owned()
                            } else {
                                format!(
                                    "HTTP/1.1 404 Not Found\r\ncontent-length: 7\r\n\r\nno {id:>4}"
                                )
                            };
                            if socket.write_all(reply.as_bytes()).await.is_err() {
                                return;
                            }
                        }
                    }
                });
            }
        });
        let report = load(&LoadSpec {
            addr,
            connections: 2,
            warmup_ms: 10,
            duration_ms: 100,
            rows: 100,
            seed: 3,
        })
        .await
        .unwrap();
        assert!(report.requests.ops > 0, "{report:?}");
        assert!(report.errors > 0, "{report:?}");
        assert!(
            report
                .error_samples
                .iter()
                .all(|s| s.starts_with("HTTP 404: no")),
            "{report:?}"
        );
    }
}
