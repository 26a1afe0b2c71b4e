//! `quicklite bench`: options → matrix → runners → cells → files and terminal summary.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, bail};
use quicklite_lab::workload_file::WorkloadFile;
use quicklite_lab::{
    ApproachName, BenchOptions, ExecOptions, ExportFormat, ResultStore, RunnerSetup, Runners,
    build_matrix, catalog, now_compact, run_all,
};

use crate::cli::{BenchArgs, OnOff};
use crate::progress::Progress;

/// Process start-up, seeding and tear-down per cell, on top of warm-up, duration and the idle window (for the
/// estimate only).
const CELL_OVERHEAD: Duration = Duration::from_millis(700);

/// Validates everything, prepares the runners, runs every cell, prints the summary. Exits 1 when a cell
/// failed (its reason is in the results), after writing everything.
pub fn run(args: BenchArgs) -> anyhow::Result<ExitCode> {
    let mut options = options(&args)?;
    // Checked before a server is started for nothing.
    build_matrix(&BenchOptions {
        postgres_url: options.postgres_url.clone().or_else(|| {
            args.with_postgres
                .then(|| "postgres://placeholder".to_owned())
        }),
        ..options.clone()
    })?;
    let _server = if args.with_postgres {
        let root = match &args.repo_root {
            Some(root) => root.clone(),
            None => quicklite_lab::find_repo_root()?,
        };
        let server = crate::postgres::Server::start(&root)?;
        options.postgres_url = Some(server.url.clone());
        Some(server)
    } else {
        None
    };
    // Everything about the input is checked before anything is built, created or run.
    let cells = build_matrix(&options)?;
    let exec = ExecOptions {
        timeout: args.timeout.map(|s| seconds("--timeout", s)).transpose()?,
        db_root: args.db_dir.clone(),
    };
    if let Some(timeout) = exec.timeout
        && timeout.is_zero()
    {
        bail!("invalid --timeout: must be greater than zero");
    }
    if let Some(dir) = &exec.db_root
        && !dir.is_dir()
    {
        bail!("invalid --db-dir: {} is not a directory", dir.display());
    }

    let dir = args
        .output
        .clone()
        .unwrap_or_else(|| PathBuf::from("results").join(now_compact()));
    let existed = dir.exists();
    let mut store = ResultStore::create(&dir, args.baseline)?;

    // The approaches with a cell, in the order of their first.
    let mut approaches: Vec<ApproachName> = Vec::new();
    for cell in &cells {
        let approach = cell.approach.parse()?;
        if !approaches.contains(&approach) {
            approaches.push(approach);
        }
    }
    let setup = RunnerSetup {
        programs: args.runners.clone(),
        build: !args.no_build,
        repo_root: args.repo_root.clone(),
    };
    let runners = match Runners::resolve_profiles(&approaches, &options.build_profiles, &setup) {
        Ok(runners) => runners,
        Err(err) => {
            if !existed {
                // Nothing ran: leave no empty results directory behind (remove_dir only removes an empty one).
                let _ = std::fs::remove_dir(&dir);
            }
            return Err(err).context("preparing the runners");
        }
    };

    let estimate: Duration = cells
        .iter()
        .map(|c| {
            Duration::from_millis(c.warmup_ms + c.duration_ms)
                + quicklite_lab::IDLE_WINDOW
                + CELL_OVERHEAD
        })
        .sum();
    let repetitions = if options.repeat > 1 {
        format!(
            ", each of {} measured {} times in interleaved rounds",
            cells.len() / options.repeat as usize,
            options.repeat
        )
    } else {
        String::new()
    };
    eprintln!(
        "Running {} cells{repetitions} (about {}), results in {}",
        cells.len(),
        minutes(estimate),
        dir.display()
    );
    let mut progress = Progress::new(cells.len());
    let outcome = run_all(&cells, &runners, &exec, &mut store, &mut progress);
    progress.finish();
    outcome.with_context(|| format!("writing results to {}", dir.display()))?;

    let ascii = ExportFormat::Ascii.serialize(store.results(), args.baseline)?;
    println!("{}", String::from_utf8_lossy(&ascii).trim_end());
    println!();
    println!("Results in {}:", dir.display());
    for format in ExportFormat::ALL {
        println!("  {}", store.path(format).display());
    }
    let failed = store
        .results()
        .iter()
        .filter(|r| r.failure.is_some())
        .count();
    if failed > 0 {
        eprintln!(
            "{failed} of {} cells failed; their reasons are in the summary.",
            cells.len()
        );
        return Ok(ExitCode::FAILURE);
    }
    Ok(ExitCode::SUCCESS)
}

