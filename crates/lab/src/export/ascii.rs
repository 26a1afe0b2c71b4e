//! Tables and bar charts for a terminal (and `charts.txt`): what `bench` prints when it finishes.

use std::fmt::Write as _;

use quicklite_lab_core::{ApproachName, CellResult};

use super::Exporter;
use super::columns::{Columns, columns, settings_line};
use crate::error::Result;
use crate::format;
use crate::summary::{Summary, Table};

/// Width of the longest bar, in terminal cells.
const BAR_WIDTH: usize = 40;

/// `charts.txt`.
#[derive(Debug, Default, Clone, Copy)]
pub struct AsciiExporter;

impl Exporter for AsciiExporter {
    fn serialize(&self, results: &[CellResult], baseline: ApproachName) -> Result<Vec<u8>> {
        let summary = Summary::new(results, baseline);
        let mut out = String::new();
        let _ = writeln!(out, "{}\n", crate::summary::repetitions_note(results));
        if let Some(note) = crate::summary::wal_reset_note(results) {
            let _ = writeln!(out, "{note}\n");
        }
        for table in &summary.tables {
            // Writing to a String cannot fail.
            let _ = writeln!(out, "{}", table.title);
            let _ = writeln!(out, "  {}", settings_line(table));
            out.push('\n');
            if !table.rows.is_empty() {
                grid(&mut out, &columns(table));
                out.push('\n');
                chart(&mut out, table);
                if let Some(headline) = table.headline() {
                    let _ = writeln!(out, "\n  {headline}");
                }
            }
            for failure in &table.failures {
                let _ = writeln!(
                    out,
                    "  FAILED {}: {}",
                    failure.label,
                    first_line(&failure.message)
                );
            }
            out.push('\n');
        }
        Ok(out.into_bytes())
    }
}

/// Aligned columns, numbers right-aligned.
fn grid(out: &mut String, cols: &Columns) {
    let widths: Vec<usize> = (0..cols.headers.len())
        .map(|i| {
            cols.cells
                .iter()
                .map(|row| row[i].chars().count())
                .chain([cols.headers[i].chars().count()])
                .max()
                .unwrap_or(0)
        })
        .collect();
    let line = |cells: &[String]| {
        let parts: Vec<String> = cells
            .iter()
            .enumerate()
            .map(|(i, c)| pad(c, widths[i], cols.numeric[i]))
            .collect();
        format!("  {}", parts.join("  ").trim_end())
    };
    let _ = writeln!(out, "{}", line(&cols.headers));
    for row in &cols.cells {
        let _ = writeln!(out, "{}", line(row));
    }
}

/// Horizontal bars of throughput, the longest for the fastest row.
fn chart(out: &mut String, table: &Table) {
    let max = table.rows.iter().map(|r| r.throughput).fold(0.0, f64::max);
    let label_width = table
        .rows
        .iter()
        .map(|r| r.label.chars().count())
        .max()
        .unwrap_or(0);
    let unit = if table.is_orm {
        "ORM suites per second"
    } else if table.has_operations {
        "queue cycles per second"
    } else {
        "reads + writes per second"
    };
    let _ = writeln!(out, "  {}  {unit}", pad("", label_width, false));
    for row in &table.rows {
        let _ = writeln!(
            out,
            "  {}  {} {}/s",
            pad(&row.label, label_width, false),
            pad(&bar(row.throughput, max), BAR_WIDTH, false),
            format::ops(row.throughput)
        );
    }
}

/// A bar of up to [`BAR_WIDTH`] cells with eighth-cell resolution.
fn bar(value: f64, max: f64) -> String {
    const PARTS: [char; 8] = [' ', '▏', '▎', '▍', '▌', '▋', '▊', '▉'];
    if max <= 0.0 || value <= 0.0 {
        return String::new();
    }
    let eighths = ((value / max) * (BAR_WIDTH * 8) as f64).round() as usize;
    let mut bar = "█".repeat(eighths / 8);
    if !eighths.is_multiple_of(8) {
        bar.push(PARTS[eighths % 8]);
    }
    if bar.is_empty() {
        // Visible even when tiny next to the fastest.
        bar.push('▏');
    }
    bar
}

fn pad(text: &str, width: usize, right: bool) -> String {
    let fill = " ".repeat(width.saturating_sub(text.chars().count()));
    if right {
        format!("{fill}{text}")
    } else {
        format!("{text}{fill}")
    }
}

fn first_line(text: &str) -> &str {
    text.lines().next().unwrap_or("")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixtures;

    #[test]
    fn ascii_snapshot() {
        let bytes = AsciiExporter
            .serialize(&fixtures::results(), ApproachName::TokioRusqlite)
            .unwrap();
        insta::assert_snapshot!(String::from_utf8(bytes).unwrap());
    }

    #[test]
    fn bars_scale_to_the_fastest() {
        assert_eq!(bar(1.0, 1.0).chars().count(), BAR_WIDTH);
        assert_eq!(bar(0.5, 1.0).chars().count(), BAR_WIDTH / 2);
        assert_eq!(bar(0.0, 1.0), "");
    }
}
