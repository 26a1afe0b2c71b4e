//! The lab's error type.

use std::path::PathBuf;

/// Everything that can stop the lab before or between cells.
///
/// A runner that crashes, hangs or prints garbage is *not* an error: it becomes a failed
/// [`CellResult`](quicklite_lab_core::CellResult) and the run continues.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LabError {
    /// A workload name that the lab does not know.
    #[error("unknown workload `{name}` (valid workloads: {valid})")]
    UnknownWorkload {
        /// The name as given.
        name: String,
        /// The valid names, comma-separated.
        valid: String,
    },
    /// An option value that is out of range, empty, or contradicts another option.
    #[error("invalid {option}: {reason}")]
    InvalidOption {
        /// The option, as spelled on the command line.
        option: &'static str,
        /// What is wrong with it.
        reason: String,
    },
    /// The results directory cannot be created or written.
    #[error("results directory {path} is not writable: {source}")]
    OutputDir {
        /// The directory.
        path: PathBuf,
        /// The underlying error.
        source: std::io::Error,
    },
    /// Reading or writing a file failed.
    #[error("{action} {path}: {source}")]
    Io {
        /// What was being done (`writing`, `reading`, …).
        action: &'static str,
        /// The file.
        path: PathBuf,
        /// The underlying error.
        source: std::io::Error,
    },
    /// A results CSV could not be parsed.
    #[error("reading results CSV {path}: {message}")]
    Csv {
        /// The file.
        path: PathBuf,
        /// What went wrong, with the record number.
        message: String,
    },
    /// A workload file (`--workload-file`) that cannot be run: its shape, a value, or its SQL.
    #[error("{}:{line}: {message}", path.display())]
    WorkloadFile {
        /// The file.
        path: PathBuf,
        /// The line at fault, from 1.
        line: usize,
        /// What is wrong there.
        message: String,
    },
    /// Serializing results failed (a bug rather than a user error).
    #[error("serializing results: {0}")]
    Serialize(String),
    /// The source tree needed to build runners was not found.
    #[error(
        "cannot find the quicklite source tree to build the runners (looked for crates/lab-core/Cargo.toml above {cwd} and at {compiled}); run from a clone or pass explicit runner programs"
    )]
    RepoRootNotFound {
        /// The working directory searched upwards from.
        cwd: PathBuf,
        /// The source location recorded at compile time.
        compiled: PathBuf,
    },
    /// A runner could not be built, found, or asked what it supports.
    #[error("runner {runner}: {reason}")]
    Runner {
        /// The runner (program or package name).
        runner: String,
        /// What went wrong.
        reason: String,
    },
    /// No runner provides a requested approach.
    #[error("no runner provides approach `{approach}`{hint}")]
    NoRunner {
        /// The approach.
        approach: String,
        /// Where it was looked for.
        hint: String,
    },
}

/// Shorthand used throughout the crate.
pub type Result<T, E = LabError> = std::result::Result<T, E>;
