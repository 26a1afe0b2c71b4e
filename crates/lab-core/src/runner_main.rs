//! The `main` of every runner program: read a cell, run it, print one result.
//!
//! Protocol: the orchestrator writes one [`Cell`] as JSON on standard input; the runner prints exactly one
//! [`CellResult`] as JSON on standard output and exits 0, also when the cell fails (its `failure` says why).
//! Logs go to standard error. `--approaches` prints the JSON list of approach names the runner supports.

use std::future::Future;
use std::io::{Read, Write};
use std::process::ExitCode;

use anyhow::{Context, Result};

use crate::approach_name::ApproachName;
use crate::cell::Cell;
use crate::measurement::{Measurement, failed_result};
use crate::result::{CellResult, Environment};

/// A runner program: the approaches it implements and how it runs a cell.
pub trait Runner {
    /// Program name and version, e.g. `quicklite-runner 0.1.0`.
    fn name(&self) -> String;

    /// The approaches this runner implements (for a runner of this project, its
    /// [`RunnerProgram::approaches`](crate::RunnerProgram::approaches)).
    fn approaches(&self) -> Vec<ApproachName>;

    /// Runs `cell`, whose approach is `approach` (one of [`Runner::approaches`], parsed from the cell), inside the
    /// runner's tokio runtime: process set-up, seeding, opening the approach, [`crate::drive`]. Fills the SQLite
    /// fields of `env` as they become known, so a failure still reports them.
    fn run(
        &self,
        approach: ApproachName,
        cell: &Cell,
        env: &mut Environment,
    ) -> impl Future<Output = Result<Measurement>>;
}

/// Runs a runner program: handles `--approaches`, reads the cell from standard input, builds the tokio
/// runtime the cell asks for, runs it and prints the result.
pub fn run_runner_main(runner: impl Runner) -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.as_slice() {
        [] => {}
        [flag] if flag == "--approaches" => {
            let names: Vec<&str> = runner
                .approaches()
                .into_iter()
                .map(ApproachName::as_str)
                .collect();
            return print_json(&names);
        }
        // The `http` workload's load generator: this same program, in another process.
        [flag] if flag == "--http-load" => {
            return crate::http_load::run_load_main();
        }
        _ => {
            eprintln!(
                "usage: {} [--approaches | --http-load]\n  reads one cell as JSON on standard input, prints its result as JSON",
                runner.name()
            );
            return ExitCode::from(2);
        }
    }

    let cell = match read_cell() {
        Ok(cell) => cell,
        Err(e) => {
            eprintln!("{}: {e:#}", runner.name());
            return ExitCode::from(2);
        }
    };
    let result = run_cell(&runner, cell);
    print_json(&result)
}

/// Runs one cell and always returns a result; a failure is recorded in it.
fn run_cell(runner: &impl Runner, cell: Cell) -> CellResult {
    let mut env = Environment::for_machine(runner.name());
    // Before any database opens: thousands of databases need thousands of file descriptors.
    match crate::process::raise_open_files_limit() {
        Ok(limit) => env.open_files_limit = Some(limit),
        Err(e) => {
            eprintln!("{}: cannot raise the open-file limit: {e}", runner.name());
            env.open_files_limit = crate::process::open_files_limits()
                .ok()
                .map(|(soft, _)| soft);
        }
    }
    // The edge: the cell's name becomes the approach, or the cell fails naming what this runner supports.
    let supported = runner.approaches();
    let approach = match cell.approach.parse::<ApproachName>() {
        Ok(approach) if supported.contains(&approach) => approach,
        _ => {
            let names: Vec<&str> = supported.into_iter().map(ApproachName::as_str).collect();
            let message = format!(
                "unknown approach `{}` for {} (supported: {})",
                cell.approach,
                runner.name(),
                names.join(", ")
            );
            return failed_result(cell, env, message);
        }
    };
    // The host's placement of the CPUs, on either side of the cell (see `core_round_trip_ns`).
    env.core_round_trip_before_ns = crate::round_trip::core_round_trip_ns();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(cell.worker_threads.max(1) as usize)
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => return failed_result(cell, env, format!("cannot build the tokio runtime: {e}")),
    };
    eprintln!(
        "{}: {} / {} for {} ms after {} ms warm-up",
        runner.name(),
        cell.workload,
        cell.approach,
        cell.duration_ms,
        cell.warmup_ms
    );
    let outcome = runtime.block_on(runner.run(approach, &cell, &mut env));
    // Operations still in flight (e.g. a writer inside its simulated delay) are not waited for: the window
    // is closed and the process is about to exit.
    runtime.shutdown_background();
    env.core_round_trip_after_ns = crate::round_trip::core_round_trip_ns();
    match outcome {
        Ok(measurement) => measurement.into_result(cell, env),
        Err(e) => failed_result(cell, env, format!("{e:#}")),
    }
}

/// Reads and parses the cell from standard input.
fn read_cell() -> Result<Cell> {
    let mut input = String::new();
    std::io::stdin()
        .read_to_string(&mut input)
        .context("cannot read the cell from standard input")?;
    serde_json::from_str(&input).context("standard input is not a valid cell (JSON)")
}

/// Prints `value` as one JSON document on standard output.
fn print_json(value: &impl serde::Serialize) -> ExitCode {
    let mut out = std::io::stdout().lock();
    let written = serde_json::to_writer(&mut out, value)
        .map_err(anyhow::Error::from)
        .and_then(|()| Ok(writeln!(out)?))
        .and_then(|()| Ok(out.flush()?));
    match written {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("cannot write the result to standard output: {e:#}");
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::sample_cell;

    struct NoOp;

    impl Runner for NoOp {
        fn name(&self) -> String {
            "noop-runner 0".into()
        }

        fn approaches(&self) -> Vec<ApproachName> {
            vec![ApproachName::Ceiling]
        }

        async fn run(
            &self,
            _approach: ApproachName,
            _cell: &Cell,
            env: &mut Environment,
        ) -> Result<Measurement> {
            env.sqlite_version = "3.0.0".into();
            anyhow::bail!("set-up failed: disk on fire")
        }
    }

    #[test]
    fn unknown_approach_is_a_failed_result() {
        let result = run_cell(&NoOp, sample_cell("point-read", "other"));
        let failure = result.failure.unwrap();
        assert!(failure.contains("unknown approach `other`"), "{failure}");
        assert!(failure.contains("noop"), "{failure}");
        assert!(failure.contains("(supported: ceiling)"), "{failure}");
        // An approach the lab knows is refused too when this runner does not implement it.
        let result = run_cell(&NoOp, sample_cell("point-read", "quicklite"));
        let failure = result.failure.unwrap();
        assert!(
            failure.contains("unknown approach `quicklite`"),
            "{failure}"
        );
        assert_eq!(result.env.runner, "noop-runner 0");
        assert!(result.env.open_files_limit.is_some());
        assert!(result.env.allocator.is_some());
    }

    #[test]
    fn set_up_error_keeps_the_environment_known_so_far() {
        let result = run_cell(&NoOp, sample_cell("point-read", "ceiling"));
        assert_eq!(
            result.failure.as_deref(),
            Some("set-up failed: disk on fire")
        );
        assert_eq!(result.env.sqlite_version, "3.0.0");
    }
}
