//! `quicklite`: the lab's command line. `quicklite bench` measures the ways a tokio service can use SQLite side
//! by side; `quicklite report <csv>` redraws the reports of a run from its CSV; `quicklite doctor [db]` checks
//! the linked SQLite and a database file against SQLite's documentation.
//!
//! This binary only parses flags and wires the `quicklite-lab` and `quicklite` crates together; they do the work.

mod bench;
mod cli;
mod doctor;
mod postgres;
mod progress;
mod report;
mod workload_check;

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
        Command::Doctor(args) => doctor::run(&args),
    }
}
