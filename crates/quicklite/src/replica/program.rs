//! Running the `litestream` program for a registry: within a deadline, and stopped as soon as nobody waits for its
//! answer. A run that ends either way has its child killed and reaped before it returns, so that no `litestream`
//! outlives the look at a tenant that started it.

use std::ffi::OsStr;
use std::io::Read;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{self, RecvTimeoutError, Sender};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use crate::util::{lock, spawn};

/// Why a run of `litestream` gave no answer.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Failure {
    /// The deadline passed before it exited; it was killed. The command, as `litestream <command>` names it.
    TimedOut(String),
    /// Everyone waiting for its answer gave up ([`Stop::stop`]); it was killed, or not started.
    Stopped,
    /// It could not run, failed, or answered what is not understood: what it said, or what went wrong.
    Failed(String),
}

impl From<String> for Failure {
    fn from(message: String) -> Failure {
        Failure::Failed(message)
    }
}

/// What ends the runs of one look at a tenant early: its callers all gave up. Cloned into the thread that runs them;
/// [`Stop::stop`] kills the run under way and keeps later ones from starting.
#[derive(Debug, Clone, Default)]
pub(crate) struct Stop(Arc<Mutex<StopState>>);

#[derive(Debug, Default)]
struct StopState {
    /// Set once, by [`Stop::stop`].
    stopped: bool,
    /// Where the run under way waits for its child's output; told when the look stops.
    running: Option<Sender<Event>>,
}

impl Stop {
    /// Ends the run under way (its child is killed) and every later one before it starts.
    pub(crate) fn stop(&self) {
        let mut state = lock(&self.0);
        state.stopped = true;
        if let Some(running) = state.running.take() {
            let _ = running.send(Event::Stop);
        }
    }

    /// Whether [`Stop::stop`] was called.
    pub(crate) fn is_stopped(&self) -> bool {
        lock(&self.0).stopped
    }

    /// Has [`Stop::stop`] tell the run waiting on `events`; `false` if it was called already.
    fn watch(&self, events: Sender<Event>) -> bool {
        let mut state = lock(&self.0);
        state.running = Some(events);
        !state.stopped
    }

    /// The run under way ended: nothing to tell any more.
    fn unwatch(&self) {
        lock(&self.0).running = None;
    }
}

/// What a run waits for: its child's output (it ends when the child exits), or the word to stop.
#[derive(Debug)]
enum Event {
    Stdout(std::io::Result<Vec<u8>>),
    Stderr(std::io::Result<Vec<u8>>),
    Stop,
}

/// Runs `program <command> <args…> <url>` (its standard input empty) until it exits, `deadline` passes or `stop` is
/// told, and returns what it printed on its standard output. A failure names the command, the URL and what the program said.
pub(crate) fn run<A: AsRef<OsStr>>(
    program: &Path,
    command: &str,
    args: &[A],
    url: &str,
    deadline: Instant,
    stop: &Stop,
) -> Result<Vec<u8>, Failure> {
    if stop.is_stopped() {
        return Err(Failure::Stopped);
    }
    let mut child = Command::new(program)
        .arg(command)
        .args(args)
        .arg(url)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("could not run {}: {e}", program.display()))?;
    let (events, rx) = mpsc::channel();
    // Each pipe is read on a thread of its own until the child closes it, so that a child printing much on one
    // never blocks on it while the other is read; both closed, the child has exited.
    let readers = [
        read_all(child.stdout.take(), events.clone(), Event::Stdout),
        read_all(child.stderr.take(), events.clone(), Event::Stderr),
    ];
    if let Some(Err(e)) = readers.into_iter().find(Result::is_err) {
        end(&mut child);
        return Err(Failure::Failed(format!(
            "could not read what `litestream {command}` prints: {e}"
        )));
    }
    if !stop.watch(events) {
        end(&mut child);
        return Err(Failure::Stopped);
    }
    let (mut stdout, mut stderr) = (None, None);
    let waited = loop {
        if let (Some(_), Some(_)) = (&stdout, &stderr) {
            break Ok(());
        }
        match rx.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
            Ok(Event::Stdout(out)) => stdout = Some(out),
            Ok(Event::Stderr(err)) => stderr = Some(err),
            Ok(Event::Stop) => break Err(Failure::Stopped),
            Err(RecvTimeoutError::Timeout) => break Err(Failure::TimedOut(command.to_owned())),
            // Every sender gone: both readers have sent (the loop ended before), and `stop` let go of its own.
            Err(RecvTimeoutError::Disconnected) => break Ok(()),
        }
    };
    stop.unwatch();
    if let Err(failure) = waited {
        end(&mut child);
        return Err(failure);
    }
    // Both pipes closed: the child has exited (or closed them to run on, which `litestream` does not do).
    let status = child
        .wait()
        .map_err(|e| format!("`litestream {command}` of {url}: {e}"))?;
    let read = |out: Option<std::io::Result<Vec<u8>>>| {
        out.unwrap_or(Ok(Vec::new()))
            .map_err(|e| format!("`litestream {command}` of {url}: its output: {e}"))
    };
    let (stdout, stderr) = (read(stdout)?, read(stderr)?);
    if !status.success() {
        return Err(Failure::Failed(format!(
            "`litestream {command}` of {url} failed ({}): {}",
            status,
            String::from_utf8_lossy(&stderr).trim()
        )));
    }
    Ok(stdout)
}

