//! The raw CSV: one row per cell (see [`CsvRow`] for the columns).

use quicklite_lab_core::{ApproachName, CellResult};

use super::Exporter;
use crate::error::{LabError, Result};
use crate::row::CsvRow;

/// Writes [`CsvRow`]s with a header.
#[derive(Debug, Default, Clone, Copy)]
pub struct CsvExporter;

impl Exporter for CsvExporter {
    fn serialize(&self, results: &[CellResult], _baseline: ApproachName) -> Result<Vec<u8>> {
        let mut writer = csv::Writer::from_writer(Vec::new());
        if results.is_empty() {
            // csv writes the header with the first record; an empty run still gets one so the file parses.
            writer
                .write_record(crate::row::COLUMNS)
                .map_err(|e| LabError::Serialize(e.to_string()))?;
        }
        for result in results {
            writer
                .serialize(CsvRow::from(result))
                .map_err(|e| LabError::Serialize(e.to_string()))?;
        }
        writer
            .into_inner()
            .map_err(|e| LabError::Serialize(e.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixtures;

    #[test]
    fn csv_snapshot() {
        let bytes = CsvExporter
            .serialize(&fixtures::results(), ApproachName::TokioRusqlite)
            .unwrap();
        insta::assert_snapshot!(String::from_utf8(bytes).unwrap());
    }

    #[test]
    fn header_lists_every_column() {
        let bytes = CsvExporter
            .serialize(&[], ApproachName::TokioRusqlite)
            .unwrap();
        let text = String::from_utf8(bytes).unwrap();
        assert_eq!(text.trim_end(), crate::row::COLUMNS.join(","));
        let full = CsvExporter
            .serialize(&fixtures::results(), ApproachName::TokioRusqlite)
            .unwrap();
        assert!(
            String::from_utf8(full)
                .unwrap()
                .starts_with(text.trim_end())
        );
    }
}
