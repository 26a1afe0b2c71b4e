//! `quicklite report <csv>`: the Markdown, HTML and ASCII reports, redrawn from a results CSV alone.

use std::process::ExitCode;

use anyhow::Context;
use quicklite_lab::{ExportFormat, read_csv, write_reports};

use crate::cli::ReportArgs;

/// Reads the CSV, writes the three reports beside it (or into `--output`), prints the ASCII one.
pub fn run(args: ReportArgs) -> anyhow::Result<ExitCode> {
    let results = read_csv(&args.csv)?;
    let dir = match &args.output {
        Some(dir) => dir.clone(),
        None => args
            .csv
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .map_or_else(|| ".".into(), ToOwned::to_owned),
    };
    let written = write_reports(&results, &dir, args.baseline)
        .with_context(|| format!("writing reports for {}", args.csv.display()))?;
    let ascii = ExportFormat::Ascii.serialize(&results, args.baseline)?;
    println!("{}", String::from_utf8_lossy(&ascii).trim_end());
    println!();
    println!("Reports written:");
    for path in written {
        println!("  {}", path.display());
    }
    Ok(ExitCode::SUCCESS)
}
