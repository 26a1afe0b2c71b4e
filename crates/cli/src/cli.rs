//! The command line, declared with clap's derive API. Flag names follow seed 004's `run_benchmark.sh`
//! (`--duration`, `--workers`, `--readers`, `--write-delays`, `--num-databases`, `--output`, `--quick`).

use std::ops::RangeInclusive;
use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};
use quicklite_lab::ApproachName;
use quicklite_lab::catalog::DEFAULT_BASELINE;

/// Measure the ways a tokio service can use SQLite, side by side, with every number's settings.
#[derive(Debug, Parser)]
#[command(name = "quicklite", version, about)]
pub struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// Subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the benchmark matrix: every cell in a fresh runner process, results written after every cell.
    Bench(Box<BenchArgs>),
    /// Regenerate the Markdown, HTML and ASCII reports from a results CSV.
    Report(ReportArgs),
    /// Check the linked SQLite and a database file (read-only) against SQLite's documentation.
    ///
    /// Reports the linked SQLite (version, compile options, threading mode, memory statistics, the WAL-reset bug)
    /// and, if a database is given, its journal mode, per-connection defaults, page and WAL sizes, free pages and
    /// `PRAGMA quick_check`: each finding with a severity (ok, info, warning, error), the value observed, a
    /// recommendation, and the SQLite documentation behind it. The database is opened read-only and never
    /// modified.
    #[command(after_help = DOCTOR_EXIT_STATUS)]
    Doctor(DoctorArgs),
}

/// The exit statuses of `quicklite doctor`, shown under its `--help`.
const DOCTOR_EXIT_STATUS: &str = "\
Exit status:
  0  the report was produced and no finding is an error (warnings and notes do not fail)
  1  the report was produced and a finding is an error (e.g. PRAGMA quick_check found corruption, or the
     linked SQLite has the WAL-reset bug, which can corrupt WAL databases)
  2  the database cannot be inspected at all: missing, a directory, not an SQLite database, locked by
     another process, unreadable (a one-line reason goes to stderr; nothing goes to stdout)";

/// `quicklite bench`. Lists are comma-separated; each list is one axis of the matrix.
#[derive(Debug, Args)]
pub struct BenchArgs {
    /// A run of about 4 minutes: every approach on point-read, insert, mixed, a 10-database multi-db, the
    /// queue, http and the ORM suite, 2 s per cell after 0.5 s of warm-up, each cell once, plus variants for the
    /// seeds' knobs. Other flags override its choices.
    #[arg(long)]
    pub quick: bool,

    /// Workloads to run: point-read, insert, mixed, write-read, multi-db, queue, http, orm, throughput, long-read,
    /// held-tx [default: all but long-read and held-tx, which run only when named].
    #[arg(long, value_delimiter = ',', value_name = "NAMES")]
    pub workloads: Option<Vec<String>>,

    /// Workload files: each the user's schema, seed data and weighted transactions of SQL (TOML; see the lab's
    /// manual), checked against SQLite before anything runs and measured like a built-in workload by every
    /// approach that runs arbitrary SQL. Without --workloads, only the files' workloads run.
    #[arg(long, value_delimiter = ',', value_name = "FILES")]
    pub workload_file: Vec<PathBuf>,

    /// Approaches to compare [default: all but the variants (quicklite's, turso-mvcc, ceiling-async) and postgres].
    #[arg(short, long, value_delimiter = ',', value_name = "NAMES")]
    pub approaches: Option<Vec<ApproachName>>,

    /// Measured seconds per cell, after the warm-up [default: 10].
    #[arg(short, long, value_name = "SECS")]
    pub duration: Option<f64>,

    /// Warm-up seconds per cell, not measured [default: 2].
    #[arg(long, value_name = "SECS")]
    pub warmup: Option<f64>,

    /// Measure every cell N times, each in a fresh process, in rounds interleaved with the other cells of its
    /// table; reports show medians, ranges and paired ratios, and the seeds get verdicts from 3 on
    /// [default: 3; --quick: 1].
    #[arg(long, value_name = "N")]
    pub repeat: Option<u32>,

    /// Concurrent client tasks (http: keep-alive connections; not used by multi-db) [default: 64].
    #[arg(short, long, value_delimiter = ',', value_name = "N,N")]
    pub concurrency: Option<Vec<u32>>,

