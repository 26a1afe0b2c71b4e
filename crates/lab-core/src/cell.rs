//! A cell: one measured combination of workload × approach × settings, sent to a runner as JSON.

use serde::{Deserialize, Serialize};

use crate::custom::CustomWorkload;

/// One measured combination of workload, approach and knobs.
///
/// The orchestrator serializes a `Cell` to JSON and writes it to a fresh runner process's standard input;
/// the runner prints one [`crate::CellResult`] as JSON on standard output. Every field is a column in the
/// results, so a number never travels without the settings that produced it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Cell {
    /// Workload name: `point-read`, `insert`, `mixed`, `multi-db` (see [`crate::Workload`]).
    pub workload: String,
    /// Approach name, e.g. `quicklite`, `tokio-rusqlite`, `direct-blocking`.
    pub approach: String,
    /// Measured time, after the warm-up.
    pub duration_ms: u64,
    /// Time run before measuring starts; its operations are not counted.
    pub warmup_ms: u64,
    /// Concurrent client tasks issuing operations (for `multi-db`: ignored, see [`MultiDb`]).
    pub concurrency: u32,
    /// Tokio worker threads of the runner's runtime.
    pub worker_threads: u32,
    /// PRAGMA profile: `server` (WAL, tuned) or `sqlite-default` (no PRAGMA touched).
    pub profile: String,
    /// `synchronous` override (`off`, `normal`, `full`); `None` keeps the profile's value.
    pub synchronous: Option<String>,
    /// SQLite memory statistics (`SQLITE_CONFIG_MEMSTATUS`) on or off, set before SQLite initializes.
    pub memstatus: bool,
    /// `mmap_size` override in bytes (`0`: no memory map); `None` keeps the profile's value. Absent in cells
    /// written before the knob existed, which kept the profile's.
    #[serde(default)]
    pub mmap_size: Option<u64>,
    /// Connection mutex mode: `nomutex` (multi-thread) or `fullmutex` (serialized).
    pub mutex: String,
    /// Rows in the seeded table (`point-read`, `mixed`).
    pub rows: u64,
    /// Settings of the `multi-db` workload; `None` for the others.
    pub multi_db: Option<MultiDb>,
    /// `throughput`'s think time, in microseconds: how long each transaction blocks its thread between its inserts
    /// and its commit (the application's work inside a transaction). `0` for every other workload, and then not
    /// written, so runners that know no think time never see it.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub think_us: u64,
    /// `mixed`'s share of writes, in parts per million of its operations (`100000`: 10%, `1000`: 0.1%); the rest are
    /// point reads. [`DEFAULT_WRITE_PPM`] (10%) for every other workload, and then not written, so runners that
    /// know no write share never see it and cells written before the knob existed read as today's 90/10 mix.
    #[serde(
        default = "default_write_ppm",
        skip_serializing_if = "is_default_write_ppm"
    )]
    pub write_ppm: u32,
    /// Open-loop load: requests per second issued on a fixed schedule whatever the answers do, at most
    /// [`Cell::concurrency`] in flight (a request due while that many are in flight is dropped and counted).
    /// `None` for a closed-loop cell (each task sends its next request when the last one returns), and then not
    /// written, so runners that know no open loop never see it and cells written before it existed read as closed
    /// loop.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate: Option<u64>,
    /// Settings of the `long-read` workload: which of its reads are long, and how long; `None` for the others, and
    /// then not written, so runners that know no long reads never see it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub long_reads: Option<LongReads>,
    /// Directory where the runner creates its database files (a fresh, empty directory per cell).
    pub dir: String,
    /// Seed for the operation mix and key choice, so runs are repeatable.
    pub seed: u64,
    /// Which repetition of the same cell this is (`0` for the first), when a run measures every cell several
    /// times (`--repeat`). The orchestrator's record only: a runner is sent `0`, which is not written, so runners
    /// never see it and cells written before the knob existed read as the first repetition.
    #[serde(default, skip_serializing_if = "is_first_repetition")]
    pub repetition: u32,
    /// SQLite build profile of the runner that measures the cell (`tuned`: the workspace's `LIBSQLITE3_FLAGS`;
    /// `default`: rusqlite's bundled flags untouched; others from the lab's profile list). The orchestrator picks
    /// the runner built with it; the runner itself only records it. Absent in cells written before build profiles
    /// existed, which were all `tuned`.
    #[serde(default = "default_build_profile")]
    pub build_profile: String,
    /// The PostgreSQL server of the `postgres` approach (`--with-postgres` or `--postgres-url`), as a
    /// `postgres://` URL; `None` for every other approach. Not part of the record: the server lives only for the run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub postgres_url: Option<String>,
    /// The custom workload the cell runs (`--workload-file`), whose name is [`Cell::workload`]; `None` for a built-in
    /// workload, and then not written, so runners that know no custom workload never see it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub custom: Option<CustomWorkload>,
}