/// Reads `pipe` to its end on a thread of its own and sends what it read as `event`.
fn read_all<R: Read + Send + 'static>(
    pipe: Option<R>,
    events: Sender<Event>,
    event: fn(std::io::Result<Vec<u8>>) -> Event,
) -> std::io::Result<()> {
    let Some(mut pipe) = pipe else {
        let _ = events.send(event(Ok(Vec::new())));
        return Ok(());
    };
    spawn("quicklite-ls-out", move || {
        let mut out = Vec::new();
        let read = pipe.read_to_end(&mut out).map(|_| out);
        let _ = events.send(event(read));
    })
    .map(drop)
}

/// Kills the child (SIGKILL) and reaps it: nothing of it is left running, nor as a zombie.
fn end(child: &mut Child) {
    if let Err(e) = child.kill() {
        tracing::warn!(error = %e, pid = child.id(), "could not kill litestream");
    }
    let _ = child.wait();
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    /// `sh -c script` run as `litestream` would be: the command `-c`, then the script, then `$0`.
    fn sh(script: &str, deadline: Instant, stop: &Stop) -> Result<Vec<u8>, Failure> {
        run(Path::new("/bin/sh"), "-c", &[script], "sh", deadline, stop)
    }

    fn far() -> Instant {
        Instant::now() + Duration::from_secs(600)
    }

    fn gone(pid: u32) -> bool {
        !Path::new(&format!("/proc/{pid}")).exists()
    }

    #[test]
    fn a_run_returns_what_the_program_printed() {
        let out = sh("echo replica; echo noise >&2", far(), &Stop::default()).unwrap();
        assert_eq!(out, b"replica\n");
    }

    #[test]
    fn a_failed_run_says_the_command_and_what_the_program_said() {
        let failure = sh("echo 'no such bucket' >&2; exit 3", far(), &Stop::default()).unwrap_err();
        let Failure::Failed(message) = failure else {
            panic!("{failure:?}");
        };
        assert!(
            message.contains("`litestream -c` of sh failed") && message.contains("no such bucket"),
            "{message}"
        );
    }

    #[test]
    fn a_run_past_its_deadline_is_killed_and_reaped() {
        let dir = tempfile::tempdir().unwrap();
        let pid = dir.path().join("pid");
        // `exec`: the shell becomes `sleep`, one process holding the pipes, the one the run must kill.
        let script = format!("echo $$ > {}; exec sleep 600", pid.display());
        let outcome = sh(
            &script,
            Instant::now() + Duration::from_millis(300),
            &Stop::default(),
        );
        assert_eq!(outcome.unwrap_err(), Failure::TimedOut("-c".into()));
        // Killed before it wrote its pid, it cannot be looked for; it is, whenever it did.
        if let Ok(text) = std::fs::read_to_string(&pid) {
            let pid: u32 = text.trim().parse().unwrap();
            assert!(gone(pid), "the child {pid} is still there");
        }
    }

    #[test]
    fn a_stopped_run_is_killed_and_reaped_and_later_runs_do_not_start() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("pid");
        let made = std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap();
        assert!(made.success());
        let stop = Stop::default();
        // Stops the run once its child said its pid through the FIFO: it is running then.
        let stopper = {
            let (stop, fifo) = (stop.clone(), fifo.clone());
            std::thread::spawn(move || {
                let pid: u32 = std::fs::read_to_string(fifo)
                    .unwrap()
                    .trim()
                    .parse()
                    .unwrap();
                stop.stop();
                pid
            })
        };
        let script = format!("echo $$ > {}; exec sleep 600", fifo.display());
        assert_eq!(sh(&script, far(), &stop).unwrap_err(), Failure::Stopped);
        let pid = stopper.join().unwrap();
        assert!(gone(pid), "the child {pid} is still there");
        assert_eq!(
            sh("echo never", far(), &stop).unwrap_err(),
            Failure::Stopped
        );
    }
}