/// The lab's options: `--quick` or the full defaults, overridden by every flag given.
fn options(args: &BenchArgs) -> anyhow::Result<BenchOptions> {
    let mut o = if args.quick {
        BenchOptions::quick()
    } else {
        BenchOptions::default()
    };
    if let Some(v) = &args.workloads {
        o.workloads = v.clone();
    }
    if let Some(v) = &args.approaches {
        o.approaches = v.clone();
    }
    if let Some(s) = args.duration {
        o.duration_ms = millis(seconds("--duration", s)?);
    }
    if let Some(s) = args.warmup {
        o.warmup_ms = millis(seconds("--warmup", s)?);
    }
    if let Some(n) = args.repeat {
        o.repeat = n;
    }
    if let Some(v) = &args.concurrency {
        o.concurrency = v.clone();
    }
    if let Some(v) = &args.workers {
        o.worker_threads = v.clone();
    }
    if let Some(v) = &args.profiles {
        o.profiles = v.clone();
    }
    if let Some(v) = &args.synchronous {
        o.synchronous = v
            .iter()
            .map(|s| (s != "default").then(|| s.clone()))
            .collect();
    }
    if let Some(v) = &args.memstatus {
        o.memstatus = v.iter().map(|m| *m == OnOff::On).collect();
    }
    if let Some(v) = &args.mutex {
        o.mutex = v.clone();
    }
    if let Some(v) = &args.mmap {
        o.mmap_size = v.iter().map(|m| m.0).collect();
    }
    if let Some(v) = args.rows {
        o.rows = v;
    }
    if let Some(v) = args.readers {
        o.readers = v;
    }
    if let Some(v) = args.total_readers {
        o.total_readers = Some(v);
    }
    if let Some(v) = &args.write_delays {
        o.write_delays_ms = v.clone();
    }
    if let Some(v) = &args.write_mode {
        o.write_modes = v.clone();
    }
    if let Some(v) = &args.num_databases {
        o.num_databases = v.clone();
    }
    if let Some(v) = &args.think_us {
        o.think_us = v.clone();
    }
    if let Some(v) = &args.write_ratio {
        o.write_ppm = v.iter().map(|r| r.0).collect();
    }
    if let Some(v) = &args.long_read_every {
        o.long_read_every = v.clone();
    }
    if let Some(v) = &args.long_read_ms {
        o.long_read_ms = v.iter().map(|ms| ms.0.clone()).collect();
    }
    if let Some(v) = &args.rate {
        o.rates = v.iter().map(|r| Some(r.0)).collect();
        if args.workloads.is_none() {
            // Only some workloads run open loop: a rate alone means those of the run's workloads that do.
            o.workloads
                .retain(|w| quicklite_lab::Workload::parse(w).is_ok_and(|w| w.runs_open_loop()));
        }
    }
    // After the rate: every custom workload runs open loop too.
    for path in &args.workload_file {
        let workload = crate::workload_check::check(&WorkloadFile::read(path)?)?;
        if args.workloads.is_none() && o.custom.is_empty() {
            o.workloads.clear();
        }
        if !o.workloads.contains(&workload.name) {
            o.workloads.push(workload.name.clone());
        }
        o.custom.push(workload);
    }
    // A long-read knob without --workloads asks for that workload, which no run measures unless named: alone, or
    // beside the workload files' workloads.
    if args.workloads.is_none() && (args.long_read_every.is_some() || args.long_read_ms.is_some()) {
        if args.workload_file.is_empty() {
            o.workloads.clear();
        }
        if !o.workloads.iter().any(|w| w == catalog::LONG_READ) {
            o.workloads.push(catalog::LONG_READ.to_owned());
        }
    }
    if let Some(v) = args.seed {
        o.seed = v;
    }
    if args.with_postgres || args.postgres_url.is_some() {
        o.postgres_url.clone_from(&args.postgres_url);
        if !o.approaches.contains(&ApproachName::Postgres) {
            o.approaches.push(ApproachName::Postgres);
        }
        if !o.workloads.iter().any(|w| w == catalog::ORM) {
            o.workloads.push(catalog::ORM.to_owned());
        }
    }
    if let Some(v) = &args.build_profiles {
        o.build_profiles = v.clone();
    }
    Ok(o)
}

fn seconds(flag: &str, value: f64) -> anyhow::Result<Duration> {
    Duration::try_from_secs_f64(value)
        .map_err(|_| anyhow::anyhow!("invalid {flag}: `{value}` is not a number of seconds ≥ 0"))
}

fn millis(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}

fn minutes(duration: Duration) -> String {
    let secs = duration.as_secs();
    if secs < 90 {
        format!("{secs} s")
    } else {
        format!("{} min {} s", secs / 60, secs % 60)
    }
}