/// The build profile of the workspace's own builds (its `.cargo/config.toml` flags).
pub const DEFAULT_BUILD_PROFILE: &str = "tuned";

/// `mixed`'s share of writes unless a cell says otherwise, in parts per million: 10%, the mix the workload has
/// always had.
pub const DEFAULT_WRITE_PPM: u32 = 100_000;

/// Parts per million in a whole: the most [`Cell::write_ppm`] can be.
pub const PPM: u32 = 1_000_000;

fn is_first_repetition(repetition: &u32) -> bool {
    *repetition == 0
}

fn is_zero(value: &u64) -> bool {
    *value == 0
}

fn default_write_ppm() -> u32 {
    DEFAULT_WRITE_PPM
}

fn is_default_write_ppm(ppm: &u32) -> bool {
    *ppm == DEFAULT_WRITE_PPM
}

fn default_build_profile() -> String {
    DEFAULT_BUILD_PROFILE.to_owned()
}

/// Settings of the `multi-db` workload (seed 004).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MultiDb {
    /// Number of databases.
    pub num_databases: u32,
    /// Reader tasks per database, each running the JOIN query in a loop on its database; not used when
    /// [`MultiDb::total_readers`] is set.
    pub readers: u32,
    /// The writer's delay in milliseconds: how long each write blocks ([`WriteMode::Blocking`]) or the period
    /// between writes ([`WriteMode::Paced`]).
    pub write_delay_ms: u64,
    /// How each database's writer spends its delay. Absent in cells written before the knob existed, which
    /// meant [`WriteMode::Blocking`].
    #[serde(default)]
    pub write_mode: WriteMode,
    /// A fixed number of reader tasks for the whole cell, each read on a database chosen at random, instead of
    /// [`MultiDb::readers`] per database: the same total read load whatever the number of databases.
    #[serde(default)]
    pub total_readers: Option<u32>,
}

impl MultiDb {
    /// Reader tasks the cell runs in all.
    pub fn reader_tasks(&self) -> u64 {
        match self.total_readers {
            Some(total) => u64::from(total),
            None => u64::from(self.readers) * u64::from(self.num_databases),
        }
    }
}

/// Settings of the `long-read` workload: point reads through one call site whose cost a parameter sets, most of
/// them short and one in [`LongReads::every`] long — a query that ran short thousands of times and then meets the
/// tenant with a million rows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LongReads {
    /// One read in this many, counted over every client task in the measured window, is long; the others, and every
    /// read of the warm-up, are short.
    pub every: u32,
    /// The shortest time a long read is made to take, in milliseconds (calibrated on the runner's SQLite before the
    /// warm-up).
    pub min_ms: u64,
    /// The longest; each long read's time is drawn uniformly from `min_ms..=max_ms`.
    pub max_ms: u64,
}

impl LongReads {
    /// The longest a long read may be asked to take: a minute, far past any window the lab measures.
    pub const MAX_MS: u64 = 60_000;

    /// Refuses settings with no short read, a long read of no time, or a range upside down.
    pub fn check(&self) -> anyhow::Result<()> {
        if self.every < 2 {
            anyhow::bail!(
                "one read in {} long leaves no short read: long reads need `every` of at least 2",
                self.every
            );
        }
        if self.min_ms == 0 {
            anyhow::bail!("a long read takes at least 1 ms (min_ms = 0)");
        }
        if self.min_ms > self.max_ms {
            anyhow::bail!(
                "long reads of {} to {} ms: the shortest is longer than the longest",
                self.min_ms,
                self.max_ms
            );
        }
        if self.max_ms > Self::MAX_MS {
            anyhow::bail!(
                "a long read of {} ms is past the longest the lab asks for ({} ms)",
                self.max_ms,
                Self::MAX_MS
            );
        }
        Ok(())
    }
}

