//! Running one cell: a fresh runner process, the cell as JSON on its stdin, one `CellResult` from its stdout.
//!
//! Whatever the runner does — crash, hang, print garbage — this returns a `CellResult`: a broken cell is a
//! result to report (with the exit status and the tail of its stderr), not a reason to stop the run.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use quicklite_lab_core::{Cell, CellResult, Environment, OpStats};
use wait_timeout::ChildExt;

use crate::clock::now_rfc3339;

/// How much of a runner's stderr a failure message keeps (its end, where the panic message is).
const STDERR_TAIL: usize = 600;

/// How long to wait for a dead runner's output pipes to close (a grandchild could hold them open).
const PIPE_GRACE: Duration = Duration::from_secs(5);

/// How cells are run.
#[derive(Debug, Clone, Default)]
pub struct ExecOptions {
    /// Kill a runner after this long. By default (`None`), [`default_timeout`] of the cell.
    pub timeout: Option<Duration>,
    /// Where the per-cell database directories are created. By default, the system temporary directory.
    pub db_root: Option<PathBuf>,
}

/// Set-up time allowed per `multi-db` database on top of the fixed allowance: copying its file and opening its
/// connections (a thread each, for some approaches) take milliseconds, which add up at 10,000 databases.
const SET_UP_PER_DATABASE: Duration = Duration::from_millis(10);

/// `(warm-up + duration) × 3 + 30 s`, plus 10 ms per `multi-db` database: generous for set-up (seeding, opening
/// databases), fatal for a hang.
pub fn default_timeout(cell: &Cell) -> Duration {
    let measured = cell.warmup_ms.saturating_add(cell.duration_ms);
    let databases = cell.multi_db.as_ref().map_or(0, |m| m.num_databases);
    Duration::from_millis(measured.saturating_mul(3))
        + Duration::from_secs(30)
        + SET_UP_PER_DATABASE * databases
}

/// Runs `cell` with `program` in a fresh process and a fresh, empty database directory (removed afterwards).
pub fn run_cell(program: &Path, cell: &Cell, options: &ExecOptions) -> CellResult {
    let started = now_rfc3339();
    let failed = |cell: &Cell, message: String| failed_result(cell, program, &started, message);
    let mut builder = tempfile::Builder::new();
    builder.prefix("quicklite-cell-");
    let dir = match &options.db_root {
        Some(root) => builder.tempdir_in(root),
        None => builder.tempdir(),
    };
    let dir = match dir {
        Ok(dir) => dir,
        Err(e) => return failed(cell, format!("creating the cell's database directory: {e}")),
    };
    let cell = Cell {
        dir: dir.path().to_string_lossy().into_owned(),
        ..cell.clone()
    };
    // The repetition is the record's: every repetition is the same cell to the runner.
    let sent = Cell {
        repetition: 0,
        ..cell.clone()
    };
    let input = match serde_json::to_vec(&sent) {
        Ok(input) => input,
        Err(e) => return failed(&cell, format!("serializing the cell: {e}")),
    };
    let child = Command::new(program)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn();
    let mut child = match child {
        Ok(child) => child,
        Err(e) => {
            return failed(
                &cell,
                format!("could not start runner {}: {e}", program.display()),
            );
        }
    };
    let stdout = collect(child.stdout.take());
    let stderr = collect(child.stderr.take());
    if let Some(mut stdin) = child.stdin.take() {
        // A runner that exits without reading its input closes the pipe; its exit status tells the story.
        let _ = stdin.write_all(&input);
    }
    let timeout = options.timeout.unwrap_or_else(|| default_timeout(&cell));
    let status = wait(&mut child, timeout);
    let stdout = stdout.recv_timeout(PIPE_GRACE).unwrap_or_default();
    let stderr = tail(&stderr.recv_timeout(PIPE_GRACE).unwrap_or_default());
    let result = match status {
        Err(message) => failed(&cell, message),
        Ok(None) => failed(
            &cell,
            format!(
                "timed out after {} s and was killed{}",
                timeout.as_secs_f64(),
                stderr_note(&stderr)
            ),
        ),
        Ok(Some(status)) if !status.success() => failed(
            &cell,
            format!("runner exited with {status}{}", stderr_note(&stderr)),
        ),
        Ok(Some(_)) => match serde_json::from_slice::<CellResult>(&stdout) {
            // The orchestrator's copy of the cell is the record: it is what was asked for.
            Ok(result) => CellResult { cell, ..result },
            Err(e) => failed(
                &cell,
                format!(
                    "runner printed something that is not a cell result ({e}); stdout starts {:?}{}",
                    head(&stdout),
                    stderr_note(&stderr)
                ),
            ),
        },
    };
    // Deleting the databases is best effort: a leftover temporary directory is not worth failing a cell for.
    let _ = dir.close();
    result
}

/// Waits up to `timeout`; `Ok(None)` means the runner was killed.
fn wait(child: &mut Child, timeout: Duration) -> Result<Option<ExitStatus>, String> {
    match child.wait_timeout(timeout) {
        Ok(Some(status)) => Ok(Some(status)),
        Ok(None) => {
            let _ = child.kill();
            let _ = child.wait();
            Ok(None)
        }
        Err(e) => {
            let _ = child.kill();
            let _ = child.wait();
            Err(format!("waiting for the runner: {e}"))
        }
    }
}

/// Reads a pipe to its end on a thread, so a runner filling one pipe never blocks on the other.
fn collect(pipe: Option<impl Read + Send + 'static>) -> mpsc::Receiver<Vec<u8>> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut buf = Vec::new();
        if let Some(mut pipe) = pipe {
            let _ = pipe.read_to_end(&mut buf);
        }
        let _ = tx.send(buf);
    });
    rx
}

fn tail(bytes: &[u8]) -> String {
    let text = String::from_utf8_lossy(bytes);
    let text = text.trim();
    let start = text
        .char_indices()
        .rev()
        .nth(STDERR_TAIL)
        .map_or(0, |(i, _)| i);
    text[start..].to_owned()
}

fn head(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).chars().take(120).collect()
}

fn stderr_note(stderr: &str) -> String {
    if stderr.is_empty() {
        String::new()
    } else {
        format!("; stderr: {stderr}")
    }
}

/// A result for a cell that produced no measurement.
pub(crate) fn failed_result(
    cell: &Cell,
    program: &Path,
    started: &str,
    message: String,
) -> CellResult {
    CellResult {
        cell: cell.clone(),
        failure: Some(message),
        reads: OpStats::default(),
        writes: OpStats::default(),
        write_completion: None,
        errors: 0,
        error_samples: Vec::new(),
        wall_secs: 0.0,
        cpu_secs: 0.0,
        threads: None,
        rss_bytes: None,
        open_databases: None,
        database_opens: None,
        operations: Vec::new(),
        window_allocations: None,
        window_alloc_bytes: None,
        lateness: None,
        cpu_per_op_us: None,
        idle_cpu: None,
        open_loop: None,
        env: Environment {
            runner: program
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default(),
            date: started.to_owned(),
            ..Environment::default()
        },
    }
}