    /// Tokio worker threads in the runner [default: tokio's default, one per CPU].
    #[arg(
        short,
        long,
        visible_alias = "worker-threads",
        value_delimiter = ',',
        value_name = "N,N"
    )]
    pub workers: Option<Vec<u32>>,

    /// PRAGMA profiles: server, sqlite-default [default: server].
    #[arg(long, value_delimiter = ',', value_name = "NAMES")]
    pub profiles: Option<Vec<String>>,

    /// `synchronous`: default (the profile's), off, normal, full, extra [default: default].
    #[arg(long, value_delimiter = ',', value_name = "MODES")]
    pub synchronous: Option<Vec<String>>,

    /// SQLite memory statistics (SQLITE_CONFIG_MEMSTATUS) [default: off].
    #[arg(long, value_delimiter = ',', value_name = "on,off")]
    pub memstatus: Option<Vec<OnOff>>,

    /// `mmap_size` in bytes (0: no memory map), or default (the profile's) [default: default].
    #[arg(long, value_delimiter = ',', value_name = "BYTES")]
    pub mmap: Option<Vec<MmapSize>>,

    /// Connection mutex mode: nomutex, fullmutex [default: nomutex].
    #[arg(long, value_delimiter = ',', value_name = "MODES")]
    pub mutex: Option<Vec<String>>,

    /// Rows in the seeded table [default: 10000].
    #[arg(long, value_name = "N")]
    pub rows: Option<u64>,

    /// multi-db: reader tasks per database [default: 3].
    #[arg(
        short,
        long,
        visible_alias = "readers-per-db",
        value_name = "N",
        conflicts_with = "total_readers"
    )]
    pub readers: Option<u32>,

    /// multi-db: N reader tasks in all instead of --readers per database, each read on a database picked at
    /// random: the same total read load at every --num-databases, e.g. to compare p99 read latency at 1 and 1000
    /// databases.
    #[arg(long, value_name = "N")]
    pub total_readers: Option<u32>,

    /// multi-db: the writer's delay in milliseconds, per write (blocking) or between writes (paced)
    /// [default: 100,1000,10000].
    #[arg(long, value_delimiter = ',', value_name = "MS,MS")]
    pub write_delays: Option<Vec<u64>>,

    /// multi-db: how each database's writer spends its delay [default: blocking].
    ///
    /// blocking: seed 004's writer — a blocking sleep inside the write transaction, writes back to back; it holds
    /// a thread for the whole delay, so a bounded thread pool completes at most threads ÷ delay writes per
    /// second, whatever the number of databases. paced: one write every delay per database (an async sleep
    /// between writes on a fixed schedule), each just the block's statements; write completion is writes done
    /// ÷ (duration ÷ delay × databases).
    #[arg(long, value_delimiter = ',', value_name = "MODES")]
    pub write_mode: Option<Vec<String>>,

    /// throughput and held-tx: think times in microseconds — how long each throughput transaction of 100 rows blocks
    /// its thread before its commit, how long each held-tx transaction awaits between its read and its write (the
    /// application's work inside a transaction) [default: 0,1000].
    #[arg(long, value_delimiter = ',', value_name = "US,US")]
    pub think_us: Option<Vec<u64>>,

    /// mixed: shares of writes among its operations, each a fraction (0.001) or a percentage (0.1%), at most 1 and
    /// in steps of one in a million; the rest are point reads. Each share is a table of its own [default: 0.1].
    #[arg(long, value_delimiter = ',', value_name = "SHARES")]
    pub write_ratio: Option<Vec<WriteRatio>>,

    /// long-read: one read in N of the window's is long, the others short — the same SQL and call site, a parameter
    /// setting its cost — beside one insert due every millisecond. Each value a table of its own. The workload runs
    /// only when --workloads names it, or when this or --long-read-ms is given without --workloads [default: 1000].
    #[arg(long, value_delimiter = ',', value_name = "N,N")]
    pub long_read_every: Option<Vec<u32>>,

    /// long-read: how long a long read takes, in milliseconds: a range (100-300, each long read's time drawn from
    /// it) or one value (200), calibrated on the runner's SQLite before the warm-up. Each a table of its own
    /// [default: 100-300].
    #[arg(long, value_delimiter = ',', value_name = "MS-MS,MS")]
    pub long_read_ms: Option<Vec<LongReadMs>>,

    /// Open-loop load: requests per second, each a cell (and a table) of its own. Requests are sent on a fixed
    /// schedule whatever the answers do, latency runs from each request's scheduled time, and at most
    /// --concurrency requests are in flight (one due while that many are is dropped and counted). point-read,
    /// insert and mixed only; without --workloads, those three [default: closed loop, each task sending its next
    /// request when the last one returns].
    #[arg(long, value_delimiter = ',', value_name = "N,N")]
    pub rate: Option<Vec<Rate>>,

    /// multi-db: numbers of databases [default: 1,10,50,100].
    #[arg(long, value_delimiter = ',', value_name = "N,N")]
    pub num_databases: Option<Vec<u32>>,

    /// SQLite build profiles, from crates/lab/build-profiles.txt: default (rusqlite's bundled flags), tuned (the
    /// workspace's LIBSQLITE3_FLAGS), threadsafe2 (tuned in multi-thread mode), … Each profile other than tuned
    /// is built into `<target>/lab-profiles/<name>` (once; later runs reuse it) [default: tuned].
    #[arg(long, value_delimiter = ',', value_name = "NAMES")]
    pub build_profiles: Option<Vec<String>>,

    /// Also run the orm workload on PostgreSQL (the `postgres` approach): installs Debian's postgresql package if
    /// needed, starts a throwaway server on loopback (scripts/postgres.sh), uses it through tokio-postgres, and
    /// stops it at the end.
    #[arg(long, conflicts_with = "postgres_url")]
    pub with_postgres: bool,

    /// Like --with-postgres, on an existing server (its orm tables are dropped and recreated).
    #[arg(long, value_name = "URL")]
    pub postgres_url: Option<String>,

    /// Seed of the operation mix and key choice [default: 4].
    #[arg(long, value_name = "N")]
    pub seed: Option<u64>,

    /// Approach the "N× faster than" ratios compare with (the slowest row stands in where it did not run).
    #[arg(long, value_name = "APPROACH", default_value_t = DEFAULT_BASELINE)]
    pub baseline: ApproachName,

    /// Results directory (by default `results/<UTC timestamp>`).
    #[arg(short, long, visible_alias = "output-dir", value_name = "DIR")]
    pub output: Option<PathBuf>,

    /// Use the runners from the last release build instead of building them.
    #[arg(long)]
    pub no_build: bool,

    /// A runner program to use as is (repeatable); it provides the approaches its `--approaches` names.
    #[arg(long = "runner", value_name = "PROGRAM")]
    pub runners: Vec<PathBuf>,

    /// Kill a cell's runner after this many seconds [default: (warm-up + duration) × 3 + 30, plus 0.01 per
    /// multi-db database].
    #[arg(long, value_name = "SECS")]
    pub timeout: Option<f64>,

    /// Where each cell's fresh database directory is created [default: the system temporary directory].
    #[arg(long, value_name = "DIR")]
    pub db_dir: Option<PathBuf>,

    /// The quicklite source tree to build runners from [default: found from the working directory].
    #[arg(long, value_name = "DIR")]
    pub repo_root: Option<PathBuf>,
}