/// How a `multi-db` writer spends its delay: the knob that decides whether write completion measures threads or
/// throughput.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum WriteMode {
    /// Seed 004's writer: the delay is a blocking `std::thread::sleep` *inside* the write transaction, and the
    /// next write starts when the previous one returns. Every write holds a thread for the whole delay, so an
    /// approach with a bounded number of threads completes at most `threads / delay` writes per second, whatever
    /// the number of databases: by construction it cannot reach 100% once databases outnumber its threads.
    #[default]
    Blocking,
    /// A writer that issues one write every delay (an async sleep between writes, on a fixed schedule staggered
    /// across databases); the write itself is just the block's statements. Completion then says whether the
    /// approach keeps up with `databases / delay` writes per second.
    Paced,
}

impl WriteMode {
    /// Every mode, in report order.
    pub const ALL: [WriteMode; 2] = [Self::Blocking, Self::Paced];

    /// The name used in cells, results and on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Self::Blocking => "blocking",
            Self::Paced => "paced",
        }
    }

    /// Parses `blocking` or `paced`.
    pub fn parse(name: &str) -> anyhow::Result<Self> {
        match Self::ALL.iter().find(|m| m.name() == name) {
            Some(mode) => Ok(*mode),
            None => anyhow::bail!("unknown write mode `{name}` (expected `blocking` or `paced`)"),
        }
    }
}

impl std::fmt::Display for WriteMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cells_without_the_new_knobs_still_parse() {
        let m: MultiDb =
            serde_json::from_str(r#"{"num_databases":2,"readers":3,"write_delay_ms":100}"#)
                .unwrap();
        assert_eq!(m.write_mode, WriteMode::Blocking);
        assert_eq!(m.total_readers, None);
        assert_eq!(m.reader_tasks(), 6);
    }

    #[test]
    fn the_default_share_of_writes_is_not_written_and_is_read_back_when_absent() {
        let mut cell = crate::test_support::sample_cell("mixed", "x");
        let json = serde_json::to_string(&cell).unwrap();
        assert!(!json.contains("write_ppm"), "{json}");
        let back: Cell = serde_json::from_str(&json).unwrap();
        assert_eq!(back.write_ppm, DEFAULT_WRITE_PPM);
        // 0.1% of writes, exactly.
        cell.write_ppm = 1_000;
        let json = serde_json::to_string(&cell).unwrap();
        assert!(json.contains(r#""write_ppm":1000"#), "{json}");
        assert_eq!(serde_json::from_str::<Cell>(&json).unwrap(), cell);
    }

    #[test]
    fn long_reads_are_written_only_for_their_workload_and_checked() {
        let mut cell = crate::test_support::sample_cell("point-read", "x");
        let json = serde_json::to_string(&cell).unwrap();
        assert!(!json.contains("long_reads"), "{json}");
        let long = LongReads {
            every: 1_000,
            min_ms: 100,
            max_ms: 300,
        };
        cell.long_reads = Some(long);
        let json = serde_json::to_string(&cell).unwrap();
        assert!(
            json.contains(r#""long_reads":{"every":1000,"min_ms":100,"max_ms":300}"#),
            "{json}"
        );
        assert_eq!(serde_json::from_str::<Cell>(&json).unwrap(), cell);
        assert!(long.check().is_ok());
        for (bad, message) in [
            (LongReads { every: 1, ..long }, "no short read"),
            (LongReads { min_ms: 0, ..long }, "at least 1 ms"),
            (
                LongReads {
                    min_ms: 400,
                    ..long
                },
                "the shortest is longer than the longest",
            ),
            (
                LongReads {
                    max_ms: LongReads::MAX_MS + 1,
                    ..long
                },
                "past the longest",
            ),
        ] {
            let err = bad.check().unwrap_err().to_string();
            assert!(err.contains(message), "{bad:?}: {err}");
        }
    }

    #[test]
    fn write_modes_round_trip() {
        for mode in WriteMode::ALL {
            assert_eq!(WriteMode::parse(mode.name()).unwrap(), mode);
            let json = serde_json::to_string(&mode).unwrap();
            assert_eq!(json, format!("\"{mode}\""));
        }
        assert!(
            WriteMode::parse("lazy")
                .unwrap_err()
                .to_string()
                .contains("`lazy`")
        );
    }
}
