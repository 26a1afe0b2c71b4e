//! Result and report formats, one file each behind the [`Exporter`] trait (hyperfine's `export/` is the model).
//!
//! CSV and JSON are the raw record; Markdown, HTML and ASCII are reports drawn from the [`Summary`]. All of them
//! can be produced from the CSV alone, which is what `quicklite report <csv>` does.

mod ascii;
pub(crate) mod columns;
mod csv;
mod html;
mod json;
mod markdown;
mod svg;

use quicklite_lab_core::{ApproachName, CellResult};

pub use self::ascii::AsciiExporter;
pub use self::csv::CsvExporter;
pub use self::html::HtmlExporter;
pub use self::json::JsonExporter;
pub use self::markdown::MarkdownExporter;
use crate::error::Result;
#[cfg(doc)]
use crate::summary::Summary;

/// Turns results into the bytes of one file.
pub trait Exporter {
    /// Serializes `results`; report formats compute ratios against `baseline`.
    fn serialize(&self, results: &[CellResult], baseline: ApproachName) -> Result<Vec<u8>>;
}

/// The formats the lab writes, with their file names inside a results directory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExportFormat {
    /// One row per cell, every knob, metric and environment field: `results.csv`.
    Csv,
    /// The array of `CellResult`s exactly as the runners reported them: `results.json`.
    Json,
    /// Tables with ratios, failures and the environment: `summary.md`.
    Markdown,
    /// A self-contained page with inline SVG charts: `report.html`.
    Html,
    /// Tables and bar charts for a terminal: `charts.txt`.
    Ascii,
}

impl ExportFormat {
    /// Everything a `bench` run writes.
    pub const ALL: [Self; 5] = [
        Self::Csv,
        Self::Json,
        Self::Markdown,
        Self::Html,
        Self::Ascii,
    ];

    /// What `report <csv>` regenerates.
    pub const REPORTS: [Self; 3] = [Self::Markdown, Self::Html, Self::Ascii];

    /// The file name inside a results directory.
    pub fn file_name(self) -> &'static str {
        match self {
            Self::Csv => "results.csv",
            Self::Json => "results.json",
            Self::Markdown => "summary.md",
            Self::Html => "report.html",
            Self::Ascii => "charts.txt",
        }
    }

    /// The exporter for this format.
    pub fn exporter(self) -> Box<dyn Exporter> {
        match self {
            Self::Csv => Box::new(CsvExporter),
            Self::Json => Box::new(JsonExporter),
            Self::Markdown => Box::new(MarkdownExporter),
            Self::Html => Box::new(HtmlExporter),
            Self::Ascii => Box::new(AsciiExporter),
        }
    }

    /// Shorthand for `self.exporter().serialize(..)`.
    pub fn serialize(self, results: &[CellResult], baseline: ApproachName) -> Result<Vec<u8>> {
        self.exporter().serialize(results, baseline)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixtures;

    #[test]
    fn an_approach_on_a_sqlite_with_the_wal_reset_bug_is_marked_in_every_report() {
        for format in ExportFormat::REPORTS {
            let bytes = format
                .serialize(&fixtures::wal_reset_bug(), ApproachName::TrailbaseSqlite)
                .unwrap();
            let report = String::from_utf8(bytes).unwrap();
            assert!(report.contains("trailbase-sqlite ⚠"), "{format:?}");
            assert!(!report.contains("quicklite ⚠"), "{format:?}");
            assert!(
                report.contains("https://sqlite.org/wal.html#walresetbug"),
                "{format:?}"
            );
            if format != ExportFormat::Ascii {
                // The environment's table of runners, which the terminal's report leaves out.
                assert!(report.contains("3.49.2 ⚠ WAL-reset bug"), "{format:?}");
            }
            let name = format!("wal_reset_bug_{format:?}").to_lowercase();
            insta::assert_snapshot!(name, report);
        }
    }
}