/// `on` / `off`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum OnOff {
    /// Enabled.
    On,
    /// Disabled.
    Off,
}

/// An `--mmap` value: `default` (the profile's `mmap_size`) or a size in bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MmapSize(pub Option<u64>);

impl std::str::FromStr for MmapSize {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        if text == "default" {
            return Ok(Self(None));
        }
        text.parse().map(|bytes| Self(Some(bytes))).map_err(|_| {
            format!("`{text}` is not a size in bytes (e.g. 0 or 268435456) or `default`")
        })
    }
}

/// A `--write-ratio` value: a share of writes, as a fraction (`0.01`) or a percentage (`1%`), held in parts per
/// million so that 0.1% is exact.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WriteRatio(pub u32);

impl std::str::FromStr for WriteRatio {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let (number, per_unit) = match text.strip_suffix('%') {
            Some(percent) => (percent, 100.0),
            None => (text, 1.0),
        };
        let share = number
            .trim()
            .parse::<f64>()
            .ok()
            .filter(|share| share.is_finite() && *share >= 0.0)
            .map(|share| share / per_unit)
            .ok_or_else(|| format!("`{text}` is not a share of writes (e.g. 0.01 or 1%)"))?;
        if share > 1.0 {
            return Err(format!(
                "`{text}` is more than every operation (at most 1 or 100%)"
            ));
        }
        let ppm = share * f64::from(quicklite_lab::PPM);
        // A decimal such as 0.001 is not exact in binary: round, but refuse what is finer than one in a million.
        let rounded = ppm.round();
        if (ppm - rounded).abs() > 1e-6 {
            return Err(format!(
                "`{text}` is finer than the knob's step of one in a million (0.0001%)"
            ));
        }
        Ok(Self(rounded as u32))
    }
}

