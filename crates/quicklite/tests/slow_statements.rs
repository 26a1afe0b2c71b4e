//! Slow statements are logged through `tracing` with their SQL and duration, without their parameters unless
//! asked; fast ones are not. (Its own test binary: it installs a process-wide subscriber.)

mod common;

use std::io::Write;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use common::{Backend, both_backends};

/// Everything the process logs, as text.
fn logs() -> &'static Arc<Mutex<Vec<u8>>> {
    static LOGS: OnceLock<Arc<Mutex<Vec<u8>>>> = OnceLock::new();
    LOGS.get_or_init(|| {
        let logs = Arc::new(Mutex::new(Vec::new()));
        let sink = logs.clone();
        tracing_subscriber::fmt()
            .with_max_level(tracing::Level::WARN)
            .with_ansi(false)
            .with_writer(move || Sink(sink.clone()))
            .init();
        logs
    })
}

struct Sink(Arc<Mutex<Vec<u8>>>);

impl Write for Sink {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Lines logged by the slow-statement log that mention `marker`.
fn slow_lines(marker: &str) -> Vec<String> {
    String::from_utf8_lossy(&logs().lock().unwrap())
        .lines()
        .filter(|l| l.contains("quicklite::slow_statement") && l.contains(marker))
        .map(str::to_string)
        .collect()
}

/// A name for the statements of one test on one backend (both backends' tests run at once and log to one sink).
fn marker(backend: Backend, name: &str) -> String {
    format!("marker_{name}_{}", backend.name())
}

/// A query that takes tens of milliseconds: counts to `n` with a recursive CTE. `marker` names it in the logs.
fn slow_sql(marker: &str) -> String {
    format!(
        "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < ?1) \
         SELECT count(*) AS {marker} FROM c"
    )
}

both_backends! {
    #[tokio::test]
    async fn a_slow_statement_is_logged_without_its_parameters(backend) {
        logs();
        let db = common::open(backend, |b| b.slow_statement_threshold(Some(Duration::from_millis(5)))).await;
        let n: i64 = db
            .query_row(slow_sql(&marker(backend, "one")), (3_000_017_i64,), |r| r.get(0))
            .await
            .unwrap();
        assert_eq!(n, 3_000_017);
        // A fast statement is not logged.
        let one: i64 = db
            .query_row(format!("SELECT 1 AS {}", marker(backend, "fast")), [], |r| r.get(0))
            .await
            .unwrap();
        assert_eq!(one, 1);

        let lines = slow_lines(&marker(backend, "one"));
        assert_eq!(lines.len(), 1, "{lines:#?}");
        let line = &lines[0];
        assert!(line.contains("WITH RECURSIVE"), "{line}");
        assert!(line.contains("duration_ms="), "{line}");
        // The connection that ran it: a registry's database serves reads on its writer's connection while no
        // write is queued or running (and opens a reader connection only when one is), a standalone database on a
        // reader's.
        let connection = match backend {
            Backend::Standalone => "reader",
            Backend::Registry => "writer",
        };
        assert!(
            line.contains(&format!("connection=\"{connection}\""))
                || line.contains(&format!("connection={connection}")),
            "{line}"
        );
        assert!(
            !line.contains("3000017"),
            "parameters are not logged by default: {line}"
        );
        assert!(slow_lines(&marker(backend, "fast")).is_empty());
        assert_eq!(db.metrics().slow_statements, 1);
        db.close().await;
    }
}

both_backends! {
    #[tokio::test]
    async fn parameters_are_logged_when_asked_and_nothing_is_logged_without_a_threshold(backend) {
        logs();
        let db = common::open(backend, |b| b.slow_statement_threshold(Some(Duration::from_millis(5))).log_statement_parameters(true)).await;
        db.query_row(slow_sql(&marker(backend, "two")), (3_000_023_i64,), |r| {
            r.get::<_, i64>(0)
        })
        .await
        .unwrap();
        let lines = slow_lines(&marker(backend, "two"));
        assert_eq!(lines.len(), 1, "{lines:#?}");
        assert!(lines[0].contains("3000023"), "expanded SQL: {}", lines[0]);
        db.close().await;

        let db = common::open(backend, |b| b.slow_statement_threshold(None)).await;
        db.query_row(slow_sql(&marker(backend, "three")), (3_000_029_i64,), |r| {
            r.get::<_, i64>(0)
        })
        .await
        .unwrap();
        assert!(slow_lines(&marker(backend, "three")).is_empty());
        assert_eq!(db.metrics().slow_statements, 0);
        db.close().await;
    }
}
