//! `quicklite report <csv>`: reading a results CSV back and redrawing the reports from it alone.

use std::path::{Path, PathBuf};

use quicklite_lab_core::{ApproachName, CellResult};

use crate::atomic::write_atomically;
use crate::error::{LabError, Result};
use crate::export::ExportFormat;
use crate::row::CsvRow;

/// Reads the results in a CSV written by `bench` (or by hand, with the same header).
pub fn read_csv(path: &Path) -> Result<Vec<CellResult>> {
    let file = std::fs::File::open(path).map_err(|source| LabError::Io {
        action: "reading",
        path: path.to_owned(),
        source,
    })?;
    let mut reader = csv::Reader::from_reader(file);
    let mut results = Vec::new();
    for (index, row) in reader.deserialize::<CsvRow>().enumerate() {
        let row = row.map_err(|e| LabError::Csv {
            path: path.to_owned(),
            message: format!("record {}: {e}", index + 1),
        })?;
        results.push(CellResult::from(row));
    }
    Ok(results)
}

/// Writes the Markdown, HTML and ASCII reports for `results` into `dir`; returns the paths written.
pub fn write_reports(
    results: &[CellResult],
    dir: &Path,
    baseline: ApproachName,
) -> Result<Vec<PathBuf>> {
    std::fs::create_dir_all(dir).map_err(|source| LabError::OutputDir {
        path: dir.to_owned(),
        source,
    })?;
    let mut written = Vec::new();
    for format in ExportFormat::REPORTS {
        let path = dir.join(format.file_name());
        write_atomically(&path, &format.serialize(results, baseline)?)?;
        written.push(path);
    }
    Ok(written)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixtures;

    #[test]
    fn reports_from_the_csv_equal_reports_from_the_results() {
        let dir = tempfile::tempdir().unwrap();
        let results = fixtures::results();
        let csv = dir.path().join("results.csv");
        std::fs::write(
            &csv,
            ExportFormat::Csv
                .serialize(&results, ApproachName::TokioRusqlite)
                .unwrap(),
        )
        .unwrap();
        let back = read_csv(&csv).unwrap();
        for format in ExportFormat::REPORTS {
            assert_eq!(
                format
                    .serialize(&back, ApproachName::TokioRusqlite)
                    .unwrap(),
                format
                    .serialize(&results, ApproachName::TokioRusqlite)
                    .unwrap(),
                "{format:?}"
            );
        }
    }

    /// The fixtures' results written to a CSV without the columns `newer`, as an older lab wrote them, and read back.
    fn through_a_csv_without(newer: &[&str]) -> Vec<CellResult> {
        let dir = tempfile::tempdir().unwrap();
        let csv = dir.path().join("results.csv");
        std::fs::write(
            &csv,
            ExportFormat::Csv
                .serialize(&fixtures::results(), ApproachName::TokioRusqlite)
                .unwrap(),
        )
        .unwrap();
        let mut reader = csv::Reader::from_path(&csv).unwrap();
        let header = reader.headers().unwrap().clone();
        for column in newer {
            assert!(header.iter().any(|h| h == *column), "no column {column}");
        }
        let keep: Vec<usize> = (0..header.len())
            .filter(|&i| !newer.contains(&&header[i]))
            .collect();
        let mut writer = csv::Writer::from_path(dir.path().join("old.csv")).unwrap();
        writer
            .write_record(keep.iter().map(|&i| &header[i]))
            .unwrap();
        for record in reader.records() {
            let record = record.unwrap();
            writer
                .write_record(keep.iter().map(|&i| &record[i]))
                .unwrap();
        }
        writer.flush().unwrap();
        read_csv(&dir.path().join("old.csv")).unwrap()
    }

    #[test]
    fn a_csv_from_before_write_modes_and_open_databases_still_loads() {
        // The columns added with the registry measurements.
        let back = through_a_csv_without(&[
            "write_mode",
            "total_readers",
            "open_databases",
            "database_opens",
            "open_files_limit",
            "core_round_trip_before_ns",
            "core_round_trip_after_ns",
            "allocator",
        ]);
        assert_eq!(back.len(), fixtures::results().len());
        let multi = back.iter().find_map(|r| r.cell.multi_db.as_ref()).unwrap();
        assert_eq!(multi.write_mode, quicklite_lab_core::WriteMode::Blocking);
        assert_eq!(multi.total_readers, None);
        assert!(
            back.iter()
                .all(|r| r.open_databases.is_none() && r.database_opens.is_none())
        );
    }

    #[test]
    fn a_csv_from_before_cpu_per_operation_and_idle_cpu_still_loads_and_reports() {
        let results = fixtures::results();
        assert!(
            results
                .iter()
                .any(|r| r.cpu_per_op_us.is_some() && r.idle_cpu.is_some())
        );
        let back = through_a_csv_without(&["cpu_per_op_us", "idle_secs", "idle_cpu_secs"]);
        assert_eq!(back.len(), results.len());
        assert!(
            back.iter()
                .all(|r| r.cpu_per_op_us.is_none() && r.idle_cpu.is_none())
        );
        // Everything else as written.
        assert_eq!(
            back.iter().map(|r| r.reads.ops).collect::<Vec<_>>(),
            results.iter().map(|r| r.reads.ops).collect::<Vec<_>>()
        );
        let markdown = ExportFormat::Markdown
            .serialize(&back, ApproachName::TokioRusqlite)
            .unwrap();
        assert!(!markdown.is_empty());
    }

    #[test]
    fn a_csv_from_before_open_loops_still_loads_as_closed_loop_cells() {
        let results = fixtures::results();
        assert!(results.iter().any(|r| r.open_loop.is_some()));
        let columns: Vec<&str> = crate::row::COLUMNS
            .iter()
            .copied()
            .skip_while(|c| *c != "rate")
            .take_while(|c| *c != "failure")
            .collect();
        assert_eq!(columns.len(), 14, "{columns:?}");
        let back = through_a_csv_without(&columns);
        assert_eq!(back.len(), results.len());
        assert!(
            back.iter()
                .all(|r| r.cell.rate.is_none() && r.open_loop.is_none())
        );
        // The closed-loop cells read exactly as written.
        for (old, new) in results.iter().zip(&back) {
            if old.cell.rate.is_none() {
                assert_eq!(old.cell.workload, new.cell.workload);
                assert_eq!((old.reads.ops, old.errors), (new.reads.ops, new.errors));
            }
        }
    }

    #[test]
    fn a_malformed_csv_names_the_record() {
        let dir = tempfile::tempdir().unwrap();
        let csv = dir.path().join("bad.csv");
        std::fs::write(&csv, "workload,approach\npoint-read,quicklite\n").unwrap();
        let err = read_csv(&csv).unwrap_err().to_string();
        assert!(err.contains("record 1"), "{err}");
    }
}