/// A `--long-read-ms` value: the milliseconds a long read takes, a range `MIN-MAX` or one value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LongReadMs(pub RangeInclusive<u64>);

impl std::str::FromStr for LongReadMs {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let ms = |part: &str| {
            part.trim().parse::<u64>().map_err(|_| {
                format!(
                    "`{text}` is not a time in milliseconds or a range of them (e.g. 200 or 100-300)"
                )
            })
        };
        let (min, max) = match text.split_once('-') {
            Some((min, max)) => (ms(min)?, ms(max)?),
            None => {
                let value = ms(text)?;
                (value, value)
            }
        };
        if min == 0 {
            return Err(format!("`{text}`: a long read takes at least 1 ms"));
        }
        if min > max {
            return Err(format!(
                "`{text}`: the shortest time comes first ({max}-{min})"
            ));
        }
        Ok(Self(min..=max))
    }
}

/// A `--rate` value: requests per second, a whole number of at least one (`1000`, `20k`, `1.5k`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rate(pub u64);

impl std::str::FromStr for Rate {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let not_a_rate =
            || format!("`{text}` is not a rate in requests per second (e.g. 1000 or 20k)");
        let (number, scale) = match text.trim().strip_suffix(['k', 'K']) {
            Some(thousands) => (thousands, 1_000.0),
            None => (text.trim(), 1.0),
        };
        let value = number
            .parse::<f64>()
            .ok()
            .filter(|v| v.is_finite() && *v >= 0.0)
            .map(|v| v * scale)
            .ok_or_else(not_a_rate)?;
        if value.fract() != 0.0 || value > u64::MAX as f64 {
            return Err(not_a_rate());
        }
        if value < 1.0 {
            return Err(format!(
                "`{text}`: a rate is at least one request per second"
            ));
        }
        Ok(Self(value as u64))
    }
}

/// `quicklite report`.
#[derive(Debug, Args)]
pub struct ReportArgs {
    /// A `results.csv` written by `quicklite bench`.
    pub csv: PathBuf,

    /// Where to write summary.md, report.html and charts.txt [default: the CSV's directory].
    #[arg(short, long, value_name = "DIR")]
    pub output: Option<PathBuf>,

    /// Approach the "N× faster than" ratios compare with.
    #[arg(long, value_name = "APPROACH", default_value_t = DEFAULT_BASELINE)]
    pub baseline: ApproachName,
}

/// `quicklite doctor`.
#[derive(Debug, Args)]
pub struct DoctorArgs {
    /// A database file to inspect. It is opened read-only and never written; without it, only the SQLite
    /// section is reported.
    #[arg(value_name = "DB")]
    pub db: Option<PathBuf>,

    /// A read replica to inspect: a Litestream replica URL (`s3://bucket/path`, `?endpoint=…` for an S3-compatible
    /// server), read through Litestream's VFS (`--vfs`) as a quicklite replica reads it. Credentials come from the
    /// environment, as Litestream takes them.
    #[arg(long, value_name = "URL", requires = "vfs")]
    pub replica: Option<String>,

    /// Litestream's VFS, the shared library `scripts/install-litestream-vfs.sh` builds (with `--replica`).
    #[arg(long, value_name = "PATH", requires = "replica")]
    pub vfs: Option<PathBuf>,

    /// Print one JSON document with the same content instead of the human report.
    #[arg(long)]
    pub json: bool,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The `bench` arguments of `quicklite bench <args>`, or clap's refusal.
    fn bench(args: &[&str]) -> Result<BenchArgs, clap::Error> {
        let cli = Cli::try_parse_from(["quicklite", "bench"].iter().chain(args))?;
        match cli.command {
            Command::Bench(bench) => Ok(*bench),
            other => panic!("not bench: {other:?}"),
        }
    }

