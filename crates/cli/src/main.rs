//! `quicklite`: the lab's command line. `quicklite bench` measures the ways a tokio service can use SQLite side
//! by side; `quicklite report <csv>` redraws the reports of a run from its CSV.
//!
//! This binary only parses flags and wires the `quicklite-lab` crate together; the lab does the work.

mod bench;
mod cli;
mod progress;
mod report;

use std::process::ExitCode;

use clap::Parser;

use crate::cli::{Cli, Command};

fn main() -> ExitCode {
    match run() {
        Ok(code) => code,
        Err(err) => {
            eprintln!("error: {err:#}");
            ExitCode::FAILURE
        }
    }
}

fn run() -> anyhow::Result<ExitCode> {
    let cli = Cli::parse();
    match cli.command {
        Command::Bench(args) => bench::run(*args),
        Command::Report(args) => report::run(args),
    }
}