    #[test]
    fn approaches_parse_into_names_and_a_typo_is_refused_with_the_valid_ones() {
        let args = bench(&[
            "--approaches",
            "quicklite-no-inline,node-better-sqlite3,go-mattn",
        ])
        .unwrap();
        assert_eq!(
            args.approaches,
            Some(vec![
                ApproachName::QuickliteNoInline,
                ApproachName::NodeBetterSqlite3,
                ApproachName::GoMattn
            ])
        );
        assert_eq!(args.baseline, ApproachName::TokioRusqlite);
        assert_eq!(
            bench(&["--baseline", "ceiling"]).unwrap().baseline,
            ApproachName::Ceiling
        );
        for flag in ["--approaches", "--baseline"] {
            let err = bench(&[flag, "tokio-sqlite"]).unwrap_err();
            assert_eq!(err.kind(), clap::error::ErrorKind::InvalidValue);
            let message = err.to_string();
            assert!(message.contains("'tokio-sqlite'"), "{message}");
            for approach in ApproachName::ALL {
                assert!(message.contains(approach.as_str()), "{approach}: {message}");
            }
        }
    }

    #[test]
    fn rates_are_whole_requests_per_second() {
        let parse = |text: &str| text.parse::<Rate>().map(|r| r.0);
        assert_eq!(parse("1"), Ok(1));
        assert_eq!(parse("1000"), Ok(1_000));
        assert_eq!(parse("20k"), Ok(20_000));
        assert_eq!(parse("1.5k"), Ok(1_500));
        for (bad, message) in [
            ("0", "at least one request per second"),
            ("fast", "not a rate"),
            ("-5", "not a rate"),
            ("2.5", "not a rate"),
            ("inf", "not a rate"),
            ("", "not a rate"),
        ] {
            let err = parse(bad).unwrap_err();
            assert!(err.contains(message), "{bad}: {err}");
        }
    }

    #[test]
    fn long_read_times_are_a_range_or_one_value_in_whole_milliseconds() {
        let parse = |text: &str| text.parse::<LongReadMs>().map(|r| r.0);
        assert_eq!(parse("100-300"), Ok(100..=300));
        assert_eq!(parse("200"), Ok(200..=200));
        assert_eq!(parse("5-5"), Ok(5..=5));
        for (bad, message) in [
            ("300-100", "the shortest time comes first (100-300)"),
            ("0", "at least 1 ms"),
            ("0-50", "at least 1 ms"),
            ("fast", "not a time in milliseconds"),
            ("100-", "not a time in milliseconds"),
            ("-5", "not a time in milliseconds"),
            ("1.5", "not a time in milliseconds"),
            ("100-200-300", "not a time in milliseconds"),
        ] {
            let err = parse(bad).unwrap_err();
            assert!(err.contains(message), "{bad}: {err}");
        }
        let args = bench(&[
            "--long-read-every",
            "1000,100",
            "--long-read-ms",
            "100-300,50",
        ])
        .unwrap();
        assert_eq!(args.long_read_every, Some(vec![1_000, 100]));
        assert_eq!(
            args.long_read_ms,
            Some(vec![LongReadMs(100..=300), LongReadMs(50..=50)])
        );
        let err = bench(&["--long-read-every", "many"]).unwrap_err();
        assert_eq!(err.kind(), clap::error::ErrorKind::ValueValidation);
    }

    #[test]
    fn write_ratios_are_fractions_or_percentages_in_parts_per_million() {
        let parse = |text: &str| text.parse::<WriteRatio>().map(|r| r.0);
        assert_eq!(parse("0"), Ok(0));
        assert_eq!(parse("0.001"), Ok(1_000));
        assert_eq!(parse("0.1%"), Ok(1_000));
        assert_eq!(parse("0.01"), Ok(10_000));
        assert_eq!(parse("1%"), Ok(10_000));
        assert_eq!(parse("0.1"), Ok(100_000));
        assert_eq!(parse("1"), Ok(1_000_000));
        assert_eq!(parse("0.000001"), Ok(1));
        for (bad, message) in [
            ("1.5", "more than every operation"),
            ("101%", "more than every operation"),
            ("-0.1", "not a share of writes"),
            ("ten", "not a share of writes"),
            ("NaN", "not a share of writes"),
            ("0.0000001", "finer than"),
        ] {
            let err = parse(bad).unwrap_err();
            assert!(err.contains(message), "{bad}: {err}");
        }
    }
}
